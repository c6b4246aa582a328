"""Batched dynamics kernels (Numba on the CPU)."""
