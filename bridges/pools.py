"""Process pools for the runner and the demonstration synthesizer: how workers are started, and
how they end with their parent."""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time


def _numba_threads_started() -> bool:
    try:
        from numba.np.ufunc import parallel as numba_parallel
    except ImportError:
        return True
    return bool(getattr(numba_parallel, "_is_initialized", True))


def _jax_started() -> bool:
    """JAX's runtime (XLA client threads, device buffers) cannot be used in a forked child."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge
    except ImportError:
        return True
    return bool(getattr(xla_bridge, "_backends", True))


def pool_context():
    """A multiprocessing context that forks when that is safe, else spawns.

    A spawned worker imports visgym, numba and the SDKs again and loads its compiled kernels
    (~0.8 s on the dev machine), which is most of a short run; a forked one starts warm. Forking
    is unsafe when this process runs native threads a child would need and that no Python
    object can recreate: Numba's parallel thread pool (row kernels go parallel from 512 rows)
    and JAX's runtime (the MJX backend). Once either has started, or where fork does not exist,
    workers are spawned. visgym's own thread pools (the MuJoCo stepper, the Fetch renderer, the
    GIF writer) are ``core.threads.ProcessThreadPool``s, which a forked child recreates on first
    use, so envs cached in the parent stay usable in the child; OpenBLAS re-initialises itself.
    """
    if "fork" in multiprocessing.get_all_start_methods():
        if not _numba_threads_started() and not _jax_started():
            return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


PR_SET_PDEATHSIG = 1   # linux/prctl.h
PARENT_POLL_S = 0.5


def _set_parent_death_signal() -> bool:
    """Ask Linux to SIGKILL this process when its parent exits (prctl PR_SET_PDEATHSIG)."""
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    return False


def _watch_parent(parent_pid: int, poll_s: float) -> None:
    while True:
        time.sleep(poll_s)
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGKILL)


def die_with_parent(parent_pid: int | None = None, poll_s: float = PARENT_POLL_S) -> None:
    """Make this worker process end as soon as its parent does (a pool initializer calls it).

    A parent killed with SIGKILL cannot stop its pool, and workers that outlive it keep writing
    into the output a rerun is rebuilding and keep the inherited stdout/stderr pipes open (so
    ``visgym demos ... | tee log`` never ends). On Linux the kernel delivers SIGKILL to the worker
    when the parent exits (PR_SET_PDEATHSIG, set through ctypes); everywhere a daemon thread also
    polls ``os.getppid()`` every ``poll_s`` seconds and kills the worker once the parent is gone
    (the fallback where prctl is missing). ``parent_pid`` (default: the current parent) is the
    pid the parent passed down: if it already differs from ``os.getppid()`` the parent died
    before this call and the worker ends at once."""
    expected = os.getppid() if parent_pid is None else int(parent_pid)
    _set_parent_death_signal()
    if os.getppid() != expected:   # the parent died before the death signal was armed
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=_watch_parent, args=(expected, poll_s), name="visgym-parent-watch",
                     daemon=True).start()


# ------------------------------------------------------------------------------ shared work lists
# A multi-process run hands out the indices of one to-do list from a counter in shared memory:
# every process takes the next index as it frees a slot, so a process that starts late or gets
# short episodes simply takes more (instead of fixed todo[k::n] shares).
_CLAIM: dict = {}


def claim_init(counter, total: int) -> None:
    """Use ``counter`` (a ``ctx.Value("q", 0)``) to hand out indices below ``total``."""
    _CLAIM["counter"], _CLAIM["total"] = counter, total


def claim_next():
    """The next unclaimed index of the shared to-do list, or None when all are taken."""
    counter = _CLAIM["counter"]
    with counter.get_lock():
        index = counter.value
        if index >= _CLAIM["total"]:
            return None
        counter.value = index + 1
    return index


def claiming_child(counter, total: int) -> None:
    """A pool initializer: the child dies with its parent (a kill -9 of the parent must not
    leave it writing records that a resumed run would repeat) and shares its counter."""
    claim_init(counter, total)
    die_with_parent()
