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


def test_a_small_call_never_loads_the_threaded_variant_from_the_cache(tmp_path):
    """Numba keys cache entries by signature only: without a name of its own, the threaded
    variant saved by a large batch was loaded for small ones too (30x slower, and a later fork
    of the process aborted: 'fork() called from a process already using GNU OpenMP'). In a
    fresh cache, a large solve (threaded) and then, in a new process, small ones (serial)
    leave Numba's thread pool unstarted."""
    import json
    import os
    import subprocess
    import sys

    big = ("import visgym; e = visgym.make('maze_2d/easy', num_envs=%d); e.reset(seeds=range(%d)); "
           "e.solve()" % (PARALLEL_MIN_ROWS, PARALLEL_MIN_ROWS))
    small = ("import json, visgym; e = visgym.make('maze_2d/easy', num_envs=4); "
             "e.reset(seeds=range(4)); e.solve(); "
             "from numba.np.ufunc import parallel; print(json.dumps(bool(parallel._is_initialized)))")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    for code in (big, small):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=600)
        assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) is False
