"""Rotation utilities shared by the 3-D mental-rotation families, in one place.

- Euler conventions. The cube's payload [yaw, pitch, roll] = [a, b, c] means
  R(a, b, c) = Rx(c) . Ry(b) . Rz(a) (Gohlke/trimesh static-frame "szyx", spec
  mental_rotation_3d_cube section 3); ``euler_szyx_matrix`` / ``euler_szyx_from_matrix`` follow
  Gohlke's formulas term by term, so plans rounded to 0.1 degree print as the reference's do.
  objaverse's payload uses a scrambled mapping of the same matrices (yaw = -c, pitch = a,
  roll = b; spec mental_rotation_3d_objaverse): ``PayloadCodec`` describes either.
- Payload angles are degrees converted to float32 radians (``payload_radians``), as the
  reference's float32 action space does before building the matrix in float64.
- Frames: "object" (intrinsic) post-multiplies the increment, current . R_inc; "world"
  (extrinsic) pre-multiplies it, R_inc . current (``compose``).
- Axis-angle conversion both ways, and the geodesic angle to the identity.
- One solver builder, ``plan_payloads``: by-axis (a single-axis factorisation emitted in the
  order that is correct for the frame: the reference emitted the world-frame order in both
  frames, which fails in the object frame), axis-angle (parts about one axis commute, so one
  plan serves both frames; uniform or random splits), and the neutral pad1/pad3 prefixes.

Vectorised functions take arrays with any leading axes; the planners are scalar Python (they
build strings, and run once per episode).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from numba import njit

FRAMES = ("object", "world")
# Gohlke's threshold for the gimbal-lock branch of euler_from_matrix.
_GOHLKE_EPS = float(np.finfo(float).eps) * 4.0
# An angle (radians) below this is "no rotation" for the planners.
ZERO_ANGLE = 1e-9


# ----------------------------------------------------------------------------- conventions
def payload_radians(payload_deg) -> np.ndarray:
    """Degrees -> radians as the reference does it: float32 in, float32 out (np.deg2rad on the
    float32 payload), returned as float64 values of those float32 numbers."""
    return np.deg2rad(np.asarray(payload_deg, np.float32)).astype(np.float64)


def euler_szyx_matrix(a, b, c) -> np.ndarray:
    """R = Rx(c) . Ry(b) . Rz(a) for arrays a, b, c (radians, broadcast together): float64
    [..., 3, 3]. Gohlke's euler_matrix(a, b, c, "szyx") written out (firstaxis z, parity odd:
    the angles are negated and the axis order is i=2, j=1, k=0)."""
    ai, aj, ak = np.broadcast_arrays(-np.asarray(a, np.float64), -np.asarray(b, np.float64),
                                     -np.asarray(c, np.float64))
    si, sj, sk = np.sin(ai), np.sin(aj), np.sin(ak)
    ci, cj, ck = np.cos(ai), np.cos(aj), np.cos(ak)
    cc, cs = ci * ck, ci * sk
    sc, ss = si * ck, si * sk
    m = np.empty(ai.shape + (3, 3), np.float64)
    m[..., 2, 2] = cj * ck
    m[..., 2, 1] = sj * sc - cs
    m[..., 2, 0] = sj * cc + ss
    m[..., 1, 2] = cj * sk
    m[..., 1, 1] = sj * ss + cc
    m[..., 1, 0] = sj * cs - sc
    m[..., 0, 2] = -sj
    m[..., 0, 1] = cj * si
    m[..., 0, 0] = cj * ci
    return m


def euler_szyx_from_matrix(m) -> tuple[float, float, float]:
    """(a, b, c) radians with Rx(c) . Ry(b) . Rz(a) = m (a 3x3 rotation), Gohlke's
    euler_from_matrix(m, "szyx") term by term (scalar Python floats)."""
    m = [[float(v) for v in row] for row in np.asarray(m, np.float64)[:3, :3]]
    i, j, k = 2, 1, 0
    cy = math.sqrt(m[i][i] * m[i][i] + m[j][i] * m[j][i])
    if cy > _GOHLKE_EPS:
        ax = math.atan2(m[k][j], m[k][k])
        ay = math.atan2(-m[k][i], cy)
        az = math.atan2(m[j][i], m[i][i])
    else:
        ax = math.atan2(-m[j][k], m[j][j])
        ay = math.atan2(-m[k][i], cy)
        az = 0.0
    return -ax, -ay, -az


def compose(current: np.ndarray, increment: np.ndarray, frame: str) -> np.ndarray:
    """The rotation after applying ``increment`` to ``current`` ([..., 3, 3] each): object frame
    current . increment (about the object's own axes), world frame increment . current."""
    if frame == "object":
        return current @ increment
    if frame == "world":
        return increment @ current
    raise ValueError(f"action_frame: expected one of {FRAMES}, got {frame!r}")


def geodesic_angle(rot: np.ndarray) -> np.ndarray:
    """Angle (radians) between rotations [..., 3, 3] and the identity: arccos((trace - 1) / 2)
    with the trace clipped to [-1, 3]."""
    trace = np.trace(rot, axis1=-2, axis2=-1)
    return np.arccos((np.clip(trace, -1.0, 3.0) - 1.0) / 2.0)


def axis_angle_from_matrix(m) -> tuple[np.ndarray, float]:
    """(unit axis float64[3], angle in [0, pi]) of a 3x3 rotation; axis (1, 0, 0) at angle 0.
    Near pi the axis comes from the symmetric part (the skew part vanishes there)."""
    m = np.asarray(m, np.float64)
    skew = np.array([m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]])
    # atan2 keeps full precision near 0 and pi, where arccos of the trace does not.
    angle = math.atan2(float(np.linalg.norm(skew)) / 2.0, (float(np.trace(m)) - 1.0) / 2.0)
    if angle < ZERO_ANGLE:
        return np.array([1.0, 0.0, 0.0]), 0.0
    if angle < math.pi - 1e-4:
        return skew / np.linalg.norm(skew), angle
    # R = I + 2 sin^2(angle/2) [n]x^2 + ...: n n^T = (R + R^T)/2 - cos(angle) I, over 1 - cos.
    sym = (m + m.T) / 2.0 - math.cos(angle) * np.eye(3)
    k = int(np.argmax(np.diag(sym)))
    axis = sym[k] / math.sqrt(max(sym[k, k], 1e-300))
    axis /= np.linalg.norm(axis)
    if skew @ axis < 0:  # orient it with the (tiny) skew part so the angle stays positive
        axis = -axis
    return axis, angle


