"""One batched kernel, compiled twice: serially and over Numba's thread pool.

Row kernels (generation, solvers) run over a list of episode rows. During a stepping loop an
auto-reset touches a handful of rows, where waking a thread pool costs milliseconds; a reset or
solve of a large batch wants both cores. ``row_kernel`` compiles the same Python function both
ways and picks by the number of rows of its ``rows`` argument.
"""
import functools

from numba import njit

from ..core.variants import renamed

PARALLEL_MIN_ROWS = 512


def row_kernel(rows_arg: int):
    """Decorator: ``rows_arg`` is the position of the ``rows`` array among the arguments."""

    def wrap(func):
        serial = njit(cache=True, nogil=True)(renamed(func, "__serial"))
        parallel = njit(cache=True, nogil=True, parallel=True)(renamed(func, "__parallel"))

        @functools.wraps(func)
        def call(*args):
            kernel = parallel if args[rows_arg].shape[0] >= PARALLEL_MIN_ROWS else serial
            return kernel(*args)

        call.serial = serial
        call.parallel = parallel
        return call

    return wrap
