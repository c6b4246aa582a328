"""mental_rotation_3d_objaverse: rotate a 3-D object (right view) back to its canonical
orientation (left view), then stop.

Implements spec/envs/mental_rotation_3d_objaverse.md: an object from the mesh layer
(envs/assets/meshes: a user's Objaverse GLB folder, ``$VIS_GYM_3D_DIR``,
``partial_datasets/objaverse``, else procedural Shepard-Metzler-style objects), a hidden
rotation Rx(roll) . Ry(pitch) . Rz(yaw) with the three angles uniform in [0, 2 pi), the
rotate/stop grammar with the reference's scrambled payload [a, b, c] (degrees, float32, each in
[-180, 180] inclusive) meaning yaw = -c, pitch = a, roll = b, i.e. R_inc = Rx(b) . Ry(a) .
Rz(-c) (kernels/rotations ``OBJAVERSE_CODEC``; interface, kept), composed in the object frame
(current . R_inc) or the world frame (R_inc . current), reward 1 on a stop within ``tolerance``
degrees (geodesic angle to the identity, inclusive), the prompt word for word, the init-state
fields (``object_path``, ``secret_yaw/pitch/roll`` = the z-y-x Euler angles of the *current*
orientation, ``current_rot`` 4x4) and the reference's solver strategies. Kept quirk: an
all-bool payload (``[True, False, False]``) is applied as the reference applies it, the angles
and the Euler matrix in float16 (``float16_increment``: 0.0174560546875 rad, cos rounding to 1).

Presets (DESIGN.md "Presets"): ``easy`` / ``hard`` are the evaluation harness's configuration,
``render_size=128, action_frame="world", use_textures=True`` with tolerances 15 / 5 degrees. The
reference's *registered* ids rotate in the object frame: one keyword away,
``visgym.make("mental_rotation_3d_objaverse/easy", action_frame="object")``.

Frames are S x 2S (S = ``render_size``): left the object at the identity, right under the
current rotation, each drawn by render/raster3d with the spec's camera, re-fitted per view to
the rotated object's axis-aligned box (identity orientation at m + d z, d = max(hx / tan 30,
hy / tan 22.5) + hz, pinhole fx = S / (2 tan 30), fy = S / (2 tan 22.5), near 0.001), white
background, ambient + one directional light along -Z (from the viewer), flat per-face colours.
The left view is drawn at reset; a step redraws only the right view of episodes that rotated.

Deviations from the reference, on purpose:
- Data: the offline default is procedural Shepard-Metzler-style objects (the reference needs the
  Objaverse download). Files of a folder are sorted (the reference walked it unsorted, so the
  object of a plain reset was machine-dependent). The object and the hidden rotation are both a
  function of the episode seed, and objects may repeat within one env (the reference drew the
  object from the reset seed and the rotation from the env's generator, ignoring the reset
  seed, and raised "All objects have been used..." once every file had been shown). Recorded
  episodes are replayed from their init states, which pin the object and the rotation.
- ``sample_dir`` defaults to None (the sources above) instead of "./partial_datasets/objaverse/",
  and there is no implicit ``data/3d/glbs``: a folder is named or the bundle is in the working
  directory, else the procedural objects serve; a named folder that is a bundle root resolves to
  its ``partial_datasets/objaverse``.
- Numeric-string payloads (``['15', '0', '0']``) are invalid actions ("Action payload ... is
  invalid."), changing nothing; the reference accepted them and then crashed.
- A GLB that fails to load or holds no triangles raises an error naming the file, at reset (the
  reference rendered it white in silence); a missing or empty folder raises naming the path.
- Pixels: our Lambert rasterizer with flat per-face colours, not pyrender's PBR shading; textures
  are sampled to per-face colours (envs/assets/meshes). Silhouettes follow the same camera, so
  shapes and placement match the reference frames, shading does not (the parity test states the
  tolerance).
- Solvers: ``uniform=False`` of the reference's ``axis-angle`` is the strategy
  ``axis-angle-random``, its split points drawn from the episode's solver seed (BatchEnv.solve
  takes a strategy and a step count); every base strategy has pad1_/pad3_ variants. The other
  plans are the reference's, string for string ("-0.0" included); all succeed in both frames
  (as the reference's do here).
- The final-goal image is the pose the default plan ends in (within 0.1 degree of the identity).
- Init states are validated, and every field ``get_init_state`` writes is required (the reference
  rebuilt the rotation from the secrets when ``current_rot`` was absent; the matrix wins
  whenever both are given, as there): ``object_path`` must name an object of the source,
  ``current_rot`` a finite 4x4 (or 3x3) rotation (orthonormal within 1e-6, determinant +1,
  last row and column (0, 0, 0, 1)), the secrets finite; anything else raises ValueError naming
  the field (the reference rendered whatever it was given).
- ``max_output_long_side`` only sets the automatic face budget, as in the reference; a
  ``seed`` keyword is not taken (episode seeds come from ``reset``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..core.cache import BoundedCache
from ..core.family import Family, goal_distance
from ..core.grammar import (STOP, STOP_ACTION, ActionSpec, FloatVector, Grammar, _as_number,
                            _to_float32)
from ..core.validate import InitSchema, describe, integer, one_of, real, real_array
from ..kernels.rotations import (FRAMES, OBJAVERSE_CODEC, ZERO_ANGLE, axis_angle_from_matrix,
                                 euler_szyx_from_matrix, euler_szyx_matrix, format_payload,
                                 geodesic_angle, matrix_from_axis_angle, payload_radians,
                                 rotate_rows, round_deg, split_strategy, strategies,
                                 szyx_from_trig)
from ..render import camera, raster3d
from .assets import meshes

DEFAULT_STRATEGY = "axis-angle"
DEFAULT_NUM_STEPS = 1
ORTHONORMAL_TOL = 1e-6
BACKGROUND = (255, 255, 255)
AMBIENT = 0.5
DIFFUSE = 0.4
TAN_X = math.tan(math.radians(30.0))
TAN_Y = math.tan(math.radians(22.5))
NEAR, FAR = 0.001, 10000.0
MESH_TABLE = 4096


@dataclass(frozen=True)
class MentalRotation3DObjaverseParams:
    """The reference's constructor keywords. render_size S (each view S x S) 16..512; tolerance
    degrees in [0, 180]; sample_dir the GLB folder (None: ``$VIS_GYM_3D_DIR``, else
    ``partial_datasets/objaverse`` under the working directory, else procedural objects);
    downsample_faces the face budget (0 = automatic, clamp(3 * max_output_long_side, 250, 900));
    use_textures; action_frame "object" (intrinsic) or "world" (extrinsic)."""

    render_size: int = 128
    tolerance: float = 15.0
    sample_dir: str | None = None
    downsample_faces: int = 0
    use_textures: bool = True
    action_frame: str = "object"
    max_output_long_side: int = 336

    def __post_init__(self):
        object.__setattr__(self, "render_size", integer("render_size", self.render_size, 16, 512))
        object.__setattr__(self, "tolerance", real("tolerance", self.tolerance, 0.0, 180.0))
        if self.sample_dir is not None:
            if not isinstance(self.sample_dir, str) or not self.sample_dir:
                raise ValueError(f"sample_dir: expected a folder path or None, got "
                                 f"{describe(self.sample_dir)}")
        object.__setattr__(self, "downsample_faces",
                           integer("downsample_faces", self.downsample_faces, 0, 10 ** 7))
        if type(self.use_textures) not in (bool, np.bool_):
            raise ValueError(f"use_textures: expected a bool, got {describe(self.use_textures)}")
        object.__setattr__(self, "use_textures", bool(self.use_textures))
        one_of("action_frame", self.action_frame, FRAMES)
        object.__setattr__(self, "max_output_long_side",
                           integer("max_output_long_side", self.max_output_long_side, 1, 10 ** 6))

    @property
    def face_budget(self) -> int:
        if self.downsample_faces > 0:
            return self.downsample_faces
        return min(max(3 * self.max_output_long_side, 250), 900)


class MentalRotation3DObjaverseState(NamedTuple):
    obj: np.ndarray        # int64[B], object code (procedural id >= 0, or -(file index + 1))
    rot: np.ndarray        # float64[B, 3, 3], world vertex = rot . object vertex
    changed: np.ndarray    # bool[B], rotated by the last step (its right view is redrawn)


@dataclass(frozen=True)
class RotatePayload(FloatVector):
    """[a, b, c] degrees, float32, each in [-180, 180]; strings are invalid. Slot 3 flags an
    all-bool payload, which the reference applies in float16 (``[True, False, False]`` rotates
    by 0.0174560546875 rad)."""

    @property
    def width(self) -> int:
        return self.length + 1

    def convert(self, payload, ints, floats) -> bool:
        if type(payload) not in (list, tuple) or len(payload) != self.length:
            return False
        all_bool = True
        for k, item in enumerate(payload):
            if type(item) is str:
                return False
            value = _as_number(item)
            if value is None or math.isnan(value):
                return False
            value = _to_float32(value)
            if not self.low <= value <= self.high:
                return False
            floats[k] = value
            all_bool = all_bool and type(item) is bool
        floats[self.length] = 1.0 if all_bool else 0.0
        return True


_PROMPT = (
    "You are solving a 3D mental rotation task. Two panels are shown:\n"
    "- Left: the target view of the object (identity orientation).\n"
    "- Right: the current view that you can rotate.\n"
    "Your job is to rotate the object on the right so it matches the left.\n\n"
    "Available actions:\n"
    "1. 'rotate': Apply an incremental Euler rotation (yaw, pitch, roll). Format: "
    "`('rotate', [d_roll, d_yaw, d_pitch])` with angles in degrees.\n"
    "2. 'stop': Submit your final orientation. Format: `('stop', 'stop')`\n\n"
    "Success: You succeed if the final rotation error is less than or equal to {tol:.1f}°.\n\n"
    "Note: Rotations are applied in the {frame_note}\n\n"
    "For example:\n"
    "- Roll by 15°: `('rotate', [15, 0, 0])`\n"
    "- To submit: `('stop', 'stop')`"
)
_FRAME_NOTES = {"object": "object's local (intrinsic) axes", "world": "world (extrinsic) axes"}


# Payloads of the internal single-axis rotations (yaw about Z, pitch about Y, roll about X) as
# the reference prints them: [pitch, roll, -yaw], so a zero yaw prints as -0.0.
def _internal_payload(yaw: float, pitch: float, roll: float) -> list[float]:
    return [pitch, roll, -yaw]


_YAW90 = _internal_payload(90.0, 0.0, 0.0)
_PITCH = lambda deg: _internal_payload(0.0, deg, 0.0)  # noqa: E731
_ROLL90 = _internal_payload(0.0, 0.0, 90.0)
PAD1 = [_YAW90] * 3 + [_PITCH(90.0), _PITCH(180.0), _PITCH(90.0), _YAW90]
PAD_OF_SLOT = {2: _YAW90, 0: _PITCH(90.0), 1: _ROLL90}


def plan_payloads(rot, frame: str, strategy: str, num_steps: int, cuts=None) -> list:
    """The reference's plans (degrees rounded to 0.1) that bring ``rot`` to the identity in
    ``frame``; the caller appends the stop."""
    pad, base = split_strategy(strategy)
    target = np.linalg.inv(np.asarray(rot, np.float64))
    out: list[list[float]] = []
    if pad == "pad1":
        out.extend(list(p) for p in PAD1)
    if base == "by-axis":
        yaw, pitch, roll = euler_szyx_from_matrix(target)
        # target = Rx(roll) Ry(pitch) Rz(yaw): world frame applies yaw, pitch, roll; object
        # frame roll, pitch, yaw.
        factors = [(2, yaw), (0, pitch), (1, roll)]
        if frame == "object":
            factors = factors[::-1]
        for slot, angle in factors:
            if abs(angle) < ZERO_ANGLE:
                continue
            if pad == "pad3":
                out.extend(list(PAD_OF_SLOT[slot]) for _ in range(4))
            p = [0.0, 0.0, 0.0]
            p[slot] = -round_deg(angle) if slot == 2 else round_deg(angle)
            out.append(p)
        return out
    if pad == "pad3":
        for slot in (2, 0, 1):
            out.extend(list(PAD_OF_SLOT[slot]) for _ in range(4))
    axis, angle = axis_angle_from_matrix(target)
    if angle < ZERO_ANGLE:
        return out
    n = max(1, int(num_steps))
    if base == "axis-angle-random":
        points = sorted(float(u) for u in cuts)[: n - 1]
        edges = [0.0] + points + [1.0]
        parts = [angle * (hi - lo) for lo, hi in zip(edges[:-1], edges[1:])]
    else:
        parts = [angle / n] * n
    for part in parts:
        yaw, pitch, roll = euler_szyx_from_matrix(matrix_from_axis_angle(axis, part))
        out.append([round_deg(pitch), round_deg(roll), -round_deg(yaw)])
    return out


def float16_increment(payload) -> np.ndarray:
    """R_inc of an all-bool payload as the reference computes it: the payload becomes a float16
    array, and the Euler matrix (Gohlke's szyx formulas) is evaluated in float16 arithmetic and
    stored in float64 -- cos(1 degree) rounds to 1.0, so the increment is not quite orthonormal
    (R^T R = 1 + sin^2 on the diagonal), as recorded."""
    p = np.deg2rad(np.asarray(payload, np.float64).astype(np.float16))
    a, b, c = -p[2], p[0], p[1]                 # OBJAVERSE_CODEC: szyx (a, b, c) = (-p2, p0, p1)
    ai, aj, ak = -a, -b, -c
    m = np.empty((3, 3), np.float64)
    szyx_from_trig(np.sin(ai), np.sin(aj), np.sin(ak), np.cos(ai), np.cos(aj), np.cos(ak), m)
    return m


def apply_payloads(rot, payloads, world: bool) -> np.ndarray:
    out = np.array(rot, np.float64).reshape(1, 3, 3)
    mask = np.ones(1, np.bool_)
    for p in payloads:
        angles = OBJAVERSE_CODEC.szyx(payload_radians(np.asarray(p, np.float64)[None]))
        rotate_rows(out, np.ascontiguousarray(angles), mask, world)
    return out[0]


class MentalRotation3DObjaverse(Family):
    name = "mental_rotation_3d_objaverse"
    transient_fields = ("changed",)   # redraw bookkeeping (state_hash)
    Params = MentalRotation3DObjaverseParams
    presets = {"easy": MentalRotation3DObjaverseParams(tolerance=15.0, action_frame="world"),
               "hard": MentalRotation3DObjaverseParams(tolerance=5.0, action_frame="world")}
    grammar = Grammar([ActionSpec("rotate",
                                  RotatePayload(3, -180.0, 180.0, float32=True, decimals=1),
                                  invalid="Action payload {payload} is invalid."), STOP])
    feedback_texts = ()
    has_text_mode = False
    solver_strategies = strategies()
    data_dir_keyword = "sample_dir"

    def __init__(self, params: MentalRotation3DObjaverseParams):
        super().__init__(params)
        self.S = int(params.render_size)
        self.world = params.action_frame == "world"
        try:
            self.source = meshes.mesh_source(params.sample_dir, params.use_textures,
                                             params.face_budget)
        except meshes.MeshSourceError as exc:
            where = "sample_dir" if params.sample_dir else f"${meshes.ENV_VAR} or the bundle"
            raise meshes.MeshSourceError(f"{where}: {exc}") from None
        self._meshes = BoundedCache("mental_rotation_3d_objaverse meshes by code",
                                    max_items=MESH_TABLE)
        s = self.S
        self.proj = camera.pinhole(s / (2 * TAN_X), s / (2 * TAN_Y), s / 2, s / 2, s, s, NEAR, FAR)

    @property
    def frame_shape(self) -> tuple[int, int]:
        return self.S, 2 * self.S

    # Object codes in the state: a procedural object's id (>= 0), or -(k + 1) for file k of the
    # source's sorted list, so the state names its object without a table that grows.
    def _code(self, name: str) -> int:
        pid = meshes.procedural_id(name) if self.source.procedural else None
        return pid if pid is not None else -(self.source.index(name) + 1)

    def _name(self, code: int) -> str:
        code = int(code)
        return f"{meshes.PROCEDURAL_PREFIX}{code}" if code >= 0 else self.source.files[-code - 1]

    def _mesh(self, code: int) -> meshes.Mesh:
        """The mesh of an object code, loading it (errors name the file)."""
        code = int(code)
        return self._meshes.get_or_build(code, lambda: self.source.load(self._name(code)))

    def _object(self, name: str) -> int:
        code = self._code(name)
        self._mesh(code)
        return code

    def new_state(self, batch: int) -> MentalRotation3DObjaverseState:
        rot = np.zeros((batch, 3, 3), np.float64)
        rot[:] = np.eye(3)
        return MentalRotation3DObjaverseState(
            obj=np.full(batch, -1, np.int64), rot=rot,
            changed=np.zeros(batch, np.bool_))

    # -- episodes -------------------------------------------------------------------------
    def reset_rows(self, state, rows, seeds) -> None:
        rows = np.asarray(rows, np.int64)
        picked = []
        for k, seed in zip(rows.tolist(), np.asarray(seeds, np.uint64).tolist()):
            obj = self._object(self.source.pick(seed))
            angles = np.random.default_rng([int(seed), 0x207]).uniform(0.0, 2 * math.pi, 3)
            picked.append((k, obj, angles))
        for k, obj, angles in picked:
            state.obj[k] = obj
            state.rot[k] = euler_szyx_matrix(angles[0], angles[1], angles[2])
            state.changed[k] = False

    def load_rows(self, state, rows, init_states) -> None:
        def object_path(field, value):
            try:
                return self.source.check_name(value)
            except ValueError as exc:
                raise ValueError(f"{field}: {exc}") from None

        schema = InitSchema({"object_path": object_path, "secret_yaw": real,
                             "secret_pitch": real, "secret_roll": real,
                             "current_rot": self._rotation})
        loaded = schema.parse_all(init_states)
        objs = [self._object(init["object_path"]) for init in loaded]
        for b, obj, init in zip(np.asarray(rows, np.int64).tolist(), objs, loaded):
            state.obj[b] = obj
            state.rot[b] = init["current_rot"]
            state.changed[b] = False

    @staticmethod
    def _rotation(field: str, value) -> np.ndarray:
        arr = real_array(field, value, shapes=((4, 4), (3, 3)))   # shape before converting
        if arr.shape == (4, 4):
            if np.abs(arr[3] - [0, 0, 0, 1]).max() > ORTHONORMAL_TOL or \
                    np.abs(arr[:3, 3]).max() > ORTHONORMAL_TOL:
                raise ValueError(f"{field}: a 4x4 rotation needs last row and column (0, 0, 0, 1)")
            arr = arr[:3, :3]
        err = float(np.abs(arr.T @ arr - np.eye(3)).max())
        det = float(np.linalg.det(arr))
        if err > ORTHONORMAL_TOL or det < 0:
            raise ValueError(f"{field}: not a rotation matrix (R^T R differs from the identity "
                             f"by {err:.3g}, det {det:.6g})")
        return np.array(arr, np.float64)

    def to_init_state(self, state, i: int) -> dict:
        rot = state.rot[i]
        yaw, pitch, roll = euler_szyx_from_matrix(rot)
        m = np.eye(4)
        m[:3, :3] = rot
        return {"object_path": self._name(state.obj[i]), "secret_yaw": float(yaw),
                "secret_pitch": float(pitch), "secret_roll": float(roll),
                "current_rot": m.tolist()}

    def step_rows(self, state, actions, rows, reward, terminated, feedback) -> None:
        np.copyto(state.changed, rows)
        if not rows.any():
            return
        payload = actions.floats[:, :3]
        bools = rows & (actions.floats[:, 3] > 0.5)
        plain = rows & ~bools
        if plain.any():
            angles = np.ascontiguousarray(OBJAVERSE_CODEC.szyx(payload_radians(payload)))
            rotate_rows(state.rot, angles, plain, self.world)
        for b in np.flatnonzero(bools).tolist():
            inc = float16_increment(payload[b])
            state.rot[b] = inc @ state.rot[b] if self.world else state.rot[b] @ inc

    def rotation_error(self, state) -> np.ndarray:
        """float64[B]: geodesic angle (radians) of each episode's rotation to the identity."""
        return geodesic_angle(state.rot)

    def is_success(self, state) -> np.ndarray:
        return self.rotation_error(state) <= math.radians(self.params.tolerance)

    def potential(self, state, out) -> None:
        # Degrees of rotation beyond the tolerance.
        error = np.degrees(self.rotation_error(state))
        goal_distance(error - self.params.tolerance, error <= self.params.tolerance, out)

    def metrics(self, state) -> dict:
        return {"rotation_error": self.rotation_error(state)}

    def goal_state(self, state):
        """The rotation the default plan ends in (within ~0.1 degree of the identity)."""
        for b in range(state.rot.shape[0]):
            plan = plan_payloads(state.rot[b], self.params.action_frame, DEFAULT_STRATEGY,
                                 DEFAULT_NUM_STEPS)
            state.rot[b] = apply_payloads(state.rot[b], plan, self.world)
        state.changed[:] = False
        return state

    # -- pixels -----------------------------------------------------------------------------
    def _draw(self, state, frames, work, rows, right: bool) -> None:
        n = rows.shape[0]
        objs = state.obj[rows]
        uniq = np.unique(objs)
        verts, tris, cols = [], [], []
        start = {}
        v_off = t_off = 0
        for o in uniq.tolist():
            mesh = self._mesh(o)
            verts.append(mesh.vertices)
            tris.append(mesh.triangles + v_off)
            cols.append(mesh.face_colors)
            start[o] = (t_off, t_off + mesh.triangles.shape[0])
            v_off += mesh.vertices.shape[0]
            t_off += mesh.triangles.shape[0]
        vertices = np.ascontiguousarray(np.concatenate(verts), np.float32)
        triangles = np.ascontiguousarray(np.concatenate(tris), np.int32)
        face_colors = np.ascontiguousarray(np.concatenate(cols))
        tri_start = np.array([start[o][0] for o in objs.tolist()], np.int64)
        tri_stop = np.array([start[o][1] for o in objs.tolist()], np.int64)
        model = np.zeros((n, 4, 4))
        model[:, 3, 3] = 1.0
        if right:
            model[:, :3, :3] = state.rot[rows]
        else:
            model[:, :3, :3] = np.eye(3)
        # Camera re-fitted to each rotated object's AABB.
        lo = np.empty((n, 3))
        hi = np.empty((n, 3))
        for k, o in enumerate(objs.tolist()):
            v = self._mesh(o).vertices.astype(np.float64) @ model[k, :3, :3].T
            lo[k] = v.min(axis=0)
            hi[k] = v.max(axis=0)
        m = (lo + hi) / 2.0
        h = (hi - lo) / 2.0
        d = np.maximum(h[:, 0] / TAN_X, h[:, 1] / TAN_Y) + h[:, 2]
        view = np.zeros((n, 4, 4))
        view[:, 0, 0] = view[:, 1, 1] = view[:, 2, 2] = view[:, 3, 3] = 1.0
        view[:, 0, 3] = -m[:, 0]
        view[:, 1, 3] = -m[:, 1]
        view[:, 2, 3] = -(m[:, 2] + d)
        view_proj = self.proj @ view
        viewport = np.zeros((n, 4), np.int64)
        viewport[:, 0] = self.S if right else 0
        viewport[:, 2] = viewport[:, 3] = self.S
        depth = work if work is not None and work.shape[0] == frames.shape[0] else None
        if depth is None:
            depth = np.empty(frames.shape[:3], np.float32)
        # Clear only the view being drawn (the other half keeps its pixels).
        x0 = self.S if right else 0
        frames[rows, :, x0:x0 + self.S] = 255
        depth[rows, :, x0:x0 + self.S] = np.inf
        raster3d.draw_meshes(frames, depth, rows, vertices, triangles, tri_start, tri_stop,
                             view_proj, model=model, face_colors=face_colors,
                             face_flags=raster3d.FLAG_LIT | raster3d.FLAG_TWO_SIDED,
                             light_dir=(0.0, 0.0, 1.0), ambient=AMBIENT, diffuse=DIFFUSE,
                             viewport=viewport)

    def new_workspace(self, batch: int):
        return np.empty((batch, self.S, 2 * self.S), np.float32)

    def render_rows(self, state, frames, rows, work) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if rows.shape[0] == 0:
            return
        self._draw(state, frames, work, rows, right=False)
        self._draw(state, frames, work, rows, right=True)

    def render_after_step(self, state, frames, work) -> None:
        rows = np.flatnonzero(state.changed).astype(np.int64)
        if rows.shape[0]:
            self._draw(state, frames, work, rows, right=True)

    def prompt(self, state, i: int, text_mode: bool = False) -> str:
        return _PROMPT.format(tol=float(self.params.tolerance),
                              frame_note=_FRAME_NOTES[self.params.action_frame])

    # -- solver ---------------------------------------------------------------------------
    def solve(self, state, rows, strategy, num_steps, seeds) -> list[list[str]]:
        strategy = strategy or DEFAULT_STRATEGY
        _, base = split_strategy(strategy)
        n = DEFAULT_NUM_STEPS if num_steps is None else int(num_steps)
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        seeds = np.asarray(seeds, dtype=np.uint64)[rows]
        plans = []
        for k, b in enumerate(rows.tolist()):
            cuts = None
            if base == "axis-angle-random":
                cuts = np.random.default_rng(int(seeds[k])).random(max(n - 1, 0)).tolist()
            payloads = plan_payloads(state.rot[b], self.params.action_frame, strategy, n, cuts)
            plans.append([format_payload("rotate", p) for p in payloads] + [STOP_ACTION])
        return plans
