"""Broker: many single-episode callers, one batched env (DESIGN.md "Data flow", RL).

Trainers run one coroutine or one thread per trajectory, each wanting a plain ``reset`` / ``step``
of its own episode; a batched env is fast only when it steps many episodes per call. A ``Broker``
sits between them: each caller holds a **slot** (one row of the env), and the broker gathers the
pending calls of all slots into batched calls of the shared env, in the spirit of EnvPool's
``Send``/``Recv`` tagged by env id. A batch is flushed as soon as every open slot has a call
waiting, or when ``window_s`` has passed since its first call (or since the previous batch was
answered, if that is later), so a lone or slow caller is never stuck. Pending resets go into
``env.reset(rows=..., seeds=...)`` calls, pending steps into one ``env.step(actions,
active=mask)``; rows that did not ask are left alone.

It works with anything of the batched-env surface (duck typing): ``num_envs``, ``reset(seeds=,
init_states=, rows=)``, ``step(actions, active=)`` returning (frames, reward, terminated,
truncated, info) with per-row info entries, and ``frame(i)`` — ``BatchEnv`` and the mixed env
alike. What a caller gets back: ``obs`` is its row's exact frame view ``env.frame(i)``; it stays
valid until that caller's own next call, because the broker only ever steps or resets rows whose
callers asked (with ``autoreset="disabled"`` the view object itself is kept per row until the
row's next reset). Reward and flags are Python scalars, info is a small dict of this row's
entries (nested dicts such as ``reward_components`` stay nested).
A caller's malformed action is just feedback, as in the env; an exception raised by the env
reaches exactly the callers whose requests were in that call; ``shutdown()`` wakes every waiter
with ``BrokerClosed``.

Per-call cost is what limits a broker on a fast env, so waiting is shared: one lock-gate per batch
for all threaded waiters (each woken waiter opens it for the next), one future per event loop per
batch for coroutines (one ``call_soon_threadsafe`` per loop, or a plain ``set_result`` when the
flush runs on that loop), and results are converted to Python lists once per batch, not per
caller. By default (``inline=True``) the caller whose request completes a batch steps the env
itself, which saves a thread hop; ``inline=False`` steps every batch in the broker's own thread,
so the completing caller's thread or event loop stays free while the kernels (which release the
GIL) run. The broker's thread also watches the window. Measured (``python -m visgym.bench
broker``): a broker call costs some microseconds of Python per caller (the event loop's own task
wake-up is about half of it; for threads the operating system's thread switch dominates), so the
broker keeps up with envs whose per-row step costs more than that and trails the fastest ones.
"""
from __future__ import annotations

import asyncio
import copy
import heapq
import os
import threading
import time
import weakref

import numpy as np

from .seeding import check_seeds
from .validate import describe, real

_get_running_loop = asyncio._get_running_loop   # the running loop of this thread, or None
_BROKERS: "weakref.WeakSet[Broker]" = weakref.WeakSet()


class BrokerClosed(RuntimeError):
    """The broker was shut down (before or while the call waited)."""


class Slot:
    """One caller's row of the broker's env; ``with broker.open() as slot:`` closes it."""

    __slots__ = ("broker", "row")

    def __init__(self, broker: "Broker", row: int):
        self.broker = broker
        self.row = row

    def close(self) -> None:
        self.broker.close(self)

    def __enter__(self) -> "Slot":
        return self

    def __exit__(self, *exc) -> None:
        if self.broker._owner[self.row] is self:
            self.broker.close(self)

    def __repr__(self) -> str:
        return f"Slot(row={self.row})"


class _SharedFuture(asyncio.Future):
    """The one future that every coroutine of a loop awaits for a batch. It refuses cancel():
    a cancelled caller's task would otherwise cancel the future that its neighbours wait on;
    refused, the task gets its CancelledError when the batch is done (asyncio's own rule)."""

    __slots__ = ()

    def cancel(self, msg=None) -> bool:
        return False


def _resolve(fut: asyncio.Future, batch) -> None:
    if not fut.done():
        fut.set_result(batch)


