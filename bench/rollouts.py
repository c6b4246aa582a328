"""Rollout-collector throughput against a local policy server with a fixed reply delay.

``python -m visgym.bench rollouts [--concurrency 256] [--delay-ms 50] [--processes N]`` starts
the benchmark server of ``tests/fake_openai.py`` as a subprocess, by its path in the source
checkout (``--fast --rollout-starts``: the solver's reply for every start ``visgym rollouts``
draws, with vLLM-style token ids and log-probabilities, after the delay; asyncio, no JSON
parsing of the request), runs the collector of ``visgym rollouts`` (bridges/rollouts.py, the
``TokenOpenAIAgent`` asking for tokens, a run folder with records and images) on
``maze_2d/easy`` and prints

* the request rate achieved over the server's busy window (first request to last reply, so
  the collector's start-up is left out; the run skips the pre-flight, whose test chat would
  open the window early) against the ideal ``concurrency / delay``, and their ratio (the
  target is 0.8);
* the same over the whole call of ``run_rollouts`` (start-up, planning and warm-up included);
* the collector's own CPU per env step, all in: user + system seconds of this process and of
  its collector processes (getrusage, children reaped before they are read) over the whole
  call, divided by the steps played (env step, frame, JPEG, prompt, HTTP, reply parsing,
  record and image writes; target at most 1 ms), and the server's CPU apart (/proc);
* the same CPU over the server's busy window only (sampled every 20 ms by a thread and
  interpolated at the window's ends), which leaves out the imports, warm-up and planning that
  a run pays once;
* steps, trajectories, success rate and wall time.

The ratio falls short of 1 besides overhead because trajectories differ in length (a group
shares its start, so its members are equally long), so the last wave runs with fewer than
``concurrency`` requests in flight. The server shares the machine's cores with the collector.
``--json FILE`` writes the figures as JSON. Needs a source checkout (the server lives in
``tests/``).
"""
from __future__ import annotations

import json
import multiprocessing
import os
import platform
import resource
import tempfile
import time

from .eval import _cpu_s, launch_fake_server, stop_server

ENV_ID = "maze_2d/easy"


def _start_server(folder: str, delay_ms: float, starts: int, seed: int):
    return launch_fake_server(
        ["--fast", "--logprobs", "--policy", "solver", "--latency-ms", str(delay_ms),
         "--register", ENV_ID, "--rollout-starts", str(starts), "--rollout-seed", str(seed)],
        folder, "bench rollouts")


def _stop_server(proc, log, log_path: str) -> dict:
    """Stop the server; its closing line (requests, busy window) as a dict, {} if missing."""
    stop_server(proc, log)
    with open(log_path) as f:
        for line in reversed(f.read().splitlines()):
            if line.startswith("{"):
                return json.loads(line)
    return {}


def _cpu_self_and_children() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class _CpuSampler:
    """Samples (monotonic time, collector CPU seconds) every ``period_s`` in a thread: this
    process (getrusage) plus its live collector processes (/proc), so the CPU spent inside the
    server's busy window can be read off by interpolation (CLOCK_MONOTONIC is shared by the
    processes of one machine)."""

    def __init__(self, period_s: float = 0.02):
        import threading

        self.samples = []
        self._stop = threading.Event()
        self._period = period_s
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def _now_cpu(self) -> float:
        total = _cpu_self_and_children()     # with the collector processes already reaped
        for child in multiprocessing.active_children():
            total += _cpu_s(child.pid) or 0.0
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self._now_cpu()))
            self._stop.wait(self._period)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        # A last sample, so a window that ends after the thread's last one can still be read.
        self.samples.append((time.monotonic(), self._now_cpu()))

    def at(self, when: float) -> float | None:
        """The CPU seconds at monotonic time ``when`` (linear between samples)."""
        samples = self.samples
        for (t0, c0), (t1, c1) in zip(samples, samples[1:]):
            if t0 <= when <= t1:
                return c0 + (c1 - c0) * ((when - t0) / (t1 - t0) if t1 > t0 else 0.0)
        return None


def _reap_collector_processes(timeout_s: float = 30.0) -> None:
    """Wait for the collector processes to exit (``active_children`` joins the ended ones), so
    their CPU time is in RUSAGE_CHILDREN; the server is no multiprocessing child."""
    deadline = time.monotonic() + timeout_s
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)