def matrix_from_axis_angle(axis, angle: float) -> np.ndarray:
    """Rodrigues: the rotation by ``angle`` radians about the unit ``axis``."""
    x, y, z = (float(v) for v in axis)
    c, s = math.cos(angle), math.sin(angle)
    t = 1.0 - c
    return np.array([[c + x * x * t, x * y * t - z * s, x * z * t + y * s],
                     [y * x * t + z * s, c + y * y * t, y * z * t - x * s],
                     [z * x * t - y * s, z * y * t + x * s, c + z * z * t]])


# ----------------------------------------------------------------------------- payload codecs
@dataclass(frozen=True)
class PayloadCodec:
    """How a family's 3-number payload maps to the szyx angles of its matrix: szyx angle j
    (a = about z first, b, c) is ``signs[j] * payload[slots[j]]``. ``factor_slots``: the
    payload slot of each single-axis factor of R = Rx(c) . Ry(b) . Rz(a), left to right."""

    slots: tuple[int, int, int]
    signs: tuple[float, float, float]

    def szyx(self, payload):
        """szyx angles (a, b, c) of a payload [..., 3] (array in, array out)."""
        p = np.asarray(payload, np.float64)
        return np.stack([self.signs[j] * p[..., self.slots[j]] for j in range(3)], axis=-1)

    def from_matrix(self, m) -> tuple[float, float, float]:
        """A payload whose matrix is m (scalar floats)."""
        abc = euler_szyx_from_matrix(m)
        out = [0.0, 0.0, 0.0]
        for j in range(3):
            out[self.slots[j]] = self.signs[j] * abc[j]
        return tuple(out)

    def matrix(self, payload) -> np.ndarray:
        abc = self.szyx(payload)
        return euler_szyx_matrix(abc[..., 0], abc[..., 1], abc[..., 2])

    def factor(self, m) -> list[tuple[int, float]]:
        """[(payload slot, angle)] of the single-axis factors of m, left to right (Rx(c), Ry(b),
        Rz(a)), each angle already carrying the codec's sign."""
        p = self.from_matrix(m)
        return [(self.slots[j], p[self.slots[j]]) for j in (2, 1, 0)]


