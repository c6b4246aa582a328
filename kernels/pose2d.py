"""Batched planar-pose kernels (Numba): a segment's midpoint and heading on a scaled canvas.

A pose is a midpoint in *unit* coordinates (canvas position = unit x scale) plus a heading in
degrees. Moves add a translation times the scale to the unit midpoint, clip it into the canvas
and turn the heading modulo 360 with Python's float modulo; alignment is measured between a pose
and a target pose, with headings compared modulo 180 (a segment looks the same turned by 180
degrees). Generation, moves, alignment checks, the misalignment measure (how many tolerances
a pose lies outside the aligned region) and two plan builders (unit-first and random split)
live here; nothing knows a task by name.

Every move, whether taken by the step kernel or simulated by a plan builder, goes through
``apply_move`` with the float64 payload the action parser stores (a plan's values print as
``repr`` and parse back exactly), so a plan's simulated end pose is bit-identical to the pose
the env reaches by stepping it.
"""
import math

import numpy as np
from numba import njit

from .rng import seed_state, uniform01

STREAM_GENERATE = np.uint64(1)
STREAM_SOLVER = np.uint64(2)

# Unit directions of the eight 45-degree sectors, counter-clockwise from +x.
SECTOR_DX = np.array([1, 1, 0, -1, -1, -1, 0, 1], dtype=np.float64)
SECTOR_DY = np.array([0, 1, 1, 1, 0, -1, -1, -1], dtype=np.float64)


@njit(cache=True, nogil=True)
def sample_poses(scale, target_mid, target_ang, mid, ang, prev_mid, prev_ang, rows, seeds,
                 width, height, scale_lo, scale_hi):
    """Fresh episodes into ``rows``, all draws uniform, in the reference's order: the scale s,
    then the target (x in [0, W/s), y in [0, H/s), heading in [0, 360)), then the start pose the
    same way. Serial on purpose: a row costs a few nanoseconds, less than waking a thread pool."""
    for k in range(rows.shape[0]):
        b = rows[k]
        s = seed_state(seeds[k], STREAM_GENERATE)
        s, u = uniform01(s)
        sc = scale_lo + (scale_hi - scale_lo) * u
        scale[b] = sc
        s, u = uniform01(s)
        target_mid[b, 0] = u * (width / sc)
        s, u = uniform01(s)
        target_mid[b, 1] = u * (height / sc)
        s, u = uniform01(s)
        target_ang[b] = 360.0 * u
        s, u = uniform01(s)
        mid[b, 0] = u * (width / sc)
        s, u = uniform01(s)
        mid[b, 1] = u * (height / sc)
        s, u = uniform01(s)
        ang[b] = 360.0 * u
        prev_mid[b, 0] = mid[b, 0]
        prev_mid[b, 1] = mid[b, 1]
        prev_ang[b] = ang[b]


@njit(cache=True, inline="always")
def wrap_degrees(a):
    """a mod 360 with Python's float semantics, folded into [0, 360): Python's ``%`` returns
    360.0 for sums in (-3e-14, 0), which is the same heading as 0.0."""
    a = a % 360.0
    if a >= 360.0:
        a = 0.0
    return a


@njit(cache=True, inline="always")
def apply_move(x, y, a, sc, dx, dy, dtheta, width, height):
    """One move: (x, y) += (dx, dy) * s in unit coordinates (so s*s canvas px per unit), clipped
    to [0, W/s] x [0, H/s] as np.clip does; heading (a + dtheta) mod 360."""
    x = x + dx * sc
    y = y + dy * sc
    xmax = width / sc
    ymax = height / sc
    x = min(max(x, 0.0), xmax)
    y = min(max(y, 0.0), ymax)
    return x, y, wrap_degrees(a + dtheta)


@njit(cache=True, inline="always")
def heading_error(a, target):
    """((a - target) mod 180) folded into [0, 90]: a segment turned by 180 degrees is unchanged."""
    d = (a - target) % 180.0
    if d > 90.0:
        d = 180.0 - d
    return d


@njit(cache=True, inline="always")
def canvas_distance(x, y, tx, ty, sc):
    """Midpoint distance in canvas px (unit coordinates times s)."""
    return math.hypot(x * sc - tx * sc, y * sc - ty * sc)


