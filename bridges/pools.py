"""Process pools for the runner and the demonstration synthesizer: how workers are started."""
from __future__ import annotations

import multiprocessing


def pool_context():
    """A multiprocessing context that forks when that is safe, else spawns.

    A spawned worker imports visgym, numba and the SDKs again and loads its compiled kernels
    (~0.8 s on the dev machine), which is most of a short run; a forked one starts warm. Forking
    is unsafe when this process runs native threads a child would need: here that is Numba's
    parallel thread pool (row kernels go parallel from 512 rows), so once it has been started,
    or where fork does not exist, workers are spawned. (OpenBLAS re-initialises itself after a
    fork; Fetch's MuJoCo thread pools and HTTP clients belong to objects a child builds anew.)
    """
    if "fork" in multiprocessing.get_all_start_methods():
        try:
            from numba.np.ufunc import parallel as numba_parallel
            started = bool(getattr(numba_parallel, "_is_initialized", True))
        except ImportError:
            started = True
        if not started:
            return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")
