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
def test_fork_while_numba_threads_are_not_running(numba_parallel):
    numba_parallel(False)
    assert pools.pool_context().get_start_method() == "fork"


def test_spawn_once_numba_threads_run(numba_parallel):
    numba_parallel(True)
    assert pools.pool_context().get_start_method() == "spawn"


def test_spawn_without_fork(monkeypatch, numba_parallel):
    numba_parallel(False)
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert pools.pool_context().get_start_method() == "spawn"
