"""Simulation kernels of the Fetch mocap-arm scenes (spec/envs/fetch_reach.md and
fetch_pick_and_place.md, sections 3, 4, 6, 11 and 13): model loading from the installed
gymnasium-robotics assets, construction-time settling, the batched CPU stepper (MuJoCo C, one
MjData per worker thread, the GIL released around every C call), episode sampling, the discrete
action mapping, success tests, and the closed-loop oracles.
The MJX (JAX) variant of the model and its stepper live in kernels/fetch_mjx.py; ``load_scene(...,
variant="mjx")`` compiles that variant and settles it here with MuJoCo C.

The episode's physics lives in one float64 vector per episode (MuJoCo's mjSTATE_INTEGRATION:
time, qpos, qvel, warm start, controls, mocap pose, ...), so a batch is one array that can be
copied, sliced and serialised like any other State field; a worker loads a row into its MjData,
advances it and writes it back. Everything that depends only on that vector (site and body
positions, geom poses for rendering) is recomputed by forward kinematics after every change.

Nothing here names a task: scenes are picked by their MJCF file name, and the task differences
(blocked gripper, object, thresholds) are arguments.
"""
from __future__ import annotations

import ctypes
import glob
import os
import threading
from functools import lru_cache
from types import SimpleNamespace

import numpy as np
from numba import njit

from ..core.threads import FRAME_POOL
from . import _mjloop
from .rng import seed_state, uniform01

# MuJoCo picks its OpenGL backend once, when it is first imported. Without a display its default
# (GLFW) cannot make a context and aborts the process when asked to; EGL renders headless. Only
# the optional renderer="mujoco" path uses OpenGL, and a missing EGL library only disables it.
if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["MUJOCO_GL"] = "egl"

# ---------------------------------------------------------------------------------------------
# model

N_SUBSTEPS = 20          # physics steps per control step (0.04 s)
STEP_M = 0.05            # nominal mocap displacement per unit payload
SETTLE_OFFSET = (-0.498, 0.005, -0.431 + 0.2)   # mocap target relative to the grip at setup
DOWN_QUAT = (1.0, 0.0, 1.0, 0.0)                 # the reference's (unnormalised) quaternion term
STATE_SPEC = None        # mjSTATE_INTEGRATION, set on first load (mujoco imported lazily)


def asset_dir() -> str:
    """The Fetch MJCF folder of the installed gymnasium-robotics package."""
    import importlib.util

    spec = importlib.util.find_spec("gymnasium_robotics")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the Fetch scenes need the gymnasium-robotics package "
                           "(pip install 'gymnasium-robotics>=1.2')")
    return os.path.join(list(spec.submodule_search_locations)[0], "envs", "assets", "fetch")


