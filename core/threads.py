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

import numpy as np

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

    def run_parts(self, fn, rows, weights, min_weight: float) -> None:
        """``fn(part)`` for contiguous parts of ``rows`` of about equal total ``weights``, one
        part per worker with the last on the calling thread, when the weights add up to at least
        ``min_weight`` (below it one call on the calling thread: a hand-over costs tens of
        microseconds). ``fn`` must release the GIL to gain anything; its exceptions propagate
        after every part has finished."""
        if len(rows) < 2 or self.workers < 2 or float(np.sum(weights)) < min_weight:
            fn(rows)
            return
        parts = contiguous_parts(weights, self.workers)
        if len(parts) < 2:
            fn(rows)
            return
        self.run_all([lambda part=part: fn(rows[part]) for part in parts])

    def run_all(self, calls) -> None:
        """Each of ``calls`` (callables without arguments): the last on the calling thread, the
        others on the workers; their exceptions propagate after every call has finished."""
        futures = [self.submit(call) for call in calls[:-1]]
        try:
            calls[-1]()
        finally:
            errors = [f.exception() for f in futures]
        for error in errors:
            if error is not None:
                raise error

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


#: The package's one pool of worker threads, shared by every family and env: frames are drawn
#: on it (the drawing kernels release the GIL; a batch is split with ``run_parts`` into one
#: contiguous run of episodes per core) and Fetch's MuJoCo rows are stepped on it, so envs
#: stepped at once from several threads queue their work instead of running more threads than
#: there are cores. Work submitted to it must not wait on other work of the pool.
FRAME_POOL = ProcessThreadPool(os.cpu_count() or 1, "visgym-frames")

_LOCAL = threading.local()


def thread_buffer(name: str, nbytes: int) -> np.ndarray:
    """The calling thread's scratch buffer ``name``: flat uint8 of at least ``nbytes`` (grown
    when a call needs more, never shrunk). Per thread, so drawing code may use it on the pool's
    threads and the caller's at once; it lives as long as the thread."""
    buffers = getattr(_LOCAL, "buffers", None)
    if buffers is None:
        buffers = _LOCAL.buffers = {}
    buf = buffers.get(name)
    if buf is None or buf.shape[0] < nbytes:
        buf = buffers[name] = np.empty(int(nbytes), np.uint8)
    return buf

#: A draw that writes less than this many bytes stays on the calling thread.
THREAD_BYTES = 1 << 20


def contiguous_parts(weights, parts: int) -> list[slice]:
    """Slices splitting positions 0..n-1 into at most ``parts`` non-empty contiguous runs of
    about equal total weight (each cut next to where the running total crosses k / parts of the
    whole, on whichever side lands nearer)."""
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    n = w.shape[0]
    parts = max(1, min(int(parts), n))
    total = float(w.sum())
    if n == 0:
        return []
    if parts == 1 or total <= 0:
        return [slice(0, n)]
    cum = np.cumsum(w)
    targets = total * np.arange(1, parts) / parts
    at = np.minimum(np.searchsorted(cum, targets), n - 1)   # first position reaching the target
    before = cum[at] - w[at]
    cuts = np.where((targets - before < cum[at] - targets) & (at > 0), at, at + 1)
    edges = sorted({0, n, *(int(c) for c in cuts if 0 < c < n)})
    return [slice(a, b) for a, b in zip(edges, edges[1:])]


def _after_fork_in_child() -> None:
    for pool in list(_POOLS):
        pool._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
