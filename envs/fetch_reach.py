"""fetch_reach: drive the Fetch robot's gripper to a red target with discrete moves, then stop.

Implements spec/envs/fetch_reach.md (and, through ``FetchBase``, the machinery shared with
spec/envs/fetch_pick_and_place.md): the gymnasium-robotics Fetch MJCF read from the installed
package, the construction-time settling, mocap re-anchoring with 0.05 m per unit payload and 20
substeps, the blocked gripper, goal sampling around the settled grip position, per-episode camera
jitter, success within 0.1 m judged on stop, the reference's prompt, and the greedy-axis oracle.
Physics runs on MuJoCo C (kernels/fetch_sim.CpuStepper: MjData per worker thread, GIL released)
or, with ``backend="mjx"``, on MJX (kernels/fetch_mjx.MjxStepper: the MJX variant of the same
MJCF, robot meshes out of collision, the whole batch advanced by one jitted function; ``impl``
"jax" or "warp"; meant for accelerators); both share sampling, action mapping, success, feedback
and the closed-loop oracle, which runs through the env's own stepper. Frames are the
two 480x480 free-camera views of the reference side by side (jittered front view | view following
the grip point), drawn by the shared z-buffered rasterizer from the model's geom poses and meshes
with Lambert light (robot meshes simplified by 4 mm vertex clustering); MuJoCo's OpenGL renderer
(``renderer="mujoco"``, envs/fetch_gl.py) draws the same views where an OpenGL context exists.

Deviations from the reference, on purpose:
- Goals and cameras come from our own per-episode random stream (seed k does not give the
  reference's episode k); recorded episodes are replayed from their init states.
- Rendering is a pure function of the state, so the reset frame already shows the jittered camera
  (quirk Q1), and feedback never leaks into the next episode's prompt (quirk Q2); the prompt never
  carries a "Feedback:" paragraph (the harness sends feedback as its own text).
- ``to_init_state`` adds two keys the reference lacks, ``sim_state`` (MuJoCo's integration state
  vector) and ``gripper_cmd``, so mid-episode states round-trip exactly; both are optional on
  load (reference dicts start from the settled robot). ``camera_config`` is required (the
  reference's own dicts always carry it).
- The frames are rasterised, not OpenGL-rendered: flat Lambert shading with one combined light
  (top light + headlight), no specular highlights, no anti-aliasing.
- A simulation that diverges (non-finite state, or MuJoCo's own bad-acceleration reset) restores
  the episode's start and reports it in the feedback instead of continuing from MuJoCo's model
  default.
- MuJoCo is the installed version (4.x), not the reference's 3.3.2; positions agree to a few
  millimetres (see tests/test_fetch_reach_parity.py).
"""
from __future__ import annotations

import math
from abc import abstractmethod
import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..core.family import FAMILY_BASE, Family, copy_state
from ..core.threads import ProcessThreadPool
from ..core.grammar import STOP, STOP_ACTION, ActionBatch, ActionSpec, FloatVector, Grammar
from ..kernels import fetch_sim as sim
from ..render import camera as cam
from ..render import raster3d

UNSTABLE_CODE = FAMILY_BASE  # see feedback_texts
BACKGROUND_RGB = (114, 219, 145)   # the reference's skybox as rendered
FOVY_DEG = 45.0


def _check_real(name, value, low=None, high=None, positive=False):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name}: must be finite, got {value}")
    if positive and value <= 0:
        raise ValueError(f"{name}: must be > 0, got {value}")
    if low is not None and value < low:
        raise ValueError(f"{name}: must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name}: must be <= {high}, got {value}")
    return value


def _check_vec3(name, value):
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ValueError(f"{name}: expected three numbers, got {value!r}")
    for k, v in enumerate(value):
        _check_real(f"{name}[{k}]", v)


