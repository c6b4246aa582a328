"""Evaluation-loop throughput against a local OpenAI-compatible server with a fixed latency.

``python -m visgym.bench.eval --concurrency 64 --latency-ms 50 --episodes 128`` starts the fake
chat-completions server of ``tests/fake_openai.py`` as a subprocess (solver policy: every reply is
the correct next action, so episodes run their natural length; the given latency before every
answer), runs ``visgym eval``'s runner with the OpenAI agent on the shipped split (episodes are
reused with distinct keys when more than the split's 70 are asked for), and prints

* requests/s achieved, the ideal ``min(concurrency, episodes) / latency`` and their ratio;
* the runner's own mean loop overhead per step (run.json ``loop_overhead_ms_per_step``: prompt
  building, JPEG encoding, reply parsing and this episode's share of the batched env step, not
  time spent waiting for the server);
* env ``step_calls`` against steps (the micro-batching), episodes, success rate and wall time.

The ratio falls short of 1 for two reasons besides overhead: episodes differ in length (13 to 25
steps here), so the last wave runs with fewer than ``concurrency`` requests in flight; and the
server and the client share the machine's cores. ``--json FILE`` writes the figures as JSON.

Needs a source checkout (the server lives in ``tests/``).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVER = Path(__file__).resolve().parents[1] / "tests" / "fake_openai.py"


def _start_server(latency_ms: float, env_id: str, folder: str):
    if not SERVER.exists():
        raise SystemExit(f"bench eval: {SERVER} not found (needs a source checkout)")
    port_file = os.path.join(folder, "port")
    log = open(os.path.join(folder, "server.log"), "w")
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port-file", port_file,
                             "--policy", "solver", "--latency-ms", str(latency_ms),
                             "--register", env_id, "--no-record"],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            log.close()
            raise SystemExit("bench eval: the fake server did not start:\n"
                             + open(os.path.join(folder, "server.log")).read())
        time.sleep(0.05)
    with open(port_file) as f:
        port = int(f.read())
    return proc, log, f"http://127.0.0.1:{port}/v1"


def _episodes(task: str, split: str, n: int) -> list:
    from ..bridges.splits import load_split

    base = load_split(task, split)
    return [dataclasses.replace(base[i % len(base)], key=f"{task}/{split}#{i}", index=i)
            for i in range(n)]


def run(concurrency: int, latency_ms: float, episodes: int, task: str = "maze_2d",
        split: str = "easy", out: str | None = None, processes: int = 1) -> dict:
    from ..bridges.agents import make_agent
    from ..bridges.evaluate import EvalConfig, run_eval

    with tempfile.TemporaryDirectory(prefix="visgym-bench-eval-") as folder:
        proc, log, base_url = _start_server(latency_ms, f"{task}/{split}", folder)
        try:
            specs = _episodes(task, split, episodes)
            out_dir = out or os.path.join(folder, "run")
            agent = make_agent("openai", model="fake", base_url=base_url,
                               api_key_env="VISGYM_BENCH_UNUSED_KEY", timeout_s=60.0)
            # --concurrency is the total in flight, shared by the processes.
            config = EvalConfig(out=out_dir, split=split, gifs=False, progress=False,
                                concurrency=max(1, concurrency // processes),
                                processes=processes)
            start = time.perf_counter()
            run_eval(agent, config, specs, {"command": "python -m visgym.bench.eval"})
            wall = time.perf_counter() - start
            with open(os.path.join(out_dir, "run.json")) as f:
                info = json.load(f)
            with open(os.path.join(out_dir, "episodes.jsonl")) as f:
                records = [json.loads(line) for line in f]
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
    requests = sum(s["attempts"] for r in records for s in r["steps_log"])
    latency = latency_ms / 1000.0
    ideal = min(concurrency, episodes) / latency if latency > 0 else float("inf")
    achieved = requests / wall
    return {
        "task": f"{task}/{split}", "episodes": len(records), "concurrency": concurrency,
        "latency_ms": latency_ms, "requests": requests, "steps": info["steps"],
        "step_calls": info["step_calls"], "wall_s": round(wall, 3),
        "requests_per_s": round(achieved, 2), "ideal_requests_per_s": round(ideal, 2),
        "ratio": round(achieved / ideal, 4) if ideal != float("inf") else None,
        "loop_overhead_ms_per_step": info["loop_overhead_ms_per_step"],
        "success_rate": round(sum(r["success"] for r in records) / len(records), 4),
        "mean_steps": round(info["steps"] / len(records), 2),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                    "processor": platform.processor() or platform.machine()},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m visgym.bench.eval",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--task", default="maze_2d")
    parser.add_argument("--split", choices=["easy", "hard"], default="easy")
    parser.add_argument("--processes", type=int, default=1,
                        help="runner processes sharing the concurrency")
    parser.add_argument("--out", default=None, help="keep the run directory here")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.episodes < 1 or args.latency_ms < 0:
        parser.error("--concurrency and --episodes must be >= 1, --latency-ms >= 0")
    result = run(args.concurrency, args.latency_ms, args.episodes, args.task, args.split,
                 args.out, args.processes)
    print(f"eval loop: {result['task']}, {result['episodes']} episodes, concurrency "
          f"{result['concurrency']} in {args.processes} process(es), server latency "
          f"{result['latency_ms']:g} ms "
          f"({result['machine']['cores']} cores)")
    print(f"  requests/s achieved   {result['requests_per_s']:10.1f}  ({result['requests']} requests)")
    print(f"  ideal (conc./latency) {result['ideal_requests_per_s']:10.1f}")
    print(f"  ratio                 {result['ratio']:10.3f}" if result["ratio"] is not None
          else "  ratio                        n/a")
    print(f"  loop overhead/step    {result['loop_overhead_ms_per_step']:10.3f} ms")
    print(f"  env step calls        {result['step_calls']:10d}  for {result['steps']} steps")
    print(f"  success rate          {100 * result['success_rate']:9.1f}%  "
          f"(mean {result['mean_steps']} steps)")
    print(f"  wall time             {result['wall_s']:10.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
