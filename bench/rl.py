"""RL-layer costs: stepping a mixed-task batch against the same rows as separate BatchEnvs
(issue 26: at most 10% more), shaped rewards and state hashes against a plain step, and a
fork against a reset of the same rows.

    python -m visgym.bench rl --mix maze_2d/easy:128,jigsaw/easy:128 --repeat 5
    python -m visgym.bench rl --fork maze_2d/easy,counting/easy --rows 64

Every comparison is interleaved (A, B, A, B, ...) in one process with the same actions, so the
machine's drift hits both sides alike; the medians and the ratio are printed.
"""
from __future__ import annotations

import statistics
import time

import numpy as np


def _parse_mix(text: str) -> dict:
    tasks = {}
    for part in text.split(","):
        env_id, _, n = part.strip().rpartition(":")
        if not env_id or not n.isdigit():
            raise SystemExit(f"--mix: expected id:count[,id:count...], got {text!r}")
        tasks[env_id] = int(n)
    return tasks


def _pools(envs, rng, size=64):
    """Per env, ``size`` action lists (each row's solver first action or a random valid one)."""
    from .step import _action_pool

    out = []
    for env in envs:
        pool = _action_pool(env, rng, 512)
        out.append([[pool[int(rng.integers(len(pool)))] for _ in range(env.num_envs)]
                    for _ in range(size)])
    return out


def _timed(step, rounds: int) -> float:
    t0 = time.perf_counter()
    for k in range(rounds):
        step(k)
    return time.perf_counter() - t0


def bench_mix(tasks: dict, seconds: float, repeat: int, **options) -> dict:
    """env-steps/s of a MixedEnv and of the same tasks as separate BatchEnvs (stepped one after
    another, as a user without mixing would), interleaved."""
    import visgym

    rng = np.random.default_rng(0)
    mix = visgym.make_mixed(tasks, **options)
    separate = [visgym.make(t, n, **options) for t, n in tasks.items()]
    seeds = list(range(mix.num_envs))
    mix.reset(seeds=seeds)
    start = 0
    for env in separate:
        env.reset(seeds=seeds[start:start + env.num_envs])
        start += env.num_envs
    pools = _pools(separate, rng)
    joined = [sum((pool[k] for pool in pools), []) for k in range(len(pools[0]))]

    def mixed_step(k):
        mix.step(joined[k % len(joined)])

    def separate_step(k):
        for env, pool in zip(separate, pools):
            env.step(pool[k % len(pool)])

    mixed_step(0)
    separate_step(0)
    per_step = _timed(mixed_step, 5) / 5
    rounds = max(3, int(seconds / max(per_step, 1e-6)))
    rates = {"mixed": [], "separate": []}
    for _ in range(repeat):
        for name, fn in (("mixed", mixed_step), ("separate", separate_step)):
            rates[name].append(mix.num_envs * rounds / _timed(fn, rounds))
    mixed = statistics.median(rates["mixed"])
    sep = statistics.median(rates["separate"])
    return {"tasks": tasks, "mixed": mixed, "separate": sep, "overhead": sep / mixed - 1,
            "frame_bytes": mix.frame_bytes(), "padded_bytes": int(np.prod(
                (mix.num_envs, *mix.frames.capacity, 3)))}


def bench_options(env_id: str, batch: int, seconds: float, repeat: int) -> dict:
    """env-steps/s of one task with the sparse reward and no hash, with state hashes (the
    default), and with shaped rewards and hashes, interleaved."""
    import visgym

    variants = {"plain": dict(state_hash=False), "hash": dict(state_hash=True),
                "progress+hash": dict(state_hash=True, reward="progress")}
    envs = {k: visgym.make(env_id, batch, **v) for k, v in variants.items()}
    rng = np.random.default_rng(1)
    for env in envs.values():
        env.reset(seeds=range(batch))
    pool = _pools([envs["plain"]], rng)[0]
    rates = {k: [] for k in envs}
    probe = envs["plain"]
    per_step = _timed(lambda k: probe.step(pool[k % len(pool)]), 5) / 5
    rounds = max(3, int(seconds / max(per_step, 1e-6)))
    for _ in range(repeat):
        for name, env in envs.items():
            rates[name].append(batch * rounds / _timed(
                lambda k, env=env: env.step(pool[k % len(pool)]), rounds))
    return {"env": env_id, "batch": batch,
            **{k: statistics.median(v) for k, v in rates.items()}}


def bench_fork(env_id: str, rows: int, repeat: int) -> dict:
    """Seconds to fork ``rows`` rows from one mid-episode source, against resetting them."""
    import visgym

    batch = rows + 1
    env = visgym.make(env_id, batch, autoreset="disabled", max_steps=None)
    env.reset(seeds=range(batch))
    env.step([p[0] for p in env.solve()])
    dst = list(range(1, batch))
    src = [0] * rows
    env.fork(src, dst)
    env.reset(seeds=range(rows), rows=dst)
    times = {"fork": [], "reset": []}
    for k in range(repeat):
        t0 = time.perf_counter()
        env.fork(src, dst)
        times["fork"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        env.reset(seeds=range(1000 * k, 1000 * k + rows), rows=dst)
        times["reset"].append(time.perf_counter() - t0)
    fork = statistics.median(times["fork"])
    reset = statistics.median(times["reset"])
    return {"env": env_id, "rows": rows, "fork_ms": 1e3 * fork, "reset_ms": 1e3 * reset,
            "ratio": fork / reset}


def run(args) -> int:
    if args.mix:
        tasks = _parse_mix(args.mix)
        result = bench_mix(tasks, args.seconds, args.repeat)
        print(f"mix {args.mix}: mixed {result['mixed']:,.0f} env-steps/s, separate BatchEnvs "
              f"{result['separate']:,.0f}; mixing costs {100 * result['overhead']:+.1f}% "
              f"(frames {result['frame_bytes'] / 2**20:.1f} MiB in the tasks' buffers; "
              f"{result['padded_bytes'] / 2**20:.1f} MiB as one padded array)")
    for env_id in filter(None, (args.options or "").split(",")):
        r = bench_options(env_id, args.batch, args.seconds, args.repeat)
        print(f"{env_id} B={args.batch}: plain {r['plain']:,.0f}, with state_hash "
              f"{r['hash']:,.0f} ({100 * (r['plain'] / r['hash'] - 1):+.1f}%), progress + hash "
              f"{r['progress+hash']:,.0f} ({100 * (r['plain'] / r['progress+hash'] - 1):+.1f}%) "
              f"env-steps/s")
    for env_id in filter(None, (args.fork or "").split(",")):
        r = bench_fork(env_id, args.rows, args.repeat)
        print(f"{env_id}: fork of {r['rows']} rows {r['fork_ms']:.2f} ms, reset of the same "
              f"rows {r['reset_ms']:.2f} ms (fork/reset {r['ratio']:.2f})")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("rl", help="mixed batches, shaped rewards and hashes, forks")
    p.add_argument("--mix", default=None, help="id:count[,id:count...]: mixed vs separate")
    p.add_argument("--options", default=None,
                   help="ids: step rate plain, with state_hash, with reward='progress'")
    p.add_argument("--fork", default=None, help="ids: fork vs reset of --rows rows")
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seconds", type=float, default=1.0, help="per timed run")
    p.add_argument("--repeat", type=int, default=5)
    p.set_defaults(run=run)
