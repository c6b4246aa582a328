"""Counter-free per-episode random numbers for Numba kernels.

Each episode carries its own 64-bit generator state, derived from the episode's seed alone, so a
batch of 1 and a batch of 1,000 draw exactly the same numbers for the same seed (the contract's
"episode i depends only on its seed"). The generator is SplitMix64: one add and three
xor-shift-multiply rounds per draw, good statistical quality for simulation, trivially seeded.
All arithmetic is on uint64 so it wraps; mixing int64 and uint64 in Numba would go through
float64, which is why every constant is typed.
"""
import numpy as np
from numba import njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S32 = np.uint64(32)


@njit(cache=True, inline="always")
def _mix(z):
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@njit(cache=True, inline="always")
def next_u64(s):
    """Advance state ``s``; return (new state, 64 random bits)."""
    s = s + _GOLDEN
    return s, _mix(s)


@njit(cache=True, inline="always")
def below(s, n):
    """Advance state ``s``; return (new state, uniform int in [0, n)) for 0 < n < 2**32."""
    s, z = next_u64(s)
    return s, np.int64(((z >> _S32) * np.uint64(n)) >> _S32)


@njit(cache=True, inline="always")
def uniform01(s):
    """Advance state ``s``; return (new state, float64 uniform in [0, 1))."""
    s, z = next_u64(s)
    return s, (z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, inline="always")
def seed_state(seed, stream):
    """Generator state for (episode seed, stream id): streams keep e.g. generation and solver
    padding independent of each other."""
    return _mix(_mix(seed ^ (stream * _MIX2)) + _GOLDEN)