class _Const:
    """An info entry that is not per row (the same value for every row)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __getitem__(self, row):
        return self.value


def _column(value, n: int):
    """A per-row info entry as something indexable by row that the next env call cannot change
    (the env's arrays are its own buffers): arrays become lists once per batch."""
    if isinstance(value, np.ndarray):
        return value.tolist() if value.ndim and value.shape[0] == n else _Const(value.copy())
    if isinstance(value, (list, tuple)) and len(value) == n:
        return list(value)
    return _Const(value)


def _snapshot(info: dict, n: int) -> tuple:
    """info as ([(key, column)], [(key, [(sub_key, column)])]) for per-row dicts."""
    flat, nested = [], []
    for key, value in info.items():
        if isinstance(value, dict):
            nested.append((key, [(k, _column(v, n)) for k, v in value.items()]))
        else:
            flat.append((key, _column(value, n)))
    return flat, nested


def _rows_info(info: dict, rows: list, n: int) -> list:
    """The info dicts of ``rows`` only (a reset's rows: a few of the env's, so the per-row
    arrays are indexed by them rather than converted whole)."""
    index = np.asarray(rows, np.int64)
    infos = [{} for _ in rows]

    def columns(value):
        if isinstance(value, np.ndarray) and value.ndim and value.shape[0] == n:
            return value[index].tolist()
        if isinstance(value, (list, tuple)) and len(value) == n:
            return [value[r] for r in rows]
        shared = value.copy() if isinstance(value, np.ndarray) else value
        return [shared] * len(rows)

    for key, value in info.items():
        if isinstance(value, dict):
            subs = [{} for _ in rows]
            for sub_key, sub_value in value.items():
                for sub, item in zip(subs, columns(sub_value)):
                    sub[sub_key] = item
            for row_info, sub in zip(infos, subs):
                row_info[key] = sub
        else:
            for row_info, item in zip(infos, columns(value)):
                row_info[key] = item
    return infos


def _raise(exc: BaseException):
    """Raise ``exc`` in this caller as its own copy (several callers may raise it at once, and a
    shared exception object would collect all their tracebacks), chained to the original, which
    keeps the env's traceback."""
    try:
        dup = copy.copy(exc)
    except Exception:   # an exception type that cannot be copied: raise the shared one
        dup = None
    if dup is None or type(dup) is not type(exc) or dup is exc:
        raise exc
    raise dup from exc


class _Batch:
    """The calls gathered for one flush, and after it their results."""

    __slots__ = ("actions", "claimed", "count", "steps", "resets", "first", "due",
                 "gate", "futures", "done", "failed", "error", "step_error", "row_errors", "reward",
                 "terminated", "truncated", "info", "reset_info")

    def __init__(self, n: int):
        self.actions = [None] * n
        self.claimed = bytearray(n)      # per row: 0 no call, 1 a step, 2 a reset
        self.count = 0                   # calls in this batch
        self.steps = 0
        self.resets = []                 # (row, seed or None, init_state or None, slot)
        self.first = 0.0                 # time.monotonic() of the first call
        self.due = False                 # full: the broker's thread should flush it now
        self.gate = None                 # held until delivery; threaded waiters pass it on
        self.futures = None              # {loop: _SharedFuture}
        self.done = False
        self.failed = False              # one of the three below is set
        self.error = None                # the whole batch failed (shutdown)
        self.step_error = None           # env.step raised
        self.row_errors = None           # {row: exception}: failed resets, dropped calls
        self.reward = self.terminated = self.truncated = self.info = None
        self.reset_info = None           # {row: its reset call's info for that row}


class Broker:
    """Batches the single-episode calls of many threads and coroutines onto one batched env.

    ``Broker(env, window_s=0.002, inline=True)``; ``slot = broker.open()`` (or ``with
    broker.open() as slot``), then ``broker.reset(slot, seed=...)`` / ``broker.step(slot,
    action)`` from threads, or ``await broker.areset(...)`` / ``await broker.astep(...)`` from
    coroutines (any number of event loops), one call at a time per slot. The broker resets the
    whole env once when it is made; a slot must be reset before its first step. ``shutdown()``
    (or leaving ``with Broker(...)``) ends it; the env itself stays the caller's.
    """

    def __init__(self, env, *, window_s: float = 0.002, inline: bool = True):
        missing = [name for name in ("num_envs", "reset", "step", "frame")
                   if not hasattr(env, name)]
        if missing:
            raise ValueError(f"env: expected a batched env (num_envs, reset, step, frame), "
                             f"{describe(env)} has no {', '.join(missing)}")
        self.window_s = real("window_s", window_s, 0.0, 60.0)
        if not isinstance(inline, bool):
            raise ValueError(f"inline: expected True or False, got {describe(inline)}")
        self.env = env
        self.inline = inline
        n = self._n = int(env.num_envs)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._env_lock = threading.Lock()      # one env call at a time
        self._batch = _Batch(n)
        self._owner = [None] * n               # row -> its open Slot
        self._started = bytearray(n)           # row was reset since its slot opened
        self._free = list(range(n))            # a heap: open() hands out the lowest free row
        self._open = 0
        self._closed = False
        self._timer = None
        self._timer_idle = False
        self._executing = False                # a batch is being stepped
        self._timer_awaits_end = False         # the broker's thread waits for that to end
        self._delivered_at = 0.0               # when the last batch was answered
        # A row's frame view changes only when its episode starts; an env that never restarts
        # episodes by itself restarts them only in our reset calls, so views can be kept.
        # (An env whose frame(i) gives encoded bytes, not a view, is asked every time.)
        self._keep_views = getattr(env, "autoreset", None) == "disabled" and \
            not getattr(env, "encoded", False)
        self._views = [None] * n
        self.env_steps = 0                     # env.step calls made (for tests and benchmarks)
        self.env_resets = 0
        env.reset()   # a batched env steps rows only after one full reset
        _BROKERS.add(self)

    # ---------------------------------------------------------------------------- slots
    def open(self) -> Slot:
        """A free row of the env as a new slot (the lowest free row)."""
        with self._lock:
            if self._closed:
                raise BrokerClosed("the broker was shut down")
            if not self._free:
                raise RuntimeError(f"all {self._n} slots of the broker are open; close one or "
                                   f"make the env with more num_envs")
            row = heapq.heappop(self._free)
            slot = Slot(self, row)
            self._owner[row] = slot
            self._started[row] = 0
            self._open += 1
            return slot

    def close(self, slot: Slot) -> None:
        """Give the slot's row back. A call of it still waiting to be flushed is dropped and
        its caller gets ValueError; a call already being stepped completes."""
        answer_now = None
        with self._lock:
            row = self._row(slot)
            self._owner[row] = None
            self._open -= 1
            heapq.heappush(self._free, row)
            batch = self._batch
            if batch.claimed[row]:
                self._drop(batch, row)
                if batch.row_errors is None:
                    batch.row_errors = {}
                batch.row_errors[row] = ValueError(
                    f"slot: row {row} was closed while its call waited")
                if batch.count == 0:
                    # Nothing left to flush: the dropped caller is answered now.
                    answer_now = batch
                    self._batch = _Batch(self._n)
            # Closing may leave every remaining open slot with a call waiting.
            full = answer_now is None and batch.count > 0 and batch.count == self._open
            if full and not self.inline:
                self._mark_due(batch)
        if answer_now is not None:
            self._deliver(answer_now)
        elif full and self.inline:
            self._flush()

    def _drop(self, batch: _Batch, row: int) -> None:
        kind = batch.claimed[row]
        batch.claimed[row] = 0
        batch.count -= 1
        if kind == 1:
            batch.actions[row] = None
            batch.steps -= 1
        else:
            batch.resets = [r for r in batch.resets if r[0] != row]

    def _row(self, slot) -> int:
        """The slot's row, or ValueError saying why the slot cannot be used (lock held)."""
        row = getattr(slot, "row", None)
        if isinstance(row, int) and 0 <= row < self._n and self._owner[row] is slot:
            return row
        if self._closed:
            raise BrokerClosed("the broker was shut down")
        if not isinstance(slot, Slot):
            raise ValueError(f"slot: expected a Slot from broker.open(), got {describe(slot)}")
        if slot.broker is not self:
            raise ValueError(f"slot: {slot!r} belongs to another broker")
        raise ValueError(f"slot: {slot!r} is closed")

    @property
    def open_slots(self) -> int:
        return self._open

    # ------------------------------------------------------------------------ requests
    def _submit(self, slot, action, seed, init_state, loop):
        """Add one call to the forming batch; returns (batch, row, flush_here). The hot path of
        every call: kept to a few attribute and list operations under the lock."""
        with self._lock:
            row = getattr(slot, "row", -1)
            if row.__class__ is not int or not 0 <= row < self._n or self._owner[row] is not slot:
                self._row(slot)   # raises the right error
            batch = self._batch
            if batch.claimed[row]:
                raise ValueError(f"slot: row {row} already has a call waiting (one call per "
                                 f"slot at a time)")
            if action is not None:
                if not self._started[row]:
                    raise ValueError(f"slot: row {row} must be reset before its first step")
                batch.actions[row] = action
                batch.claimed[row] = 1
                batch.steps += 1
            else:
                batch.resets.append((row, seed, init_state, slot))
                batch.claimed[row] = 2
            count = batch.count = batch.count + 1
            if loop is None:
                if batch.gate is None:
                    batch.gate = threading.Lock()
                    batch.gate.acquire()
            else:
                futures = batch.futures
                if futures is None:
                    batch.futures = {loop: _SharedFuture(loop=loop)}
                elif loop not in futures:
                    futures[loop] = _SharedFuture(loop=loop)
            if count == 1:
                batch.first = time.monotonic()
                if self._timer is None:
                    self._start_timer()
                elif self._timer_idle:
                    self._cond.notify()
            if count == self._open:
                if self.inline:
                    return batch, row, True
                self._mark_due(batch)
            return batch, row, False

    def _mark_due(self, batch: _Batch) -> None:
        batch.due = True
        if self._timer is None:
            self._start_timer()
        self._cond.notify()

    @staticmethod
    def _check_action(action) -> None:
        if action.__class__ is not str and not isinstance(action, str):
            raise ValueError(f"action: expected the model's action text (a str), got "
                             f"{describe(action)}")

    @staticmethod
    def _check_reset(seed, init_state):
        if seed is not None:
            seed = int(check_seeds([seed], 1, "seed")[0])
        if init_state is not None and not isinstance(init_state, dict):
            raise ValueError(f"init_state: expected a dict (a reference init state), got "
                             f"{describe(init_state)}")
        return seed

    def step(self, slot: Slot, action: str):
        """Step the slot's episode with ``action`` (blocks until its batch is stepped; from a
        coroutine use ``astep``, or the event loop stalls until the window flushes).
        Returns (obs, reward, terminated, truncated, info) of this row."""
        self._check_action(action)
        batch, row, flush = self._submit(slot, action, None, None, None)
        if flush:
            self._flush()
        gate = batch.gate
        gate.acquire()
        gate.release()   # the next threaded waiter of this batch
        return self._step_result(batch, row)

    def reset(self, slot: Slot, seed: int | None = None, init_state: dict | None = None):
        """Start a new episode in the slot (from ``init_state`` if given, else from ``seed``;
        None draws one). Returns (obs, info)."""
        seed = self._check_reset(seed, init_state)
        batch, row, flush = self._submit(slot, None, seed, init_state, None)
        if flush:
            self._flush()
        gate = batch.gate
        gate.acquire()
        gate.release()
        return self._reset_result(batch, row)

    async def astep(self, slot: Slot, action: str):
        """``step`` for coroutines. A call cancelled while it waits still takes effect (its
        batch is stepped); the task gets its CancelledError when the batch is answered."""
        self._check_action(action)
        loop = _get_running_loop() or self._no_loop()
        batch, row, flush = self._submit(slot, action, None, None, loop)
        if flush:
            self._flush()
            if batch.done:
                # Stepped here without waiting: still give the loop's other coroutines (the
                # batch's woken callers, or callers that have not opened a slot yet) their turn.
                await asyncio.sleep(0)
        if not batch.done:
            await batch.futures[loop]
        return self._step_result(batch, row)

    async def areset(self, slot: Slot, seed: int | None = None, init_state: dict | None = None):
        """``reset`` for coroutines."""
        seed = self._check_reset(seed, init_state)
        loop = _get_running_loop() or self._no_loop()
        batch, row, flush = self._submit(slot, None, seed, init_state, loop)
        if flush:
            self._flush()
            if batch.done:
                await asyncio.sleep(0)   # as in astep
        if not batch.done:
            await batch.futures[loop]
        return self._reset_result(batch, row)

    @staticmethod
    def _no_loop():
        raise RuntimeError("astep/areset need a running asyncio event loop; threads call "
                           "step/reset")

    # ------------------------------------------------------------------------- results
    def _obs(self, row: int):
        view = self._views[row]
        if view is None:
            view = self.env.frame(row)
            if self._keep_views:
                self._views[row] = view
        return view

    @staticmethod
    def _error_for(batch: _Batch, row: int, stepped: bool):
        error = batch.error or (batch.step_error if stepped else None)
        if error is None and batch.row_errors is not None:
            error = batch.row_errors.get(row)
        return error

    def _step_result(self, batch: _Batch, row: int):
        # Written out, not shared with _reset_result: it runs once per caller step.
        if batch.failed:
            error = self._error_for(batch, row, True)
            if error is not None:
                _raise(error)
        view = self._views[row]
        if view is None:
            view = self._obs(row)
        flat, nested = batch.info
        info = {key: col[row] for key, col in flat}
        for key, sub in nested:
            info[key] = {k: col[row] for k, col in sub}
        return view, batch.reward[row], batch.terminated[row], batch.truncated[row], info

    def _reset_result(self, batch: _Batch, row: int):
        if batch.failed:
            error = self._error_for(batch, row, False)
            if error is not None:
                _raise(error)
        return self._obs(row), batch.reset_info[row]

    # --------------------------------------------------------------------------- flush
    def _flush(self) -> None:
        """Step the forming batch (whatever it holds by now; nothing if another thread took
        it), one flush at a time."""
        with self._env_lock:
            with self._lock:
                batch = self._batch
                if not batch.count:
                    return
                self._batch = _Batch(self._n)
                self._executing = True
            try:
                self._execute(batch)
            finally:
                with self._lock:
                    self._executing = False
                    self._delivered_at = time.monotonic()
                    if self._timer_awaits_end:
                        self._cond.notify()

    def _execute(self, batch: _Batch) -> None:
        env, n = self.env, self._n
        try:
            if batch.resets:
                self._execute_resets(batch)
            if batch.steps:
                try:
                    active = np.frombuffer(batch.claimed, np.uint8) == 1
                    _, reward, terminated, truncated, info = env.step(batch.actions,
                                                                      active=active)
                    batch.reward = reward.tolist()
                    batch.terminated = terminated.tolist()
                    batch.truncated = truncated.tolist()
                    batch.info = _snapshot(info, n)
                except Exception as exc:   # the env's: it reaches the callers that stepped
                    batch.step_error = exc
                self.env_steps += 1
        except BaseException as exc:
            # Anything else (a KeyboardInterrupt in the flushing thread) reaches every caller
            # of the batch rather than leaving them waiting.
            batch.error = exc
        finally:
            self._deliver(batch)

    def _execute_resets(self, batch: _Batch) -> None:
        """Pending resets in as few env.reset calls as their arguments allow: one per kind
        (seeded, unseeded, from init states with or without seed)."""
        groups: dict = {}
        for request in batch.resets:
            groups.setdefault((request[2] is not None, request[1] is not None), []).append(request)
        batch.reset_info = {}
        for (has_init, has_seed), requests in groups.items():
            self._reset_group(batch, requests, has_init, has_seed)

    def _reset_group(self, batch: _Batch, requests: list, has_init: bool, has_seed: bool):
        rows = [r[0] for r in requests]
        for row in rows:
            self._views[row] = None
        try:
            _, info = self.env.reset(seeds=[r[1] for r in requests] if has_seed else None,
                                     init_states=[r[2] for r in requests] if has_init else None,
                                     rows=rows)
        except Exception as exc:
            if has_init and len(requests) > 1 and isinstance(exc, ValueError):
                # One caller's bad init state must not fail its neighbours: retry one by one
                # (the env changes nothing on a refused reset).
                for request in requests:
                    self._reset_group(batch, [request], has_init, has_seed)
                return
            if batch.row_errors is None:
                batch.row_errors = {}
            for row in rows:
                batch.row_errors[row] = exc
            return
        finally:
            self.env_resets += 1
        for (row, _, _, slot), row_info in zip(requests, _rows_info(info, rows, self._n)):
            batch.reset_info[row] = row_info
            if self._owner[row] is slot:   # not closed and opened anew meanwhile
                self._started[row] = 1

    def _deliver(self, batch: _Batch) -> None:
        batch.failed = bool(batch.error or batch.step_error or batch.row_errors)
        batch.done = True
        if batch.gate is not None:
            batch.gate.release()
        if batch.futures:
            here = _get_running_loop()
            for loop, fut in batch.futures.items():
                if loop is here:
                    _resolve(fut, batch)
                else:
                    try:
                        loop.call_soon_threadsafe(_resolve, fut, batch)
                    except RuntimeError:   # that loop is closed: nobody waits there any more
                        continue

    # --------------------------------------------------------------------- the window
    def _start_timer(self) -> None:
        self._timer = threading.Thread(target=self._watch, name="visgym-broker", daemon=True)
        self._timer.start()

    def _watch(self) -> None:
        """The broker's thread: flushes a batch when its window has passed, or (inline=False)
        as soon as it is full.

        The window runs from the batch's first call or from the end of the previous batch,
        whichever is later: the callers of a batch being stepped cannot join the next one
        until it is answered, and a window that ran out meanwhile would flush the others
        alone; the two groups would then alternate for ever, each waiting out a window."""
        cond = self._cond
        while True:
            with cond:
                while True:
                    if self._closed:
                        return
                    batch = self._batch
                    if batch.count:
                        if batch.due:
                            break
                        if self._executing:
                            self._timer_idle = False
                            self._timer_awaits_end = True
                            cond.wait()
                            self._timer_awaits_end = False
                            continue
                        start = max(batch.first, self._delivered_at)
                        wait = start + self.window_s - time.monotonic()
                        if wait <= 0:
                            break
                        self._timer_idle = False
                        cond.wait(wait)
                    else:
                        self._timer_idle = True
                        cond.wait()
                self._timer_idle = False
            self._flush()

    # ------------------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        """Stop the broker: every call still waiting for a batch gets BrokerClosed, later calls
        too; a batch being stepped completes first. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            batch = self._batch
            self._batch = _Batch(self._n)
            self._owner = [None] * self._n
            self._open = 0
            self._cond.notify_all()
            timer = self._timer
        batch.error = BrokerClosed("the broker was shut down while this call waited")
        self._deliver(batch)
        if timer is not None and timer is not threading.current_thread():
            timer.join(timeout=5.0)

    def __enter__(self) -> "Broker":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (f"Broker({self.env!r}, open={self._open}/{self._n}, window_s={self.window_s}, "
                f"inline={self.inline})")


def _after_fork_in_child() -> None:
    # A forked child has no broker thread (only the forking thread survives): start a new one
    # on the next call, with fresh locks (a copied lock may be held by a thread that is gone).
    for broker in list(_BROKERS):
        broker._timer = None
        broker._lock = threading.Lock()
        broker._cond = threading.Condition(broker._lock)
        broker._env_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
