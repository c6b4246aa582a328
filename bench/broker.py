"""Broker throughput: env-steps/s of many single-episode callers batched by ``core.broker``,
against the batched env's own rate in the same run.

Three measurements on the same kind of env (``--env``, or a mixed env from ``--mix``) with
``--callers`` rows: the env stepped alone (every row each call, ended episodes restarted with
``reset(rows=...)``), then that many asyncio coroutines on one event loop, then that many threads,
each running its own episode through one Broker and restarting it when it ends. Every caller
(and the batched baseline) takes its actions from the same precomputed list per row (random
well-formed actions of the row's task, a stop now and then), so the figures differ only by the
cost of brokering. Each broker figure is also given as a fraction of the batched rate.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time

import numpy as np

from .step import _action_pool, _machine

POOL = 512   # actions per row, cycled


def parse_mix(text: str) -> dict:
    """"maze_2d/easy:128,jigsaw/easy:128" -> {"maze_2d/easy": 128, "jigsaw/easy": 128}."""
    out = {}
    for part in text.split(","):
        env_id, sep, count = part.strip().rpartition(":")
        if not sep or not env_id or not count.isdigit() or int(count) < 1:
            raise SystemExit(f"--mix: expected 'env_id:count,...' such as "
                             f"'maze_2d/easy:128,jigsaw/easy:128', got {part.strip()!r}")
        out[env_id] = out.get(env_id, 0) + int(count)
    return out


def make_env(args):
    import visgym

    if args.mix:
        make_mixed = getattr(visgym, "make_mixed", None)
        if make_mixed is None:
            raise SystemExit("--mix needs visgym.make_mixed (the mixed env, core/mixed.py), "
                             "which this checkout does not have yet")
        return make_mixed(parse_mix(args.mix), autoreset="disabled", max_steps=args.max_steps)
    return visgym.make(args.env, num_envs=args.callers, autoreset="disabled",
                       max_steps=args.max_steps)


def row_pools(env, seed: int = 0) -> list[list[str]]:
    """Per row, a list of valid actions of the row's task (a mixed env's ``info["task"]``
    indexes its ``task_ids``)."""
    import visgym

    rng = np.random.default_rng(seed)
    _, info = env.reset(seeds=range(env.num_envs))
    if "task" not in info:
        pool = _action_pool(env, rng, POOL * 4)
        return [[pool[j] for j in rng.integers(len(pool), size=POOL)]
                for _ in range(env.num_envs)]
    tasks = [env.task_ids[t] for t in np.asarray(info["task"]).tolist()]
    by_task = {}
    for task in dict.fromkeys(tasks):
        by_task[task] = _action_pool(visgym.make(task, num_envs=1), rng, POOL * 4)
    return [[by_task[t][j] for j in rng.integers(len(by_task[t]), size=POOL)] for t in tasks]


def bench_batched(env, pools, seconds: float) -> dict:
    """The env alone: all rows each call; ended episodes restarted by reset(rows=...)."""
    n = env.num_envs
    env.reset(seeds=range(n))
    next_seed = n
    steps = calls = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    k = 0
    while time.perf_counter() < deadline:
        actions = [pool[k % POOL] for pool in pools]
        _, _, terminated, truncated, _ = env.step(actions)
        k += 1
        calls += 1
        steps += n
        ended = np.flatnonzero(terminated | truncated)
        if ended.size:
            env.reset(rows=ended, seeds=range(next_seed, next_seed + ended.size))
            next_seed += ended.size
    elapsed = time.perf_counter() - t0
    return {"env_steps_per_s": steps / elapsed, "env_step_calls": calls, "seconds": elapsed}


def _counted(broker, steps: int, elapsed: float, calls0: int) -> dict:
    calls = broker.env_steps - calls0
    return {"env_steps_per_s": steps / elapsed, "env_step_calls": calls,
            "mean_batch": steps / max(calls, 1), "seconds": elapsed}


def bench_async(env, pools, seconds: float, window_s: float, inline: bool) -> dict:
    from ..core.broker import Broker

    broker = Broker(env, window_s=window_s, inline=inline)
    n = env.num_envs
    counts = [0] * n

    slots = [broker.open() for _ in range(n)]   # every caller's slot open before any steps

    async def caller(k: int, deadline: float):
        pool = pools[k]
        with slots[k] as slot:
            await broker.areset(slot, seed=k)
            seed = k + n
            i = 0
            while time.perf_counter() < deadline:
                _, _, terminated, truncated, _ = await broker.astep(slot, pool[i % POOL])
                i += 1
                if terminated or truncated:
                    await broker.areset(slot, seed=seed)
                    seed += n
            counts[k] = i

    async def main():
        start = time.perf_counter()
        await asyncio.gather(*[caller(k, start + seconds) for k in range(n)])
        return time.perf_counter() - start

    calls0 = broker.env_steps
    elapsed = asyncio.run(main())
    broker.shutdown()
    return _counted(broker, sum(counts), elapsed, calls0)


def bench_threads(env, pools, seconds: float, window_s: float, inline: bool) -> dict:
    from ..core.broker import Broker

    broker = Broker(env, window_s=window_s, inline=inline)
    n = env.num_envs
    counts = [0] * n
    go = threading.Event()
    box = {}

    slots = [broker.open() for _ in range(n)]

    def caller(k: int):
        pool = pools[k]
        with slots[k] as slot:
            broker.reset(slot, seed=k)
            go.wait()
            deadline = box["deadline"]
            seed = k + n
            i = 0
            while time.perf_counter() < deadline:
                _, _, terminated, truncated, _ = broker.step(slot, pool[i % POOL])
                i += 1
                if terminated or truncated:
                    broker.reset(slot, seed=seed)
                    seed += n
            counts[k] = i

    threads = [threading.Thread(target=caller, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    while broker.env_resets == 0:
        time.sleep(0.001)
    time.sleep(0.05)   # the first resets go through
    calls0 = broker.env_steps
    start = time.perf_counter()
    box["deadline"] = start + seconds
    go.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    broker.shutdown()
    return _counted(broker, sum(counts), elapsed, calls0)


def run(args) -> int:
    env = make_env(args)
    what = f"mix {args.mix}" if args.mix else args.env
    pools = row_pools(env)
    m = _machine()
    print(f"machine: {m['cpu']}, {m['cores']} cores, python {m['python']}, numpy {m['numpy']}, "
          f"numba {m['numba']}")
    print(f"env: {what}, {env.num_envs} rows, max_steps {args.max_steps}, {args.seconds:.1f} s "
          f"per measurement (best of {args.repeat}), window {args.window * 1e3:.1f} ms, "
          f"{'inline' if args.inline else 'broker-thread'} flush")
    bench_batched(env, pools, 0.3)   # compile or load the kernels, warm the caches
    rows = {}
    suites = [("batched env", lambda: bench_batched(env, pools, args.seconds))]
    if "async" in args.callers_kind:
        suites.append(("asyncio callers", lambda: bench_async(
            env, pools, args.seconds, args.window, args.inline)))
    if "threads" in args.callers_kind:
        suites.append(("threaded callers", lambda: bench_threads(
            env, pools, args.seconds, args.window, args.inline)))
    for _ in range(max(1, args.repeat)):
        for name, fn in suites:
            r = fn()
            if name not in rows or r["env_steps_per_s"] > rows[name]["env_steps_per_s"]:
                rows[name] = r
    base = rows["batched env"]["env_steps_per_s"]
    print(f"{'':>18} {'env-steps/s':>12} {'of batched':>10} {'env.step calls':>15} "
          f"{'mean batch':>11}")
    for name, r in rows.items():
        r["fraction_of_batched"] = r["env_steps_per_s"] / base
        mean = r.get("mean_batch", env.num_envs)
        print(f"{name:>18} {r['env_steps_per_s']:>12,.0f} {r['fraction_of_batched']:>10.2f} "
              f"{r['env_step_calls']:>15,} {mean:>11.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": m, "env": what, "rows": env.num_envs, "window_s": args.window,
                       "inline": args.inline, "results": rows}, f, indent=2)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("broker", help="env-steps/s of many single-episode callers through the "
                                      "broker, as a fraction of the batched env's own rate")
    p.add_argument("--env", default="maze_2d/easy")
    p.add_argument("--mix", default=None, metavar="SPEC",
                   help="a mixed env instead, e.g. 'maze_2d/easy:128,jigsaw/easy:128' "
                        "(visgym.make_mixed; its total rows are the callers)")
    p.add_argument("--callers", type=int, default=256,
                   help="rows of the env = concurrent callers (ignored with --mix)")
    p.add_argument("--max-steps", type=int, default=50)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="keep the fastest of N windows of each measurement")
    p.add_argument("--window", type=float, default=0.002, metavar="S",
                   help="the broker's window in seconds (default 0.002)")
    p.add_argument("--thread-flush", dest="inline", action="store_false",
                   help="step every batch in the broker's own thread (default: the caller "
                        "that completes a batch steps it)")
    p.add_argument("--only", dest="callers_kind", default="async,threads",
                   help="which broker measurements: 'async', 'threads' or both (default)")
    p.add_argument("--json", default=None)
    p.set_defaults(run=run)