def run(concurrency: int = 256, delay_ms: float = 50.0, starts: int = 64, group_size: int = 8,
        processes: int = 1, seed: int = 0, out: str | None = None) -> dict:
    from ..bridges.rollout_policy import TokenOpenAIAgent
    from ..bridges.rollouts import RolloutConfig, run_rollouts

    with tempfile.TemporaryDirectory(prefix="visgym-bench-rollouts-") as folder:
        proc, log, log_path, base_url = _start_server(folder, delay_ms, starts, seed)
        server_cpu_start = _cpu_s(proc.pid)   # after its set-up (plans, frames)
        try:
            out_dir = out or os.path.join(folder, "run")
            os.environ.setdefault("VISGYM_BENCH_UNUSED_KEY", "unused")
            agent = TokenOpenAIAgent(model="fake", base_url=base_url,
                                     api_key_env="VISGYM_BENCH_UNUSED_KEY", timeout_s=60.0)
            config = RolloutConfig(env_ids=[ENV_ID], episodes=starts, group_size=group_size,
                                   out=out_dir, seed=seed, concurrency=concurrency,
                                   processes=processes, progress=False,
                                   # Its test chat would open the server's busy window before
                                   # the warm-up and the planning of the starts.
                                   preflight=False)
            cpu0, t0 = _cpu_self_and_children(), time.perf_counter()
            with _CpuSampler() as sampler:
                summary = run_rollouts(agent, config,
                                       {"command": "python -m visgym.bench rollouts"})
            wall = time.perf_counter() - t0
            _reap_collector_processes()
            cpu = _cpu_self_and_children() - cpu0
            server_cpu_end = _cpu_s(proc.pid)
            with open(os.path.join(out_dir, "episodes.jsonl")) as f:
                records = [json.loads(line) for line in f]
        finally:
            window = _stop_server(proc, log, log_path)
    requests = sum(t["attempts"] for r in records for t in r["turns"])
    steps = sum(r["steps"] for r in records)
    ideal = concurrency / (delay_ms / 1000.0) if delay_ms > 0 else float("inf")
    busy = (window["last_s"] - window["first_s"]) if window.get("first_s") is not None else None
    busy_rate = (requests / busy) if busy else None
    server_cpu = (None if server_cpu_start is None or server_cpu_end is None
                  else server_cpu_end - server_cpu_start)
    # The CPU inside the busy window: the steps' own cost, start-up and warm-up left out.
    busy_cpu = None
    if busy:
        before, after = sampler.at(window["first_s"]), sampler.at(window["last_s"])
        busy_cpu = None if before is None or after is None else after - before
    return {
        "env_id": ENV_ID, "trajectories": len(records), "concurrency": concurrency,
        "processes": summary["processes"], "delay_ms": delay_ms, "requests": requests,
        "steps": steps, "wall_s": round(wall, 3),
        "busy_window_s": None if busy is None else round(busy, 3),
        "ideal_requests_per_s": round(ideal, 1),
        "requests_per_s": None if busy_rate is None else round(busy_rate, 1),
        "ratio": None if busy_rate is None or ideal == float("inf")
        else round(busy_rate / ideal, 4),
        "requests_per_s_whole_run": round(requests / wall, 1),
        "ratio_whole_run": None if ideal == float("inf") else round(requests / wall / ideal, 4),
        "collector_cpu_s": round(cpu, 3),
        "collector_cpu_ms_per_step": round(cpu / steps * 1e3, 4) if steps else None,
        "collector_busy_cpu_ms_per_step": (round(busy_cpu / steps * 1e3, 4)
                                           if busy_cpu is not None and steps else None),
        "server_cpu_s": None if server_cpu is None else round(server_cpu, 2),
        "success_rate": round(sum(r["success"] for r in records) / len(records), 4),
        "stop_reasons": summary["stop_reasons"],
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                    "processor": platform.processor() or platform.machine()},
    }


def _main(args) -> int:
    for name in ("concurrency", "starts", "group_size", "processes"):
        if getattr(args, name) < 1:
            raise SystemExit(f"bench rollouts: --{name.replace('_', '-')} must be at least 1")
    if args.delay_ms < 0:
        raise SystemExit("bench rollouts: --delay-ms must be at least 0")
    r = run(args.concurrency, args.delay_ms, args.starts, args.group_size, args.processes,
            args.seed, args.out)
    print(f"rollouts: {r['env_id']}, {r['trajectories']} trajectories, concurrency "
          f"{r['concurrency']} in {r['processes']} process(es), reply delay {r['delay_ms']:g} ms "
          f"({r['machine']['cores']} cores)")
    if r["ratio"] is not None:
        print(f"  requests/s (busy)     {r['requests_per_s']:10.1f}  over {r['busy_window_s']} s")
    print(f"  ideal (conc./delay)   {r['ideal_requests_per_s']:10.1f}")
    if r["ratio"] is not None:
        print(f"  ratio                 {r['ratio']:10.3f}  (target >= 0.8)")
    if r["ratio_whole_run"] is not None:
        print(f"  ratio, whole run      {r['ratio_whole_run']:10.3f}  ({r['wall_s']} s with "
              "start-up)")
    print(f"  collector CPU/step    {r['collector_cpu_ms_per_step']:10.3f} ms  "
          f"({r['collector_cpu_s']} s for {r['steps']} steps; target <= 1 ms)")
    if r["collector_busy_cpu_ms_per_step"] is not None:
        print(f"  ... in the busy window {r['collector_busy_cpu_ms_per_step']:10.3f} ms  (start-up "
              "and warm-up left out)")
    if r["server_cpu_s"] is not None:
        print(f"  server CPU s          {r['server_cpu_s']:10.2f}")
    print(f"  success rate          {100 * r['success_rate']:9.1f}%  "
          f"({r['requests']} requests)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("rollouts", help="rollout-collector request rate and CPU per step "
                       "against a local fake policy server")
    p.add_argument("--concurrency", type=int, default=256, help="trajectories in flight")
    p.add_argument("--delay-ms", type=float, default=50.0, help="server delay per reply")
    p.add_argument("--processes", type=int, default=1, help="collector processes")
    p.add_argument("--starts", type=int, default=64, help="starts (groups) of maze_2d/easy")
    p.add_argument("--group-size", type=int, default=8, help="trajectories per start")
    p.add_argument("--seed", type=int, default=0, help="base seed of the starts")
    p.add_argument("--out", default=None, help="keep the run folder here")
    p.add_argument("--json", default=None, help="write the figures to this file")
    p.set_defaults(run=_main)