class Scene:
    """One compiled Fetch scene plus the constants of its settled start state."""

    def __init__(self, xml_name: str, base_x: float, has_object: bool, variant: str = "cpu"):
        import mujoco

        global STATE_SPEC
        STATE_SPEC = int(mujoco.mjtState.mjSTATE_INTEGRATION)
        self.mujoco = mujoco
        self.xml_path = os.path.join(asset_dir(), xml_name)
        model = mujoco.MjModel.from_xml_path(self.xml_path)
        if variant == "mjx":
            from .fetch_mjx import derive_model

            model = derive_model(model)
        elif variant != "cpu":
            raise ValueError(f"variant: expected 'cpu' or 'mjx', got {variant!r}")
        self.variant = variant
        self.model = model
        self.has_object = has_object
        self.nstate = mujoco.mj_stateSize(model, STATE_SPEC)
        # Offsets of the pieces of the state vector (components are laid out in bit order).
        offsets = {}
        pos = 0
        for bit in range(15):
            size = mujoco.mj_stateSize(model, 1 << bit)
            offsets[1 << bit] = pos
            pos += size
        st = mujoco.mjtState
        self.ofs_qpos = offsets[int(st.mjSTATE_QPOS)]
        self.ofs_qvel = offsets[int(st.mjSTATE_QVEL)]
        self.ofs_ctrl = offsets[int(st.mjSTATE_CTRL)]
        self.ofs_mocap_pos = offsets[int(st.mjSTATE_MOCAP_POS)]
        self.ofs_mocap_quat = offsets[int(st.mjSTATE_MOCAP_QUAT)]
        # The largest magnitude each entry of a loaded state vector may have: physically
        # plausible with a wide margin (measured maxima in oracle episodes: |qpos| 1.6, |qvel|
        # 21, |warm start| 1.7e3, mocap quaternion 1.7), so an absurd but finite value is refused
        # when loaded instead of being simulated or drawn.
        limits = {"TIME": 1e7, "QPOS": 100.0, "QVEL": 1e3, "ACT": 1e3, "WARMSTART": 1e7,
                  "CTRL": 10.0, "EQ_ACTIVE": 1.0, "MOCAP_POS": 100.0, "MOCAP_QUAT": 10.0}
        self.state_bound = np.full(self.nstate, 1e6)
        for key, limit in limits.items():
            bit = int(getattr(st, "mjSTATE_" + key))
            start = offsets[bit]
            self.state_bound[start:start + mujoco.mj_stateSize(model, bit)] = limit

        name = lambda kind, n: mujoco.mj_name2id(model, kind, n)  # noqa: E731
        obj = mujoco.mjtObj
        self.grip_site = name(obj.mjOBJ_SITE, "robot0:grip")
        self.link_body = name(obj.mjOBJ_BODY, "robot0:gripper_link")
        self.mocap_body = name(obj.mjOBJ_BODY, "robot0:mocap")
        fingers = [name(obj.mjOBJ_JOINT, "robot0:r_gripper_finger_joint"),
                   name(obj.mjOBJ_JOINT, "robot0:l_gripper_finger_joint")]
        self.finger_qpos = np.array([model.jnt_qposadr[j] for j in fingers], np.int64)
        # Position actuators hold "their finger's joint position + command" (ctrl_set_action).
        self.actuator_qpos = np.array(
            [model.jnt_qposadr[model.actuator_trnid[a, 0]] for a in range(model.nu)], np.int64)
        self.object_site = name(obj.mjOBJ_SITE, "object0") if has_object else -1
        self.object_qpos = (model.jnt_qposadr[name(obj.mjOBJ_JOINT, "object0:joint")]
                            if has_object else -1)

        # Construction-time settling (fetch_reach.md section 4).
        data = mujoco.MjData(model)
        for joint, value in (("robot0:slide0", base_x), ("robot0:slide1", 0.48),
                             ("robot0:slide2", 0.0)):
            data.qpos[model.jnt_qposadr[name(obj.mjOBJ_JOINT, joint)]] = value
        if has_object:
            data.qpos[self.object_qpos:self.object_qpos + 7] = (1.25, 0.53, 0.4, 1, 0, 0, 0)
        # The weld's stored relative pose is reset to identity, so the solver pulls the
        # gripper_link origin and orientation onto the mocap pose.
        model.eq_data[0, 3:10] = (0, 0, 0, 1, 0, 0, 0)
        model.eq_data[0, 0:3] = 0
        mujoco.mj_forward(model, data)
        data.mocap_pos[0] = data.site_xpos[self.grip_site] + np.array(SETTLE_OFFSET)
        data.mocap_quat[0] = DOWN_QUAT
        for _ in range(10):
            mujoco.mj_step(model, data, N_SUBSTEPS)
        self.initial_grip = data.site_xpos[self.grip_site].copy()
        self.height_offset = float(data.site_xpos[self.object_site][2]) if has_object else 0.0
        qpos, qvel, time = data.qpos.copy(), data.qvel.copy(), data.time
        # Episode start: a data reset, then the settled qpos/qvel/time (warm start, controls and
        # the mocap pose back at the model defaults, as the reference's reset leaves them).
        mujoco.mj_resetData(model, data)
        data.qpos[:] = qpos
        data.qvel[:] = qvel
        data.time = time
        self.start_state = np.zeros(self.nstate)
        mujoco.mj_getState(model, data, self.start_state, STATE_SPEC)
        # Every geom's pose at the episode start (the renderer draws the parts that stay put,
        # table and robot base, from these: envs/fetch_base.FetchMeshes.static).
        mujoco.mj_kinematics(model, data)
        self.start_geom_xpos = data.geom_xpos.copy()
        self.start_geom_xmat = data.geom_xmat.copy()
        self.ngeom = model.ngeom

    def start_object(self) -> np.ndarray:
        """The settled object joint position (x, y, z)."""
        a = self.ofs_qpos + self.object_qpos
        return self.start_state[a:a + 3].copy()


