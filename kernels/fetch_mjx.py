"""MJX (JAX) backend of the Fetch scenes (spec/envs/fetch_reach.md and fetch_pick_and_place.md,
section 13): the MJX variant of the model, derived programmatically from the gymnasium-robotics
MJCF that the CPU backend loads, and a batched stepper that advances a whole batch with one jitted
function (``jax.vmap`` over episodes, the 20 substeps inside ``lax.fori_loop``).

The model variant (``derive_model``), all changes made on the compiled MjModel, no XML copied:
- every robot mesh geom (arm, torso, head, base, gripper_link) is taken out of collision
  (contype = conaffinity = 0) and its margin zeroed: MJX-JAX has no (PLANE, MESH) / (BOX, MESH)
  margin support, and the stock model's mesh pairs make MJX allocate ~126 GB. The contacts that
  occur in the reference's episodes (fingers-table, fingers-cube, cube-table, base-floor) are
  kept, except base-floor, which is irrelevant (the base is pinned by its slide damping);
- the finger boxes keep their 0.001 margin (the spec: zeroing it changed grasp outcomes);
  box-box and box-plane margins are supported by MJX-JAX;
- the Newton solver runs at most ``ITERATIONS`` iterations with ``LS_ITERATIONS`` line-search
  steps (the stock 100 / 50 bound MJX's while-loops; a handful of contacts converge in a few).

The settled start state (construction-time settling, fetch_reach.md section 4) is computed once
with MuJoCo C on this same derived model (``fetch_sim.load_scene(..., variant="mjx")``) and every
MJX episode starts from it plus the sampled object/goal, as on the CPU backend.

The stepper (``MjxStepper``) keeps the batch's simulation state on the device between steps (the
integration state of the last batch it advanced). The State's float64 ``phys`` vector stays the
episode's source of truth on the host (so copies, row resets, ``state_dicts`` and goal frames
work unchanged); after every step the new integration state is written back to it, and on the
next step only the rows the host changed since then (new episodes, loaded states) and the
controls/mocap written by the action mapping are uploaded. Copied back per step: the integration
state of the moved rows, grip/link/object/finger positions and the geom poses the rasterizer
draws. Rows whose state turns non-finite are reported as unstable and left untouched, so the
caller restarts that episode (same feedback as the CPU backend); ``vmap`` keeps them from
affecting the rest of the batch.

Compilation: one compile per (padded batch size, finger zeroing); batch sizes are padded to a
power of two. JAX's persistent compilation cache is enabled under the user cache directory
(``$XDG_CACHE_HOME/visgym/jax``, default ``~/.cache/visgym/jax``) unless the process already
configured one, so later processes skip most of the compile.
"""
from __future__ import annotations

import importlib.util
import os
import threading

import numpy as np

from ..core.validate import one_of

ITERATIONS = 4        # Newton iterations per substep (stock 100)
LS_ITERATIONS = 8     # line-search iterations (stock 50)
IMPLS = ("jax", "warp")


def check_impl(impl) -> str:
    """Validate the ``impl`` keyword: "jax" (MJX-JAX) or "warp" (MuJoCo Warp through MJX)."""
    one_of("impl", impl, IMPLS)
    if impl == "warp":
        missing = [p for p in ("warp", "mujoco_warp") if importlib.util.find_spec(p) is None]
        if missing:
            raise ValueError(f"impl: 'warp' needs the {' and '.join(missing)} package(s), which "
                             f"are not installed here (pip install mujoco-warp); use impl='jax'")
    return impl


def derive_model(model):
    """Turn a freshly loaded Fetch MjModel (modified in place and returned) into its MJX
    variant: robot mesh geoms out of collision with zero margin, few solver iterations."""
    import mujoco

    mesh = int(mujoco.mjtGeom.mjGEOM_MESH)
    for g in range(model.ngeom):
        body = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.geom_bodyid[g])) or ""
        if int(model.geom_type[g]) == mesh and body.startswith("robot0:"):
            model.geom_contype[g] = 0
            model.geom_conaffinity[g] = 0
            model.geom_margin[g] = 0.0
            model.geom_gap[g] = 0.0
    model.opt.iterations = ITERATIONS
    model.opt.ls_iterations = LS_ITERATIONS
    return model


_cache_lock = threading.Lock()
_cache_done = False


def enable_compilation_cache() -> None:
    """JAX's persistent compilation cache under the user cache dir (never the repository)."""
    global _cache_done
    with _cache_lock:
        if _cache_done:
            return
        _cache_done = True
        import jax

        if jax.config.jax_compilation_cache_dir:
            return
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "visgym", "jax")
        try:
            os.makedirs(path, exist_ok=True)
        except OSError:
            return
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def _state_offsets(model):
    import mujoco

    out = {}
    pos = 0
    for bit in range(15):
        out[1 << bit] = pos
        pos += mujoco.mj_stateSize(model, 1 << bit)
    st = mujoco.mjtState
    return {"time": out[int(st.mjSTATE_TIME)], "qpos": out[int(st.mjSTATE_QPOS)],
            "qvel": out[int(st.mjSTATE_QVEL)], "warm": out[int(st.mjSTATE_WARMSTART)],
            "ctrl": out[int(st.mjSTATE_CTRL)], "mocap_pos": out[int(st.mjSTATE_MOCAP_POS)],
            "mocap_quat": out[int(st.mjSTATE_MOCAP_QUAT)]}


