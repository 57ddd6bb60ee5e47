"""Torch kernels of the torch backend: the chunked math kernel and the fused-op wrappers.

Importing this package imports torch (and nothing of ``hipdnn_graph``: the kernels run where
only torch is installed); the engines import it lazily, so that ``import hipdnn_graph`` never
pulls torch in.

Public modules:

* :mod:`.call` — ``SdpaCall``: what a plan fixes about one SDPA call (scale, mask window, ALiBi,
  dBias, dropout), built once per node from the public ``SdpaProblem`` and passed to every
  kernel; ``SdpaInputs``: what each call hands over beside it (optional tensors, runtime
  scalars).
* :mod:`.math` — ``sdpa_forward`` / ``sdpa_backward``: every feature of spec §6, any device.
* :mod:`.fused` — wrappers over torch's fused SDPA ops (cuDNN, FlashAttention, memory-efficient)
  fed with the user's O and Stats, with ``check()`` reasons for what each op cannot do.
* :mod:`.probe` — the capability probe of the fused ops (tiny runs, cached per device/dtype).
* :mod:`.flex` — FlexAttention kernels (``TORCH_SDPA_FLEX_ENGINE``), compiled once per node.

Imports follow the call graph: ``fused`` → ``probe`` → ``_fused_ops`` → ``_fused_common`` →
``_fused_rules`` (its rules take the measured capabilities as an argument) → ``call`` (a leaf
every kernel reads); ``fused`` → ``_fused_philox`` (philox dropout: the CUDA generator and the
backward's seed/offset tensors); ``flex`` → ``_flex_kernel`` (the compiled kernel) →
``_flex_compiled`` → ``_flex_mods`` (and ``_fused_common``), ``flex`` and ``_flex_kernel`` →
``_flex_spec`` (what a node is to flex and whether it runs) → ``_flex_env`` (a leaf the engine
reads before it imports ``flex``); ``math`` → ``_math_plan``.
"""