@lru_cache(maxsize=None)
def load_scene(xml_name: str, base_x: float, has_object: bool, variant: str = "cpu") -> Scene:
    return Scene(xml_name, base_x, has_object, variant)


# ---------------------------------------------------------------------------------------------
# the CPU stepper

def _libmujoco():
    import mujoco

    paths = sorted(glob.glob(os.path.join(os.path.dirname(mujoco.__file__), "libmujoco.so*"))
                   + glob.glob(os.path.join(os.path.dirname(mujoco.__file__), "libmujoco*.dylib"))
                   + glob.glob(os.path.join(os.path.dirname(mujoco.__file__), "mujoco*.dll")))
    if not paths:
        return None
    # The worker threads call MuJoCo's C functions by address from compiled code without the
    # GIL (kernels/_mjloop), so they simulate in parallel whether or not the installed Python
    # bindings release the GIL in mj_step (older ones do not), and one episode's 20 physics
    # steps are one call rather than 20 GIL hand-overs.
    lib = ctypes.CDLL(paths[0])
    address = lambda fn: ctypes.cast(fn, ctypes.c_void_p).value  # noqa: E731
    return SimpleNamespace(step=address(lib.mj_step), kinematics=address(lib.mj_kinematics),
                           set_state=address(lib.mj_setState),
                           get_state=address(lib.mj_getState))


class Kinematics:
    """Per-episode quantities recomputed from the physics vector (all arrays [B, ...])."""

    FIELDS = ("grip", "link_pos", "link_quat", "obj", "fingers", "geom_xpos", "geom_xmat")


