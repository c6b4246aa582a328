"""The machinery the two Fetch families share (spec/envs/fetch_reach.md and
fetch_pick_and_place.md): ``FetchParams`` (the reference's constructor keywords), the episode
state, and ``FetchBase``, which the families (envs/fetch_reach.py, envs/fetch_pick_and_place.py)
specialise with their scene, grammar, prompt and oracle.

``FetchBase`` loads the gymnasium-robotics Fetch MJCF from the installed package
(kernels/fetch_sim), settles it as the reference's constructor does, samples goals, objects and
the per-episode camera jitter, maps move/gripper actions onto mocap re-anchoring with 0.05 m per
unit payload and 20 substeps, judges success on stop, and runs the family's closed-loop oracle
through the env's own stepper. Physics runs on MuJoCo C (kernels/fetch_sim.CpuStepper: MjData per
worker thread, GIL released) or, with ``backend="mjx"``, on MJX (kernels/fetch_mjx.MjxStepper:
the MJX variant of the same MJCF, robot meshes out of collision, the whole batch advanced by one
jitted function; ``impl`` "jax" or "warp"; meant for accelerators). Frames are the two 480x480
free-camera views of the reference side by side (jittered front view | view following the grip
point), drawn by the shared z-buffered rasterizer from the model's geom poses and meshes with
Lambert light (robot meshes simplified by vertex clustering at three levels of detail,
render/shapes3d.cluster, a draw taking the coarsest that stays within two frame pixels), with
``antialias`` x ``antialias`` samples per pixel when asked (the evaluation runner and the
demonstration synthesizer draw the views at the size they show, with 2 x 2). Each view is drawn
on its own, a few frames per call, into per-thread buffers that stay in a core's cache, and
geoms whose box lies outside a view are left out of its draws (raster3d.boxes_outside). The
table, the floor and the robot's base (which stays within 10 um of its start pose) are drawn
from their start pose; the front view's camera is fixed for an episode, so its picture of them
is drawn once an episode and kept (FetchWorkspace.layer), and each step draws the rest over it;
MuJoCo's OpenGL renderer (``renderer="mujoco"``, envs/fetch_gl.py) draws the same views where an
OpenGL context exists.

Deviations from the reference, on purpose, shared by both families:
- Goals and cameras come from our own per-episode random stream (seed k does not give the
  reference's episode k); recorded episodes are replayed from their init states.
- Rendering is a pure function of the state, so the reset frame already shows the jittered camera
  (quirk Q1), and feedback never leaks into the next episode's prompt (quirk Q2); the prompt never
  carries a "Feedback:" paragraph (the harness sends feedback as its own text).
- ``to_init_state`` adds two keys the reference lacks, ``sim_state`` (MuJoCo's integration state
  vector) and ``gripper_cmd``, so mid-episode states round-trip exactly; both are optional on
  load (reference dicts start from the settled robot). ``camera_config`` is required (the
  reference's own dicts always carry it). Loaded values must be physically plausible (positions
  within 10 m, every ``sim_state`` entry within a per-component bound, fetch_sim.Scene), so an
  absurd but finite value is refused naming its field.
- The frames are rasterised, not OpenGL-rendered: flat Lambert shading with one combined light
  (top light + headlight), no specular highlights; one sample per pixel unless ``antialias``
  asks for more (the reference's frames are multisampled and then downscaled by its harness).
- A simulation that diverges (non-finite state, or MuJoCo's own bad-acceleration reset) restores
  the episode's start and reports it in the feedback instead of continuing from MuJoCo's model
  default.
- The oracles use multi-axis and fractional moves (payloads on a 1/20 grid, written as short
  decimals that parse back to exactly the floats they were planned with) so that their plans fit
  the evaluation budget (20 steps easy, 30 hard, stop included); ``num_steps`` caps a plan's
  length (stop included).
- MuJoCo is the installed version (4.x), not the reference's 3.3.2; positions agree to a few
  millimetres (see tests/test_fetch_parity.py).
"""
from __future__ import annotations

import math
import threading
from abc import abstractmethod
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..core import threads as core_threads
from ..core.cache import BoundedCache
from ..core.family import FAMILY_BASE, Family, copy_state, goal_distance
from ..core.grammar import IGNORED, OK, STOP_ACTION, ActionBatch, ActionSpec, FloatVector
from ..core.validate import (InitSchema, boolean, describe, integer, mapping, one_of, real,
                             real_array, reals)
from ..kernels import fetch_sim as sim
from ..render import camera as cam
from ..render import blit, raster3d, shapes3d
from ..render.resample import fit_long_side

