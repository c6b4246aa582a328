"""OpenEnv server throughput (``python -m visgym.bench serve``): step requests/s and latency of
many concurrent sessions against ``visgym serve``, in the manner of OpenEnv's scaling
measurements (concurrent WebSocket sessions, step requests per second, P50/P99 latency).

The server runs in its own process (``visgym serve --port 0``, ``--workers`` processes); the
load runs in ``--clients`` processes, each holding its share of ``--sessions`` sessions through
OpenEnv's own client (``VisGymClient``, a websockets ``EnvClient``). Every session resets with
its own seed, then steps with random well-formed actions of the task (a stop now and then) and
resets whenever its episode ends, for ``--seconds`` after a warm-up; every observation carries
its JPEG frame. Printed: step requests/s (all sessions), resets/s, step latency P50/P99 as the
client sees it, and the CPU seconds each side used per step.
"""
from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time

import numpy as np

from .eval import _cpu_s, launch_server, stop_server
from .step import _action_pool


def _start_server(args, folder: str):
    cmd = [sys.executable, "-m", "visgym.bridges.cli", "serve", "--tasks", args.env, "--port", "0",
           "--sessions", str(args.sessions_per_worker), "--workers", str(args.workers),
           "--window-ms", str(args.window_ms)]
    proc, log, _, port = launch_server(cmd, folder, "bench serve", timeout_s=300.0)
    time.sleep(0.5 if args.workers > 1 else 0.0)   # the other workers' startup
    return proc, log, port


def _client_process(url: str, env_id: str, sessions: list, warmup: float, seconds: float,
                    conn) -> None:
    """One load process: ``sessions`` (their seeds) as concurrent OpenEnv sessions."""
    from visgym.core.registry import make
    from visgym.integrations.openenv import VisGymAction, VisGymClient

    rng = np.random.default_rng(sessions[0] if sessions else 0)
    pool = [VisGymAction(action=a) for a in _action_pool(make(env_id, 4), rng, 512)]
    latencies, resets, ready = [], [0], [0]
    window = {}

    async def session(seed: int, start: asyncio.Event):
        client = VisGymClient(base_url=url, message_timeout_s=120.0)
        await client.connect()
        result = await client.reset(seed=seed)
        ready[0] += 1
        await start.wait()
        k = seed
        while time.perf_counter() < window["end"]:
            if result.done:
                result = await client.reset()
                if window["start"] <= time.perf_counter():
                    resets[0] += 1
                continue
            k += 1
            sent = time.perf_counter()
            result = await client.step(pool[k % len(pool)])
            if sent >= window["start"]:
                latencies.append(time.perf_counter() - sent)
        await client.close()

    async def run():
        start = asyncio.Event()
        tasks = [asyncio.create_task(session(s, start)) for s in sessions]
        await asyncio.sleep(0)
        # Everyone connected and reset before the clock starts.
        while ready[0] < len(sessions):
            failed = [t for t in tasks if t.done()]
            if failed:
                failed[0].result()       # raises the session's error
            await asyncio.sleep(0.05)
        now = time.perf_counter()
        window["start"], window["end"] = now + warmup, now + warmup + seconds
        cpu0 = time.process_time()
        start.set()
        await asyncio.gather(*tasks)
        return time.process_time() - cpu0

    cpu = asyncio.run(run())
    conn.send({"latencies": latencies, "resets": resets[0], "cpu": cpu})
    conn.close()


def _server_cpu(pid: int) -> float:
    """CPU seconds of the server process and of its children (the workers), from /proc."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(p) for p in f.read().split()]
    except OSError:
        return float("nan")
    return sum(_cpu_s(p) or 0.0 for p in [pid] + children)


def run(args) -> int:
    args.sessions_per_worker = -(-args.sessions // args.workers) + 8
    with tempfile.TemporaryDirectory(prefix="visgym-bench-serve-") as folder:
        proc, log, port = _start_server(args, folder)
        try:
            url = f"http://127.0.0.1:{port}"
            seeds = list(range(args.sessions))
            shares = [seeds[i::args.clients] for i in range(args.clients)]
            ctx = multiprocessing.get_context("fork")
            pipes, procs = [], []
            cpu_before = _server_cpu(proc.pid)
            for share in shares:
                parent, child = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_client_process,
                                args=(url, args.env, share, args.warmup, args.seconds, child))
                p.start()
                pipes.append(parent)
                procs.append(p)
            results = [pipe.recv() for pipe in pipes]
            for p in procs:
                p.join()
            server_cpu = _server_cpu(proc.pid) - cpu_before
        finally:
            stop_server(proc, log, timeout_s=20.0)
    latencies = np.array([x for r in results for x in r["latencies"]])
    steps = len(latencies)
    rate = steps / args.seconds
    figures = {
        "env": args.env, "sessions": args.sessions, "workers": args.workers,
        "clients": args.clients, "seconds": args.seconds, "steps": steps,
        "step_req_per_s": round(rate, 1),
        "resets_per_s": round(sum(r["resets"] for r in results) / args.seconds, 1),
        "p50_ms": round(1e3 * float(np.percentile(latencies, 50)), 2) if steps else None,
        "p99_ms": round(1e3 * float(np.percentile(latencies, 99)), 2) if steps else None,
        "server_cpu_ms_per_step": round(1e3 * server_cpu / max(steps, 1), 3),
        "client_cpu_ms_per_step": round(1e3 * sum(r["cpu"] for r in results) / max(steps, 1),
                                        3),
    }
    print(f"{args.env}: {args.sessions} sessions ({args.workers} server worker(s), "
          f"{args.clients} client process(es)): {rate:,.0f} step req/s, P50 "
          f"{figures['p50_ms']} ms, P99 {figures['p99_ms']} ms, "
          f"{figures['resets_per_s']} resets/s; CPU per step: server "
          f"{figures['server_cpu_ms_per_step']} ms, clients "
          f"{figures['client_cpu_ms_per_step']} ms")
    if args.json:
        print(json.dumps(figures))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("serve", help="OpenEnv server: step requests/s and P50/P99 latency of "
                       "concurrent sessions")
    p.add_argument("--env", default="maze_2d/easy")
    p.add_argument("--sessions", type=int, default=256)
    p.add_argument("--workers", type=int, default=1, help="server processes")
    p.add_argument("--clients", type=int, default=1, help="load-generating processes")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--window-ms", type=float, default=2.0)
    p.add_argument("--json", action="store_true", help="also print the figures as JSON")
    p.set_defaults(run=run)