# The cube: [yaw a, pitch b, roll c] -> Rx(c) Ry(b) Rz(a).
CUBE_CODEC = PayloadCodec(slots=(0, 1, 2), signs=(1.0, 1.0, 1.0))
# objaverse: yaw = -c, pitch = a, roll = b for payload [a, b, c]: szyx angles (-p2, p0, p1).
OBJAVERSE_CODEC = PayloadCodec(slots=(2, 0, 1), signs=(-1.0, 1.0, 1.0))


def szyx_from_trig(si, sj, sk, ci, cj, ck, m):
    """Gohlke's szyx matrix into m[3, 3] from the sines and cosines of (-a, -b, -c): plain
    Python, so the arithmetic is that of the numbers given (mental_rotation_3d_objaverse passes
    float16 scalars, as the reference computed); compiled below for float64."""
    cc, cs = ci * ck, ci * sk
    sc, ss = si * ck, si * sk
    m[2, 2] = cj * ck
    m[2, 1] = sj * sc - cs
    m[2, 0] = sj * cc + ss
    m[1, 2] = cj * sk
    m[1, 1] = sj * ss + cc
    m[1, 0] = sj * cs - sc
    m[0, 2] = -sj
    m[0, 1] = cj * si
    m[0, 0] = cj * ci


_szyx_from_trig = njit(cache=True, inline="always")(szyx_from_trig)


@njit(cache=True, nogil=True)
def _szyx_into(a, b, c, m):
    """euler_szyx_matrix for one triple into m[3, 3] (scalar libm calls, so a row's result never
    depends on its position in a batch)."""
    ai, aj, ak = -a, -b, -c
    _szyx_from_trig(math.sin(ai), math.sin(aj), math.sin(ak), math.cos(ai), math.cos(aj),
                    math.cos(ak), m)


@njit(cache=True, nogil=True)
def szyx_rows(angles, rows, rot):
    """rot[rows[k]] = R(angles[k]) (szyx)."""
    m = np.empty((3, 3))
    for k in range(rows.shape[0]):
        _szyx_into(angles[k, 0], angles[k, 1], angles[k, 2], m)
        rot[rows[k]] = m


@njit(cache=True, nogil=True)
def rotate_rows(rot, angles, mask, world):
    """For rows b with mask[b]: rot[b] <- rot[b] . R(angles[b]) (object frame) or
    R(angles[b]) . rot[b] (world), angles the szyx triple (radians)."""
    inc = np.empty((3, 3))
    out = np.empty((3, 3))
    for b in range(rot.shape[0]):
        if not mask[b]:
            continue
        _szyx_into(angles[b, 0], angles[b, 1], angles[b, 2], inc)
        for i in range(3):
            for j in range(3):
                if world:
                    out[i, j] = inc[i, 0] * rot[b, 0, j] + inc[i, 1] * rot[b, 1, j] + inc[i, 2] * rot[b, 2, j]
                else:
                    out[i, j] = rot[b, i, 0] * inc[0, j] + rot[b, i, 1] * inc[1, j] + rot[b, i, 2] * inc[2, j]
        rot[b] = out


# ----------------------------------------------------------------------------- planners
BASES = ("by-axis", "axis-angle", "axis-angle-random")
PADS = ("", "pad1_", "pad3_")
# pad1: yaw 90 x3, pitch 90, pitch 180, pitch 90, yaw 90 (product: the identity in any frame).
PAD1 = ([90.0, 0.0, 0.0],) * 3 + ([0.0, 90.0, 0.0], [0.0, 180.0, 0.0], [0.0, 90.0, 0.0],
                                  [90.0, 0.0, 0.0])


