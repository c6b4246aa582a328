"""A task's first reset and step, done up front and announced when Numba has to compile.

The kernels are compiled by Numba on first use and cached on disk (``__pycache__`` next to each
module). ``warm_up`` builds a one-episode env of the task and runs each code path once
(generation, loading an init state, the solver, a step and a stop, the frames), before the run
starts its episodes and before it forks its workers (which then inherit the compiled code).
``announce_compilation`` listens to Numba's own compile event, which fires only on a cache miss
(a cold or outdated cache), never on a cache load: so the notice

    compiling kernels for maze_2d/easy (first run only, cached afterwards)... 12.3 s

appears exactly when something is compiled, as it starts, and a warm run prints nothing.

``warm_up_all``: the tasks of a run whose kernels are not cached yet (``is_cold``: a kernel the
family's module uses has no cache index on disk) are compiled in parallel, one process per core,
before the run warms each task in its own process (which then only loads the caches). Compiling
every family's kernels takes about 75 s of CPU on the 2-core development machine, so a first run
waits about half of that; ``make install`` does it once (``visgym warmup``), and a warm run pays
nothing for the check beyond importing the families it uses.
"""
from __future__ import annotations

import contextlib
import gc
import sys
import threading
import time

from ..core import make
from ..core.grammar import STOP_ACTION
from ..core.rollout import run_plans

__all__ = ["announce_compilation", "is_cold", "settled_heap", "warm_up", "warm_up_all"]


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
            text_mode: bool = False, announce: bool = True, stream=None,
            thorough: bool = False) -> None:
    """Run every code path of ``env_id`` once on a side env of one episode: a reset from
    ``seed``, a reset from ``init_state`` (when given), the solver (each of ``strategies``, with
    ``num_steps``), its first action and a stop, the text rendering in ``text_mode``; Numba
    compiles or loads each kernel now, announced by ``announce_compilation``. ``thorough`` also
    runs every solver strategy, a mid-episode state reloaded and the goal frames (every path
    whose kernels ``is_cold`` looks for)."""
    with announce_compilation(env_id, stream, announce):
        env = make(env_id, num_envs=1, autoreset="disabled", max_steps=None,
                   **(make_kwargs or {}))
        if thorough:
            strategies = tuple(dict.fromkeys((*strategies, *env.family.solver_strategies)))
        for strategy in strategies:
            env.reset(seeds=[seed])
            env.potential()   # shaped rewards' kernels (reward="progress")
            if init_state is not None:
                env.reset(seeds=[seed], init_states=[init_state])
            plan = list(env.solve(strategy=strategy, num_steps=num_steps)[0])
            if thorough:
                env.step(plan[:1])
                env.reset(seeds=[seed], init_states=env.state_dicts())
                env.goal_frames()
            run_plans(env, [plan[:1] + [STOP_ACTION]])
            if text_mode:
                env.render_text()


def _dispatchers(module) -> list:
    """The cached Numba kernels a module uses: those in its namespace, those of the visgym
    modules it refers to, one level down, and those of the ``visgym.kernels`` modules its
    kernels come from (a family's own kernel module, whose helpers its kernels call). The
    shared render/ toolkit modules count only for the kernels a family names: they hold kernels
    that one family uses and another never runs (a family would look cold for ever)."""
    import types

    from numba.core.registry import CPUDispatcher

    found, modules = {}, {module}
    for value in vars(module).values():
        if isinstance(value, types.ModuleType) and value.__name__.startswith("visgym."):
            modules.add(value)
        elif isinstance(value, CPUDispatcher):
            found[id(value)] = value
            owner = sys.modules.get(value.py_func.__module__)
            if owner is not None and owner.__name__.startswith("visgym.kernels."):
                modules.add(owner)
    for mod in modules:
        for value in vars(mod).values():
            if isinstance(value, CPUDispatcher):
                found[id(value)] = value
    # Kernels inlined into their callers (inline="always") are never compiled, nor cached, on
    # their own; threaded variants (parallel=True) are compiled when a batch first needs them.
    return [d for d in found.values() if getattr(d, "_cache", None) is not None
            and d.targetoptions.get("inline", "never") == "never"
            and not d.targetoptions.get("parallel")]