@njit(cache=True, inline="always")
def is_aligned(x, y, a, tx, ty, ta, sc, pos_tol_px, ang_tol_deg):
    return (canvas_distance(x, y, tx, ty, sc) <= pos_tol_px
            and heading_error(a, ta) <= ang_tol_deg)


@njit(cache=True, nogil=True)
def step_pose_moves(scale, mid, ang, prev_mid, prev_ang, floats, rows, width, height):
    """The moves of one step, in place, for the rows where ``rows`` is true (the step template
    in core handles errors and stop): (dx, dy, dtheta) from ``floats``. ``prev_mid``/``prev_ang``
    receive every row's pose before the step (the renderer erases it)."""
    for b in range(mid.shape[0]):
        prev_mid[b, 0] = mid[b, 0]
        prev_mid[b, 1] = mid[b, 1]
        prev_ang[b] = ang[b]
        if not rows[b]:
            continue
        x, y, a = apply_move(mid[b, 0], mid[b, 1], ang[b], scale[b], np.float64(floats[b, 0]),
                             np.float64(floats[b, 1]), np.float64(floats[b, 2]), width, height)
        mid[b, 0] = x
        mid[b, 1] = y
        ang[b] = a


@njit(cache=True, nogil=True)
def aligned_poses(scale, target_mid, target_ang, mid, ang, pos_tol_px, ang_tol_deg, out):
    for b in range(mid.shape[0]):
        out[b] = is_aligned(mid[b, 0], mid[b, 1], ang[b], target_mid[b, 0], target_mid[b, 1],
                            target_ang[b], scale[b], pos_tol_px, ang_tol_deg)


@njit(cache=True, inline="always")
def round1(v):
    """v rounded to one decimal (the reference's round(v, 1); ties may differ, which no plan
    depends on). rint(10 v) is an integer, so k / 10 is the double Python prints as k/10."""
    return np.rint(v * 10.0) / 10.0


@njit(cache=True, inline="always")
def turn_toward(a, target):
    """The shortest turn that aligns heading a with target modulo 180, in (-90, 90]."""
    d = (target - a) % 180.0
    if d > 90.0:
        d -= 180.0
    return d


@njit(cache=True, inline="always")
def sector_of(dx, dy):
    """Index of the 45-degree sector around the direction (dx, dy), 0 = +x, counter-clockwise."""
    deg = math.degrees(math.atan2(dy, dx))
    deg = (deg + 360.0) % 360.0
    return int(((deg + 22.5) % 360.0) / 45.0)


@njit(cache=True, inline="always")
def _plan_move(plans, k, i, dx, dy, dth, x, y, a, sc, width, height):
    """Write move i of plan k; return the pose (x, y, heading) it reaches from (x, y, a)."""
    plans[k, i, 0] = dx
    plans[k, i, 1] = dy
    plans[k, i, 2] = dth
    return apply_move(x, y, a, sc, dx, dy, dth, width, height)


@njit(cache=True, inline="always")
def _plan_remainder(plans, plan_len, end_pose, k, i, x, y, a, tx, ty, target_a, sc, width,
                    height):
    """The last move i of plan k from pose (x, y, a): the remaining translation and the turn to
    ``target_a``, each rounded to 0.1; records the plan's length and end pose."""
    x, y, a = _plan_move(plans, k, i, round1((tx - x) / sc), round1((ty - y) / sc),
                         round1(turn_toward(a, target_a)), x, y, a, sc, width, height)
    plan_len[k] = i + 1
    end_pose[k, 0] = x
    end_pose[k, 1] = y
    end_pose[k, 2] = a


