"""One Python function compiled more than one way, each with a cache of its own.

Numba names a function's on-disk cache after its qualified name and keys the entries by the
signature only, not by compile options such as ``parallel``: the serial and the threaded
compilation of one function share a cache entry, and whichever was saved last is loaded for
both. A serial kernel then wakes Numba's thread pool on every small call (measured 30x slower on
a 16-row maze solve) and starts the threading layer, after which forking is unsafe. ``renamed``
gives each variant its own qualified name, hence its own cache (kernels/batching.py's row
kernels, render/painter3d.py). No Numba import here: it is plain Python.
"""
from __future__ import annotations

import types


def renamed(func, suffix: str):
    """A copy of ``func`` (same code, globals, defaults and closure) whose name and qualified
    name end in ``suffix``."""
    clone = types.FunctionType(func.__code__, func.__globals__, func.__name__ + suffix,
                               func.__defaults__, func.__closure__)
    clone.__qualname__ = func.__qualname__ + suffix
    clone.__module__ = func.__module__
    clone.__kwdefaults__ = func.__kwdefaults__
    clone.__doc__ = func.__doc__
    return clone
