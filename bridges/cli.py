"""The ``visgym`` command line.

``visgym demo``: rolls the built-in solver through a few episodes of each requested env in one
BatchEnv, writes one GIF per episode and prints a one-line success summary. (The evaluation
runner replaces it as the main job when it lands.)
``visgym list``: the registered ids.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from PIL import Image

from ..core import list_envs, make


def rollout(env_id: str, episodes: int, seed: int, max_frames: int = 64):
    """Solve ``episodes`` episodes of ``env_id`` together; return (frames per episode, rewards)."""
    env = make(env_id, num_envs=episodes, autoreset="disabled", max_steps=None)
    frames, _ = env.reset(seeds=range(seed, seed + episodes))
    plans = env.solve()
    recorded = [[frames[b].copy()] for b in range(episodes)]
    total = np.zeros(episodes, np.float32)
    done = np.zeros(episodes, np.bool_)
    longest = max(len(p) for p in plans)
    for t in range(longest):
        # Episodes whose plan is over repeat a stop; their frames are no longer recorded.
        actions = [p[t] if t < len(p) else p[-1] for p in plans]
        frames, reward, terminated, _, _ = env.step(actions)
        for b in range(episodes):
            if not done[b]:
                total[b] += reward[b]
                if len(recorded[b]) < max_frames:
                    recorded[b].append(frames[b].copy())
        done |= terminated
    return recorded, total


def write_gif(path: str, frames: list, frame_ms: int = 250) -> None:
    images = [Image.fromarray(f) for f in frames]
    tmp = path + ".tmp"
    images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                   duration=frame_ms, loop=0)
    os.replace(tmp, path)


def cmd_demo(args) -> int:
    os.makedirs(args.out, exist_ok=True)
    start = time.perf_counter()
    summary = []
    for env_id in args.envs.split(","):
        recorded, total = rollout(env_id, args.episodes, args.seed)
        for b, frames in enumerate(recorded):
            name = env_id.replace("/", "_") + f"_seed{args.seed + b}.gif"
            write_gif(os.path.join(args.out, name), frames)
        summary.append(f"{env_id} {int((total > 0).sum())}/{len(total)}")
    elapsed = time.perf_counter() - start
    print(f"demo: solver success {'; '.join(summary)}; GIFs in {args.out}/ ({elapsed:.1f} s)")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="visgym", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="solve a few episodes and write their GIFs")
    demo.add_argument("--envs", default="maze_2d/easy,maze_2d/hard")
    demo.add_argument("--episodes", type=int, default=4)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--out", default="demo_out")
    demo.set_defaults(func=cmd_demo)
    lister = sub.add_parser("list", help="list the registered env ids")
    lister.set_defaults(func=lambda args: print("\n".join(list_envs())) or 0)
    args = parser.parse_args(argv)
    if getattr(args, "episodes", 1) < 1:
        parser.error("--episodes must be at least 1")
    for env_id in getattr(args, "envs", "").split(",") if hasattr(args, "envs") else []:
        if env_id not in list_envs():
            parser.error(f"--envs: unknown env id {env_id!r} (see 'visgym list')")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