class CpuStepper:
    """Advances rows of a batch of physics vectors with MuJoCo C on a pool of threads."""

    def __init__(self, scene: Scene, threads: int | None = None):
        import mujoco

        self.scene = scene
        self.threads = max(1, int(threads or os.cpu_count() or 1))
        self._lib = _libmujoco()
        self._local = threading.local()
        # The package's one shared pool (core/threads.py: per process, so a stepper survives a
        # fork; shared, so two envs stepped at once never run more threads than cores).
        self._pool = FRAME_POOL if self.threads > 1 and FRAME_POOL.workers > 1 else None
        self._mujoco = mujoco
        self._bad = [int(mujoco.mjtWarning.mjWARN_BADQACC), int(mujoco.mjtWarning.mjWARN_BADQPOS),
                     int(mujoco.mjtWarning.mjWARN_BADQVEL)]

    def _data(self):
        d = getattr(self._local, "data", None)
        if d is None:
            d = self._mujoco.MjData(self.scene.model)
            self._local.data = d
        return d

    def _rows(self, phys, rows, nsub, zero_fingers, out, unstable):
        """run() for the row indices ``rows`` yields (an iterator other threads may share)."""
        sc = self.scene
        m = sc.model
        d = self._data()
        lib = self._lib
        mj = self._mujoco
        warn = d.warning
        for b in rows:
            row = phys[b]
            if nsub:
                for w in self._bad:
                    warn[w].number = 0
            if lib is not None:
                _mjloop.set_state_and_step(lib.set_state, lib.step, m._address, d._address,
                                           row.ctypes.data, STATE_SPEC, nsub)
            else:
                mj.mj_setState(m, d, row, STATE_SPEC)
                mj.mj_step(m, d, nsub)
            if nsub:
                if zero_fingers:
                    d.qpos[sc.finger_qpos] = 0.0
                bad = any(warn[w].number for w in self._bad)
                if bad or not (np.isfinite(d.qpos).all() and np.isfinite(d.qvel).all()):
                    # MuJoCo resets a diverged simulation to the model default; we restore the
                    # episode's own start instead (the caller finishes that reset).
                    unstable[b] = True
                    continue
            if lib is not None:
                _mjloop.kinematics_and_get_state(lib.kinematics, lib.get_state, m._address,
                                                 d._address, row.ctypes.data, STATE_SPEC)
            else:
                mj.mj_kinematics(m, d)
                mj.mj_getState(m, d, row, STATE_SPEC)
            out.grip[b] = d.site_xpos[sc.grip_site]
            out.link_pos[b] = d.xpos[sc.link_body]
            out.link_quat[b] = d.xquat[sc.link_body]
            if sc.has_object:
                out.obj[b] = d.site_xpos[sc.object_site]
            out.fingers[b] = d.qpos[sc.finger_qpos]
            out.geom_xpos[b] = d.geom_xpos
            out.geom_xmat[b] = d.geom_xmat

    def run(self, phys: np.ndarray, rows: np.ndarray, nsub: int, zero_fingers: bool, out,
            unstable: np.ndarray) -> None:
        """Advance ``phys[rows]`` by ``nsub`` physics steps (0: kinematics only), optionally zero
        the finger joints, recompute the kinematic fields of ``out``; rows whose simulation
        diverged are flagged in ``unstable`` and left unchanged."""
        rows = np.asarray(rows, np.int64)
        if rows.size == 0:
            return
        if not phys.flags.c_contiguous:
            raise ValueError("phys: must be C-contiguous")
        if self._pool is None or rows.size < 2 or nsub == 0 and rows.size < 16:
            self._rows(phys, rows, nsub, zero_fingers, out, unstable)
            return
        # The threads, this one included, take the rows one at a time from one shared iterator
        # (its next() is atomic under the GIL): rows whose contacts make them slower (0.35 to
        # 0.9 ms) no longer leave one thread idle at the end of a fixed split.
        shared = iter(rows.tolist())
        work = lambda: self._rows(phys, shared, nsub, zero_fingers, out, unstable)  # noqa: E731
        self._pool.run_all([work] * min(self.threads, self._pool.workers + 1, rows.size))


# ---------------------------------------------------------------------------------------------
# episode sampling (Numba, one random stream per episode)

@njit(cache=True, nogil=True)
def sample_episodes(seeds, rows, initial_grip, height_offset, has_object, goal_range,
                    object_range, object_min_dist, air_prob, air_height, jitter, cam_default,
                    cam_jitter, goal, object_xy, camera):
    """Goal, object xy and front camera for each row (fetch_reach.md section 4 and
    fetch_pick_and_place.md section 4, in the reference's order of draws).

    cam_default: (azimuth, elevation, distance, lookat x, y, z); cam_jitter: (azimuth,
    elevation, distance, lookat) half-ranges. camera rows get the same 6 numbers."""
    for k in range(rows.shape[0]):
        b = rows[k]
        s = seed_state(np.uint64(seeds[k]), np.uint64(1))
        if has_object:
            for _ in range(10000):
                s, u = uniform01(s)
                dx = (2.0 * u - 1.0) * object_range
                s, u = uniform01(s)
                dy = (2.0 * u - 1.0) * object_range
                if dx * dx + dy * dy >= object_min_dist * object_min_dist:
                    break
            object_xy[b, 0] = initial_grip[0] + dx
            object_xy[b, 1] = initial_grip[1] + dy
        for a in range(3):
            s, u = uniform01(s)
            goal[b, a] = initial_grip[a] + (2.0 * u - 1.0) * goal_range
        if has_object:
            goal[b, 2] = height_offset
            s, u = uniform01(s)
            if u < air_prob:
                s, u = uniform01(s)
                goal[b, 2] += u * air_height
        for a in range(6):
            camera[b, a] = cam_default[a]
        if jitter:
            for a in range(6):
                s, u = uniform01(s)
                camera[b, a] += (2.0 * u - 1.0) * cam_jitter[min(a, 3)]


# ---------------------------------------------------------------------------------------------
# the discrete action -> controls of one control step (Numba)

