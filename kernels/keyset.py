"""Growable open-addressing hash sets of packed keys (Numba): the visited sets of the searches.

A key is two 64-bit words (k0, k1) into which a search packs its state (pass k1 = 0 where one
word holds it). A set is one array, ``uint64[size + 1, 2]``: rows 0..size-1 are the slots of a
linear-probing table (size a power of two; (0, 0) marks an empty slot), and the last row holds
the number of keys and whether the key (0, 0) itself is in the set. The table is kept at most
half full; growing replaces the array, so a search adds a key with

    if set_full(table):
        table = set_grow(table)
    if set_add(table, k0, k1):
        ...  # the key was new

which keeps the common path free of array returns (a returned array costs reference counting
on every call). ``mix`` is a stronger hash of a key, for folding packed states into a seed.
"""
import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def mix(k0, k1):
    """A 64-bit hash of the key (k0, k1) (SplitMix64's finalizer over both words)."""
    z = k0 ^ (k1 * np.uint64(0x9E3779B97F4A7C15))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, inline="always")
def _slot(k0, k1, mask):
    z = (k0 ^ (k1 * np.uint64(0xBF58476D1CE4E5B9))) * np.uint64(0x9E3779B97F4A7C15)
    return (z ^ (z >> np.uint64(29))) & mask


@njit(cache=True, nogil=True)
def new_set(capacity):
    """An empty set with room for ``capacity`` keys before it first grows."""
    size = 64
    while size < 2 * capacity:
        size *= 2
    return np.zeros((size + 1, 2), np.uint64)


@njit(cache=True, inline="always")
def set_full(table):
    """True when the next new key would fill the table past half (call ``set_grow`` first)."""
    size = table.shape[0] - 1
    return 2 * (table[size, 0] + np.uint64(1)) > np.uint64(size)


@njit(cache=True, nogil=True)
def set_add(table, k0, k1):
    """Insert (k0, k1) (the table must not be ``set_full``); return True if it was new."""
    size = table.shape[0] - 1
    if k0 == 0 and k1 == 0:
        if table[size, 1] != 0:
            return False
        table[size, 1] = 1
        table[size, 0] += np.uint64(1)
        return True
    mask = np.uint64(size - 1)
    h = _slot(k0, k1, mask)
    while True:
        a = table[h, 0]
        b = table[h, 1]
        if a == k0 and b == k1:
            return False
        if a == 0 and b == 0:
            table[h, 0] = k0
            table[h, 1] = k1
            table[size, 0] += np.uint64(1)
            return True
        h = (h + np.uint64(1)) & mask


@njit(cache=True, nogil=True)
def set_grow(table):
    """The same keys in a table twice the size."""
    size = table.shape[0] - 1
    bigger = np.zeros((2 * size + 1, 2), np.uint64)
    bigger[2 * size, 1] = table[size, 1]
    bigger[2 * size, 0] = table[size, 1]
    for h in range(size):
        if table[h, 0] != 0 or table[h, 1] != 0:
            set_add(bigger, table[h, 0], table[h, 1])
    return bigger
