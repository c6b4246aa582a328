"""Thread pools that belong to one process, so that nothing which owns threads crosses a fork.

A forked child inherits a copy of every Python object of its parent, but only the thread that
forked: a ``ThreadPoolExecutor`` copied into a child has a work queue and no workers, and the
first ``Future.result`` on it blocks forever (issue 10: demos of a Fetch task run twice in one
process hung its forked workers). Every pool in visgym is a ``ProcessThreadPool``: the executor
is created on first use and remembered with the id of the process that created it; in any other
process (a forked child) the first use creates a fresh executor, and ``os.register_at_fork``
drops the inherited ones in the child at once, so an env, a stepper or a cache of envs can be
used on both sides of a fork. Code that needs threads must use this class, never a bare
executor stored on an object.
"""
from __future__ import annotations

import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

_POOLS: "weakref.WeakSet[ProcessThreadPool]" = weakref.WeakSet()


class ProcessThreadPool:
    """A lazily created ``ThreadPoolExecutor`` of ``workers`` threads, private to the process
    that uses it."""

    def __init__(self, workers: int, name: str = "visgym"):
        self.workers = max(1, int(workers))
        self.name = name
        self._executor: ThreadPoolExecutor | None = None
        self._pid = -1
        self._lock = threading.Lock()
        _POOLS.add(self)

    def executor(self) -> ThreadPoolExecutor:
        """This process's executor (created now if this process has none)."""
        pid = os.getpid()
        if self._executor is None or self._pid != pid:
            with self._lock:
                if self._executor is None or self._pid != pid:
                    self._executor = ThreadPoolExecutor(self.workers,
                                                        thread_name_prefix=self.name)
                    self._pid = pid
        return self._executor

    def submit(self, fn, *args, **kwargs):
        return self.executor().submit(fn, *args, **kwargs)

    def map(self, fn, *iterables):
        return self.executor().map(fn, *iterables)

    def shutdown(self, wait: bool = True) -> None:
        """Stop this process's threads (a later use starts new ones)."""
        executor = self._executor
        if executor is not None and self._pid == os.getpid():
            executor.shutdown(wait=wait)
        self._executor = None
        self._pid = -1

    def _forget(self) -> None:
        # In a forked child: the copied executor has no threads; never touch it again.
        self._executor = None
        self._pid = -1
        self._lock = threading.Lock()


def _after_fork_in_child() -> None:
    for pool in list(_POOLS):
        pool._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