# The compiled step functions, shared by every stepper of the process:
# (id of the scene, impl, padded batch, nsub, zero_fingers) -> jitted function.
_compiled: dict = {}
_device_models: dict = {}


def _bucket(n: int) -> int:
    b = 1
    while b < n:
        b *= 2
    return b


class MjxStepper:
    """Advances rows of a batch of physics vectors with MJX; same ``run`` contract as
    ``fetch_sim.CpuStepper`` (the scene must be the MJX variant, ``variant="mjx"``)."""

    def __init__(self, scene, impl: str = "jax", batching: str = "auto"):
        check_impl(impl)
        enable_compilation_cache()
        import jax

        if batching not in ("auto", "vmap", "map"):
            raise ValueError(f"batching: expected 'auto', 'vmap' or 'map', got {batching!r}")
        if batching == "auto":
            # On XLA:CPU a vmapped MJX step is slower than stepping the episodes one after the
            # other inside the same jitted function (measured at B=2: 1.45 s vs 0.74 s per
            # control step); accelerators want the vmap.
            batching = "map" if jax.default_backend() == "cpu" else "vmap"
        self.batching = batching

        self.scene = scene
        self.impl = impl
        m = scene.model
        self.nq, self.nv, self.nu, self.nmocap = m.nq, m.nv, m.nu, m.nmocap
        self.ofs = _state_offsets(m)
        key = (id(scene), impl)
        if key not in _device_models:
            from mujoco import mjx

            mx = mjx.put_model(m, impl=impl)
            d0 = mjx.make_data(mx, impl=impl)
            _device_models[key] = (mx, d0)
        self.mx, self.d0 = _device_models[key]
        self._jax = jax
        # Device-resident batch: (padded size, dict of device arrays) and the host copy of the
        # integration rows as last written back (to detect rows the host changed since).
        self._dev = None
        self._host_seen = None
        self._phys_id = None

    # -- the jitted batch step --------------------------------------------------------
    def _function(self, batch, nsub, zero_fingers):
        key = (id(self.scene), self.impl, self.batching, batch, nsub, zero_fingers)
        fn = _compiled.get(key)
        if fn is not None:
            return fn
        import jax
        import jax.numpy as jnp
        from mujoco import mjx

        sc = self.scene
        finger = jnp.asarray(sc.finger_qpos)
        grip_site, link_body = sc.grip_site, sc.link_body
        obj_site = sc.object_site if sc.has_object else sc.grip_site

        def one(mx, d0, time, qpos, qvel, warm, ctrl, mpos, mquat, active):
            d = d0.replace(time=time, qpos=qpos, qvel=qvel, qacc_warmstart=warm, ctrl=ctrl,
                           mocap_pos=mpos, mocap_quat=mquat)
            if nsub:
                d = jax.lax.fori_loop(0, nsub, lambda _, x: mjx.step(mx, x), d)
                if zero_fingers:
                    d = d.replace(qpos=d.qpos.at[finger].set(0.0))
            d = mjx.kinematics(mx, d)
            ok = (jnp.isfinite(d.qpos).all() & jnp.isfinite(d.qvel).all()
                  & jnp.isfinite(d.qacc_warmstart).all() & jnp.isfinite(d.geom_xpos).all())
            keep = active & ok
            sel = lambda new, old: jnp.where(keep, new, old)  # noqa: E731
            new = {"time": sel(d.time, time), "qpos": sel(d.qpos, qpos),
                   "qvel": sel(d.qvel, qvel), "warm": sel(d.qacc_warmstart, warm)}
            kin = {"grip": d.site_xpos[grip_site], "link_pos": d.xpos[link_body],
                   "link_quat": d.xquat[link_body], "obj": d.site_xpos[obj_site],
                   "fingers": d.qpos[finger], "geom_xpos": d.geom_xpos,
                   "geom_xmat": d.geom_xmat.reshape(-1, 9)}
            return new, kin, ok

        if self.batching == "vmap":
            def batch_fn(mx, d0, dev, ctrl, mpos, mquat, active):
                return jax.vmap(one, in_axes=(None, None, 0, 0, 0, 0, 0, 0, 0, 0))(
                    mx, d0, dev["time"], dev["qpos"], dev["qvel"], dev["warm"], ctrl, mpos,
                    mquat, active)
        else:
            def batch_fn(mx, d0, dev, ctrl, mpos, mquat, active):
                return jax.lax.map(lambda a: one(mx, d0, *a), (
                    dev["time"], dev["qpos"], dev["qvel"], dev["warm"], ctrl, mpos, mquat,
                    active))

        fn = jax.jit(batch_fn)
        _compiled[key] = fn
        return fn

    # -- host <-> device --------------------------------------------------------------
    def _integration(self, phys):
        o = self.ofs
        return {"time": phys[:, o["time"]],
                "qpos": phys[:, o["qpos"]:o["qpos"] + self.nq],
                "qvel": phys[:, o["qvel"]:o["qvel"] + self.nv],
                "warm": phys[:, o["warm"]:o["warm"] + self.nv]}

    def _sync_in(self, phys, padded):
        """Device integration state for the padded batch: reuse the resident arrays, upload
        only the rows whose host copy changed since the last write-back."""
        import jax.numpy as jnp

        b = phys.shape[0]
        host = self._integration(phys)
        flat = np.concatenate([host["time"][:, None], host["qpos"], host["qvel"], host["warm"]],
                              axis=1)
        if (self._dev is None or self._dev[0] != padded or self._host_seen is None
                or self._host_seen.shape != flat.shape or self._phys_id != id(phys)):
            dev = {k: jnp.asarray(np.concatenate(
                [v, np.repeat(v[:1], padded - b, 0)]) if padded > b else v, jnp.float32)
                for k, v in host.items()}
            self._dev = (padded, dev)
            return dev
        dev = self._dev[1]
        changed = np.flatnonzero((flat != self._host_seen).any(axis=1))
        if changed.size:
            dev = {k: dev[k].at[changed].set(jnp.asarray(host[k][changed], jnp.float32))
                   for k in dev}
        return dev

    def run(self, phys, rows, nsub, zero_fingers, out, unstable) -> None:
        """Advance ``phys[rows]`` by ``nsub`` physics steps (0: kinematics only), optionally zero
        the finger joints, recompute the kinematic fields of ``out``; rows whose simulation
        diverged are flagged in ``unstable`` and left unchanged. The whole (padded) batch goes
        through one jitted call; rows outside ``rows`` keep their state."""
        import jax.numpy as jnp

        rows = np.asarray(rows, np.int64)
        if rows.size == 0:
            return
        b = phys.shape[0]
        padded = _bucket(b)
        o = self.ofs
        active = np.zeros(padded, np.bool_)
        active[rows] = True

        def pad(a):
            return np.concatenate([a, np.repeat(a[:1], padded - b, 0)]) if padded > b else a

        dev = self._sync_in(phys, padded)
        ctrl = pad(phys[:, o["ctrl"]:o["ctrl"] + self.nu])
        mpos = pad(phys[:, o["mocap_pos"]:o["mocap_pos"] + 3 * self.nmocap]).reshape(
            padded, self.nmocap, 3)
        mquat = pad(phys[:, o["mocap_quat"]:o["mocap_quat"] + 4 * self.nmocap]).reshape(
            padded, self.nmocap, 4)
        fn = self._function(padded, int(nsub), bool(zero_fingers))
        new, kin, ok = fn(self.mx, self.d0, dev, jnp.asarray(ctrl, jnp.float32),
                          jnp.asarray(mpos, jnp.float32), jnp.asarray(mquat, jnp.float32),
                          jnp.asarray(active))
        self._dev = (padded, new)
        self._phys_id = id(phys)
        # Copy back only the moved rows: their integration state and what frames and feedback
        # need (one device->host transfer of the gathered rows).
        idx = jnp.asarray(rows)
        host_new, host_kin, host_ok = self._jax.device_get(
            ({k: v[idx] for k, v in new.items()}, {k: v[idx] for k, v in kin.items()}, ok[idx]))
        host_ok = np.asarray(host_ok, np.bool_)
        good = rows[host_ok]
        unstable[rows[~host_ok]] = True
        g = host_ok
        phys[good, o["time"]] = host_new["time"][g]
        phys[good, o["qpos"]:o["qpos"] + self.nq] = host_new["qpos"][g]
        phys[good, o["qvel"]:o["qvel"] + self.nv] = host_new["qvel"][g]
        phys[good, o["warm"]:o["warm"] + self.nv] = host_new["warm"][g]
        out.grip[good] = host_kin["grip"][g]
        out.link_pos[good] = host_kin["link_pos"][g]
        out.link_quat[good] = host_kin["link_quat"][g]
        if self.scene.has_object:
            out.obj[good] = host_kin["obj"][g]
        out.fingers[good] = host_kin["fingers"][g]
        out.geom_xpos[good] = host_kin["geom_xpos"][g]
        out.geom_xmat[good] = host_kin["geom_xmat"][g]
        # Unstable rows: the device keeps their old state (masked above); the caller restarts
        # them on the host, which the next call uploads.
        flat = self._integration(phys)
        self._host_seen = np.concatenate([flat["time"][:, None], flat["qpos"], flat["qvel"],
                                          flat["warm"]], axis=1).copy()