UNSTABLE_CODE = FAMILY_BASE  # see feedback_texts
BACKGROUND_RGB = (114, 219, 145)   # the reference's skybox as rendered
FOVY_DEG = 45.0
# Levels of detail of the robot meshes: vertex-clustering cells (34.5 k triangles -> 13.5 k, 6.9 k,
# 3 k). A draw uses the coarsest level whose cell is at most LOD_PIXELS pixels of the frame where
# the geom stands (with supersampling, 2 * antialias drawn pixels), so a full-size view keeps the
# 4 mm level and a small or distant view draws fewer, sub-pixel triangles that barely change its
# picture (measured in docs/NOTES.md).
CLUSTER_LEVELS = (0.004, 0.008, 0.016)
LOD_PIXELS = 2.0
CONSUMER_ANTIALIAS = 2   # samples per pixel side when drawing at a consumer's size
POSITION_BOUND = 10.0   # metres: loaded goals, objects and camera targets (the scene is ~2 m)
MIN_CAMERA_DISTANCE, MAX_CAMERA_DISTANCE = 0.01, 100.0   # metres from the camera target
MAX_ANGLE_DEG = 720.0   # camera azimuths (degrees; any angle is one of these modulo 360)
GROUP = 4           # frames per rasterizer call (they share one depth buffer)
# The parts of the scene that stay put (FetchMeshes.static: the floor, the table, the robot's base
# and what is fixed to it) are drawn from their pose at the episode start while every one of them
# is within STATIC_TOL of it (metres, and rotation-matrix entries; the base rides on damped slide
# joints and drifts by under a micrometre in an episode). The front view's camera is fixed for an
# episode, so its picture of those parts is the same at every step: it is drawn once per episode
# and kept (colour and depth, FetchWorkspace.layer) for as many rows as fit in LAYER_BYTES.
BASE_BODY = "robot0:base_link"
STATIC_TOL = 1e-5
LAYER_BYTES = 256 << 20

MOVE_SPEC = ActionSpec("move", FloatVector(3, -1.0, 1.0))


@dataclass(frozen=True)
class FetchParams:
    """The reference's constructor keywords (defaults: the evaluation harness's camera values)
    plus ``backend`` ("cpu": MuJoCo C, "mjx": MJX), ``impl`` (the MJX implementation: "jax" or
    "warp"; used with backend "mjx" only), ``renderer`` ("raster", "mujoco") and ``antialias``
    (the rasterizer draws antialias x antialias samples per pixel and averages them; 1 = one
    sample). The evaluation runner and the demonstration synthesizer render at the size they
    show the model, with antialias 2 (``consumer_overrides``)."""

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
    antialias: int = 1

    def __post_init__(self):
        # Every number is coerced to a float in a physical range here, so nothing odd (a huge
        # Python int, 1e300) reaches the kernels; the bounds are far beyond any sensible scene.
        def number(name, low=None, high=None, positive=False):
            value = real(name, getattr(self, name), low, high, positive=positive)
            object.__setattr__(self, name, value)
            return value

        def vector(name, bound):
            value = reals(name, getattr(self, name), 3, -bound, bound)
            object.__setattr__(self, name, value)

        one_of("reward_type", self.reward_type, ("sparse", "dense"))
        number("distance_threshold", high=10.0, positive=True)
        for name in ("width", "height"):
            integer(name, getattr(self, name), 16, 2048)
        integer("antialias", self.antialias, 1, 4)
        if max(self.width, self.height) * self.antialias > 2048:
            raise ValueError(f"antialias: width and height times antialias must be at most 2048, "
                             f"got {max(self.width, self.height)} x {self.antialias}")
        for name in ("use_follow_camera", "jitter_camera_on_reset"):
            boolean(name, getattr(self, name))
        number("follow_cam_distance", MIN_CAMERA_DISTANCE, MAX_CAMERA_DISTANCE)
        number("follow_cam_azimuth", -MAX_ANGLE_DEG, MAX_ANGLE_DEG)
        number("follow_cam_elevation", -89.9, 89.9)
        vector("follow_cam_lookat_offset", POSITION_BOUND)
        vector("camera_base_lookat", POSITION_BOUND)
        number("camera_jitter_azimuth", 0.0, 180.0)
        number("camera_jitter_elevation", 0.0, 89.9)
        number("camera_jitter_distance", 0.0, MAX_CAMERA_DISTANCE)
        number("camera_jitter_lookat", 0.0, POSITION_BOUND)
        number("camera_default_azimuth", -MAX_ANGLE_DEG, MAX_ANGLE_DEG)
        number("camera_default_elevation", -89.9, 89.9)
        number("camera_default_distance", MIN_CAMERA_DISTANCE, MAX_CAMERA_DISTANCE)
        if self.camera_default_distance <= self.camera_jitter_distance:
            raise ValueError(f"camera_jitter_distance: must be less than camera_default_distance "
                             f"({self.camera_default_distance}), got {self.camera_jitter_distance}")
        for name in ("primary_camera_name", "secondary_camera_name"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name}: expected a str")
        one_of("backend", self.backend, ("cpu", "mjx"))   # MuJoCo C, or MJX
        if self.backend == "mjx":
            from ..kernels.fetch_mjx import check_impl

            check_impl(self.impl)
        elif self.impl != "jax":
            raise ValueError(f"impl: only used with backend='mjx'; expected 'jax' with backend "
                             f"{self.backend!r}, got {describe(self.impl)}")
        # The Cython rasterizer (default), or MuJoCo's OpenGL renderer.
        one_of("renderer", self.renderer, ("raster", "mujoco"))
        if self.antialias != 1 and self.renderer != "raster":
            raise ValueError(f"antialias: only used with renderer='raster' (MuJoCo's renderer "
                             f"keeps its own multisampling), got {self.antialias} with "
                             f"renderer {self.renderer!r}")


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


