"""Batched dynamics kernels (Numba on the CPU).

Importing the package installs the compiled state hash in core (core/state_hash.py): every
family imports a kernel module, so every BatchEnv of a real family hashes in compiled code.
"""
from ..core import state_hash as _core_state_hash
from . import state_hash as _state_hash

_core_state_hash.set_kernels(_state_hash.prepare, _state_hash.finish)
