"""A dataset's settings (``DemoConfig``), the key of what determines its bytes, and the seeds.

A dataset's key (``dataset_key``) holds every setting that changes its bytes except the episode
count; it is stored in ``.shards/<dataset>/key.json`` and in every shard's stats, and a rerun
whose key differs is refused, naming the differences (``key_differences``). Episode k's attempt
a is seeded by a hash of (task, split, base seed, k, a) (``attempt_seed``, ``SEED_RULE``).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

from ...core import make
from ...core.registry import spec as env_spec
from ..prompts import DEMO_PROMPT

FORMAT = 2
"""Version of the record and shard layout; part of every dataset's key."""

MAX_ATTEMPTS_PER_EPISODE = 20
"""A shard gives up once its attempts reach this many times its episodes."""

PER_FOLDER_SETTINGS = ("max_long_side", "max_steps")
"""Prompt settings the manifest's "prompt" block sets per folder (not part of the fixed ones)."""

PROMPT_SETTINGS = {k: v for k, v in DEMO_PROMPT.manifest().items()
                   if k not in PER_FOLDER_SETTINGS}
"""How demonstrations are prompted (``prompts.DEMO_PROMPT``, fixed), as a dataset's key holds
it: the manifest's "prompt" block adds max_long_side and the step budget per env id; ``visgym
eval --prompt-from DIR`` reads that block."""

SEED_RULE = ("attempt 0: sha256('visgym-demos/<task>/<split>/<seed>/<episode>'), attempt a > 0: "
             "sha256('visgym-demos/<task>/<split>/<seed>/<episode>/<a>'); first 8 bytes "
             "little-endian >> 1")


def demo_seed(task: str, split: str, base_seed: int, episode: int) -> int:
    return attempt_seed(task, split, base_seed, episode, 0)


def attempt_seed(task: str, split: str, base_seed: int, episode: int, attempt: int) -> int:
    text = f"visgym-demos/{task}/{split}/{base_seed}/{episode}"
    if attempt:
        text += f"/{attempt}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


@dataclass(frozen=True)
class DemoConfig:
    task: str
    split: str = "easy"
    episodes: int = 100                    # conversations kept (unsuccessful attempts redrawn)
    strategy: str | None = None           # None: the family's default; "mixed": cycle them
    shard_size: int = 100
    seed: int = 0
    num_steps: tuple | None = None         # (lo, hi) inclusive, drawn per attempt
    max_steps: int | None = None           # None: the evaluation budget (20 easy, 30 hard)
    max_long_side: int | None = 336
    quality: int = 75
    full_size_frames: bool = False         # draw at the task's own size, then downscale

    @property
    def env_id(self) -> str:
        return f"{self.task}/{self.split}"

    @property
    def dataset(self) -> str:
        return self.task if self.strategy is None else f"{self.task}_{self.strategy}"

    @property
    def budget(self) -> int:
        return self.max_steps or env_spec(self.env_id).default_max_steps

    @property
    def num_shards(self) -> int:
        return math.ceil(self.episodes / self.shard_size)

    def shard_count(self, index: int) -> int:
        return min(self.shard_size, self.episodes - index * self.shard_size)

    def strategies(self) -> list:
        family = make(self.env_id, num_envs=1).family
        known = list(family.solver_strategies)
        if self.strategy is None:
            return [None]
        if self.strategy == "mixed":
            return known or [None]
        if known and self.strategy not in known:
            raise ValueError(f"--strategy: {self.task} has strategies {known} (or 'mixed'), "
                             f"got {self.strategy!r}")
        return [self.strategy]

    def validate(self) -> None:
        env_spec(self.env_id)  # raises naming env_id
        if self.episodes < 1:
            raise ValueError(f"--episodes: must be at least 1, got {self.episodes}")
        if self.shard_size < 1:
            raise ValueError(f"--shard-size: must be at least 1, got {self.shard_size}")
        if self.num_steps is not None:
            lo, hi = self.num_steps
            if not 1 <= lo <= hi:
                raise ValueError(f"--num-steps: expected LO,HI with 1 <= LO <= HI, got {lo},{hi}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"--max-steps: must be at least 1, got {self.max_steps}")
        if self.max_long_side is not None and self.max_long_side < 16:
            raise ValueError(f"--max-long-side: must be at least 16 (0: no resizing), "
                             f"got {self.max_long_side}")
        self.strategies()


def dataset_key(cfg: DemoConfig, exclusion_sha256: str) -> dict:
    """Everything that determines a dataset's bytes except the episode count (episode k's bytes
    do not depend on it). Stored in ``.shards/<dataset>/key.json`` and in every shard's stats."""
    return {"format": FORMAT, "task": cfg.task, "split": cfg.split,
            "strategy": cfg.strategy or "default", "seed": cfg.seed,
            "num_steps": list(cfg.num_steps) if cfg.num_steps else None,
            "max_steps": cfg.budget, "max_long_side": cfg.max_long_side, "quality": cfg.quality,
            "shard_size": cfg.shard_size,
            "task_version": int(env_spec(cfg.env_id).family.version),
            "prompt": dict(PROMPT_SETTINGS), "exclusion_sha256": exclusion_sha256,
            # Only when set, so datasets made before the option existed keep their key.
            **({"full_size_frames": True} if cfg.full_size_frames else {})}


_KEY_FLAGS = {"split": "--split", "seed": "--seed", "num_steps": "--num-steps",
              "max_steps": "--max-steps", "max_long_side": "--max-long-side",
              "shard_size": "--shard-size", "strategy": "--strategy",
              "exclusion_sha256": "--exclude-dataset-root (excluded evaluation states)",
              "task_version": "task version", "format": "record format", "quality": "quality",
              "prompt": "prompt settings", "task": "task",
              "full_size_frames": "--full-size-frames"}


def key_differences(old: dict, new: dict) -> str:
    """The settings where two dataset keys differ, named by their flags (for messages)."""
    parts = []
    for k in sorted(set(old) | set(new)):
        if old.get(k) != new.get(k):
            a, b = old.get(k), new.get(k)
            if k == "exclusion_sha256":
                parts.append(f"{_KEY_FLAGS[k]}: differ")
            else:
                parts.append(f"{_KEY_FLAGS.get(k, k)}: {json.dumps(a)} there, {json.dumps(b)} now")
    return "; ".join(parts)
