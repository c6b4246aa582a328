"""Process pools for the runner and the demonstration synthesizer: how workers are started."""
from __future__ import annotations

import multiprocessing
import sys


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