@dataclass(frozen=True)
class FetchParams:
    """The reference's constructor keywords (defaults: the evaluation harness's camera values)
    plus ``backend`` ("cpu": MuJoCo C, "mjx": MJX), ``impl`` (the MJX implementation: "jax" or
    "warp"; used with backend "mjx" only) and ``renderer`` ("raster", "mujoco")."""

    reward_type: str = "sparse"
    distance_threshold: float = 0.1
    width: int = 480
    height: int = 480
    use_follow_camera: bool = True
    follow_cam_distance: float = 0.36
    follow_cam_azimuth: float = 200.0
    follow_cam_elevation: float = -65.0
    follow_cam_lookat_offset: tuple = (0.0, 0.0, -0.01)
    jitter_camera_on_reset: bool = True
    camera_base_lookat: tuple = (1.3, 0.75, 0.55)
    camera_jitter_azimuth: float = 10.0
    camera_jitter_elevation: float = 10.0
    camera_jitter_distance: float = 0.1
    camera_jitter_lookat: float = 0.1
    camera_default_azimuth: float = 132.0
    camera_default_elevation: float = -14.0
    camera_default_distance: float = 1.75
    primary_camera_name: str = "external_camera_0"
    secondary_camera_name: str = "gripper_camera_rgb"
    backend: str = "cpu"
    impl: str = "jax"
    renderer: str = "raster"

    def __post_init__(self):
        if self.reward_type not in ("sparse", "dense"):
            raise ValueError(f"reward_type: expected 'sparse' or 'dense', got {self.reward_type!r}")
        _check_real("distance_threshold", self.distance_threshold, positive=True)
        for name in ("width", "height"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 16 <= v <= 2048:
                raise ValueError(f"{name}: expected an integer in [16, 2048], got {v!r}")
        for name in ("use_follow_camera", "jitter_camera_on_reset"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name}: expected True or False, got {getattr(self, name)!r}")
        _check_real("follow_cam_distance", self.follow_cam_distance, positive=True)
        _check_real("follow_cam_azimuth", self.follow_cam_azimuth)
        _check_real("follow_cam_elevation", self.follow_cam_elevation, -89.9, 89.9)
        _check_vec3("follow_cam_lookat_offset", self.follow_cam_lookat_offset)
        _check_vec3("camera_base_lookat", self.camera_base_lookat)
        for name in ("camera_jitter_azimuth", "camera_jitter_elevation", "camera_jitter_distance",
                     "camera_jitter_lookat"):
            _check_real(name, getattr(self, name), low=0.0)
        _check_real("camera_default_azimuth", self.camera_default_azimuth)
        _check_real("camera_default_elevation", self.camera_default_elevation, -89.9, 89.9)
        _check_real("camera_default_distance", self.camera_default_distance, positive=True)
        if self.camera_default_distance <= self.camera_jitter_distance:
            raise ValueError("camera_default_distance: must exceed camera_jitter_distance")
        for name in ("primary_camera_name", "secondary_camera_name"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name}: expected a str")
        if self.backend not in ("cpu", "mjx"):
            raise ValueError(f"backend: expected 'cpu' (MuJoCo C) or 'mjx' (MJX), "
                             f"got {self.backend!r}")
        if self.backend == "mjx":
            from ..kernels.fetch_mjx import check_impl

            check_impl(self.impl)
        elif self.impl != "jax":
            raise ValueError(f"impl: only used with backend='mjx'; expected 'jax' with backend "
                             f"{self.backend!r}, got {self.impl!r}")
        if self.renderer not in ("raster", "mujoco"):
            raise ValueError(f"renderer: expected 'raster' (the Cython rasterizer, default) or "
                             f"'mujoco' (MuJoCo's OpenGL renderer), got {self.renderer!r}")
        # Lists from JSON kwargs become tuples so the params stay hashable.
        for name in ("follow_cam_lookat_offset", "camera_base_lookat"):
            object.__setattr__(self, name, tuple(float(v) for v in getattr(self, name)))


class FetchState(NamedTuple):
    phys: np.ndarray          # float64[B, S] MuJoCo integration state
    goal: np.ndarray          # float64[B, 3]
    camera: np.ndarray        # float64[B, 6] azimuth, elevation, distance, lookat xyz
    object_start: np.ndarray  # float64[B, 3] object joint position at the episode start
    gripper_cmd: np.ndarray   # float64[B] sticky command: 0 hold, +1 open, -1 close
    grip: np.ndarray          # float64[B, 3] site robot0:grip
    link_pos: np.ndarray      # float64[B, 3] body robot0:gripper_link
    link_quat: np.ndarray     # float64[B, 4]
    obj: np.ndarray           # float64[B, 3] site object0 (zeros without an object)
    fingers: np.ndarray       # float64[B, 2] right, left finger joints
    geom_xpos: np.ndarray     # float64[B, G, 3]
    geom_xmat: np.ndarray     # float64[B, G, 9]
    moved: np.ndarray         # bool[B] physics ran in the last step (frame must be redrawn)


# ---------------------------------------------------------------------------------------------
# scene geometry for the rasterizer

def _box(half):
    hx, hy, hz = half
    v = np.array([[sx * hx, sy * hy, sz * hz] for sx in (-1, 1) for sy in (-1, 1)
                  for sz in (-1, 1)], np.float32)
    # Index = 4*ix + 2*iy + iz; faces counter-clockwise seen from outside.
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = []
    for a, b, c, d in quads:
        tris += [(a, b, c), (a, c, d)]
    return v, np.array(tris, np.int32)


CLUSTER_M = 0.004   # vertex-clustering cell for the robot meshes (34.5 k -> a few k triangles)


def _cluster(vertices, faces, cell):
    """Simplify a mesh by merging vertices that share a cell of a ``cell``-metre grid and
    dropping the triangles that collapse; at 480 px the robot keeps its silhouette."""
    keys = np.floor(vertices / cell).astype(np.int64)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    sums = np.zeros((first.size, 3))
    np.add.at(sums, inverse, vertices)
    counts = np.bincount(inverse, minlength=first.size)[:, None]
    merged = (sums / counts).astype(np.float32)
    t = inverse[faces]
    keep = (t[:, 0] != t[:, 1]) & (t[:, 1] != t[:, 2]) & (t[:, 0] != t[:, 2])
    t = t[keep]
    t = np.unique(t, axis=0)
    return merged, t.astype(np.int32)


class _Meshes:
    """Triangle table of every visible geom in its own frame, plus the target sphere."""

    def __init__(self, scene):
        m = scene.model
        verts, tris, colors = [], [], []
        self.geoms, self.starts, self.stops, self.radius = [], [], [], []
        nv = 0
        nt = 0
        for g in range(m.ngeom):
            if m.geom_bodyid[g] == scene.mocap_body or m.geom_group[g] > 2:
                continue
            rgba = m.geom_rgba[g]
            if m.geom_matid[g] >= 0 and np.allclose(rgba, (0.5, 0.5, 0.5, 1.0)):
                rgba = m.mat_rgba[m.geom_matid[g]]
            if rgba[3] <= 0:
                continue
            gtype = m.geom_type[g]
            if gtype == 7:  # mesh
                mid = m.geom_dataid[g]
                va, vn = m.mesh_vertadr[mid], m.mesh_vertnum[mid]
                fa, fn = m.mesh_faceadr[mid], m.mesh_facenum[mid]
                v, t = _cluster(m.mesh_vert[va:va + vn], m.mesh_face[fa:fa + fn], CLUSTER_M)
            elif gtype == 6:  # box
                v, t = _box(m.geom_size[g])
            elif gtype == 0:  # plane: a quad of the given half-sizes facing +z
                hx, hy = m.geom_size[g][:2]
                v = np.array([[-hx, -hy, 0], [hx, -hy, 0], [hx, hy, 0], [-hx, hy, 0]], np.float32)
                t = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
            else:
                continue
            self.geoms.append(g)
            self.starts.append(nt)
            self.stops.append(nt + len(t))
            self.radius.append(float(np.linalg.norm(v, axis=1).max()))
            verts.append(v)
            tris.append(t + nv)
            colors.append(np.repeat((np.clip(rgba[:3], 0, 1) * 255 + 0.5).astype(np.uint8)[None],
                                    len(t), 0))
            nv += len(v)
            nt += len(t)
        sv, st, _ = raster3d.uv_sphere(0.02, 8, 12)
        self.target_start, self.target_stop = nt, nt + len(st)
        verts.append(sv.astype(np.float32))
        tris.append(st.astype(np.int32) + nv)
        colors.append(np.repeat(np.array([[255, 0, 0]], np.uint8), len(st), 0))
        self.vertices = np.ascontiguousarray(np.concatenate(verts), np.float32)
        self.triangles = np.ascontiguousarray(np.concatenate(tris), np.int32)
        self.colors = np.ascontiguousarray(np.concatenate(colors), np.uint8)
        self.geoms = np.array(self.geoms, np.int64)
        self.starts = np.array(self.starts, np.int64)
        self.stops = np.array(self.stops, np.int64)
        self.radius = np.array(self.radius)


def free_camera(azimuth, elevation, distance, lookat):
    """MuJoCo free-camera geometry (fetch_reach.md section 9): (eye, forward) per row."""
    az = np.radians(azimuth)
    el = np.radians(elevation)
    fwd = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], -1)
    eye = lookat - distance[..., None] * fwd
    return eye, fwd


