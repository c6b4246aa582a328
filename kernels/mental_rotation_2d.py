"""Batched kernels for in-plane rotation puzzles: a hidden angle per episode and the angle the
agent has turned its copy by, both in degrees in [0, 360).

Nothing here knows a family by name. The shown copy is the original turned clockwise by
(agent - secret) mod 360; an episode is solved when that is within a tolerance of 0 either way.
``mod`` is Python's float modulo (``np.mod``: the result takes the divisor's sign), which is what
the reference's ``(angle + delta) % 360`` computes; the one value it can round up to, 360.0 (for
a tiny negative angle), is taken as 0.0. These are a few vectorised NumPy operations on B
floats (microseconds at B = 256), so they need no compiled kernel.
"""
import numpy as np


def mod360(values: np.ndarray) -> np.ndarray:
    """``values`` mod 360 in [0, 360) (a new array)."""
    out = np.mod(values, 360.0)
    out[out >= 360.0] = 0.0
    return out


def apply_rotations(agent, ints, move, changed) -> None:
    """One step's rotations in place: rows where ``move`` is true turn by ``ints[b, 0]`` degrees
    (clockwise on screen); ``changed`` becomes ``move`` (the rows whose right panel is
    redrawn)."""
    np.copyto(changed, move)
    rows = np.flatnonzero(move)
    if rows.shape[0]:
        agent[rows] = mod360(agent[rows] + ints[rows, 0])


def changed_rows(changed, out) -> int:
    """The indices of the true entries of ``changed`` into ``out``; returns their count."""
    rows = np.flatnonzero(changed)
    out[:rows.shape[0]] = rows
    return int(rows.shape[0])


def shown_angles(agent, secret, out) -> None:
    """``out`` = (agent - secret) mod 360: how far clockwise each right panel is turned."""
    out[:] = mod360(agent - secret)


def rotation_errors(agent, secret, out) -> None:
    """``out`` = |e| with e = (agent - secret) mod 360, less 360 above 180: the angle still to
    undo, in [0, 180]."""
    e = mod360(agent - secret)
    np.subtract(e, 360.0, out=e, where=e > 180.0)
    np.abs(e, out=out)
