"""The builder methods of :class:`~hipdnn_graph.graph.Graph`, one mixin per group of families.

:mod:`.base` holds the one recipe every builder method follows (a family's
:class:`~hipdnn_graph.graph.builders.base.FamilyRecipe` and its ``NodeSpec``); :mod:`.families`,
:mod:`.norm`, :mod:`.sdpa`, :mod:`.resample` and :mod:`.block_scale` are the mixins ``Graph``
inherits; :mod:`.keyword_types` and :mod:`.sdpa_keywords` type the keywords they take.

Example:
    >>> from hipdnn_graph.graph import Graph
    >>> from hipdnn_graph.graph.builders.families import FamilyBuilders
    >>> issubclass(Graph, FamilyBuilders)
    True
"""
