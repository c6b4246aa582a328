"""Step throughput: env-steps/s with up-to-date frames for several batch sizes, the single
gymnasium env's per-step latency, and the memory-bandwidth ceiling measured in the same run (how
many frames per second this machine can merely copy), with the ratio between the two, and the
frame bytes an env-step changes (measured over a few untimed steps: what any renderer has to
write) with the write rate those bytes make at the measured speed.

Compile time (first reset and step, Numba JIT or cache load) is reported apart from step time.
Actions are random valid moves with a stop now and then; episodes auto-reset (next-step mode) when
they stop or reach the step budget, so resets and their full redraws are part of the figure.
"""
from __future__ import annotations

import json
import os
import platform
import time

import numpy as np


def _machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import numba
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "numba": numba.__version__}


def _action_pool(env, rng, size=4096):
    """Random well-formed actions of the env's grammar, mostly moves, about 1 in 40 a stop."""
    from ..bridges.gym import ActionText

    space = ActionText(env.grammar, seed=int(rng.integers(2**31)))
    pool = []
    while len(pool) < size:
        action = space.sample()
        if "stop" in action and rng.random() > 0.05:
            continue
        pool.append(action)
    return pool


def bench_batch(env_id: str, batch: int, seconds: float, seed: int = 0,
                make_kwargs: dict | None = None, repeat: int = 1) -> dict:
    from .. import make

    rng = np.random.default_rng(seed)
    env = make(env_id, num_envs=batch, **(make_kwargs or {}))
    pool = _action_pool(env, rng)
    t0 = time.perf_counter()
    env.reset(seeds=range(batch))
    env.step(pool[:batch] if batch <= len(pool) else [pool[0]] * batch)
    compile_s = time.perf_counter() - t0
    # Pre-build action lists so the loop measures the env, not list construction.
    lists = [[pool[j] for j in rng.integers(len(pool), size=batch)] for _ in range(64)]
    best = None
    for _ in range(max(1, repeat)):   # the fastest of ``repeat`` windows (a shared machine)
        steps = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while True:
            for actions in lists:
                env.step(actions)
            steps += len(lists)
            if time.perf_counter() >= deadline:
                break
        elapsed = time.perf_counter() - t0
        if best is None or steps / elapsed > best[0] / best[1]:
            best = (steps, elapsed)
    steps, elapsed = best
    rate = steps * batch / elapsed
    changed = _changed_bytes(env, lists[:8])
    return {"batch": batch, "env_steps_per_s": rate,
            "step_call_us": elapsed / steps * 1e6, "compile_s": compile_s,
            "frame_shape": list(env.frame_shape), "changed_bytes_per_env_step": changed,
            "changed_gb_per_s": changed * rate / 1e9}


def _changed_bytes(env, lists) -> float:
    """Mean bytes of the frames that a step changes, per env-step, over a few untimed steps:
    what any renderer must write to keep the frames up to date (``changed_gb_per_s`` at the
    measured rate says how close to the memory bandwidth a family runs)."""
    before = np.empty_like(env.frames)
    total = 0
    for actions in lists:
        np.copyto(before, env.frames)
        env.step(actions)
        total += int(np.count_nonzero(before != env.frames))
    return total / (len(lists) * env.num_envs)


def bench_single_gym(env_id: str, seconds: float, make_kwargs: dict | None = None) -> dict:
    import gymnasium

    import visgym  # noqa: F401  (registers the ids)

    kwargs = {"max_steps": gymnasium.spec(env_id).max_episode_steps, **(make_kwargs or {})}
    env = gymnasium.make(env_id, **kwargs).unwrapped   # the env itself, with the budget inside
    env.reset(seed=0)
    rng = np.random.default_rng(1)
    pool = _action_pool(env.batch, rng)
    for a in pool[:100]:
        env.step(a)
    steps = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        for a in pool[:256]:
            _, _, terminated, truncated, _ = env.step(a)
            if terminated or truncated:
                env.reset()
        steps += 256
    elapsed = time.perf_counter() - t0
    return {"step_us": elapsed / steps * 1e6, "steps_per_s": steps / elapsed}


