"""Fetch at scale: ``backend="mjx"`` of the Fetch families measured on one accelerator.

Per batch size B (default 1,024, 4,096 and 8,192; padded to a power of two by the MJX stepper):
- compile time, apart: the first step's wall time (the jitted batch step is traced and compiled
  there; JAX's persistent cache, which the MJX backend enables, makes a later process load it)
  minus one steady step, with env construction and reset timed separately;
- env-steps/s without frames (the physics path: action mapping, MJX step on the device, the
  copy-back of the moved rows; the rasterizer is bypassed for these steps only);
- env-steps/s with frames (every moved row redrawn by the CPU rasterizer after each step, as
  ``BatchEnv.step`` does), the rasterizer alone on the whole batch (CPU frames/s), and where the
  pipeline's bound is: the stage with the lower rate (the two run one after the other in a step,
  so the with-frames rate is about 1 / (1/physics + 1/frames));
- device memory from ``jax.Device.memory_stats()`` where the backend reports it (GPUs do, XLA:CPU
  does not), and the process's peak host RSS (the frame buffer lives on the host: B x 480 x 960 x
  3 bytes, 11.3 GB at B=8,192).
Plus agreement with the CPU backend at a small batch (``--agree-batch``, same seeds and a short
action sequence without a grasp, as tests/test_fetch_mjx.py): grip, cube and geom positions
within POS_TOL = 1 cm and finger joints within FINGER_TOL = 3 mm (the tolerances of that test,
argued from spec/envs/fetch_pick_and_place.md section 13: MJX-JAX float32 deviates 2 mm - 2 cm
from the reference over whole episodes), identical feedback and success flags.

``--time-budget-s`` bounds the whole run: before each batch size the script predicts its cost
from the previous one (compile time, plus the stepping time scaled by the batch ratio) and skips
it, saying so, when it would not fit. The JSON report is rewritten after every batch size (to
``$OUT/mjx_gpu.json`` when OUT is set, else ``--json``), so a run cut short keeps what it
measured. A short table is printed last.

    python -m visgym.bench mjx-gpu --batches 1024,4096,8192 --steps 20 --task fetch_pick_and_place
    bench/mjx_gpu.sh      # on the GPU machine: offline installs, build, then this script

NOT YET RUN ON A GPU: no accelerator was available when this was written; it has only run on a
2-core CPU at tiny batches (``--batches 2 --steps 3``, tests/test_mjx_gpu_script.py), where MJX
compiles in ~30 s and steps at ~2 env-steps/s. The GPU figures are still to be measured.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time

import numpy as np

TASKS = ("fetch_reach", "fetch_pick_and_place")
# The tolerances of tests/test_fetch_mjx.py (see the module docstring).
POS_TOL = 0.01
FINGER_TOL = 0.003
# Agreement actions: open, right, down, backward, close, up (no grasp with these seeds: the cube
# is out of reach for seeds 3 and 4, and a straight sequence keeps the others away from it too).
AGREE_ACTIONS = {
    "fetch_pick_and_place": ["('gripper', 0)", "('move', [1, 0, 0])", "('move', [0, 0, -1])",
                             "('move', [0, -1, 0])", "('gripper', 1)", "('move', [0, 0, 1])"],
    "fetch_reach": ["('move', [0, 0, -1])", "('move', [1, 1, 0])", "('move', [0, -1, 0])",
                    "('move', [-1, 0, 1])"],
}
AGREE_SEED0 = 3


def _cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (None where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name")), None)
    except OSError:
        return None


def _version(package: str) -> str | None:
    """An installed distribution's version (None when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _machine() -> dict:
    import jax

    out = {"python": platform.python_version(), "cores": os.cpu_count(),
           "jax": jax.__version__, "jax_backend": jax.default_backend(),
           "devices": [str(d) for d in jax.devices()],
           "device_kind": jax.devices()[0].device_kind}
    out["cpu"] = _cpu_model()
    for name in ("mujoco", "mujoco-mjx", "numpy", "numba"):
        out[name.replace("-", "_")] = _version(name)
    return out