@njit(cache=True, nogil=True)
def plan_unit_first(scale, target_mid, target_ang, mid, ang, rows, num_steps, width, height,
                    plans, plan_len, end_pose):
    """Unit-first plans (spec section 9): translation-only moves along the 8-way sector toward
    the target, of lengths num_steps-1, ..., 1 (one unit move when num_steps <= 2), then one move
    with the remaining translation and the whole turn, every component rounded to 0.1.

    Fix of the reference (its quirk 4): the sector of each move and the final remainder are taken
    from the position the env will actually reach, advanced by step * s and clipped, so a move
    that runs into the canvas edge no longer spoils the plan. ``plans[k, i]`` = (dx, dy, dtheta),
    ``end_pose[k]`` = (x, y, heading) after the plan, exactly as stepping it gives."""
    for k in range(rows.shape[0]):
        b = rows[k]
        sc = scale[b]
        x = mid[b, 0]
        y = mid[b, 1]
        a = ang[b]
        tx = target_mid[b, 0]
        ty = target_mid[b, 1]
        if num_steps <= 2:
            n_unit = 1
        else:
            n_unit = num_steps - 1
        for i in range(n_unit):
            sec = sector_of(tx - x, ty - y)
            length = 1.0 if num_steps <= 2 else np.float64(num_steps - 1 - i)
            x, y, a = _plan_move(plans, k, i, SECTOR_DX[sec] * length, SECTOR_DY[sec] * length,
                                 0.0, x, y, a, sc, width, height)
        _plan_remainder(plans, plan_len, end_pose, k, n_unit, x, y, a, tx, ty, target_ang[b], sc,
                        width, height)


@njit(cache=True, nogil=True)
def plan_random_split(scale, target_mid, target_ang, mid, ang, rows, seeds, num_steps, width,
                      height, plans, plan_len, end_pose):
    """Random-split plans (the reference's "stochastic" strategy): the whole correction
    (dx, dy, dtheta) = ((target - mid) / s, shortest turn) cut at num_steps - 1 sorted uniform
    points, each piece rounded to 0.1. The cut points come from the episode's solver stream, not a
    shared generator. The last piece is the exact remainder from the pose the earlier pieces
    reach (rounded), so the rounding of the earlier pieces does not accumulate."""
    cuts = np.empty(max(num_steps - 1, 1), np.float64)
    for k in range(rows.shape[0]):
        b = rows[k]
        sc = scale[b]
        x = mid[b, 0]
        y = mid[b, 1]
        a = ang[b]
        tx = target_mid[b, 0]
        ty = target_mid[b, 1]
        total_dx = (tx - x) / sc
        total_dy = (ty - y) / sc
        total_dth = turn_toward(a, target_ang[b])
        s = seed_state(seeds[k], STREAM_SOLVER)
        for i in range(num_steps - 1):
            s, u = uniform01(s)
            cuts[i] = u
        cuts[:num_steps - 1] = np.sort(cuts[:num_steps - 1])
        prev_cut = 0.0
        for i in range(num_steps - 1):
            frac = cuts[i] - prev_cut
            prev_cut = cuts[i]
            x, y, a = _plan_move(plans, k, i, round1(total_dx * frac), round1(total_dy * frac),
                                 round1(total_dth * frac), x, y, a, sc, width, height)
        _plan_remainder(plans, plan_len, end_pose, k, num_steps - 1, x, y, a, tx, ty,
                        target_ang[b], sc, width, height)


@njit(cache=True, nogil=True)
def pose_excess(scale, target_mid, target_ang, mid, ang, pos_tol_px, ang_tol_deg, out):
    """out[b] = how far pose b lies outside the aligned region, in tolerances: the midpoint
    distance beyond ``pos_tol_px`` divided by it, plus the heading error (modulo 180) beyond
    ``ang_tol_deg`` divided by it (a zero tolerance divides by 1 px or 1 degree instead).
    Exactly 0 where ``is_aligned`` holds; elsewhere at least float32's smallest normal number,
    so a float32 ``out`` never rounds a misaligned pose to 0."""
    pos_norm = pos_tol_px if pos_tol_px > 0.0 else 1.0
    ang_norm = ang_tol_deg if ang_tol_deg > 0.0 else 1.0
    floor = np.float64(np.finfo(np.float32).tiny)
    for b in range(mid.shape[0]):
        dist = canvas_distance(mid[b, 0], mid[b, 1], target_mid[b, 0], target_mid[b, 1],
                               scale[b])
        err = heading_error(ang[b], target_ang[b])
        if dist <= pos_tol_px and err <= ang_tol_deg:
            out[b] = 0.0
            continue
        excess = max(dist - pos_tol_px, 0.0) / pos_norm + max(err - ang_tol_deg, 0.0) / ang_norm
        out[b] = max(excess, floor)