class FetchWorkspace:
    """Render scratch of one BatchEnv, per drawing thread (created on first use, so the pool's
    threads never share one): colour and depth of GROUP one-view frames at the drawn size (the
    view size times ``antialias``); a view is drawn there, then copied or averaged into its
    place in the frame."""

    def __init__(self, height: int, width: int, antialias: int = 1, views: int = 1,
                 batch: int = 0):
        self.shape = (GROUP, height * antialias, width // views * antialias)
        self._buffers = {}
        # The front view's layer of static parts for the first ``layer_rows`` rows of the batch.
        per_row = self.shape[1] * self.shape[2] * (3 + 4)
        self.layer_rows = int(min(batch, LAYER_BYTES // per_row))
        self._layer = None

    def layer(self) -> tuple:
        """(colour, depth, camera) of the kept front-view layers of the first ``layer_rows``
        rows: the static parts drawn alone for an episode whose camera is ``camera[b]`` (NaN: none
        kept). Allocated on first use."""
        if self._layer is None:
            n, h, w = self.layer_rows, self.shape[1], self.shape[2]
            self._layer = (np.empty((n, h, w, 3), np.uint8), np.empty((n, h, w), np.float32),
                           np.full((n, 6), np.nan))
        return self._layer

    def buffers(self, n: int) -> tuple:
        """The calling thread's colour and depth buffers of ``n`` <= GROUP one-view frames."""
        key = threading.get_ident()
        bufs = self._buffers.get(key)
        if bufs is None:
            bufs = self._buffers[key] = (np.empty(self.shape + (3,), np.uint8),
                                         np.empty(self.shape, np.float32))
        return bufs[0][:n], bufs[1][:n]


# ---------------------------------------------------------------------------------------------
# scene geometry for the rasterizer

class FetchMeshes:
    """Triangle table of every visible geom of a Fetch scene in its own frame, plus the red
    target sphere (last), checked once as a ``raster3d.MeshTable``. Each robot mesh is stored at
    every level of detail of CLUSTER_LEVELS (vertex clustering); boxes, planes and the sphere
    have one level. ``starts[l, j]`` / ``stops[l, j]``: triangle range of drawable j (geom j,
    the sphere at j = len(geoms)) at level l; ``radius[j]``: its bounding-sphere radius."""

    def __init__(self, scene):
        m = scene.model
        verts, tris, colors = [], [], []
        self.geoms, starts, stops, self.radius = [], [], [], []
        boxes = []
        nv = 0
        nt = 0

        def add(v, t, rgb):
            nonlocal nv, nt
            verts.append(np.asarray(v, np.float32))
            tris.append(np.asarray(t, np.int32) + nv)
            colors.append(np.repeat(rgb[None], len(t), 0))
            span = (nt, nt + len(t))
            nv += len(v)
            nt += len(t)
            return span

        for g in range(m.ngeom):
            if m.geom_bodyid[g] == scene.mocap_body or m.geom_group[g] > 2:
                continue
            rgba = m.geom_rgba[g]
            if m.geom_matid[g] >= 0 and np.allclose(rgba, (0.5, 0.5, 0.5, 1.0)):
                rgba = m.mat_rgba[m.geom_matid[g]]
            if rgba[3] <= 0:
                continue
            rgb = (np.clip(rgba[:3], 0, 1) * 255 + 0.5).astype(np.uint8)
            gtype = m.geom_type[g]
            if gtype == 7:  # mesh
                mid = m.geom_dataid[g]
                va, vn = m.mesh_vertadr[mid], m.mesh_vertnum[mid]
                fa, fn = m.mesh_faceadr[mid], m.mesh_facenum[mid]
                levels = [shapes3d.cluster(m.mesh_vert[va:va + vn], m.mesh_face[fa:fa + fn], cell)
                          for cell in CLUSTER_LEVELS]
            elif gtype == 6:  # box
                levels = [shapes3d.box(m.geom_size[g])]
            elif gtype == 0:  # plane: a quad of the given half-sizes facing +z
                levels = [shapes3d.quad(*m.geom_size[g][:2])]
            else:
                continue
            spans = [add(v, t, rgb) for v, t in levels]
            every = np.concatenate([v for v, _ in levels])
            boxes.append((every.min(0), every.max(0)))
            spans += [spans[-1]] * (len(CLUSTER_LEVELS) - len(spans))
            self.geoms.append(g)
            starts.append([a for a, _ in spans])
            stops.append([b for _, b in spans])
            self.radius.append(float(np.linalg.norm(levels[0][0], axis=1).max()))
        sv, st, _ = raster3d.uv_sphere(0.02, 8, 12)
        sphere = add(sv, st, np.array([255, 0, 0], np.uint8))
        starts.append([sphere[0]] * len(CLUSTER_LEVELS))
        stops.append([sphere[1]] * len(CLUSTER_LEVELS))
        self.radius.append(0.02)
        boxes.append((sv.min(0), sv.max(0)))
        # Each drawable's box around every level's vertices (draws outside the view are culled).
        self.box_lo = np.array([b[0] for b in boxes], np.float64)
        self.box_hi = np.array([b[1] for b in boxes], np.float64)
        floors = [j for j, g in enumerate(self.geoms) if m.geom_type[g] == 0]   # planes
        self.order = np.array([j for j in range(len(boxes)) if j not in floors] + floors)
        self.table = raster3d.MeshTable(
            np.ascontiguousarray(np.concatenate(verts), np.float32),
            np.ascontiguousarray(np.concatenate(tris), np.int32),
            face_colors=np.ascontiguousarray(np.concatenate(colors), np.uint8),
            face_flags=raster3d.FLAG_LIT)
        self.geoms = np.array(self.geoms, np.int64)
        # Drawables that stay put (see STATIC_TOL): geoms of the world and of bodies fixed to
        # it (floor, table), and of the robot's base and the bodies fixed to the base.
        base = m.body(BASE_BODY).id

        def stays(body):
            while body not in (0, base) and m.body_jntnum[body] == 0:
                body = m.body_parentid[body]
            return body in (0, base)

        self.static = np.array([stays(m.geom_bodyid[g]) for g in self.geoms] + [False])
        self.static_geoms = self.geoms[self.static[:-1]]           # their scene geom ids
        self.static_pose = (scene.start_geom_xpos[self.static_geoms],
                            scene.start_geom_xmat[self.static_geoms])
        self.starts = np.ascontiguousarray(np.array(starts, np.int64).T)
        self.stops = np.ascontiguousarray(np.array(stops, np.int64).T)
        self.radius = np.array(self.radius)
        self.cells = np.array(CLUSTER_LEVELS)


# ---------------------------------------------------------------------------------------------
# oracle actions as strings

def _payload_text(units: int) -> str:
    """One payload component (units of 1/PAYLOAD_GRID) as the shortest decimal that parses back
    to exactly units / PAYLOAD_GRID: "1", "-1", "0", "0.35", "-0.05"."""
    grid = sim.PAYLOAD_GRID
    return str(units // grid) if units % grid == 0 else repr(units / grid)


_ACTION_TEXT = BoundedCache("Fetch oracle action strings", max_items=1 << 16)


def action_string(code: int, units) -> str:
    """The action string of an oracle action (fetch_sim MOVE with payload ``units``, OPEN,
    CLOSE or STOP)."""
    key = (int(code), *(int(u) for u in units)) if code == sim.MOVE else (int(code),)
    text = _ACTION_TEXT.get(key)
    if text is None:
        if code == sim.MOVE:
            text = "('move', [" + ", ".join(_payload_text(u) for u in key[1:]) + "])"
        else:
            text = {sim.OPEN: "('gripper', 0)", sim.CLOSE: "('gripper', 1)",
                    sim.STOP: STOP_ACTION}[int(code)]
        text = _ACTION_TEXT.put(key, text)
    return text


class FetchBase(Family):
    """Everything the two Fetch families share; subclasses set the scene and the task."""

    # Redraw bookkeeping, and the geometry the frames are drawn from (a function of ``phys``):
    # not part of state_hash.
    transient_fields = ("moved", "geom_xpos", "geom_xmat")

    # Set by subclasses.
    xml_name = ""
    base_x = 0.0
    has_object = False
    goal_range = 0.15
    plan_cap = 150      # the most actions (stop included) of a solver plan
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
        self.meshes = FetchMeshes(self.scene)
        self._kind = {name: self.grammar.index(name) if name in self.grammar.names else -1
                      for name in ("move", "gripper")}
        # The optional OpenGL renderer, created on first use (fetch_gl).
        self._gl = BoundedCache(f"{self.name} OpenGL renderer", max_items=1)

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

    def new_workspace(self, batch):
        return FetchWorkspace(*self.frame_shape, self.params.antialias,
                              2 if self.params.use_follow_camera else 1, batch)

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

    def _init_schema(self) -> InitSchema:
        """The reference's fields, plus our own optional ``sim_state`` and ``gripper_cmd``
        (mid-episode dicts) and ``object_start`` (pick and place)."""
        def position(field, value):
            return self._position(value, field)

        fields = {"goal_pos": position,
                  "camera_config": lambda field, value: self._camera(value, field)}
        if self.has_object:
            fields["object_pos"] = position
            fields["object_start"] = (position, None)
        fields["sim_state"] = (self._sim_state, None)
        fields["gripper_cmd"] = (lambda field, value: one_of(field, real(field, value),
                                                             (0.0, 1.0, -1.0)), 0.0)
        return InitSchema(fields)

    def _sim_state(self, field, value):
        if value is None:
            return None
        n = self.scene.nstate
        if not isinstance(value, (list, tuple, np.ndarray)):
            raise ValueError(f"{field}: expected a list of {n} numbers, got "
                             f"{type(value).__name__}")
        arr = real_array(field, value, shapes=((n,),))   # the shape checked before converting
        return real_array(field, arr, bound=self.scene.state_bound)

    def load_rows(self, state, rows, init_states):
        # Every dict is checked before any row changes (BatchEnv also loads into a fresh state).
        staged = self._init_schema().parse_all(init_states)
        rows = np.asarray(rows, np.int64)
        for b, init in zip(rows.tolist(), staged):
            state.goal[b] = init["goal_pos"]
            state.camera[b] = init["camera_config"]
            if self.has_object:
                start = init["object_start"]
                state.object_start[b] = init["object_pos"] if start is None else start
        self._start_rows(state, rows)
        with_sim = [b for b, init in zip(rows.tolist(), staged) if init["sim_state"] is not None]
        for b, init in zip(rows.tolist(), staged):
            if init["sim_state"] is not None:
                state.phys[b] = init["sim_state"]
            state.gripper_cmd[b] = init["gripper_cmd"]
        if with_sim:
            self._kinematics(state, np.array(with_sim, np.int64))

    @staticmethod
    def _position(value, where):
        """[x, y, z] in metres, within POSITION_BOUND of the origin."""
        return np.array(reals(where, value, 3, -POSITION_BOUND, POSITION_BOUND))

    def _camera(self, value, where):
        p = self.params
        if value is None:
            # The reference stores None when it has no renderer: the un-jittered default camera.
            return np.array([p.camera_default_azimuth, p.camera_default_elevation,
                             p.camera_default_distance, *p.camera_base_lookat])
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a dict or None, got {type(value).__name__}")
        mapping(where, value, ("azimuth", "elevation", "distance", "lookat"))
        out = [real(f"{where}.azimuth", value["azimuth"]),
               real(f"{where}.elevation", value["elevation"], -89.9, 89.9),
               real(f"{where}.distance", value["distance"], high=100.0, positive=True)]
        out += list(self._position(value["lookat"], f"{where}.lookat"))
        return np.array(out)

    def to_init_state(self, state, i):
        c = state.camera[i]
        out = {"goal_pos": [float(v) for v in state.goal[i]]}
        if self.has_object:
            sc = self.scene
            a = sc.ofs_qpos + sc.object_qpos
            current = state.phys[i, a:a + 3]
            out = {"object_pos": [float(v) for v in current], **out}
            if not np.array_equal(current, state.object_start[i]):
                # Ours (mid-episode only): where the episode started the cube, where a diverged
                # simulation restarts it.
                out["object_start"] = [float(v) for v in state.object_start[i]]
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

    def distance(self, state) -> np.ndarray:
        """float64[B]: metres from the gripper (reach) or the object (pick and place) to the
        goal."""
        return np.linalg.norm(self._points(state) - state.goal, axis=1)

    def potential(self, state, out) -> None:
        # Metres beyond the success distance.
        goal_distance(self.distance(state) - float(self.params.distance_threshold),
                      self.is_success(state), out)

    def metrics(self, state) -> dict:
        return {"distance": self.distance(state)}

    # -- solver -------------------------------------------------------------------------
    @abstractmethod
    def _new_oracle(self, batch):
        """The oracle's memory for ``batch`` rows (arrays the oracle kernel updates)."""

    @abstractmethod
    def _oracle_codes(self, state, oracle, active, codes, units):
        """Write the oracle's next action for the ``active`` rows of ``state``: ``codes``
        (fetch_sim MOVE, OPEN, CLOSE or STOP) and, for MOVE, ``units`` (payload x
        PAYLOAD_GRID)."""

    def _rollout(self, state, rows, num_steps):
        """Run the oracle closed-loop on a copy of ``rows``; returns (final state, plans of
        action strings, each ending with a stop)."""
        work = copy_state(type(state)(*(a[rows] for a in state)))
        n = len(rows)
        oracle = self._new_oracle(n)
        cap = min(num_steps, self.plan_cap) if num_steps else self.plan_cap
        plans = [[] for _ in range(n)]
        active = np.ones(n, np.bool_)
        codes = np.zeros(n, np.int64)
        units = np.zeros((n, 3), np.int64)
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
            if t == cap - 1:
                codes[:] = sim.STOP
            else:
                self._oracle_codes(work, oracle, active, codes, units)
            # Codes to parsed actions (no strings in the loop); floats are exactly what the
            # parser reads from the plan's strings.
            stop = active & (codes == sim.STOP)
            error[:] = np.where(active & ~stop, OK, IGNORED)
            kind[:] = -1
            floats[:] = 0
            ints[:] = 0
            move = active & (codes == sim.MOVE)
            kind[move] = self._kind["move"]
            floats[move, :3] = units[move] / sim.PAYLOAD_GRID
            grip = active & ((codes == sim.OPEN) | (codes == sim.CLOSE))
            kind[grip] = self._kind["gripper"]
            ints[grip, 0] = np.where(codes[grip] == sim.OPEN, 0, 1)
            for k in np.flatnonzero(active).tolist():
                plans[k].append(action_string(codes[k], units[k]))
            self.step(work, ActionBatch.from_arrays(kind, ints, floats, error, self.stop_kind),
                      reward, term, fb)
            active &= ~stop
        return work, plans

    def solve(self, state, rows, strategy, num_steps, seeds):
        rows = np.ascontiguousarray(rows, np.int64)
        _, plans = self._rollout(state, rows, num_steps)
        return plans

    def goal_state(self, state):
        rows = np.arange(state.phys.shape[0], dtype=np.int64)
        work, _ = self._rollout(state, rows, None)
        for dst, src in zip(state, work):
            dst[...] = src
        return state

    # -- pixels -------------------------------------------------------------------------
    @classmethod
    def consumer_overrides(cls, params, max_long_side):
        """Views drawn at the size the consumer shows them (960x480 -> 336x168 for a long side
        of 336), each pixel the mean of CONSUMER_ANTIALIAS x CONSUMER_ANTIALIAS samples, which
        is what makes the frame look like the reference's full frame downscaled (measured in
        tests/test_fetch_frames.py). The OpenGL renderer keeps its own size."""
        if params.renderer != "raster":
            return {}
        views = 2 if params.use_follow_camera else 1
        width, height = fit_long_side(params.width * views, params.height, max_long_side)
        if (width, height) == (params.width * views, params.height):
            return {}
        return {"width": max(16, round(width / views)), "height": max(16, height),
                "antialias": CONSUMER_ANTIALIAS}

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
        return [cam.free_camera(*camera) for camera in self._cameras(state, rows)]

    def render_rows(self, state, frames, rows, work):
        rows = np.ascontiguousarray(rows, np.int64)
        if rows.size == 0:
            return
        p = self.params
        if p.renderer == "mujoco":
            self._render_gl(state, frames, rows)
            return
        # The front view is drawn in two passes, the static parts (FetchMeshes.static) and then
        # the rest; rows whose kept layer shows the static parts for this camera start from it
        # instead of the first pass (``reuse``), rows that can keep one store it (``keep``).
        settled = self._settled(state, rows)
        reuse = np.zeros(rows.size, np.bool_)
        keep = np.zeros(rows.size, np.bool_)
        key = None
        if work.layer_rows:
            key = work.layer()[2]
            ok = np.flatnonzero(settled & (rows < work.layer_rows))
            same = (key[rows[ok]] == state.camera[rows[ok]]).all(axis=1)
            reuse[ok[same]] = True
            keep[ok[~same]] = True
            key[rows[keep]] = state.camera[rows[keep]]
        # Consecutive runs of rows, at most GROUP frames each, share one depth buffer; the runs
        # go to a pool of threads (the rasterizer releases the GIL). Each view of a run is a
        # task of its own, drawn into the thread's one-view buffers: a view's colour and depth
        # (1.6 MB at 480x480) stay in a core's cache while its triangles land, where the two
        # side by side (3.2 MB) did not; that made a B=64 full-size step ~15% faster (NOTES).
        runs = []
        start = 0
        for k in range(1, rows.size + 1):
            if k == rows.size or rows[k] != rows[k - 1] + 1 or k - start >= GROUP:
                runs.append((start, k))
                start = k
        (static, static_row), *views = self._draw_lists(state, rows, settled, reuse)

        def part(draws, draw_row, start, k):
            lo, hi = np.searchsorted(draw_row, (start, k))
            return draws[lo:hi]

        tasks = []
        for view, (draws, draw_row) in enumerate(views):
            for start, k in runs:
                layer = None
                if view == 0:
                    layer = (part(static, static_row, start, k), reuse[start:k], keep[start:k])
                tasks.append((int(rows[start]), int(rows[k - 1]) + 1, view,
                              part(draws, draw_row, start, k), layer))
        try:
            if core_threads.FRAME_POOL.workers > 1 and len(tasks) > 1:
                # The one shared pool of drawing threads: envs drawn at once (two Fetch tasks
                # of a mixed batch) queue their tasks instead of running more threads than
                # there are cores.
                list(core_threads.FRAME_POOL.map(
                    lambda task: self._draw_task(frames, work, *task), tasks))
            else:
                for task in tasks:
                    self._draw_task(frames, work, *task)
        except BaseException:
            if key is not None:
                key[:] = np.nan   # layers half drawn are not kept
            raise

    def _draw_task(self, frames, work, r0, r1, view, draws, layer=None):
        """Draw ``view`` of frames r0..r1-1 from ``draws`` into the thread's one-view buffers,
        then copy it (or average its samples) into its place in the frames. ``layer``: (the
        static parts' draws, reuse, keep) of the front view, drawn first (see render_rows)."""
        p = self.params
        aa = p.antialias
        n = r1 - r0
        target, depth = work.buffers(n)
        if layer is None:
            raster3d.draw_list(target, depth, draws, first_frame=r0, clear=BACKGROUND_RGB)
        else:
            static, reuse, keep = layer
            if not reuse.all():
                raster3d.draw_list(target, depth, static, first_frame=r0, clear=BACKGROUND_RGB)
            if reuse.any() or keep.any():
                kept_rgb, kept_depth, _ = work.layer()
                for k in np.flatnonzero(reuse).tolist():
                    np.copyto(target[k], kept_rgb[r0 + k])
                    np.copyto(depth[k], kept_depth[r0 + k])
                for k in np.flatnonzero(keep).tolist():
                    np.copyto(kept_rgb[r0 + k], target[k])
                    np.copyto(kept_depth[r0 + k], depth[k])
            raster3d.draw_list(target, depth, draws, first_frame=r0)
        x = view * p.width
        if aa > 1:
            raster3d.downsample(target, frames[r0:r1], aa, x)
            return
        # Streamed stores when the batch's frames are far bigger than the caches.
        stream = frames.nbytes >= blit.STREAM_BYTES
        for k in range(n):
            blit.copy_frame(frames, r0 + k, target[k].reshape(-1), p.height, p.width, x=x,
                            stream=stream)

    def render_after_step(self, state, frames, work):
        rows = np.flatnonzero(state.moved)
        if rows.size:
            self.render_rows(state, frames, rows, work)

    def render_step(self, state, frames, work, restarted):
        # A reset marks its rows as moved, so render_after_step draws the stepped and the
        # auto-reset rows in one pass (one draw list, one round of the render threads).
        self.render_after_step(state, frames, work)

    def _settled(self, state, rows):
        """bool over ``rows``: every static part is within STATIC_TOL of its start pose."""
        rows = np.asarray(rows, np.int64)
        fixed = self.meshes.static_geoms[None]
        pos, mat = self.meshes.static_pose
        moved = np.abs(state.geom_xpos[rows[:, None], fixed] - pos).max(axis=(1, 2))
        turned = np.abs(state.geom_xmat[rows[:, None], fixed] - mat).max(axis=(1, 2))
        return (moved <= STATIC_TOL) & (turned <= STATIC_TOL)

    def _draw_lists(self, state, rows, settled=None, reuse=None):
        """The draws of ``rows`` (one per visible geom, ordered by row, then geom), each view
        drawn on its own (viewport at x = 0 of a one-view frame), as (raster3d.DrawList, each
        draw's position in rows) pairs: the front view's static parts, except in the rows of
        ``reuse`` (bool over rows), then each view's other draws (the front view's without its
        static parts). Static parts of the ``settled`` rows are drawn at their start pose."""
        p = self.params
        me = self.meshes
        n = len(rows)
        ng = len(me.geoms)
        if settled is None:
            settled = self._settled(state, rows)
        if reuse is None:
            reuse = np.zeros(n, np.bool_)
        views = self._views(state, rows)
        width, height = p.width * p.antialias, p.height * p.antialias   # drawn size of a view
        proj = cam.perspective_fov_y(FOVY_DEG, p.width / p.height, 0.01, 20.0)
        # Geom model matrices, then the target sphere's.
        models = np.zeros((n, ng + 1, 4, 4))
        models[:, :ng, :3, :3] = state.geom_xmat[rows][:, me.geoms].reshape(n, ng, 3, 3)
        models[:, :ng, :3, 3] = state.geom_xpos[rows][:, me.geoms]
        models[:, ng, :3, :3] = np.eye(3)
        models[:, ng, :3, 3] = state.goal[rows]
        models[:, :, 3, 3] = 1.0
        if settled.any():
            pos, mat = me.static_pose
            at = np.flatnonzero(settled)[:, None]
            fixed = np.flatnonzero(me.static)
            models[at, fixed, :3, :3] = mat.reshape(-1, 3, 3)
            models[at, fixed, :3, 3] = pos
        centers = models[:, :, :3, 3]
        eye = np.stack([e for e, _ in views], 1)                  # (n, views, 3)
        fwd = np.stack([f for _, f in views], 1)
        view_proj = proj @ cam.look_at(eye, eye + fwd, (0.0, 0.0, 1.0))   # (n, views, 4, 4)
        # Cull geoms whose bounding sphere is outside the view cone.
        tan_half = math.tan(math.radians(FOVY_DEG / 2))
        rel = centers[:, None] - eye[:, :, None]                  # (n, views, ng + 1, 3)
        along = np.einsum("nvgk,nvk->nvg", rel, fwd)
        lateral = np.sqrt(np.maximum(np.einsum("nvgk,nvgk->nvg", rel, rel) - along ** 2, 0))
        visible = (along > -me.radius) & (
            lateral - me.radius * 1.5 < (along + me.radius) * tan_half * 1.5)
        # Draw order: geoms, the target sphere, then the floor, drawn last so that the
        # rasterizer skips its ends hidden behind the table top (raster3d's row records).
        r, v, g = np.nonzero(visible[:, :, me.order])
        g = me.order[g]
        # ... and those whose box lies outside one side of the view (every corner beyond the
        # same clip plane, by a margin above rounding): their triangles would all be rejected
        # one by one, after their corners were transformed. In the gripper view that is about
        # 30% of the triangles the sphere test keeps.
        beyond = raster3d.boxes_outside(view_proj[r, v], models[r, g], me.box_lo[g], me.box_hi[g])
        r, v, g = r[~beyond], v[~beyond], g[~beyond]
        # Level of detail: metres per frame pixel at the geom's depth.
        footprint = 2.0 * tan_half * np.maximum(along[r, v, g], 1e-6) / p.height
        level = np.searchsorted(me.cells, LOD_PIXELS * footprint, side="right") - 1
        level = np.maximum(level, 0)
        # One light standing for MuJoCo's two: the downward directional light (diffuse 0.8)
        # and the headlight (diffuse 0.4, from the camera).
        light = 0.8 * np.array([0.0, 0.0, 1.0]) - 0.4 * fwd        # (n, views, 3)
        strength = np.linalg.norm(light, axis=-1)
        viewport = np.array([0, 0, width, height], np.int64)
        light_dir = light[r, v] / strength[r, v, None]

        def draw_list(sel):
            return raster3d.DrawList(
                me.table, rows[r[sel]], me.starts[level[sel], g[sel]],
                me.stops[level[sel], g[sel]], view_proj[r[sel], v[sel]],
                num_frames=int(rows.max()) + 1, frame_hw=(height, width),
                model=models[r[sel], g[sel]], light_dir=light_dir[sel], ambient=0.3,
                diffuse=strength[r[sel], v[sel]], viewport=viewport), r[sel]

        front_static = (v == 0) & me.static[g]
        return [draw_list(front_static & ~reuse[r])] + [
            draw_list((v == k) & ~front_static) for k in range(len(views))]

    def gl_renderer(self):
        """The OpenGL renderer (created on first use; RuntimeError without an OpenGL context)."""
        from .fetch_gl import GlRenderer

        return self._gl.get_or_build(None, lambda: GlRenderer(self.scene, self.params.width,
                                                              self.params.height))

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