def _memory() -> dict:
    """Device memory (bytes) as JAX reports it, plus the host's peak RSS."""
    import jax

    out = {"host_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:   # noqa: BLE001  (not every backend implements it)
        stats = None
    out["device_stats_available"] = bool(stats)
    for key in ("bytes_in_use", "peak_bytes_in_use", "bytes_limit", "bytes_reserved"):
        if stats and key in stats:
            out[f"device_{key}"] = int(stats[key])
    return out


def _action_lists(task: str, batch: int, count: int, seed: int) -> list:
    """``count`` action lists for the batch: random unit moves (and gripper commands in
    pick-and-place), never a stop, so every row is simulated on every step."""
    rng = np.random.default_rng(seed)
    pool = [f"('move', [{x}, {y}, {z}])" for x in (-1, 0, 1) for y in (-1, 0, 1)
            for z in (-1, 0, 1) if (x, y, z) != (0, 0, 0)]
    if task == "fetch_pick_and_place":
        pool += ["('gripper', 0)", "('gripper', 1)"]
    return [[pool[j] for j in rng.integers(len(pool), size=batch)] for _ in range(count)]


def _make(task: str, batch: int, backend: str):
    from .. import make

    return make(f"{task}/easy", num_envs=batch, autoreset="disabled", max_steps=None,
                backend=backend)


def _unstable(feedback) -> int:
    return sum(1 for f in feedback if "unstable" in f)


class _NoFrames:
    """Within the block, steps leave the frames as they are (the rasterizer is bypassed)."""

    def __init__(self, env):
        self.family = env.family

    def __enter__(self):
        self.family.render_after_step = lambda state, frames, work: None

    def __exit__(self, *exc):
        del self.family.render_after_step


def bench_batch(task: str, batch: int, steps: int, frame_steps: int, frames: bool,
                seed: int = 0) -> dict:
    from ..kernels import fetch_mjx

    t0 = time.perf_counter()
    env = _make(task, batch, "mjx")
    make_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    env.reset(seeds=range(batch))
    reset_s = time.perf_counter() - t0
    lists = _action_lists(task, batch, max(steps, frame_steps) + 1, seed)
    unstable = 0
    with _NoFrames(env):
        t0 = time.perf_counter()
        out = env.step(lists[0])
        first_step_s = time.perf_counter() - t0
        unstable += _unstable(out[4]["feedback"])
        t0 = time.perf_counter()
        for actions in lists[1:steps + 1]:
            unstable += _unstable(env.step(actions)[4]["feedback"])
        phys_s = (time.perf_counter() - t0) / steps
    row = {"batch": batch, "padded_batch": fetch_mjx._bucket(batch),
           "batching": env.family._mjx.batching, "make_s": make_s, "reset_s": reset_s,
           "first_step_s": first_step_s, "compile_s": max(first_step_s - phys_s, 0.0),
           "steps": steps, "step_s": phys_s, "env_steps_per_s": batch / phys_s}
    if frames:
        rows = np.arange(batch, dtype=np.int64)
        t0 = time.perf_counter()
        env.family.render_rows(env.state, env.frames, rows, env.work)
        render_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for actions in lists[1:frame_steps + 1]:
            unstable += _unstable(env.step(actions)[4]["feedback"])
        framed_s = (time.perf_counter() - t0) / frame_steps
        cpu_fps = batch / render_s
        drawn = int(np.count_nonzero(env.frames[:, ::16, ::16].any(axis=(1, 2, 3))))
        row["frames"] = {
            "frame_shape": list(env.frame_shape), "steps": frame_steps, "step_s": framed_s,
            "env_steps_per_s": batch / framed_s, "render_s": render_s,
            "cpu_frames_per_s": cpu_fps, "frames_drawn": drawn,
            "bound": "cpu rasterizer" if cpu_fps < row["env_steps_per_s"] else "mjx physics",
            # With the two stages overlapped (rasterizer on the CPU while the device steps),
            # the slower one would set the rate.
            "overlapped_ceiling_env_steps_per_s": min(cpu_fps, row["env_steps_per_s"]),
        }
    row["unstable_rows"] = unstable
    row["memory"] = _memory()
    row["total_s"] = make_s + reset_s + first_step_s + phys_s * steps + (
        row["frames"]["render_s"] + row["frames"]["step_s"] * frame_steps if frames else 0.0)
    return row


def agreement(task: str, batch: int) -> dict:
    """Same seeds and actions on both backends at a small batch: the largest deviations after
    every step, against the tolerances of tests/test_fetch_mjx.py."""
    envs = {b: _make(task, batch, b) for b in ("cpu", "mjx")}
    seeds = list(range(AGREE_SEED0, AGREE_SEED0 + batch))
    for env in envs.values():
        env.reset(seeds=seeds)
    worst = {"grip": 0.0, "obj": 0.0, "fingers": 0.0, "geom_xpos": 0.0}
    same_feedback = same_success = True
    t0 = time.perf_counter()
    for action in AGREE_ACTIONS[task]:
        out = {b: env.step([action] * batch) for b, env in envs.items()}
        same_feedback &= out["cpu"][4]["feedback"] == out["mjx"][4]["feedback"]
        same_success &= bool(np.array_equal(out["cpu"][4]["success"], out["mjx"][4]["success"]))
        for field in worst:
            diff = np.abs(getattr(envs["mjx"].state, field) - getattr(envs["cpu"].state, field))
            worst[field] = max(worst[field], float(diff.max()))
    moved = float(np.abs(envs["mjx"].state.grip - envs["mjx"].family.scene.initial_grip).max())
    within = {f: worst[f] <= (FINGER_TOL if f == "fingers" else POS_TOL) for f in worst}
    return {"batch": batch, "seeds": seeds, "actions": AGREE_ACTIONS[task],
            "max_abs_m": worst, "pos_tol_m": POS_TOL, "finger_tol_m": FINGER_TOL,
            "within_tol": within, "same_feedback": bool(same_feedback),
            "same_success": bool(same_success), "grip_moved_m": moved,
            "passed": bool(all(within.values()) and same_feedback and same_success
                           and moved > 0.02),
            "seconds": time.perf_counter() - t0}


def _predict(prev: dict, batch: int) -> float:
    """Seconds the next batch size is expected to take: a compile like the last one's (20 %
    margin) plus everything else scaled by the batch ratio."""
    ratio = batch / prev["batch"]
    return 1.2 * prev["compile_s"] + (prev["total_s"] - prev["compile_s"]) * ratio


def _write(path: str | None, report: dict) -> None:
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=2)
    os.replace(tmp, path)


