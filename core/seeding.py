"""Episode seeds: validation, and the seeds that automatic resets and unseeded resets use.

An episode is a pure function of its seed. BatchEnv needs new seeds when the caller gives none
(drawn from a NumPy SeedSequence of the env's own ``seed``) and when an episode auto-resets: the
next seed of slot b is a hash of its previous seed, so a slot's sequence of episodes does not
depend on what the other slots do or on the batch size.
"""
from __future__ import annotations

import numpy as np

from .validate import describe

_U64 = (1 << 64) - 1


def check_seeds(seeds, count: int, field: str = "seeds") -> np.ndarray:
    """``count`` seeds as uint64; ValueError naming ``field`` for anything that is not one."""
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, (bool, np.bool_)):
        seeds = [int(seeds) + k for k in range(count)]
    try:
        seeds = list(seeds)
    except TypeError:
        raise ValueError(f"{field}: expected a list of {count} integers, got "
                         f"{describe(seeds)}") from None
    if len(seeds) != count:
        raise ValueError(f"{field}: expected {count} seeds (one per episode), got {len(seeds)}")
    out = np.empty(count, np.uint64)
    for k, s in enumerate(seeds):
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
            raise ValueError(f"{field}[{k}]: a seed must be an integer, got {describe(s)}")
        if not 0 <= int(s) <= _U64:
            raise ValueError(f"{field}[{k}]: a seed must be in [0, 2**64), got {describe(s)}")
        out[k] = int(s)
    return out


def draw_seeds(seq: np.random.SeedSequence, count: int) -> np.ndarray:
    """Fresh seeds from the env's seed sequence (each call spawns a new child)."""
    child = seq.spawn(1)[0]
    return child.generate_state(count, np.uint64)


def next_seeds(seeds: np.ndarray) -> np.ndarray:
    """SplitMix64 of each seed: the seed of the next episode in the same slot."""
    with np.errstate(over="ignore"):
        z = seeds.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))
