"""Torch kernels of the torch backend: the chunked math kernel and the fused-op wrappers.

Importing this package imports torch; the backend imports it lazily, so that
``import hipdnn_graph`` never pulls torch in.

* :mod:`.math` — ``sdpa_forward`` / ``sdpa_backward``: every feature of spec §6, any device.
* :mod:`.fused` — wrappers over torch's fused SDPA ops (cuDNN, FlashAttention, memory-efficient)
  fed with the user's O and Stats, with ``check()`` reasons for what each op cannot do.
"""
