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
* the server's CPU seconds while the runner ran (``/proc/<pid>/stat`` utime + stime, read
  before the server is stopped, its set-up excluded), so the split between client and server
  is visible;
* env ``step_calls`` against steps (the micro-batching), episodes, success rate and wall time.

The server is ``fake_openai.py --fast`` by default (``--server full`` for the threaded test
server). The bench measures the client, and the server shares the machine's cores with it: the
full test server parses every request's JSON (the whole history, resent every turn) and decodes
every image, which at 64 x 50 ms on 2 cores took 4.8-5.6 s of CPU out of an 11 s run. The fast
server answers the same solver replies from the raw body (the first and last image data URLs
looked up in the registered frames; asyncio, no JSON parsing, no image decoding) in 1.3-1.6 s,
and the ratio rose by about 0.02-0.05 (success rate unchanged at 93%).

The ratio falls short of 1 besides overhead because episodes differ in length (13 to 25 steps
here), so the last wave runs with fewer than ``concurrency`` requests in flight (with the
shipped maze_2d/easy split and 768 episodes this alone caps it at 0.93 with two processes), and
because with ``--processes`` the child runners start later (a fresh interpreter importing
visgym and openai and building its env, ~0.8 s) inside the timed run. ``--http-transport``
picks the OpenAI agent's HTTP client (``auto``: the lean transport). ``--json FILE`` writes the
figures as JSON.

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


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux /proc), None where unavailable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime, stime


def stop_server(proc, log, timeout_s: float = 10.0) -> None:
    """Terminate a benchmark's server process (killed if it has not stopped after
    ``timeout_s``) and close its log file."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def launch_server(cmd: list, folder: str, label: str, timeout_s: float = 120.0):
    """Start a benchmark's server ``cmd`` (which takes ``--port-file``), its log in
    ``folder``/server.log; returns (process, log file, log path, port) once it has written its
    port file."""
    port_file = os.path.join(folder, "port")
    log_path = os.path.join(folder, "server.log")
    log = open(log_path, "w")
    proc = subprocess.Popen([*cmd, "--port-file", port_file], stdout=log,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            log.close()
            raise SystemExit(f"{label}: the server did not start:\n" + open(log_path).read())
        time.sleep(0.05)
    with open(port_file) as f:
        return proc, log, log_path, int(f.read())


def launch_fake_server(args: list, folder: str, label: str):
    """Start tests/fake_openai.py with ``args`` (a source checkout's); returns (process, log
    file, log path, base URL) once it listens."""
    if not SERVER.exists():
        raise SystemExit(f"{label}: {SERVER} not found (needs a source checkout)")
    proc, log, log_path, port = launch_server([sys.executable, str(SERVER), *args], folder,
                                              label)
    return proc, log, log_path, f"http://127.0.0.1:{port}/v1"


def _start_server(latency_ms: float, env_id: str, folder: str, server: str = "fast"):
    proc, log, _, url = launch_fake_server(
        ["--policy", "solver", "--latency-ms", str(latency_ms), "--register", env_id,
         "--no-record"] + ["--fast"] * (server == "fast"), folder, "bench eval")
    return proc, log, url


def _episodes(task: str, split: str, n: int) -> list:
    from ..bridges.splits import load_split

    base = load_split(task, split)
    return [dataclasses.replace(base[i % len(base)], key=f"{task}/{split}#{i}", index=i)
            for i in range(n)]


def run(concurrency: int, latency_ms: float, episodes: int, task: str = "maze_2d",
        split: str = "easy", out: str | None = None, processes: int = 1,
        server: str = "fast", http_transport: str = "auto") -> dict:
    from ..bridges.agents import make_agent
    from ..bridges.evaluate import EvalConfig, run_eval

    with tempfile.TemporaryDirectory(prefix="visgym-bench-eval-") as folder:
        proc, log, base_url = _start_server(latency_ms, f"{task}/{split}", folder, server)
        server_cpu_start = _cpu_s(proc.pid)   # after the set-up (plans, frames)
        server_cpu = None
        try:
            specs = _episodes(task, split, episodes)
            out_dir = out or os.path.join(folder, "run")
            agent = make_agent("openai", model="fake", base_url=base_url,
                               api_key_env="VISGYM_BENCH_UNUSED_KEY", timeout_s=60.0,
                               http_transport=http_transport)
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
            server_cpu_end = _cpu_s(proc.pid)
            if server_cpu_start is not None and server_cpu_end is not None:
                server_cpu = server_cpu_end - server_cpu_start
        finally:
            stop_server(proc, log)
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
        "server": server, "server_cpu_s": None if server_cpu is None else round(server_cpu, 2),
        "http_transport": info.get("http_transport"), "client_shards": info.get("client_shards"),
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
    parser.add_argument("--server", choices=["fast", "full"], default="fast",
                        help="fake server: fast (asyncio, reads the raw body) or full (the "
                        "threaded test server that parses every body and decodes every image)")
    parser.add_argument("--http-transport", choices=["auto", "lean", "httpx"], default="auto")
    parser.add_argument("--out", default=None, help="keep the run directory here")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.episodes < 1 or args.latency_ms < 0:
        parser.error("--concurrency and --episodes must be >= 1, --latency-ms >= 0")
    result = run(args.concurrency, args.latency_ms, args.episodes, args.task, args.split,
                 args.out, args.processes, args.server, args.http_transport)
    print(f"eval loop: {result['task']}, {result['episodes']} episodes, concurrency "
          f"{result['concurrency']} in {args.processes} process(es), server latency "
          f"{result['latency_ms']:g} ms "
          f"({result['machine']['cores']} cores)")
    print(f"  requests/s achieved   {result['requests_per_s']:10.1f}  ({result['requests']} requests)")
    print(f"  ideal (conc./latency) {result['ideal_requests_per_s']:10.1f}")
    print(f"  ratio                 {result['ratio']:10.3f}" if result["ratio"] is not None
          else "  ratio                        n/a")
    print(f"  loop overhead/step    {result['loop_overhead_ms_per_step']:10.3f} ms")
    cpu = result["server_cpu_s"]
    print(f"  server CPU s          {cpu:10.2f}  ({args.server} server; client: "
          f"{result['http_transport']} transport, {result['client_shards']} client(s))"
          if cpu is not None else "  server CPU s                 n/a")
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