@njit(cache=True, nogil=True)
def apply_actions(kind, floats, ints, rows, move_kind, phys, ofs_qpos, ofs_ctrl, ofs_mocap_pos,
                  ofs_mocap_quat, actuator_qpos, link_pos, link_quat, gripper_cmd, feedback,
                  simulate):
    """Map the parsed move and gripper actions of the rows where ``rows`` is true onto the
    physics vectors (the step template in core handles errors and stop; ``simulate`` says which
    rows then run physics). move and gripper re-anchor the mocap to the gripper_link's current
    pose, add 0.05 m x payload and the (1, 0, 1, 0) quaternion term, and set each finger
    actuator to its joint position + the sticky command (fetch_reach.md section 6)."""
    for b in range(kind.shape[0]):
        simulate[b] = False
        if not rows[b]:
            continue
        dx = 0.0
        dy = 0.0
        dz = 0.0
        if kind[b] == move_kind:
            dx = floats[b, 0]
            dy = floats[b, 1]
            dz = floats[b, 2]
            if not (np.isfinite(dx) and np.isfinite(dy) and np.isfinite(dz)) or max(
                    abs(dx), abs(dy), abs(dz)) > 1.0:
                feedback[b] = 4
                continue
        else:
            # ('gripper', 0) opens (+1), ('gripper', 1) closes (-1); the command is sticky.
            gripper_cmd[b] = 1.0 if ints[b, 0] == 0 else -1.0
        phys[b, ofs_mocap_pos + 0] = link_pos[b, 0] + STEP_M * dx
        phys[b, ofs_mocap_pos + 1] = link_pos[b, 1] + STEP_M * dy
        phys[b, ofs_mocap_pos + 2] = link_pos[b, 2] + STEP_M * dz
        for a in range(4):
            phys[b, ofs_mocap_quat + a] = link_quat[b, a] + (1.0 if a % 2 == 0 else 0.0)
        for a in range(actuator_qpos.shape[0]):
            phys[b, ofs_ctrl + a] = phys[b, ofs_qpos + actuator_qpos[a]] + gripper_cmd[b]
        simulate[b] = True


@njit(cache=True, nogil=True)
def within(points, goal, threshold, out):
    """out[b] = |points[b] - goal[b]| < threshold (strictly)."""
    for b in range(points.shape[0]):
        d = 0.0
        for a in range(3):
            e = points[b, a] - goal[b, a]
            d += e * e
        out[b] = np.sqrt(d) < threshold


# ---------------------------------------------------------------------------------------------
# oracles (Numba), closed-loop: each call reads the current state and writes, per active row, an
# action code and, for MOVE, the payload in grid units (payload = units / PAYLOAD_GRID, each
# in [-1, 1]), so the plans are short decimal strings that parse back to exactly the floats
# the oracle stepped with.

MOVE = 0
OPEN = 1
CLOSE = 2
STOP = 3
PAYLOAD_GRID = 20        # payload resolution 1/20 (2.5 mm of nominal displacement)
EFFECTIVE_STEP = 0.033   # measured displacement per unit payload in steady motion (spec §6)

# Pick-and-place geometry (measured on the pick-and-place scene, spec §3): the gripper points
# down and its fingers open along world y; each finger box spans x +-0.0135 and, at finger joint
# q, |y| from 0.0009 + q to 0.0149 + q around the grip site; fingertips are 0.0185 m below the
# grip site; the palm is 0.052 m above it; the cube's half-size is 0.025 m.
FINGER_HALF_X = 0.0135
FINGER_INNER = 0.0009
FINGER_OUTER = 0.0149
FINGER_BELOW = 0.0185
FINGER_OPEN = 0.05       # finger joint when fully open
CUBE_HALF = 0.025
CONTACT_MARGIN = 0.004   # kept between a finger and the cube while approaching
# Pick-and-place tunables.
GRASP_DZ = 0.025         # grip site above the cube centre when closing (fingertips at 6 mm)
CLEAR_DZ = 0.05          # grip site above the cube centre when a finger must pass over the cube
ALIGN_TOL = 0.02         # x and y error at which the fingers close
HEIGHT_TOL = 0.012       # grip height error at which the fingers close
PRECLOSE_DZ = 0.03       # ... or this far above it when the next step descends onto the cube
PRECLOSE_TOL = 0.016     # ... with the cube this well centred between the fingers in y
OPEN_MIN = 0.08          # finger opening (sum of both joints) needed before closing
SETTLE = 0.3             # payload scale of the step after closing (the fingers reach the cube)
LIFT = 0.015             # the carried cube's centre stays this far above its resting height
HELD_MIN = 0.035         # a closed grip narrower than this holds nothing
HELD_DIST = 0.06         # a cube farther than this from the grip site is not held

