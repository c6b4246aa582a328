"""How runner and demos workers are started (bridges/pools.py)."""
from __future__ import annotations

import multiprocessing

import pytest

from visgym.bridges import pools


@pytest.fixture
def numba_parallel(monkeypatch):
    from numba.np.ufunc import parallel

    def set_started(value: bool):
        monkeypatch.setattr(parallel, "_is_initialized", value, raising=False)

    return set_started


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                    reason="no fork on this platform")
def test_fork_while_numba_threads_are_not_running(numba_parallel, monkeypatch):
    numba_parallel(False)
    monkeypatch.setattr(pools, "_jax_started", lambda: False)   # an earlier test may run MJX
    assert pools.pool_context().get_start_method() == "fork"


def test_spawn_once_numba_threads_run(numba_parallel):
    numba_parallel(True)
    assert pools.pool_context().get_start_method() == "spawn"


def test_spawn_without_fork(monkeypatch, numba_parallel):
    numba_parallel(False)
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert pools.pool_context().get_start_method() == "spawn"


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                    reason="no fork on this platform")
def test_spawn_once_jax_runs(monkeypatch, numba_parallel):
    numba_parallel(False)
    monkeypatch.setattr(pools, "_jax_started", lambda: True)
    assert pools.pool_context().get_start_method() == "spawn"


@pytest.mark.timeout(60)
@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                    reason="no fork on this platform")
def test_thread_pool_used_before_a_fork_works_in_the_child():
    """A ProcessThreadPool that ran tasks in the parent runs tasks in a forked child (a bare
    ThreadPoolExecutor copied by fork has no threads and blocks the child forever)."""
    from visgym.core.threads import ProcessThreadPool

    pool = ProcessThreadPool(2, "test")
    assert sum(pool.map(abs, [-1, -2, -3])) == 6
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_use_pool_and_exit, args=(pool,))
    child.start()
    child.join(30)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child blocked on the inherited thread pool")
    assert child.exitcode == 0
    pool.shutdown()


def _use_pool_and_exit(pool):
    assert pool.submit(sum, [1, 2, 3]).result(timeout=20) == 6


def test_no_bare_thread_pool_outside_core_threads():
    """Every thread pool of the package is a ProcessThreadPool (recreated after a fork): a bare
    executor stored on an env, a stepper or a cache would hang a forked worker again."""
    import pathlib

    import visgym

    root = pathlib.Path(visgym.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("tests/", ".venv/", "build/")) or rel == "core/threads.py":
            continue
        text = path.read_text(encoding="utf-8")
        if "ThreadPoolExecutor(" in text or "ThreadPool(" in text.replace("ProcessThreadPool(", ""):
            offenders.append(rel)
    assert offenders == []