# ---------------------------------------------------------------------------------------------
# prompt

_REACH_PROMPT = (
    "You are controlling a robotic arm to reach a target 3D position. The left image is a front "
    "view of the robot, and the right image moving camera attached to the gripper. Your goal is "
    "to move it to the red target marker. Each action moves the end-effector by a fixed step "
    "size in the specified direction.\n\n"
    "Available actions:\n"
    "1. 'move': Move the end-effector in 3D space. Format: `('move', [x, y, z])` where each "
    "element is -1, 0, or 1:\n"
    "   - x: -1=left, 0=no change, 1=right\n"
    "   - y: -1=backward, 0=no change, 1=forward\n"
    "   - z: -1=down, 0=no change, 1=up\n"
    "2. 'stop': End the reaching session. Format: `('stop', 'stop')`\n\n"
    "Success: You succeed when the end-effector reaches the target position (red marker).\n\n"
    "Please respond with exactly one action and its arguments in the specified format. For "
    "example:\n"
    "- To move right and up: `('move', [1, 0, 1])`\n"
    "- To move forward: `('move', [0, 1, 0])`\n"
    "- To move down and left: `('move', [-1, 0, -1])`\n"
    "- To stay in place: `('move', [0, 0, 0])`\n"
    "- To stop: `('stop', 'stop')`"
)