# stage[b] of staged_grasp_actions
APPROACH = 0
SETTLING = 1
CARRY = 2


@njit(cache=True, inline="always")
def _units(error):
    """Grid units of the payload that moves ``error`` metres in one step (clipped to 1)."""
    v = error / EFFECTIVE_STEP
    if v > 1.0:
        v = 1.0
    elif v < -1.0:
        v = -1.0
    return np.int64(np.floor(v * PAYLOAD_GRID + 0.5))


@njit(cache=True, nogil=True)
def proportional_reach_actions(grip, goal, radius, threshold, stall, prev, active, codes, units):
    """The reach oracle: stop once the grip is within ``radius`` of the goal, or within
    ``threshold`` with the last move gaining less than ``stall`` (a goal below the lowest grip
    height); else move every axis at once by its error (at most one unit payload per axis, so
    the last moves are fractional). ``prev`` (float64[B], +inf at first) keeps each row's last
    distance."""
    for b in range(grip.shape[0]):
        if not active[b]:
            continue
        d = 0.0
        for a in range(3):
            d += (goal[b, a] - grip[b, a]) ** 2
        d = np.sqrt(d)
        if d < radius or (d < threshold and prev[b] - d < stall):
            codes[b] = STOP
            continue
        prev[b] = d
        codes[b] = MOVE
        for a in range(3):
            units[b, a] = _units(goal[b, a] - grip[b, a])


@njit(cache=True, inline="always")
def _sweeps_cube(ex, ey, grip_z, obj_z, ux, uy, uz, inner, outer):
    """Would a finger pass through the cube (with CONTACT_MARGIN) during a move of ``units``
    from a grip whose xy error to the cube is (ex, ey)? Checked at five points along the
    move's predicted path."""
    dx = ux * EFFECTIVE_STEP / PAYLOAD_GRID
    dy = uy * EFFECTIVE_STEP / PAYLOAD_GRID
    dz = uz * EFFECTIVE_STEP / PAYLOAD_GRID
    top = obj_z + CUBE_HALF + CONTACT_MARGIN
    for k in range(5):
        s = 0.25 * k
        if grip_z + s * dz - FINGER_BELOW >= top:
            continue
        px = abs(ex - s * dx)
        py = abs(ey - s * dy)
        if (px < FINGER_HALF_X + CUBE_HALF + CONTACT_MARGIN
                and py > inner - CUBE_HALF - CONTACT_MARGIN
                and py < outer + CUBE_HALF + CONTACT_MARGIN):
            return True
    return False


@njit(cache=True, nogil=True)
def _path_sweeps_cube(ex, ey, grip_z, obj_z, grasp_z, inner, outer):
    """Would a finger pass through the cube on the way from here to the grasp pose, going
    straight down to ``grasp_z`` while closing the xy error (ex, ey) as the approach does
    (predicted step by step)?"""
    for _ in range(12):
        ux = _units(ex)
        uy = _units(ey)
        uz = _units(grasp_z - grip_z)
        if ux == 0 and uy == 0 and uz == 0:
            return False
        if _sweeps_cube(ex, ey, grip_z, obj_z, ux, uy, uz, inner, outer):
            return True
        ex -= ux * EFFECTIVE_STEP / PAYLOAD_GRID
        ey -= uy * EFFECTIVE_STEP / PAYLOAD_GRID
        grip_z += uz * EFFECTIVE_STEP / PAYLOAD_GRID
    return False


