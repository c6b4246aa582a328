"""The compiled state hash (core/state_hash.py defines it and holds the NumPy twin).

Rows are independent; each folds its field's index and live length, then the field's live bytes
as little-endian 8-byte words, through SplitMix64's finaliser. Registered with core when
``visgym.kernels`` is imported.
"""
import numpy as np
from numba import njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_FIELD = np.uint64(0xD6E8FEB86659FD93)


@njit(cache=True, inline="always")
def _mix(z):
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, inline="always")
def _live(count, per_item, items):
    n = np.int64(count)
    if n < 0:
        n = 0
    if n > items:
        n = items
    return n * per_item


@njit(cache=True, nogil=True)
def hash_bytes(h, data, counts, per_item, items, index):
    """Fold one field (uint8[B, row_bytes]; row b's live bytes are its first
    min(counts[b], items) * per_item) into h (uint64[B])."""
    tag = np.uint64(index + 1) * _FIELD
    for b in range(h.shape[0]):
        n = _live(counts[b], per_item, items)
        z = _mix(h[b] ^ tag ^ np.uint64(n))
        full = n // 8
        for k in range(full):
            w = np.uint64(0)
            base = 8 * k
            for j in range(8):
                w |= np.uint64(data[b, base + j]) << np.uint64(8 * j)
            z = _mix(z ^ w)
        rest = n - 8 * full
        if rest > 0:
            w = np.uint64(0)
            base = 8 * full
            for j in range(rest):
                w |= np.uint64(data[b, base + j]) << np.uint64(8 * j)
            z = _mix(z ^ w)
        h[b] = z


@njit(cache=True, nogil=True)
def hash_words(h, words, counts, per_item, items, index):
    """``hash_bytes`` for a field whose rows are whole 8-byte words (uint64[B, row_words], the
    same bytes read as little-endian words): the same numbers, a word per load."""
    tag = np.uint64(index + 1) * _FIELD
    for b in range(h.shape[0]):
        n = _live(counts[b], per_item, items)
        z = _mix(h[b] ^ tag ^ np.uint64(n))
        full = n // 8
        for k in range(full):
            z = _mix(z ^ words[b, k])
        rest = n - 8 * full
        if rest > 0:
            z = _mix(z ^ (words[b, full] & ((np.uint64(1) << np.uint64(8 * rest)) - np.uint64(1))))
        h[b] = z


def prepare(data):
    """The kernel and view for a field's uint8[B, row_bytes] view: rows of whole words (on a
    little-endian machine) are read a word at a time."""
    if data.shape[1] % 8 == 0 and data.shape[1] and np.little_endian:
        return hash_words, data.view(np.uint64)
    return hash_bytes, data


@njit(cache=True, nogil=True)
def finish(h):
    for b in range(h.shape[0]):
        h[b] = _mix(h[b] ^ _FIELD)
