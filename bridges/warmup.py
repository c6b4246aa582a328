"""A task's first reset and step, done up front and announced when Numba has to compile.

The kernels are compiled by Numba on first use and cached on disk (``__pycache__`` next to each
module), so a fresh clone's first ``make demo`` spends most of a minute compiling. ``warm_up``
builds a one-episode env of the task and runs each code path once (generation, loading an init
state, the solver, a step and a stop, the frames), before the run starts its episodes and before
it forks its workers (which then inherit the compiled code). ``announce_compilation`` listens to
Numba's own compile event, which fires only on a cache miss (a cold or outdated cache), never on
a cache load: so the notice

    compiling kernels for maze_2d/easy (first run only, cached afterwards)... 12.3 s

appears exactly when something is compiled, as it starts, and a warm run prints nothing.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time

from ..core import make
from ..core.grammar import STOP_ACTION
from ..core.rollout import run_plans

__all__ = ["announce_compilation", "warm_up"]


@contextlib.contextmanager
def announce_compilation(label: str, stream=None, enabled: bool = True):
    """While the block runs, the first Numba compilation (in any thread) writes "compiling
    kernels for <label> (first run only, cached afterwards)..." to ``stream`` (stderr), and the
    block's end completes the line with the seconds it took."""
    if not enabled:
        yield
        return
    from numba.core import event

    stream = stream or sys.stderr
    lock = threading.Lock()
    started = []

    class Notice(event.Listener):
        def on_start(self, ev):
            with lock:
                if not started:
                    started.append(time.perf_counter())
                    stream.write(f"compiling kernels for {label} (first run only, cached "
                                 "afterwards)...")
                    stream.flush()

        def on_end(self, ev):
            pass

    listener = Notice()
    event.register("numba:compile", listener)
    try:
        yield
    finally:
        event.unregister("numba:compile", listener)
        if started:
            stream.write(f" {time.perf_counter() - started[0]:.1f} s\n")
            stream.flush()


def warm_up(env_id: str, make_kwargs: dict | None = None, init_state: dict | None = None,
            seed: int = 0, strategies=(None,), num_steps: int | None = None,
            text_mode: bool = False, announce: bool = True, stream=None) -> None:
    """Run every code path of ``env_id`` once on a side env of one episode: a reset from
    ``seed``, a reset from ``init_state`` (when given), the solver (each of ``strategies``, with
    ``num_steps``), its first action and a stop, the text rendering in ``text_mode``; Numba
    compiles or loads each kernel now, announced by ``announce_compilation``."""
    with announce_compilation(env_id, stream, announce):
        env = make(env_id, num_envs=1, autoreset="disabled", max_steps=None,
                   **(make_kwargs or {}))
        for strategy in strategies:
            env.reset(seeds=[seed])
            if init_state is not None:
                env.reset(seeds=[seed], init_states=[init_state])
            plan = list(env.solve(strategy=strategy, num_steps=num_steps)[0])
            run_plans(env, [plan[:1] + [STOP_ACTION]])
            if text_mode:
                env.render_text()