def bench_copy_ceiling(frame_shape, seconds: float) -> dict:
    """Frames per second that plain memcpy of frame-sized buffers achieves (256-frame batches,
    larger than the caches, so this is the memory bandwidth)."""
    src = np.random.default_rng(0).integers(0, 255, (256, *frame_shape), dtype=np.uint8)
    dst = np.empty_like(src)
    copies = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        np.copyto(dst, src)
        copies += src.shape[0]
    elapsed = time.perf_counter() - t0
    return {"frames_per_s": copies / elapsed,
            "gb_per_s": copies * src[0].nbytes / elapsed / 1e9}


def run(args) -> int:
    batches = [int(b) for b in args.batch.split(",")]
    make_kwargs = json.loads(args.make_kwargs) if args.make_kwargs else {}
    if not isinstance(make_kwargs, dict):
        raise SystemExit("--make-kwargs: expected a JSON object, e.g. '{\"backend\": \"mjx\"}'")
    if args.max_long_side:
        from ..core.registry import consumer_kwargs

        # The env the evaluation runner and the demonstration synthesizer make for JPEGs of
        # this long side (Family.consumer_overrides): Fetch draws its views at that size.
        make_kwargs = consumer_kwargs(args.env, make_kwargs, args.max_long_side)
    report = {"machine": _machine(), "env": args.env, "make_kwargs": make_kwargs, "results": []}
    m = report["machine"]
    print(f"machine: {m['cpu']}, {m['cores']} cores, python {m['python']}, numpy {m['numpy']}, "
          f"numba {m['numba']}")
    best_of = f" (best of {args.repeat})" if args.repeat > 1 else ""
    kwargs_note = f", make kwargs {make_kwargs}" if make_kwargs else ""
    print(f"env: {args.env}, {args.seconds:.1f} s per measurement{best_of}, random valid "
          f"actions, next-step autoreset{kwargs_note}")
    rows = [bench_batch(args.env, b, args.seconds, make_kwargs=make_kwargs, repeat=args.repeat)
            for b in batches]
    ceiling = bench_copy_ceiling(tuple(rows[0]["frame_shape"]), args.seconds)
    single = bench_single_gym(args.env, args.seconds, make_kwargs)
    print(f"frame {rows[0]['frame_shape']}; copy ceiling: {ceiling['frames_per_s']:,.0f} "
          f"frames/s ({ceiling['gb_per_s']:.1f} GB/s)")
    print(f"{'batch':>7} {'env-steps/s':>14} {'us/step call':>13} {'vs copy':>8} {'compile s':>10}"
          f" {'KB changed':>11} {'GB/s':>6}")
    for r in rows:
        r["ratio_to_copy_ceiling"] = r["env_steps_per_s"] / ceiling["frames_per_s"]
        print(f"{r['batch']:>7} {r['env_steps_per_s']:>14,.0f} {r['step_call_us']:>13.1f} "
              f"{r['ratio_to_copy_ceiling']:>8.2f} {r['compile_s']:>10.2f} "
              f"{r['changed_bytes_per_env_step'] / 1e3:>11.1f} {r['changed_gb_per_s']:>6.2f}")
    print("KB changed: frame bytes an env-step changes (any renderer must write them); GB/s: "
          "those bytes at the measured rate")
    print(f"single gymnasium env: {single['step_us']:.1f} us/step "
          f"({single['steps_per_s']:,.0f} steps/s)")
    report["results"] = rows
    report["copy_ceiling"] = ceiling
    report["single_gym"] = single
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("step", help="env-steps/s with frames per batch size")
    p.add_argument("--env", default="maze_2d/easy")
    p.add_argument("--batch", default="1,16,256,1024")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="measure each batch size N times and report the fastest window "
                        "(the machine's other work only ever slows a window down)")
    p.add_argument("--json", default=None)
    p.add_argument("--make-kwargs", default=None, metavar="JSON",
                   help="keyword arguments for make() as a JSON object, e.g. "
                        "'{\"backend\": \"mjx\"}'")
    p.add_argument("--max-long-side", type=int, default=None, metavar="PX",
                   help="make the env as 'visgym eval' and 'visgym demos' do for images of this "
                        "long side (families that can draw at that size do; default: the "
                        "family's own frames)")
    p.set_defaults(run=run)
