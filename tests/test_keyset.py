"""kernels/keyset: the packed-key hash set shared by the searches (matchstick equations,
sliding blocks)."""
import numpy as np
from numba import njit

from visgym.kernels.keyset import new_set, set_add, set_full, set_grow


@njit(cache=True)
def _add_all(keys):
    table = new_set(4)
    new = np.zeros(keys.shape[0], np.bool_)
    for r in range(keys.shape[0]):
        if set_full(table):
            table = set_grow(table)
        new[r] = set_add(table, keys[r, 0], keys[r, 1])
    return table, new


def test_set_keeps_every_key_once_through_growth():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 50, (5000, 2)).astype(np.uint64)
    keys[:3] = 0  # the all-zero key is a key like any other
    keys[3] = (0, 7)
    table, new = _add_all(keys)
    seen = set()
    expected = []
    for k0, k1 in keys.tolist():
        expected.append((k0, k1) not in seen)
        seen.add((k0, k1))
    assert new.tolist() == expected
    size = table.shape[0] - 1
    assert table[size, 0] == len(seen)
    assert size >= 2 * len(seen)
