"""Torch backend (entry point ``torch``): SDPA engines on torch's fused kernels (ROCm and CUDA
builds) plus a chunked math fallback. torch is imported lazily; the engine wiring lives here."""