ACTION_STRINGS = (
    "('move', [-1, 0, 0])", "('move', [1, 0, 0])", "('move', [0, -1, 0])", "('move', [0, 1, 0])",
    "('move', [0, 0, -1])", "('move', [0, 0, 1])", "('move', [0, 0, 0])", "('gripper', 0)",
    "('gripper', 1)", STOP_ACTION,
)


MOVE_SPEC = ActionSpec("move", FloatVector(3, -1.0, 1.0))


class FetchBase(Family):
    """Everything the two Fetch families share; subclasses set the scene and the task."""

    # Set by subclasses.
    xml_name = ""
    base_x = 0.0
    has_object = False
    goal_range = 0.15
    feedback_texts = ("The simulation became unstable, so the episode was reset to its start.",)

    def __init__(self, params):
        super().__init__(params)
        mjx = params.backend == "mjx"
        # The MJX backend runs the MJX variant of the model (fetch_mjx.derive_model), settled
        # with MuJoCo C once; the CPU stepper on that same model does the kinematics-only
        # refreshes (resets, loaded states).
        self.scene = sim.load_scene(self.xml_name, self.base_x, self.has_object,
                                    "mjx" if mjx else "cpu")
        self.stepper = sim.CpuStepper(self.scene)
        self._mjx = None
        if mjx:
            from ..kernels.fetch_mjx import MjxStepper

            self._mjx = MjxStepper(self.scene, impl=params.impl)
        self.meshes = _Meshes(self.scene)
        self._kind = {name: self.grammar.index(name) if name in self.grammar.names else -1
                      for name in ("move", "gripper")}
        self._render_pool = ProcessThreadPool(os.cpu_count() or 1, "visgym-fetch-render")
        self._gl = None
        self._depth = {}

    # -- shapes -------------------------------------------------------------------------
    @property
    def frame_shape(self):
        p = self.params
        return p.height, p.width * (2 if p.use_follow_camera else 1)

    def new_state(self, batch):
        sc = self.scene
        return FetchState(
            phys=np.tile(sc.start_state, (batch, 1)),
            goal=np.zeros((batch, 3)), camera=np.zeros((batch, 6)),
            object_start=np.zeros((batch, 3)), gripper_cmd=np.zeros(batch),
            grip=np.zeros((batch, 3)), link_pos=np.zeros((batch, 3)),
            link_quat=np.zeros((batch, 4)), obj=np.zeros((batch, 3)),
            fingers=np.zeros((batch, 2)), geom_xpos=np.zeros((batch, sc.ngeom, 3)),
            geom_xmat=np.zeros((batch, sc.ngeom, 9)), moved=np.zeros(batch, np.bool_))

    # -- physics helpers ----------------------------------------------------------------
    def _start_rows(self, state, rows):
        """Settled robot, the episode's object start, hold command; kinematics refreshed."""
        sc = self.scene
        state.phys[rows] = sc.start_state
        if self.has_object:
            a = sc.ofs_qpos + sc.object_qpos
            state.phys[rows, a:a + 3] = state.object_start[rows]
        state.gripper_cmd[rows] = 0.0
        state.moved[rows] = True
        self._kinematics(state, rows)

    def _kinematics(self, state, rows):
        unstable = np.zeros(state.phys.shape[0], np.bool_)
        self.stepper.run(state.phys, rows, 0, False, state, unstable)

    def _advance(self, state, rows):
        """20 substeps for ``rows``; returns the rows whose simulation diverged (reset)."""
        unstable = np.zeros(state.phys.shape[0], np.bool_)
        if self._mjx is not None:
            self._mjx.run(state.phys, rows, sim.N_SUBSTEPS, not self.has_object, state, unstable)
        else:
            self.stepper.run(state.phys, rows, sim.N_SUBSTEPS, not self.has_object, state,
                             unstable)
        bad = np.flatnonzero(unstable)
        if bad.size:
            self._start_rows(state, bad)
        return bad

    def _points(self, state):
        return state.obj if self.has_object else state.grip

    # -- episodes -----------------------------------------------------------------------
    def reset_rows(self, state, rows, seeds):
        p = self.params
        sc = self.scene
        rows = np.ascontiguousarray(rows, np.int64)
        cam_default = np.array([p.camera_default_azimuth, p.camera_default_elevation,
                                p.camera_default_distance, *p.camera_base_lookat])
        cam_jitter = np.array([p.camera_jitter_azimuth, p.camera_jitter_elevation,
                               p.camera_jitter_distance, p.camera_jitter_lookat])
        object_xy = np.zeros((state.phys.shape[0], 2))
        sim.sample_episodes(np.asarray(seeds, np.uint64), rows, sc.initial_grip,
                            sc.height_offset, self.has_object, self.goal_range, 0.15, 0.1, 0.5,
                            0.45, bool(p.jitter_camera_on_reset), cam_default, cam_jitter,
                            state.goal, object_xy, state.camera)
        if self.has_object:
            start = sc.start_object()
            state.object_start[rows] = start
            state.object_start[rows, :2] = object_xy[rows]
        self._start_rows(state, rows)

    def _init_fields(self):
        return ("goal_pos", "camera_config") + (("object_pos",) if self.has_object else ())

    def load_rows(self, state, rows, init_states):
        sc = self.scene
        staged = []
        for k, init in enumerate(init_states):
            where = f"init_states[{k}]"
            if not isinstance(init, dict):
                raise ValueError(f"{where}: expected a dict, got {type(init).__name__}")
            for key in self._init_fields():
                if key not in init:
                    raise ValueError(f"{where}.{key}: missing")
            entry = {"goal": self._vec3(init["goal_pos"], f"{where}.goal_pos")}
            if self.has_object:
                entry["object"] = self._vec3(init["object_pos"], f"{where}.object_pos")
            entry["camera"] = self._camera(init["camera_config"], f"{where}.camera_config")
            sim_state = init.get("sim_state")
            if sim_state is not None:
                arr = self._floats(sim_state, f"{where}.sim_state")
                if arr.shape != (sc.nstate,):
                    raise ValueError(f"{where}.sim_state: expected {sc.nstate} numbers, "
                                     f"got {arr.shape[0]}")
                entry["sim"] = arr
            cmd = init.get("gripper_cmd", 0.0)
            if isinstance(cmd, bool) or cmd not in (0, 1, -1, 0.0, 1.0, -1.0):
                raise ValueError(f"{where}.gripper_cmd: expected 0, 1 or -1, got {cmd!r}")
            entry["cmd"] = float(cmd)
            staged.append(entry)
        rows = np.asarray(rows, np.int64)
        for b, entry in zip(rows.tolist(), staged):
            state.goal[b] = entry["goal"]
            state.camera[b] = entry["camera"]
            if self.has_object:
                state.object_start[b] = entry["object"]
        self._start_rows(state, rows)
        with_sim = [b for b, e in zip(rows.tolist(), staged) if "sim" in e]
        for b, entry in zip(rows.tolist(), staged):
            if "sim" in entry:
                state.phys[b] = entry["sim"]
            state.gripper_cmd[b] = entry["cmd"]
        if with_sim:
            self._kinematics(state, np.array(with_sim, np.int64))

    @staticmethod
    def _floats(value, where):
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where}: expected a list of numbers, got {type(value).__name__}")
        out = []
        for v in value:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{where}: expected finite numbers, got {v!r}")
            out.append(float(v))
        return np.array(out)

    def _vec3(self, value, where):
        arr = self._floats(value, where)
        if arr.shape != (3,):
            raise ValueError(f"{where}: expected [x, y, z], got {value!r}")
        if np.abs(arr).max() > 100:
            raise ValueError(f"{where}: coordinates must be within 100 m, got {value!r}")
        return arr

    def _camera(self, value, where):
        p = self.params
        if value is None:
            # The reference stores None when it has no renderer: the un-jittered default camera.
            return np.array([p.camera_default_azimuth, p.camera_default_elevation,
                             p.camera_default_distance, *p.camera_base_lookat])
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a dict or None, got {type(value).__name__}")
        out = []
        for key in ("azimuth", "elevation", "distance"):
            if key not in value:
                raise ValueError(f"{where}.{key}: missing")
            out.append(_check_real(f"{where}.{key}", value[key]))
        if not -89.9 <= out[1] <= 89.9:
            raise ValueError(f"{where}.elevation: must be within [-89.9, 89.9], got {out[1]}")
        if not 0 < out[2] <= 100:
            raise ValueError(f"{where}.distance: must be in (0, 100], got {out[2]}")
        if "lookat" not in value:
            raise ValueError(f"{where}.lookat: missing")
        out += list(self._vec3(value["lookat"], f"{where}.lookat"))
        return np.array(out)

    def to_init_state(self, state, i):
        c = state.camera[i]
        out = {"goal_pos": [float(v) for v in state.goal[i]]}
        if self.has_object:
            sc = self.scene
            a = sc.ofs_qpos + sc.object_qpos
            out = {"object_pos": [float(v) for v in state.phys[i, a:a + 3]], **out}
        out["camera_config"] = {"azimuth": float(c[0]), "elevation": float(c[1]),
                                "distance": float(c[2]), "lookat": [float(v) for v in c[3:]]}
        out["sim_state"] = [float(v) for v in state.phys[i]]
        out["gripper_cmd"] = float(state.gripper_cmd[i])
        return out

    # -- step ---------------------------------------------------------------------------
    def step_rows(self, state, actions, rows, reward, terminated, feedback):
        sc = self.scene
        simulate = np.zeros(state.phys.shape[0], np.bool_)
        sim.apply_actions(actions.kind, actions.floats, actions.ints, rows, self._kind["move"],
                          state.phys, sc.ofs_qpos, sc.ofs_ctrl, sc.ofs_mocap_pos,
                          sc.ofs_mocap_quat, sc.actuator_qpos, state.link_pos, state.link_quat,
                          state.gripper_cmd, feedback, simulate)
        bad = self._advance(state, np.flatnonzero(simulate))
        feedback[bad] = UNSTABLE_CODE
        state.moved[:] = simulate

    def is_success(self, state):
        out = np.zeros(state.phys.shape[0], np.bool_)
        sim.within(self._points(state), state.goal, float(self.params.distance_threshold), out)
        return out

    # -- solver -------------------------------------------------------------------------
    @abstractmethod
    def _oracle_codes(self, state, oracle, active, codes, t, cap):
        """Write into ``codes`` (index into ACTION_STRINGS) the oracle's next action for the
        ``active`` rows of ``state`` at plan step ``t`` of at most ``cap`` actions."""

    def _new_oracle(self, batch):
        return None

    def _rollout(self, state, rows, num_steps):
        """Run the oracle closed-loop on a copy of ``rows``; returns (final state, codes)."""
        work = copy_state(type(state)(*(a[rows] for a in state)))
        n = len(rows)
        oracle = self._new_oracle(n)
        cap = self._plan_cap(num_steps)
        plans = [[] for _ in range(n)]
        active = np.ones(n, np.bool_)
        codes = np.zeros(n, np.int64)
        kind = np.full(n, -1, np.int32)
        floats = np.zeros((n, self.grammar.width))
        ints = np.zeros((n, self.grammar.width), np.int32)
        error = np.zeros(n, np.int32)
        reward = np.zeros(n, np.float32)
        term = np.zeros(n, np.bool_)
        fb = np.zeros(n, np.int32)
        for t in range(cap):
            if not active.any():
                break
            self._oracle_codes(work, oracle, active, codes, t, cap)
            # Codes to parsed actions (no strings in the loop).
            error[:] = np.where(active, 0, 5)
            kind[:] = -1
            floats[:] = 0
            ints[:] = 0
            move = active & (codes <= sim.ZERO_MOVE)
            kind[move] = self._kind["move"]
            axis_moves = move & (codes < sim.ZERO_MOVE)
            idx = np.flatnonzero(axis_moves)
            floats[idx, codes[idx] // 2] = np.where(codes[idx] % 2 == 1, 1.0, -1.0)
            grip = active & ((codes == sim.OPEN) | (codes == sim.CLOSE))
            kind[grip] = self._kind["gripper"]
            ints[grip, 0] = np.where(codes[grip] == sim.OPEN, 0, 1)
            stop = active & (codes == sim.STOP)
            error[stop] = 5
            for k in np.flatnonzero(active).tolist():
                plans[k].append(int(codes[k]))
            self.step(work, ActionBatch(kind, ints, floats, error, [""] * n), reward, term, fb)
            active &= ~stop
            active &= ~self._done_after(work)
        return work, plans

    def _done_after(self, state):
        return np.zeros(state.phys.shape[0], np.bool_)

    @abstractmethod
    def _plan_cap(self, num_steps):
        """The most actions (stop included) a plan may have, for ``solve(num_steps=...)``."""

    def solve(self, state, rows, strategy, num_steps, seeds):
        rows = np.ascontiguousarray(rows, np.int64)
        _, plans = self._rollout(state, rows, num_steps)
        out = []
        for codes in plans:
            acts = [ACTION_STRINGS[c] for c in codes if c != sim.STOP]
            out.append(acts + [STOP_ACTION])
        return out

    def goal_state(self, state):
        rows = np.arange(state.phys.shape[0], dtype=np.int64)
        work, _ = self._rollout(state, rows, None)
        for dst, src in zip(state, work):
            dst[...] = src
        return state

    # -- pixels -------------------------------------------------------------------------
    def _cameras(self, state, rows):
        """Per view: (azimuth, elevation, distance, lookat) arrays over ``rows`` of the free
        cameras (the jittered front view, then the gripper-follow view)."""
        p = self.params
        c = state.camera[rows]
        cameras = [(c[:, 0], c[:, 1], c[:, 2], c[:, 3:6])]
        if p.use_follow_camera:
            n = len(rows)
            look = state.grip[rows] + np.array(p.follow_cam_lookat_offset)
            cameras.append((np.full(n, p.follow_cam_azimuth), np.full(n, p.follow_cam_elevation),
                            np.full(n, p.follow_cam_distance), look))
        return cameras

    def _views(self, state, rows):
        """Per row and view: (eye, forward) of the free cameras."""
        return [free_camera(*camera) for camera in self._cameras(state, rows)]

    def render_rows(self, state, frames, rows, work):
        rows = np.ascontiguousarray(rows, np.int64)
        if rows.size == 0:
            return
        if self.params.renderer == "mujoco":
            self._render_gl(state, frames, rows)
            return
        # Consecutive runs of rows, at most 4 frames each, share one depth buffer; the runs go
        # to a pool of threads (the rasterizer releases the GIL).
        groups = []
        start = 0
        for k in range(1, rows.size + 1):
            if k == rows.size or rows[k] != rows[k - 1] + 1 or k - start >= 4:
                groups.append(rows[start:k])
                start = k
        threads = os.cpu_count() or 1
        if threads > 1 and len(groups) > 1:
            list(self._render_pool.map(lambda g: self._draw_group(state, frames, g), groups))
        else:
            for g in groups:
                self._draw_group(state, frames, g)

    def render_after_step(self, state, frames, work):
        rows = np.flatnonzero(state.moved)
        if rows.size:
            self.render_rows(state, frames, rows, work)

    def _draw_group(self, state, frames, rows):
        import threading

        p = self.params
        me = self.meshes
        sub = frames[rows[0]:rows[-1] + 1]
        key = (threading.get_ident(), len(rows))
        depth = self._depth.get(key)
        if depth is None or depth.shape != sub.shape[:3]:
            depth = np.empty(sub.shape[:3], np.float32)
            self._depth[key] = depth
        n = len(rows)
        ng = len(me.geoms)
        views = self._views(state, rows)
        proj = cam.perspective_fov_y(FOVY_DEG, p.width / p.height, 0.01, 20.0)
        # Geom model matrices, then the target sphere's.
        models = np.zeros((n, ng + 1, 4, 4))
        models[:, :ng, :3, :3] = state.geom_xmat[rows][:, me.geoms].reshape(n, ng, 3, 3)
        models[:, :ng, :3, 3] = state.geom_xpos[rows][:, me.geoms]
        models[:, ng, :3, :3] = np.eye(3)
        models[:, ng, :3, 3] = state.goal[rows]
        models[:, :, 3, 3] = 1.0
        centers = models[:, :, :3, 3]
        radius = np.append(me.radius, 0.02)
        starts = np.append(me.starts, me.target_start)
        stops = np.append(me.stops, me.target_stop)
        tan_half = math.tan(math.radians(FOVY_DEG / 2))
        draws_idx, draws_start, draws_stop, draws_vp, draws_model, draws_view = [], [], [], [], [], []
        draws_light, draws_diffuse = [], []
        for v, (eye, fwd) in enumerate(views):
            view = cam.look_at(eye, eye + fwd, (0.0, 0.0, 1.0))
            vp = proj @ view                                     # (n, 4, 4)
            # Cull geoms whose bounding sphere is outside the view cone.
            rel = centers - eye[:, None]
            depth_along = (rel * fwd[:, None]).sum(-1)
            lateral = np.sqrt(np.maximum((rel * rel).sum(-1) - depth_along ** 2, 0))
            visible = (depth_along > -radius) & (
                lateral - radius * 1.5 < (depth_along + radius) * tan_half * 1.5)
            # One light standing for MuJoCo's two: the downward directional light (diffuse 0.8)
            # and the headlight (diffuse 0.4, from the camera).
            light = 0.8 * np.array([0.0, 0.0, 1.0]) - 0.4 * fwd
            strength = np.linalg.norm(light, axis=1)
            for k in range(n):
                gs = np.flatnonzero(visible[k])
                draws_idx.append(np.full(gs.size, rows[k] - rows[0]))
                draws_start.append(starts[gs])
                draws_stop.append(stops[gs])
                draws_model.append(models[k, gs])
                draws_view.append(np.broadcast_to(vp[k], (gs.size, 4, 4)))
                draws_vp.append(np.broadcast_to(np.array([v * p.width, 0, p.width, p.height]),
                                                (gs.size, 4)))
                draws_light.append(np.broadcast_to(light[k] / strength[k], (gs.size, 3)))
                draws_diffuse.append(np.full(gs.size, strength[k]))
        raster3d.draw_meshes(
            sub, depth, np.concatenate(draws_idx), me.vertices, me.triangles,
            np.concatenate(draws_start), np.concatenate(draws_stop), np.concatenate(draws_view),
            model=np.concatenate(draws_model), face_colors=me.colors,
            face_flags=raster3d.FLAG_LIT, light_dir=np.concatenate(draws_light),
            ambient=0.3, diffuse=np.concatenate(draws_diffuse),
            viewport=np.concatenate(draws_vp).astype(np.int64), clear=BACKGROUND_RGB)

    def gl_renderer(self):
        """The OpenGL renderer (created on first use; RuntimeError without an OpenGL context)."""
        from .fetch_gl import GlRenderer

        if self._gl is None:
            self._gl = GlRenderer(self.scene, self.params.width, self.params.height)
        return self._gl

    def gl_cameras(self, state, b: int) -> list:
        return [tuple(np.asarray(x)[0] for x in camera)
                for camera in self._cameras(state, np.array([b]))]

    def _render_gl(self, state, frames, rows):
        gl = self.gl_renderer()
        for b in rows.tolist():
            gl.render(state.phys[b], state.goal[b], self.gl_cameras(state, b), frames[b])

    # -- prompt -------------------------------------------------------------------------
    def prompt(self, state, i, text_mode=False):
        return self._prompt_text


class FetchReach(FetchBase):
    name = "fetch_reach"
    Params = FetchParams
    presets = {"easy": FetchParams(), "hard": FetchParams()}
    grammar = Grammar([MOVE_SPEC, STOP])
    solver_strategies = ("greedy",)
    xml_name = "reach.xml"
    base_x = 0.4049
    has_object = False
    _prompt_text = _REACH_PROMPT

    def _plan_cap(self, num_steps):
        # The reference rolls out max(num_steps or 10, 10) greedy moves (then stop).
        return max(num_steps or 10, 10) + 1

    def _new_oracle(self, batch):
        return {"moves": np.zeros(batch, np.int64)}

    def _oracle_codes(self, state, oracle, active, codes, t, cap):
        sim.greedy_axis_actions(state.grip, state.goal, 0.002, active, codes)
        # Stop once every axis is within 2 mm or the move budget (the cap less the stop) is spent.
        codes[active & ((codes == sim.ZERO_MOVE) | (oracle["moves"] >= cap - 1))] = sim.STOP
        oracle["moves"] += active
