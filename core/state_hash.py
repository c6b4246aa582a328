"""Canonical 64-bit hashes of episode states (``info["state_hash"]``, issue 26).

A row's hash is a pure function of its canonical bytes, so equal states hash equally in any
batch position, process or machine, and different states differ except with probability about
2**-64 per pair. GiGPO-style trainers group steps by it.

The canonical bytes of a row are, for each State field the family does not declare transient
(``Family.transient_fields``: render bookkeeping such as "what the last step changed"), in field
order: the field's live items (``Family.live_counts``: a padded field counts only its first
``n`` entries along axis 1; a boolean count keeps or drops the whole row), as little-endian
bytes. The hash chains every 8-byte word (zero-padded at the end of a field) through SplitMix64's
bijective finaliser, after the field's index and live byte length, starting from a salt of the
family's name and behaviour version; a last mix seals it. Floats are hashed bitwise (0.0 and
-0.0 differ).

Two implementations compute the same numbers: ``hash_part_numpy`` here (NumPy only, as core
must be; vectorised over rows, a Python loop over words: slow for large states) and the Numba
kernels that ``visgym.kernels`` registers with ``set_kernels`` when it is imported (every family
imports it), which BatchEnv uses. A test holds the two equal.
"""
from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_FIELD = np.uint64(0xD6E8FEB86659FD93)

_kernels = None


def set_kernels(prepare, finish) -> None:
    """Install the compiled hash: ``prepare(data)`` -> (part kernel, view of data), and
    ``finish``, with the signatures and results of ``prepare_numpy`` and ``finish_numpy``."""
    global _kernels
    _kernels = (prepare, finish)


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (a bijection on uint64), elementwise."""
    with np.errstate(over="ignore"):
        z = (z + _GOLDEN).astype(np.uint64)
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def salt(name: str, version: int) -> int:
    """The starting value of a family's hashes: FNV-1a of "name/version", mixed."""
    h = 0xCBF29CE484222325
    for byte in f"{name}/{version}".encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return int(mix64(np.array([h], np.uint64))[0])


class StateHasher:
    """Hashes one State object's rows again and again: the fields' byte views are made once;
    each call reads the family's ``live_counts`` and folds every field in compiled code (or in
    NumPy when no kernel is installed)."""

    def __init__(self, family, state):
        unknown = set(family.transient_fields) - set(state._fields)
        if unknown:
            raise RuntimeError(f"{family.name}.transient_fields: {sorted(unknown)} are not State "
                               f"fields")
        prepare, self._finish = _kernels or (prepare_numpy, finish_numpy)
        self.family = family
        self.state = state
        self.start = np.uint64(salt(family.name, family.version))
        self.parts = []
        for name in state._fields:
            if name in family.transient_fields:
                continue
            array = getattr(state, name)
            if not array.flags.c_contiguous or array.dtype.byteorder == ">":
                raise RuntimeError(f"{family.name}: State field {name} must be a C-contiguous, "
                                   f"native little-endian array to be hashed")
            batch = array.shape[0]
            data = array.view(np.uint8).reshape(batch, -1)
            items = array.shape[1] if array.ndim > 1 else 1
            per_item = data.shape[1] // max(items, 1)
            kernel, view = prepare(data)
            self.parts.append((name, kernel, view, per_item, items,
                               np.full(batch, items, np.int64), data.shape[1]))

    def __call__(self, out: np.ndarray) -> np.ndarray:
        counts = self.family.live_counts(self.state)
        out.fill(self.start)
        for index, (name, kernel, view, per_item, items, full, row_bytes) in enumerate(
                self.parts):
            n = counts.get(name)
            if n is None:
                kernel(out, view, full, per_item, items, index)
            elif n.dtype == np.bool_:   # the whole row, or nothing
                kernel(out, view, n, row_bytes, 1, index)
            else:
                kernel(out, view, n, per_item, items, index)
        self._finish(out)
        return out


def prepare_numpy(data):
    return hash_part_numpy, data


def hash_part_numpy(h: np.ndarray, data: np.ndarray, counts, per_item: int, items: int,
                    index: int) -> None:
    """Fold one field into ``h`` (uint64[B], in place): its index and live length, then each
    little-endian 8-byte word of the live bytes (the last one zero-padded)."""
    live = np.clip(np.asarray(counts).astype(np.int64), 0, items) * per_item
    with np.errstate(over="ignore"):
        h[:] = mix64(h ^ (np.uint64(index + 1) * _FIELD) ^ live.astype(np.uint64))
        row_bytes = data.shape[1]
        words = (row_bytes + 7) // 8
        padded = np.zeros((data.shape[0], words * 8), np.uint8)
        padded[:, :row_bytes] = data
        # Bytes past a row's live length are not part of it.
        positions = np.arange(words * 8)
        padded[positions[None, :] >= live[:, None]] = 0
        as_words = padded.view("<u8").astype(np.uint64)
        for k in range(words):
            take = live > 8 * k
            if take.any():
                h[take] = mix64(h[take] ^ as_words[take, k])


def finish_numpy(h: np.ndarray) -> None:
    h[:] = mix64(h ^ _FIELD)