def table(report: dict) -> str:
    lines = [f"{'batch':>6} {'compile s':>9} {'steps/s':>10} {'+frames/s':>10} "
             f"{'CPU frames/s':>12} {'bound':>14} {'device MiB':>10}"]
    for r in report["results"]:
        fr = r.get("frames")
        mem = r["memory"].get("device_peak_bytes_in_use")
        lines.append(
            f"{r['batch']:>6} {r['compile_s']:>9.1f} {r['env_steps_per_s']:>10,.1f} "
            f"{fr['env_steps_per_s'] if fr else float('nan'):>10,.1f} "
            f"{fr['cpu_frames_per_s'] if fr else float('nan'):>12,.1f} "
            f"{fr['bound'] if fr else '-':>14} "
            f"{'n/a' if mem is None else f'{mem / 2**20:,.0f}':>10}")
    return "\n".join(lines)


def _batches(text: str) -> list:
    try:
        out = [int(b) for b in text.split(",")]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise SystemExit(f"--batches: expected positive integers separated by commas, "
                         f"e.g. 1024,4096,8192, got {text!r}")
    return out


def run(args) -> int:
    start = time.perf_counter()
    batches = _batches(args.batches)
    for name in ("steps", "frame_steps"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')}: expected at least 1, "
                             f"got {getattr(args, name)}")
    if args.agree_batch < 0:
        raise SystemExit(f"--agree-batch: expected 0 (off) or more, got {args.agree_batch}")
    if args.time_budget_s <= 0:
        raise SystemExit(f"--time-budget-s: expected a positive number, got {args.time_budget_s}")
    out_dir = os.environ.get("OUT")
    path = os.path.join(out_dir, "mjx_gpu.json") if out_dir else args.json
    if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise SystemExit(f"--json: the folder of {path} does not exist")

    machine = _machine()
    gpu = machine["jax_backend"] in ("gpu", "cuda", "rocm", "tpu")
    report = {"suite": "mjx-gpu", "task": args.task, "env_id": f"{args.task}/easy",
              "machine": machine, "accelerator": gpu, "batches_requested": batches,
              "steps": args.steps, "frame_steps": args.frame_steps, "frames": args.frames,
              "time_budget_s": args.time_budget_s, "agreement": None, "results": [],
              "skipped": [], "complete": False}
    print(f"mjx-gpu: {args.task}/easy on {machine['jax_backend']} ({machine['device_kind']}), "
          f"jax {machine['jax']}, mujoco {machine.get('mujoco')}, "
          f"{machine['cores']} CPU cores" + ("" if gpu else "  [no accelerator: CPU run]"),
          flush=True)
    _write(path, report)
    if args.agree_batch:
        report["agreement"] = a = agreement(args.task, args.agree_batch)
        print(f"agreement with the CPU backend at B={a['batch']}: "
              f"{'PASS' if a['passed'] else 'FAIL'} (max |d| grip {a['max_abs_m']['grip']:.2e} m, "
              f"obj {a['max_abs_m']['obj']:.2e} m, geoms {a['max_abs_m']['geom_xpos']:.2e} m "
              f"<= {POS_TOL} m; fingers {a['max_abs_m']['fingers']:.2e} m <= {FINGER_TOL} m; "
              f"feedback {'same' if a['same_feedback'] else 'DIFFERENT'})", flush=True)
        _write(path, report)
    prev = None
    for batch in batches:
        elapsed = time.perf_counter() - start
        need = _predict(prev, batch) if prev else 0.0
        if elapsed >= args.time_budget_s or elapsed + need > args.time_budget_s:
            reason = (f"predicted {need:.0f} s with {elapsed:.0f} s of the "
                      f"{args.time_budget_s:.0f} s budget used")
            report["skipped"].append({"batch": batch, "reason": reason})
            print(f"B={batch}: skipped, {reason}", flush=True)
            continue
        row = bench_batch(args.task, batch, args.steps, args.frame_steps, args.frames)
        row["predicted_s"] = need
        report["results"].append(row)
        prev = row
        fr = row.get("frames")
        print(f"B={batch}: compile {row['compile_s']:.1f} s, {row['env_steps_per_s']:,.1f} "
              f"env-steps/s without frames" + (
                  f", {fr['env_steps_per_s']:,.1f} with frames ({fr['cpu_frames_per_s']:,.1f} "
                  f"CPU frames/s, bound: {fr['bound']})" if fr else ""), flush=True)
        _write(path, report)
    report["elapsed_s"] = time.perf_counter() - start
    report["complete"] = True
    _write(path, report)
    print(f"elapsed {report['elapsed_s']:.1f} s" + (f"; json: {path}" if path else ""))
    print(table(report), flush=True)
    failed = report["agreement"] is not None and not report["agreement"]["passed"]
    return 1 if failed else 0


def add_parser(sub) -> None:
    p = sub.add_parser("mjx-gpu", help="Fetch on MJX at large batches on one accelerator")
    configure(p)


def configure(p) -> None:
    p.add_argument("--batches", default="1024,4096,8192")
    p.add_argument("--steps", type=int, default=20, help="timed steps without frames")
    p.add_argument("--frame-steps", type=int, default=3,
                   help="timed steps with frames (each redraws the whole batch on the CPU)")
    p.add_argument("--task", choices=TASKS, default="fetch_pick_and_place")
    p.add_argument("--frames", action=argparse.BooleanOptionalAction, default=True,
                   help="also measure with frames from the CPU rasterizer")
    p.add_argument("--agree-batch", type=int, default=4,
                   help="batch of the agreement check with the CPU backend (0: skip)")
    p.add_argument("--time-budget-s", type=float, default=480.0,
                   help="stop adding batch sizes when the next would not fit")
    p.add_argument("--json", default=None, help="report path (ignored when $OUT is set)")
    p.set_defaults(run=run)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m visgym.bench.mjx_gpu")
    configure(p)
    args = p.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