def round_deg(angle_rad: float) -> float:
    """Degrees rounded to 0.1 as the planners print them (Python's round: -0.04 -> -0.0)."""
    return round(math.degrees(angle_rad), 1)


def strategies() -> tuple[str, ...]:
    return tuple(pad + base for pad in PADS for base in BASES)


def split_strategy(strategy: str) -> tuple[str, str]:
    for pad in ("pad1_", "pad3_"):
        if strategy.startswith(pad):
            base = strategy[len(pad):]
            if base in BASES:
                return pad[:-1], base
    if strategy in BASES:
        return "", strategy
    raise ValueError(f"strategy: expected one of {strategies()}, got {strategy!r}")


def _single(slot: int, deg: float) -> list[float]:
    p = [0.0, 0.0, 0.0]
    p[slot] = deg
    return p


def plan_payloads(rot, frame: str, strategy: str, num_steps: int, codec: PayloadCodec,
                  cuts: Sequence[float] | None = None) -> list[list[float]]:
    """Payloads (degrees, rounded to 0.1) that bring ``rot`` back to the identity when applied
    in ``frame``; the caller appends the stop. ``cuts``: for axis-angle-random, num_steps - 1
    uniform draws in [0, 1) (the split points)."""
    if frame not in FRAMES:
        raise ValueError(f"action_frame: expected one of {FRAMES}, got {frame!r}")
    pad, base = split_strategy(strategy)
    target = np.linalg.inv(np.asarray(rot, np.float64))   # the rotation the plan must apply
    out: list[list[float]] = []
    if base == "by-axis":
        factors = codec.factor(target)
        # Object frame: rot . P1 . P2 . P3 = I needs the factors left to right; world frame:
        # P3 . P2 . P1 . rot = I needs them right to left.
        emitted = factors if frame == "object" else factors[::-1]
        if pad == "pad1":
            out.extend(list(p) for p in PAD1)
        for slot, angle in emitted:
            if abs(angle) < ZERO_ANGLE:
                continue
            if pad == "pad3":
                out.extend(_single(slot, 90.0) for _ in range(4))
            out.append(_single(slot, round_deg(angle)))
        return out
    axis, angle = axis_angle_from_matrix(target)
    if pad == "pad1":
        out.extend(list(p) for p in PAD1)
    elif pad == "pad3":
        for slot in (0, 1, 2):
            out.extend(_single(slot, 90.0) for _ in range(4))
    if angle < ZERO_ANGLE:
        return out
    n = max(1, int(num_steps))
    if base == "axis-angle-random":
        points = sorted(float(u) for u in (cuts if cuts is not None else ()))[: n - 1]
        if len(points) != n - 1:
            raise ValueError(f"cuts: expected {n - 1} split points, got {len(points)}")
        edges = [0.0] + points + [1.0]
        parts = [angle * (hi - lo) for lo, hi in zip(edges[:-1], edges[1:])]
    else:
        parts = [angle / n] * n
    for part in parts:
        p = codec.from_matrix(matrix_from_axis_angle(axis, part))
        out.append([round_deg(v) for v in p])
    return out


def format_payload(name: str, payload: Sequence[float]) -> str:
    """``('rotate', [a, b, c])`` with Python's float repr (so -0.0 stays "-0.0")."""
    return f"({name!r}, [{', '.join(repr(float(v)) for v in payload)}])"


def apply_payloads(rot: np.ndarray, payloads_deg, frame: str, codec: PayloadCodec) -> np.ndarray:
    """``rot`` after a sequence of payloads [n, 3] (degrees), each converted to float32 as the
    action parser does and applied exactly as a step applies it (``rotate_rows``)."""
    out = np.array(rot, np.float64).reshape(1, 3, 3)
    payloads = np.asarray(payloads_deg, np.float64).reshape(-1, 3)
    angles = codec.szyx(payload_radians(payloads))
    mask = np.ones(1, np.bool_)
    for k in range(angles.shape[0]):
        rotate_rows(out, np.ascontiguousarray(angles[k:k + 1]), mask, frame == "world")
    return out[0]
