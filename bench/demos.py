"""Demonstration synthesis throughput: episodes/s and images/s end to end (rollout, JPEG
encoding, files on disk) of ``visgym demos`` with a process pool, against a plain loop that does
the same work one episode at a time through the single gymnasium env, in the same run; plus the
split of the pipeline's time between stepping, encoding, image files and the rest.

Both write the same files: the plain loop encodes every frame with Pillow, as the reference
does; the pipeline uses one incremental encoder per episode (render/jpeg.py), whose bytes are
Pillow's (tests/test_jpeg.py) but which transforms only the MCUs a step changed. Process-pool
workers are forked when that is safe, so the run does not pay for importing visgym twice.

    python -m visgym.bench demos --task maze_2d/easy --episodes 2000
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path


def plain_loop(env_id: str, episodes: int, out: Path, max_long_side: int = 336) -> dict:
    """One episode at a time through gymnasium.make(env_id): per attempt reset, solve, then per
    step the prompt, the JPEG file and the step; an unsuccessful attempt is redrawn with the
    pipeline's next attempt seed, and each episode's successful attempt (the one success rule,
    core.rollout.episode_success) is one JSONL line."""
    import gymnasium

    import visgym  # noqa: F401
    from ..bridges.conversation import episode_instructions, sharegpt_turns, turn_text
    from ..bridges.demos import attempt_seed, init_state_hash, shipped_hashes
    from ..bridges.imaging import encode_jpeg
    from ..core.grammar import STOP_ACTION
    from ..core.rollout import episode_success

    task, split = env_id.split("/")
    budget = gymnasium.spec(env_id).max_episode_steps
    env = gymnasium.make(env_id, max_steps=budget).unwrapped
    forbidden = shipped_hashes(task)
    out.mkdir(parents=True, exist_ok=True)
    images = attempts = 0
    t0 = time.perf_counter()
    with open(out / "plain.jsonl", "w") as jsonl:
        for k in range(episodes):
            for a in range(20):
                attempts += 1
                env.reset(seed=attempt_seed(task, split, 0, k, a))
                if init_state_hash(task, env.get_init_state()) in forbidden:
                    continue
                plan = env.solve()
                instructions = episode_instructions(env.batch, 0, False, True)
                turns, paths, feedback = [], [], None
                success = False
                for t in range(budget):
                    action = plan[t] if t < len(plan) else STOP_ACTION
                    path = out / f"e{k:06d}_s{t:03d}.jpg"
                    path.write_bytes(encode_jpeg(env.render(), max_long_side))
                    paths.append(str(path))
                    turns.extend(sharegpt_turns(turn_text(t, budget, instructions, feedback),
                                                action))
                    _, _, terminated, truncated, info = env.step(action)
                    feedback = info["env_feedback"]
                    if terminated or truncated:
                        success = episode_success(terminated, info["success"])
                        break
                images += len(paths)
                if success:
                    jsonl.write(json.dumps({"conversations": turns, "images": paths}) + "\n")
                    break
    elapsed = time.perf_counter() - t0
    return {"episodes": episodes, "kept": episodes, "attempts": attempts, "images": images,
            "seconds": elapsed, "episodes_per_s": episodes / elapsed,
            "images_per_s": images / elapsed}


def pipeline(env_id: str, episodes: int, out: Path, workers: int | None) -> dict:
    from ..bridges.demos import DemoConfig, generate

    task, split = env_id.split("/")
    cfg = DemoConfig(task=task, split=split, episodes=episodes, shard_size=100)
    t0 = time.perf_counter()
    manifest = generate([cfg], out, workers=workers, progress=False)
    elapsed = time.perf_counter() - t0
    d = manifest["datasets"][cfg.dataset]
    return {"episodes": episodes, "kept": d["kept"], "attempts": d["attempted"],
            "images": d["images"], "seconds": elapsed, "episodes_per_s": episodes / elapsed,
            "images_per_s": d["images"] / elapsed, "worker_time_s": manifest["run"]["timing_s"]}


def run(args) -> int:
    from .step import _machine

    m = _machine()
    print(f"machine: {m['cpu']}, {m['cores']} cores, python {m['python']}")
    root = Path(tempfile.mkdtemp(prefix="visgym-bench-demos-", dir=args.dir))
    fast = slow = None
    try:
        # Warm-up: compile/load the kernels in this process before timing the plain loop.
        plain_loop(args.task, 3, root / "warm")
        plain_n = max(1, min(args.episodes, args.plain_episodes))
        # The two are measured alternately and the best of each is kept: file creation on a
        # virtual disk has slow spells (seconds after large writes or deletes) that would
        # otherwise land on whichever ran then. Everything is deleted only at the end.
        for rep in range(args.repeat):
            os.sync()
            run_fast = pipeline(args.task, args.episodes, root / f"pipeline{rep}", args.workers)
            os.sync()
            run_slow = plain_loop(args.task, plain_n, root / f"plain{rep}")
            print(f"  round {rep + 1}: pipeline {run_fast['episodes_per_s']:.1f} episodes/s, "
                  f"plain {run_slow['episodes_per_s']:.1f} episodes/s")
            if fast is None or run_fast["episodes_per_s"] > fast["episodes_per_s"]:
                fast = run_fast
            if slow is None or run_slow["episodes_per_s"] > slow["episodes_per_s"]:
                slow = run_slow
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'best of ' + str(args.repeat):28} {'episodes/s':>11} {'images/s':>10} "
          f"{'episodes':>9} {'seconds':>8}")
    for name, r in (("visgym demos (process pool)", fast), ("plain single-env loop", slow)):
        print(f"{name:28} {r['episodes_per_s']:>11.1f} {r['images_per_s']:>10.1f} "
              f"{r['episodes']:>9} {r['seconds']:>8.2f}")
    print(f"speed-up: {fast['episodes_per_s'] / slow['episodes_per_s']:.1f}x")
    t = fast["worker_time_s"]
    busy = t.get("total_s", 0.0) or 1e-9
    write = t.get("write_s", 0.0)
    other = busy - t["step_s"] - t["encode_s"] - t["reset_solve_s"] - write
    print(f"worker time split: JPEG encoding {t['encode_s'] / busy:.0%}, image files "
          f"{write / busy:.0%}, stepping {t['step_s'] / busy:.0%}, reset+solve "
          f"{t['reset_solve_s'] / busy:.0%}, prompts/records {other / busy:.0%} "
          f"(of {busy:.1f} s in workers)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": m, "pipeline": fast, "plain": slow}, f, indent=2)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("demos", help="demonstration synthesis throughput")
    p.add_argument("--task", default="maze_2d/easy")
    p.add_argument("--episodes", type=int, default=2000)
    p.add_argument("--plain-episodes", type=int, default=300,
                   help="episodes for the plain loop (its rate is per episode)")
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--repeat", type=int, default=2,
                   help="rounds of (pipeline, plain loop); the best of each is reported")
    p.add_argument("--dir", default=None, help="where to write (default: the temp folder)")
    p.add_argument("--json", default=None)
    p.set_defaults(run=run)