def is_cold(env_id: str) -> bool:
    """Whether a kernel of ``env_id``'s family has nothing cached on disk yet (its module is
    imported; nothing is compiled)."""
    import os

    from ..core.registry import spec

    module = sys.modules[spec(env_id).family.__module__]
    for dispatcher in _dispatchers(module):
        cache_file = getattr(dispatcher._cache, "_cache_file", None)
        index = getattr(cache_file, "_index_path", None)
        if index is not None and not os.path.exists(index):
            return True
    return False


def _warm_child(jobs) -> list:
    """Warm one family's tasks in a child process (one process per family: the presets share
    most kernels, which would otherwise be compiled twice at once)."""
    failed = []
    for env_id, kwargs in jobs:
        try:
            warm_up(env_id, announce=False, thorough=True, **kwargs)
        except Exception as error:  # noqa: BLE001 - the run meets it again, and reports it
            failed.append(f"{env_id}: {type(error).__name__}: {error}")
    return failed


def warm_up_all(jobs: list, announce: bool = True, processes: int | None = None,
                stream=None) -> None:
    """Warm every task of ``jobs`` (``(env_id, warm_up keywords)`` pairs) in this process,
    first compiling the cold ones in parallel (``processes``, default one per core) when there
    are two or more. Failures are left to the tasks' own runs: warming decides nothing."""
    import contextlib
    import os

    processes = processes or os.cpu_count() or 1
    families: dict = {}
    for job in jobs:
        if _safely(is_cold, job[0]):
            families.setdefault(job[0].split("/")[0], []).append(job)
    if processes > 1 and len(families) > 1:
        from concurrent.futures import ProcessPoolExecutor

        from .pools import pool_context

        stream = stream or sys.stderr
        workers = min(processes, len(families))
        if announce:
            stream.write(f"compiling kernels for {len(families)} families on {workers} "
                         "processes (first run only, cached afterwards)...")
            stream.flush()
        start = time.perf_counter()
        # The longest first: the families' compile times differ tenfold.
        order = sorted(families, key=lambda name: -_COMPILE_WEIGHT.get(name, 1))
        with ProcessPoolExecutor(workers, mp_context=pool_context()) as pool:
            list(pool.map(_warm_child, [families[name] for name in order]))
        if announce:
            stream.write(f" {time.perf_counter() - start:.1f} s\n")
            stream.flush()
    for env_id, kwargs in jobs:
        with contextlib.suppress(Exception):
            warm_up(env_id, announce=announce, stream=stream, **kwargs)


def _safely(check, env_id) -> bool:
    try:
        return check(env_id)
    except Exception:  # noqa: BLE001 - an id that cannot even import is warmed (and fails) alone
        return False


# Seconds of compiling per family, cold, on the 2-core development machine (both presets):
# only the order in which cold families are handed to the processes.
_COMPILE_WEIGHT = {"matchstick_equation": 31, "patch_reassembly": 14, "mental_rotation_3d_cube": 7,
                   "sliding_block": 7, "maze_3d": 5, "matchstick_rotation": 3, "maze_2d": 3,
                   "fetch_pick_and_place": 2}


@contextlib.contextmanager
def settled_heap(enabled: bool = True):
    """While the block runs, what was alive at its start is left out of garbage collection
    (``gc.freeze``); at its end it is put back (``gc.unfreeze``), garbage included, for the
    collector's next full pass. Both are list splices: no collection runs here.

    For the playing loop of a command's own process (``visgym eval``, ``visgym rollouts`` and
    their worker processes), once the start-up is over. The modules, compiled kernels and envs
    (~180,000 objects) outlive the run, yet every full collection walked them: ~90 ms each, 11%
    of a rollout run's CPU (docs/performance.md). Objects frozen are still freed when their last
    reference goes, but a cycle among them only after the block, so callers inside a trainer's
    process (``collect``) leave it off."""
    if not enabled:
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
