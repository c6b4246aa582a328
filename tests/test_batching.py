"""Row kernels compiled twice (kernels/batching.py) agree: a reset of a batch large enough to
take the thread-pool path gives the same episodes as resets small enough to stay serial."""
import pytest

import visgym
from visgym.kernels.batching import PARALLEL_MIN_ROWS

# Physics families reset through MuJoCo, not row kernels.
IDS = [i for i in visgym.list_envs() if not i.startswith("fetch")]


@pytest.mark.parametrize("env_id", IDS)
def test_parallel_and_serial_resets_agree(env_id):
    n = PARALLEL_MIN_ROWS
    big = visgym.make(env_id, num_envs=n)
    big.reset(seeds=range(1000, 1000 + n))
    small = visgym.make(env_id, num_envs=3)
    for rows in ([0, 1, 2], [n - 3, n - 2, n - 1]):
        small.reset(seeds=[1000 + r for r in rows])
        assert small.state_dicts() == [big.state_dicts()[r] for r in rows]
    plans = big.solve()
    for rows in ([0, 1, 2], [n - 3, n - 2, n - 1]):
        small.reset(seeds=[1000 + r for r in rows])
        assert small.solve() == [plans[r] for r in rows]
