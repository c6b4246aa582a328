"""Evaluation episodes: the shipped splits and the reference's published metadata layout.

Shipped splits: 70 episodes per task and split, generated once from fixed seeds
(``split_seed``) and stored as init-state files in ``envs/assets/splits/<task>__<split>.jsonl``
(one JSON object a line: env_id, index, seed, episode_seed, init_state), so ``visgym eval`` needs
no download and every run sees exactly the same episodes. ``python -m visgym.bridges.splits``
regenerates them; a test checks the shipped files still equal a fresh generation.

Reference layout (spec/agent_loop.md section 10): ``--dataset-root DIR`` reads
``test_set_<split>/<task>__<split>/*.jsonl`` (files sorted by path, lines in order; each line
has env_id, seed, episode_seed) and loads each episode's
``initial_states_<split>/<task>__<split>/seed<seed>_episode<episode_seed>/initial_state.json``.
Unparsable lines are skipped and counted, as the reference skips them; a missing init-state
file is an error naming the file.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..core import list_envs, make
from ..core.registry import spec as env_spec
from .files import atomic_file

SPLITS = ("easy", "hard")
SPLIT_EPISODES = 70
ASSET_DIR = Path(__file__).resolve().parents[1] / "envs" / "assets" / "splits"


@dataclass
class EpisodeSpec:
    key: str
    env_id: str
    task: str
    split: str
    index: int
    seed: int
    episode_seed: int
    init_state: dict
    make_kwargs: dict = field(default_factory=dict)


def tasks_with_splits() -> list[str]:
    """Families registered with both an easy and a hard id."""
    ids = set(list_envs())
    return sorted({i.split("/")[0] for i in ids if all(f"{i.split('/')[0]}/{s}" in ids for s in SPLITS)})


def task_versions(env_ids) -> dict:
    """``{env_id: version}`` of the family behind each env id, sorted by id: the family class's
    ``version`` (core/family.py; bumped when its observable behaviour changes), which run.json
    and the demonstrations' manifest.json record."""
    return {env_id: int(env_spec(env_id).family.version) for env_id in sorted(set(env_ids))}


def split_seed(task: str, split: str, index: int) -> int:
    """The fixed seed of episode ``index`` of a shipped split (a hash, so tasks and splits never
    share seeds, and demonstration seeds drawn elsewhere are unlikely to collide)."""
    digest = hashlib.sha256(f"visgym-eval/{task}/{split}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def generate_split(task: str, split: str, episodes: int = SPLIT_EPISODES) -> list[dict]:
    env_id = f"{task}/{split}"
    seeds = [split_seed(task, split, i) for i in range(episodes)]
    env = make(env_id, num_envs=episodes)
    env.reset(seeds=seeds)
    return [{"env_id": env_id, "index": i, "seed": s, "episode_seed": s, "init_state": d}
            for i, (s, d) in enumerate(zip(seeds, env.state_dicts()))]


def split_path(task: str, split: str) -> Path:
    return ASSET_DIR / f"{task}__{split}.jsonl"


def write_split(task: str, split: str) -> Path:
    path = split_path(task, split)
    with atomic_file(path, "w") as f:
        for row in generate_split(task, split):
            f.write(json.dumps(row, separators=(",", ":")) + "\n")
    return path


def _spec(row: dict, split: str, index: int) -> EpisodeSpec:
    env_id = row["env_id"]
    return EpisodeSpec(key=f"{env_id}#{index}", env_id=env_id, task=env_id.split("/")[0],
                       split=split, index=index, seed=int(row["seed"]),
                       episode_seed=int(row["episode_seed"]), init_state=row["init_state"])


def load_split(task: str, split: str) -> list[EpisodeSpec]:
    path = split_path(task, split)
    if not path.exists():
        raise ValueError(f"--tasks: no shipped {split} split for {task!r} ({path} is missing)")
    specs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: line {n} is not valid JSON ({e.msg})") from None
            specs.append(_spec(row, split, len(specs)))
    return specs


def _bundle_kwargs(env_id: str, root: Path) -> dict:
    """The published bundle's media for a family that reads some (``Family.data_dir_keyword``):
    its data folder keyword set to the dataset root, whose ``partial_datasets/<task>`` folder the
    family's asset source then uses (envs/assets/)."""
    try:
        keyword = env_spec(env_id).family.data_dir_keyword
    except (KeyError, ValueError):
        return {}
    return {keyword: str(root)} if keyword else {}


def load_reference_layout(root: str | os.PathLike, split: str, tasks: list[str]) -> tuple[list, int]:
    """Episodes of the reference's metadata layout for ``tasks`` (in file order) and the number
    of unparsable lines skipped."""
    root = Path(root)
    episodes_root = root / f"test_set_{split}"
    states_root = root / f"initial_states_{split}"
    if not episodes_root.is_dir():
        raise ValueError(f"--dataset-root: {episodes_root} does not exist (expected the "
                         f"reference layout test_set_<split>/<task>__<split>/*.jsonl)")
    specs, skipped = [], 0
    for task in tasks:
        folder = episodes_root / f"{task}__{split}"
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*.jsonl")):
            with open(path) as f:
                for line in f:
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                        env_id, seed, ep_seed = row["env_id"], int(row["seed"]), int(row["episode_seed"])
                    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                        skipped += 1
                        continue
                    slug = env_id.replace("/", "__").replace(":", "__")
                    state_path = states_root / slug / f"seed{seed}_episode{ep_seed}" / "initial_state.json"
                    try:
                        with open(state_path) as g:
                            init_state = json.load(g)
                    except OSError:
                        raise ValueError(f"{state_path}: missing initial state for an episode "
                                         f"listed in {path}") from None
                    except json.JSONDecodeError as e:
                        raise ValueError(f"{state_path}: not valid JSON ({e.msg})") from None
                    row = {"env_id": env_id, "seed": seed, "episode_seed": ep_seed,
                           "init_state": init_state}
                    index = sum(1 for s in specs if s.env_id == env_id)
                    spec = _spec(row, split, index)
                    spec.make_kwargs = _bundle_kwargs(env_id, root)
                    specs.append(spec)
    return specs, skipped


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m visgym.bridges.splits",
                                     description="regenerate the shipped evaluation splits")
    parser.add_argument("--tasks", default=None, help="comma-separated tasks (default: all)")
    args = parser.parse_args(argv)
    tasks = args.tasks.split(",") if args.tasks else tasks_with_splits()
    for task in tasks:
        for split in SPLITS:
            print(write_split(task, split))
    return 0


if __name__ == "__main__":
    sys.exit(main())