@njit(cache=True, nogil=True)
def staged_grasp_actions(grip, obj, goal, fingers, gripper_cmd, rest_z, stage, active, codes,
                         units):
    """One step of the pick-and-place oracle for the active rows (stop rows are decided by the
    caller). Stages:
    - APPROACH: open the fingers unless the sticky command is already open; move the grip to
      the cube's xy and down to grasp height, every axis at once, going below the height where
      a finger clears the cube's top only if no finger passes through the cube on the predicted
      way down (the cube slides between the open fingers along x, or they straddle it in y);
      close once aligned at grasp height, or one step above it with the cube well centred.
    - SETTLING (the step after closing, while the fingers reach the cube): descend onto the
      cube if closed above grasp height, else a slow step (SETTLE) towards the goal.
    - CARRY: move the cube towards the goal, never lower than ``rest_z`` + LIFT, so that it is
      not dragged on the table. A cube that is not held (fingers closed on nothing, or the cube
      away from the grip) restarts the approach.
    ``stage`` (int64[B]) is -1 before a row's first call, which derives the stage from the state
    alone (a held cube is carried on), so a plan can start from any mid-episode state."""
    for b in range(grip.shape[0]):
        if not active[b]:
            continue
        opening = fingers[b, 0] + fingers[b, 1]
        d = 0.0
        for a in range(3):
            d += (obj[b, a] - grip[b, a]) ** 2
        held = gripper_cmd[b] < 0 and opening > HELD_MIN and np.sqrt(d) < HELD_DIST
        st = stage[b]
        if st < 0:   # first call
            st = CARRY if held else APPROACH
        elif st == CARRY and not held:
            st = APPROACH
        if st == APPROACH:
            if gripper_cmd[b] <= 0:
                codes[b] = OPEN
                stage[b] = st
                continue
            ex = obj[b, 0] - grip[b, 0]
            ey = obj[b, 1] - grip[b, 1]
            grasp_z = obj[b, 2] + GRASP_DZ
            ez = grasp_z - grip[b, 2]
            if abs(ex) <= ALIGN_TOL and abs(ey) <= ALIGN_TOL and opening >= OPEN_MIN and (
                    abs(ez) <= HEIGHT_TOL
                    or (ez < 0 and -ez <= PRECLOSE_DZ and abs(ey) <= PRECLOSE_TOL)):
                codes[b] = CLOSE
                stage[b] = SETTLING
                continue
            # Straight to grasp height if no finger sweeps through the cube on the way; else
            # stay at (or rise to) the height where the fingers pass over it; else only rise.
            inner = min(fingers[b, 0], fingers[b, 1]) + FINGER_INNER
            outer = max(fingers[b, 0], fingers[b, 1], FINGER_OPEN) + FINGER_OUTER
            clear_z = max(grasp_z, obj[b, 2] + CLEAR_DZ)
            ux = _units(ex)
            uy = _units(ey)
            uz = _units(grasp_z - grip[b, 2])
            if _path_sweeps_cube(ex, ey, grip[b, 2], obj[b, 2], grasp_z, inner, outer):
                uz = _units(clear_z - grip[b, 2])
                if _sweeps_cube(ex, ey, grip[b, 2], obj[b, 2], ux, uy, uz, inner, outer):
                    ux = 0
                    uy = 0
            codes[b] = MOVE
            units[b, 0] = ux
            units[b, 1] = uy
            units[b, 2] = uz
            stage[b] = st
            continue
        codes[b] = MOVE
        if st == SETTLING and grip[b, 2] - (obj[b, 2] + GRASP_DZ) > HEIGHT_TOL:
            # Closed above grasp height: descend onto the cube while the fingers close.
            units[b, 0] = _units(obj[b, 0] - grip[b, 0])
            units[b, 1] = _units(obj[b, 1] - grip[b, 1])
            units[b, 2] = _units(obj[b, 2] + GRASP_DZ - grip[b, 2])
            stage[b] = CARRY
            continue
        for a in range(3):
            target = goal[b, a]
            if a == 2:
                target = max(target, rest_z + LIFT)
            u = _units(target - obj[b, a])
            if st == SETTLING:
                u = np.int64(np.floor(u * SETTLE + 0.5))
            units[b, a] = u
        stage[b] = CARRY
