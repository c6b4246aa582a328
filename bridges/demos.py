"""Demonstration synthesis: solver rollouts turned into supervised-finetuning conversations.

Implements spec/sft_data.md sections 1-4 as one pipeline: batched solver rollouts ->
multi-turn ShareGPT conversations (the layout LlamaFactory reads) with JPEG observations ->
test-set de-duplication -> ``dataset_info.json`` and a LlamaFactory training recipe; plus
exact-count mixing and an optional Hugging Face ``datasets`` export.

Episodes. ``--episodes N`` gives exactly N conversations per dataset, numbered 0..N-1. Episode k
is the first of its attempts a = 0, 1, ... that the solver finishes successfully and that is not
an excluded evaluation episode; attempt a's seed is a hash of (task, split, base seed, k, a)
(``attempt_seed``; attempt 0 keeps the older per-episode rule). So an episode's bytes depend on
its number and the settings only, never on N, the shard size, the batch it ran in or the worker:
growing ``--episodes`` adds exactly the missing episodes. Unsuccessful and excluded attempts are
counted; a shard gives up (a clear error) after 20 attempts per episode on average.

Shards. Shard s holds episodes s*S .. s*S+S-1 (S = ``--shard-size``; the last one may be
shorter, and is extended in place when N grows). A shard is a pure function of the settings, so
it can run in any process or on any Ray worker and gives the same bytes. Inside a shard the
attempts are stepped ``ROLLOUT_BATCH`` at a time in one BatchEnv, planned by the batched solver;
frames are JPEG-encoded with the evaluation loop's encoder and the prompts are the loop's own
(bridges/conversation.py), with the think/answer suffix and feedback on (spec 1.2).

Output layout under ``--out DIR`` (image paths in records are relative to DIR):

    DIR/dataset_info.json                       one LlamaFactory entry per dataset
    DIR/llamafactory_sft.yaml                   a LlamaFactory SFT recipe naming every dataset
    DIR/manifest.json                           counts, seeds, strategies, hashes, prompt
                                                settings, exclusions, package and task versions
    DIR/<dataset>/shard-00000.jsonl ...         conversation records (only complete shards)
    DIR/images/<dataset>/shard-00000/e000012_s003.jpg
    DIR/.shards/<dataset>/key.json              the settings that determine the dataset's bytes
    DIR/.shards/<dataset>/shard-00000.json      per-shard counts, hashes, file sizes, digest
    DIR/.lock                                   held (fcntl.flock) by the run writing DIR

Crash safety. A run holds DIR/.lock for its whole duration (a second run on DIR fails at once,
naming the holder's pid), and its pool workers die with it (bridges/pools.die_with_parent), so
nothing else writes DIR while a rerun repairs it. A shard's images are written first, then its
stats (with every image's size and the JSONL's SHA-256), then its JSONL, renamed into the
dataset folder from a temporary file in ``.shards/`` (so the dataset folder, which LlamaFactory
reads whole, never holds a partial or temporary file). A shard counts as done only if its stats
match the current settings, its JSONL matches the recorded digest and every image it references
exists with the recorded size; anything else is rebuilt. Rerunning with the same arguments gives
byte-identical files (only the manifest's "run" block changes); rerunning with settings that
change the bytes (split, seed, image size, budget, ...) is refused, naming them.

Init-state hash (test-set de-duplication, spec 2.4): SHA-256 of ``task + "\\n" + canonical JSON``
of the episode's init-state dict, canonical JSON being ``json.dumps(d, sort_keys=True,
separators=(",", ":"), ensure_ascii=True)``; records carry that canonical JSON as their
``init_state`` string, so ``hash == sha256(task + "\\n" + init_state)``. The shipped evaluation
splits of the task (both splits) are excluded, and so are the init states of every published
evaluation set given with ``--exclude-dataset-root`` (the reference layout that
``visgym eval --dataset-root`` reads), hashed both as stored and after a round trip through the
env (``reset(init_states=[s]).state_dicts()``, the form candidates are hashed in).

Records share one schema across tasks (every field always present with one type; ``init_state``
a string, ``strategy`` a string, ``num_steps`` 0 when not drawn), so several tasks' shards load
together with ``datasets.load_dataset("json", data_files=[...])``.

Reference quirks fixed (spec 9): datasets are named ``<task>`` or ``<task>_<strategy>`` (no
slash), so nothing is lost at consolidation (1); counts are exact (2); solver randomness and
``num_steps`` draws derive from the episode seed (5); the reply is
``<think></think><answer>ACTION</answer>`` (3: no reasoner text unwrapped).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..core import make
from ..core.grammar import STOP_ACTION
from ..core.registry import consumer_kwargs
from ..core.registry import spec as env_spec
from .conversation import episode_instructions, sharegpt_turns, turn_text
from .files import FolderLock, atomic_write, atomic_write_staged
from .imaging import frame_encoder
from .pools import die_with_parent, pool_context
from .warmup import warm_up

FORMAT = 2
"""Version of the record and shard layout; part of every dataset's key."""

MAX_ATTEMPTS_PER_EPISODE = 20
"""A shard gives up once its attempts reach this many times its episodes."""

PROMPT_SETTINGS = {"elicit_verbalization": True, "feedback": True, "history": -1,
                   "text_mode": False, "final_goal": False}
"""How demonstrations are prompted (fixed): the manifest's "prompt" block adds max_long_side and
the step budget per env id; ``visgym eval --prompt-from DIR`` reads that block."""

LLAMAFACTORY_YAML = "llamafactory_sft.yaml"
LLAMAFACTORY_MIN_CUTOFF = 15000   # the reference's training configs (spec sft_data.md 6.1)
IMAGE_MAX_PIXELS = 262144         # ditto: image_max_pixels of the reference's configs

SEED_RULE = ("attempt 0: sha256('visgym-demos/<task>/<split>/<seed>/<episode>'), attempt a > 0: "
             "sha256('visgym-demos/<task>/<split>/<seed>/<episode>/<a>'); first 8 bytes "
             "little-endian >> 1")
HASH_RULE = ("sha256(task + '\\n' + canonical JSON of init_state), canonical JSON = "
             "json.dumps(state, sort_keys=True, separators=(',', ':'), ensure_ascii=True)")


# ------------------------------------------------------------------------------ hashing
def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def init_state_hash(task: str, init_state: dict) -> str:
    return _hash_canonical(task, canonical_json(init_state))


def _hash_canonical(task: str, canonical: str) -> str:
    return hashlib.sha256((task + "\n" + canonical).encode()).hexdigest()


@lru_cache(maxsize=None)
def shipped_hashes(task: str) -> frozenset:
    """Hashes of the shipped evaluation episodes of ``task`` (both splits)."""
    from .splits import SPLITS, load_split, split_path

    hashes = set()
    for split in SPLITS:
        if split_path(task, split).exists():
            hashes.update(init_state_hash(task, e.init_state) for e in load_split(task, split))
    return frozenset(hashes)


def evaluation_hashes() -> frozenset:
    """Hashes of every shipped evaluation episode (all tasks, both splits)."""
    from .splits import tasks_with_splits

    return frozenset().union(*(shipped_hashes(t) for t in tasks_with_splits()))


def reference_layout_hashes(root, tasks: list) -> tuple[dict, int]:
    """``{task: hashes}`` of the init states of a published evaluation set in the reference
    layout (bridges/splits.load_reference_layout, both splits where present) for ``tasks``, and
    the number of unparsable lines skipped. Each state is hashed as stored and after a round trip
    through its env (the form generated candidates are hashed in)."""
    from .splits import SPLITS, load_reference_layout

    root = Path(root)
    present = [s for s in SPLITS if (root / f"test_set_{s}").is_dir()]
    if not present:
        raise ValueError(f"--exclude-dataset-root: {root} has neither test_set_easy/ nor "
                         "test_set_hard/ (expected the reference layout test_set_<split>/"
                         "<task>__<split>/*.jsonl with initial_states_<split>/)")
    out = {task: set() for task in tasks}
    skipped = 0
    by_env: dict = {}
    for split in present:
        specs, bad = load_reference_layout(root, split, list(tasks))
        skipped += bad
        for e in specs:
            if e.task in out:
                by_env.setdefault(e.env_id, []).append(e)
    for env_id, specs in by_env.items():
        task = specs[0].task
        for e in specs:
            out[task].add(init_state_hash(task, e.init_state))
        try:
            env = make(env_id, num_envs=len(specs))
            env.reset(init_states=[e.init_state for e in specs])
            states = env.state_dicts()
        except Exception as error:  # a state this version cannot load: name the set
            raise ValueError(f"--exclude-dataset-root: {root}: the {env_id} init states do not "
                             f"load ({type(error).__name__}: {error})") from None
        out[task].update(init_state_hash(task, s) for s in states)
    return {t: frozenset(h) for t, h in out.items()}, skipped


def _digest(hashes) -> str:
    return hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()


def demo_seed(task: str, split: str, base_seed: int, episode: int) -> int:
    return attempt_seed(task, split, base_seed, episode, 0)


def attempt_seed(task: str, split: str, base_seed: int, episode: int, attempt: int) -> int:
    text = f"visgym-demos/{task}/{split}/{base_seed}/{episode}"
    if attempt:
        text += f"/{attempt}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


# ------------------------------------------------------------------------------ config
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


def _key_differences(old: dict, new: dict) -> str:
    parts = []
    for k in sorted(set(old) | set(new)):
        if old.get(k) != new.get(k):
            a, b = old.get(k), new.get(k)
            if k == "exclusion_sha256":
                parts.append(f"{_KEY_FLAGS[k]}: differ")
            else:
                parts.append(f"{_KEY_FLAGS.get(k, k)}: {json.dumps(a)} there, {json.dumps(b)} now")
    return "; ".join(parts)


# ------------------------------------------------------------------------------ one shard
@dataclass
class ShardOutput:
    index: int
    start: int = 0                                # episodes of the shard already on disk
    lines: list = field(default_factory=list)     # JSONL lines of the new episodes, in order
    images: dict = field(default_factory=dict)    # relative path -> bytes (if not written)
    image_files: list = field(default_factory=list)   # [name, size] of the new images
    counts: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)     # counts and timing, for progress


def _shard_names(cfg: DemoConfig, index: int) -> dict:
    name = f"shard-{index:05d}"
    return {"jsonl": f"{cfg.dataset}/{name}.jsonl",
            "stats": f".shards/{cfg.dataset}/{name}.json",
            "key": f".shards/{cfg.dataset}/key.json",
            "staging": f".shards/{cfg.dataset}",
            "images": f"images/{cfg.dataset}/{name}"}


class _ImageDir:
    """Writes a shard's JPEGs straight into its image folder (the process-pool path).

    A full rebuild empties the folder first (the run holds the output's lock and its workers die
    with it, so nothing else writes there); an extension of a shorter shard keeps the files of
    its earlier episodes. Files are created relative to an open folder descriptor, which saves
    the path walk per image; there is no temp-and-rename per image: the shard's stats record
    every image's size and its JSONL, renamed into place after every image is written, marks it
    complete."""

    def __init__(self, folder: Path, fresh: bool):
        if fresh:
            shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(folder, os.O_RDONLY)
        self.written: list = []

    def write_all(self, items: list) -> None:
        """Write (file name, bytes) pairs."""
        for name, data in items:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=self.fd)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            self.written.append([name, len(data)])

    def close(self) -> None:
        os.close(self.fd)


_ENCODERS: dict = {}


def _encoders(count: int, shape: tuple, max_long_side, quality: int) -> list:
    pool = _ENCODERS.setdefault((shape, max_long_side, quality), [])
    pool.extend(frame_encoder(shape, max_long_side, quality) for _ in range(count - len(pool)))
    return pool[:count]


ROLLOUT_BATCH = 16
"""Attempts stepped together inside a shard. Small enough that the batch's frames, the
encoders' previous frames and block arrays of both workers stay in the shared L3 cache (at 100
encoding took 1.5x as long, at 32 the bench ran ~15% slower than at 16); episodes are
independent, so this does not change any output."""

_ENVS: dict = {}


def _batch_env(env_id: str, count: int, budget: int, kwargs: dict | None = None):
    key = (env_id, count, budget, json.dumps(kwargs or {}, sort_keys=True))
    if key not in _ENVS:
        _ENVS[key] = make(env_id, num_envs=count, autoreset="disabled", max_steps=budget,
                          **(kwargs or {}))
    return _ENVS[key]


def _frame_kwargs(cfg: DemoConfig) -> dict:
    """The make() keywords of a task's envs: unless --full-size-frames, the family's overrides
    for drawing at the images' size (Family.consumer_overrides)."""
    return {} if cfg.full_size_frames else consumer_kwargs(cfg.env_id, {}, cfg.max_long_side)


@dataclass
class _Episode:
    number: int
    attempt: int
    seed: int
    strategy: str | None
    num_steps: int | None
    init_state: str = ""        # canonical JSON
    hash: str = ""
    skipped: bool = False
    success: bool = False
    turns: list = field(default_factory=list)
    images: list = field(default_factory=list)


def _attempt(cfg: DemoConfig, strategies: list, number: int, attempt: int) -> _Episode:
    seed = attempt_seed(cfg.task, cfg.split, cfg.seed, number, attempt)
    # Strategy per episode number; plan length per attempt, from its seed only.
    num_steps = None
    if cfg.num_steps is not None:
        num_steps = int(np.random.default_rng(seed).integers(cfg.num_steps[0],
                                                              cfg.num_steps[1] + 1))
    return _Episode(number, attempt, seed, strategies[number % len(strategies)], num_steps)


_FORBIDDEN: dict = {}
"""task -> hashes excluded from the demonstrations, set by generate() (and in pool workers by
their initializer) for build_shard."""


def build_shard(cfg: DemoConfig, index: int, out: Path | None = None, start: int = 0,
                forbidden: frozenset | None = None) -> ShardOutput:
    """Roll out episodes ``start``.. of shard ``index`` and return what they produce.

    With ``out``, the images are written under ``out`` as episodes finish (the JSONL and stats
    are written by ``write_shard``); without, they are returned as bytes. ``forbidden``: the
    init-state hashes to skip (default: what generate() set, else the shipped splits')."""
    t_start = time.perf_counter()
    timing = {"reset_solve_s": 0.0, "step_s": 0.0, "encode_s": 0.0, "write_s": 0.0}
    if forbidden is None:
        forbidden = _FORBIDDEN.get(cfg.task)
        if forbidden is None:
            forbidden = shipped_hashes(cfg.task)
    first = index * cfg.shard_size
    count = cfg.shard_count(index)
    strategies = cfg.strategies()
    names = _shard_names(cfg, index)
    wanted = count - start
    limit = MAX_ATTEMPTS_PER_EPISODE * wanted
    pending = [_attempt(cfg, strategies, k, 0) for k in range(first + start, first + count)]
    kept: dict = {}
    attempts = skipped = dropped = 0
    images: dict = {}
    sink = _ImageDir(out / names["images"], fresh=start == 0) if out is not None else None
    try:
        while pending:
            room = limit - attempts
            if room <= 0:
                raise ValueError(
                    f"{cfg.env_id}: the solver succeeded in only {len(kept)} of {attempts} "
                    f"attempts for the {wanted} episodes of shard {index} ({dropped} "
                    f"unsuccessful, {skipped} evaluation overlaps); gave up at "
                    f"{MAX_ATTEMPTS_PER_EPISODE} attempts per episode (check --max-steps, "
                    f"--num-steps, --strategy)")
            batch, pending = pending[:min(ROLLOUT_BATCH, room)], pending[min(ROLLOUT_BATCH, room):]
            attempts += len(batch)
            _rollout(cfg, batch, names["images"], timing,
                     images if sink is None else sink.write_all, forbidden)
            for e in batch:
                if e.success:
                    kept[e.number] = e
                    continue
                skipped += e.skipped
                dropped += not e.skipped
                pending.append(_attempt(cfg, strategies, e.number, e.attempt + 1))
    finally:
        if sink is not None:
            sink.close()
    lines, hashes, per_strategy = [], [], {}
    max_chars = max_images = 0
    for k in sorted(kept):
        e = kept[k]
        record = {"episode": e.number, "attempt": e.attempt, "env_id": cfg.env_id,
                  "seed": e.seed, "strategy": e.strategy or "default",
                  "num_steps": e.num_steps or 0, "hash": e.hash, "init_state": e.init_state,
                  "conversations": e.turns, "images": e.images,
                  "stats": {"steps": len(e.images), "reward": 1.0, "terminated": True,
                            "truncated": False}}
        lines.append(json.dumps(record, separators=(",", ":"), ensure_ascii=False))
        hashes.append(e.hash)
        key = e.strategy or "default"
        per_strategy[key] = per_strategy.get(key, 0) + 1
        max_chars = max(max_chars, sum(len(t["value"]) for t in e.turns))
        max_images = max(max_images, len(e.images))
    image_files = (sink.written if sink is not None else
                   [[p.rsplit("/", 1)[1], len(b)] for p, b in images.items()])
    counts = {"attempted": attempts, "skipped_eval_overlap": skipped,
              "dropped_unsuccessful": dropped, "kept": len(lines),
              "images": len(image_files), "per_strategy": per_strategy, "hashes": hashes,
              "max_episode_chars": max_chars, "max_episode_images": max_images}
    timing["total_s"] = time.perf_counter() - t_start
    return ShardOutput(index=index, start=start, lines=lines, images=images,
                       image_files=image_files, counts=counts,
                       stats={"episodes": len(lines), "images": len(image_files),
                              "timing": timing})


def _rollout(cfg: DemoConfig, episodes: list, image_dir: str, timing: dict, keep,
             forbidden: frozenset) -> None:
    """Step ``episodes`` together in one BatchEnv, filling in their outcome, turns and image
    paths; the JPEGs of successful episodes go to ``keep`` (a dict by relative path, or a
    callable taking a list of (file name, bytes)) when each episode ends."""
    count = len(episodes)
    budget = cfg.budget
    env = _batch_env(cfg.env_id, count, budget, _frame_kwargs(cfg))
    t0 = time.perf_counter()
    env.reset(seeds=[e.seed for e in episodes])
    for e, state in zip(episodes, env.state_dicts()):
        e.init_state = canonical_json(state)
        e.hash = _hash_canonical(cfg.task, e.init_state)
        e.skipped = e.hash in forbidden
    plans: list = [None] * count
    groups: dict = {}
    for b, e in enumerate(episodes):
        if not e.skipped:
            groups.setdefault((e.strategy, e.num_steps), []).append(b)
    for (strategy, num_steps), rows in groups.items():
        for b, plan in zip(rows, env.solve(strategy=strategy, num_steps=num_steps, rows=rows)):
            plan = list(plan) if plan else []
            if not plan or "('stop'" not in plan[-1]:
                plan.append(STOP_ACTION)
            plans[b] = plan
    timing["reset_solve_s"] += time.perf_counter() - t0

    instructions = [episode_instructions(env, b, False, True) for b in range(count)]
    # One incremental encoder per batch row: consecutive frames differ in a few MCUs. The
    # encoders are kept for the next batch in this process (their buffers are already mapped,
    # and the next episode's frames share their background); the bytes do not depend on it.
    encoders = _encoders(count, env.frames.shape[1:], cfg.max_long_side, cfg.quality)
    jpegs: list = [[] for _ in range(count)]   # held until the episode's outcome is known
    feedback: list = [None] * count
    running = np.array([not e.skipped for e in episodes], np.bool_)
    for t in range(budget):
        if not running.any():
            break
        rows = np.flatnonzero(running).tolist()
        t0 = time.perf_counter()
        frames, sizes = env.frames, env.frame_hw.tolist()   # each episode's own frame size
        for b in rows:
            episodes[b].images.append(f"{image_dir}/e{episodes[b].number:06d}_s{t:03d}.jpg")
            h, w = sizes[b]
            jpegs[b].append(encoders[b](frames[b, :h, :w]))
        timing["encode_s"] += time.perf_counter() - t0
        actions: list = [None] * count
        for b in rows:
            action = plans[b][t] if t < len(plans[b]) else STOP_ACTION
            actions[b] = action
            episodes[b].turns.extend(sharegpt_turns(
                turn_text(t, budget, instructions[b], feedback[b], True), action))
        t0 = time.perf_counter()
        _, reward, terminated, truncated, info = env.step(actions, active=running)
        timing["step_s"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        step_feedback = info["feedback"]
        for b in rows:
            feedback[b] = step_feedback[b]
        for b in np.flatnonzero(running & (terminated | truncated)).tolist():
            e = episodes[b]
            e.success = bool(terminated[b]) and reward[b] >= 1.0
            running[b] = False
            if e.success:
                if isinstance(keep, dict):
                    keep.update(zip(e.images, jpegs[b]))
                else:
                    keep([(path.rsplit("/", 1)[1], data) for path, data in zip(e.images, jpegs[b])])
            jpegs[b] = []
        timing["write_s"] += time.perf_counter() - t0


def _merge_counts(old: dict, new: dict) -> dict:
    merged = {k: old[k] + new[k] for k in ("attempted", "skipped_eval_overlap",
                                           "dropped_unsuccessful", "kept", "images")}
    per_strategy = dict(old["per_strategy"])
    for k, v in new["per_strategy"].items():
        per_strategy[k] = per_strategy.get(k, 0) + v
    merged["per_strategy"] = dict(sorted(per_strategy.items()))
    merged["hashes"] = old["hashes"] + new["hashes"]
    merged["max_episode_chars"] = max(old["max_episode_chars"], new["max_episode_chars"])
    merged["max_episode_images"] = max(old["max_episode_images"], new["max_episode_images"])
    return merged


def write_shard(out: Path, cfg: DemoConfig, key: dict, shard: ShardOutput) -> None:
    """Write a shard's files: images (if returned as bytes), its stats, its JSONL last. An
    extension (``shard.start > 0``) is merged with the verified shorter shard on disk; the result
    equals the shard built in one go."""
    names = _shard_names(cfg, shard.index)
    if shard.images and not shard.start:   # returned as bytes (Ray): a full rebuild's folder
        shutil.rmtree(out / names["images"], ignore_errors=True)
    for rel, data in shard.images.items():
        atomic_write(out / rel, data)
    body = ("\n".join(shard.lines) + "\n").encode() if shard.lines else b""
    counts, image_files = shard.counts, shard.image_files
    if shard.start:
        old = verify_shard(out, cfg, key, shard.index)
        if old is None or old["kept"] != shard.start:
            raise RuntimeError(f"{out / names['jsonl']}: changed while it was being extended")
        body = (out / names["jsonl"]).read_bytes() + body
        counts = _merge_counts(old, counts)
        image_files = old["image_files"] + image_files
    stats = {"shard": shard.index, "dataset": cfg.dataset, "key": key,
             "first_episode": shard.index * cfg.shard_size, **counts,
             "jsonl_bytes": len(body), "jsonl_sha256": hashlib.sha256(body).hexdigest(),
             "image_dir": names["images"], "image_files": sorted(image_files)}
    atomic_write(out / names["stats"],
                 (json.dumps(stats, sort_keys=True, separators=(",", ":")) + "\n").encode())
    atomic_write_staged(out / names["jsonl"], body, out / names["staging"])


def verify_shard(out: Path, cfg: DemoConfig, key: dict, index: int) -> dict | None:
    """The stats of shard ``index`` if it is complete and intact for ``key`` (JSONL digest and
    every referenced image's size as recorded), else None."""
    names = _shard_names(cfg, index)
    try:
        with open(out / names["stats"], "rb") as f:
            stats = json.loads(f.read())
        if stats.get("key") != key:
            return None
        body = (out / names["jsonl"]).read_bytes()
        if len(body) != stats["jsonl_bytes"] or (
                hashlib.sha256(body).hexdigest() != stats["jsonl_sha256"]):
            return None
        fd = os.open(out / stats["image_dir"], os.O_RDONLY)
        try:
            for name, size in stats["image_files"]:
                if os.stat(name, dir_fd=fd).st_size != size:
                    return None
        finally:
            os.close(fd)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return stats


def shard_done(out: Path, cfg: DemoConfig, index: int, key: dict | None = None) -> bool:
    """Whether shard ``index`` is complete and intact with all its episodes."""
    stats = verify_shard(Path(out), cfg, key or _read_key(Path(out), cfg), index)
    return stats is not None and stats["kept"] == cfg.shard_count(index)


def _read_key(out: Path, cfg: DemoConfig) -> dict | None:
    with contextlib.suppress(OSError, ValueError):
        with open(out / _shard_names(cfg, 0)["key"]) as f:
            return json.load(f)
    return None


def _build_and_write(cfg: DemoConfig, index: int, start: int, key: dict, out: Path) -> dict:
    """One shard built and written by the process that rolled it out; returns its stats."""
    shard = build_shard(cfg, index, out, start)
    write_shard(out, cfg, key, shard)
    return shard.stats


def _build_in_worker(args):
    return _build_and_write(*args)


def _worker_init(parent_pid: int, forbidden: dict) -> None:
    """Pool workers die with the run (a rerun must be the only writer of the output) and get
    the excluded hashes once."""
    die_with_parent(parent_pid)
    _FORBIDDEN.clear()
    _FORBIDDEN.update(forbidden)


def worker_pool(workers: int, forbidden: dict) -> ProcessPoolExecutor:
    """The run's process pool: workers forked when that is safe (bridges/pools.pool_context),
    dying with this process, holding ``forbidden`` (task -> excluded hashes)."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=pool_context(),
                               initializer=_worker_init, initargs=(os.getpid(), forbidden))


# ------------------------------------------------------------------------------ the run
class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled = total, enabled
        self.episodes = self.images = 0
        self.start = time.perf_counter()

    def update(self, stats: dict) -> None:
        self.episodes += stats["episodes"]
        self.images += stats["images"]
        if not self.enabled:
            return
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        rate = self.episodes / elapsed
        eta = (self.total - self.episodes) / rate if rate > 0 else float("nan")
        sys.stderr.write(f"\r  episodes {self.episodes}/{self.total}  {rate:7.1f} episodes/s  "
                         f"{self.images / elapsed:8.1f} images/s  ETA {eta:5.0f}s ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def _ray_build(ray_address: str):
    try:
        import ray
    except ImportError:
        raise ValueError("--ray: Ray is not installed (pip install 'visgym[ray]')") from None
    if not ray.is_initialized():
        ray.init(address=None if ray_address == "local" else ray_address,
                 ignore_reinit_error=True, log_to_driver=False)
    return ray.remote(build_shard)


def _read_json(path: Path):
    with contextlib.suppress(OSError, ValueError):
        with open(path) as f:
            return json.load(f)
    return None


def _remove_leftovers(out: Path, configs: list) -> None:
    """Temporary files of an interrupted run (the run holds the lock: nobody else writes)."""
    folders = [out] + [out / d for c in configs for d in (c.dataset, f".shards/{c.dataset}")]
    for folder in folders:
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                if entry.name.startswith(".") and entry.name.endswith(".tmp") and entry.is_file():
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)


def _plan(out: Path, cfg: DemoConfig, key: dict) -> tuple[list, int, list]:
    """(jobs, shards done, JSONL files to remove) for one dataset: a job is (config, shard,
    episodes already there); the files are shards' JSONLs that do not verify."""
    stats_dir = out / ".shards" / cfg.dataset
    existing = sorted(int(p.stem.split("-")[1]) for p in stats_dir.glob("shard-*.json")
                      if p.stem.split("-")[1].isdigit()) if stats_dir.is_dir() else []
    for s in existing:
        if s >= cfg.num_shards:
            stats = verify_shard(out, cfg, key, s)
            if stats is not None:
                raise ValueError(
                    f"--episodes: {out / cfg.dataset} already holds episodes up to "
                    f"{stats['first_episode'] + stats['kept']}; ask for at least that many, "
                    f"or use another --out")
    stale = []     # JSONLs beyond the last shard (any that verified was refused above)
    for path in (out / cfg.dataset).glob("shard-*.jsonl"):
        number = path.stem.split("-")[1]
        if number.isdigit() and int(number) >= cfg.num_shards:
            stale.append(path)
    jobs, done = [], 0
    for s in range(cfg.num_shards):
        want = cfg.shard_count(s)
        stats = verify_shard(out, cfg, key, s) if s in existing else None
        have = stats["kept"] if stats is not None else 0
        if have > want:
            raise ValueError(f"--episodes: {out / cfg.dataset} already holds episodes up to "
                             f"{s * cfg.shard_size + have}; ask for at least that many, or use "
                             f"another --out")
        if have == want:
            done += 1
            continue
        if have == 0:   # rebuilt from scratch: first take away a JSONL whose images go
            stale.append(out / _shard_names(cfg, s)["jsonl"])
        jobs.append((cfg, s, have))
    return jobs, done, stale


def generate(configs: list, out: str | os.PathLike, workers: int | None = None,
             ray_address: str | None = None, progress: bool = True,
             exclude_dataset_roots: list | tuple = ()) -> dict:
    """Generate every dataset of ``configs`` into ``out``; returns the manifest.

    ``exclude_dataset_roots``: published evaluation sets in the reference layout whose init
    states must not appear (besides the shipped splits, always excluded)."""
    out = Path(out)
    for cfg in configs:
        cfg.validate()
    datasets = [c.dataset for c in configs]
    if len(set(datasets)) != len(datasets):
        raise ValueError(f"--tasks/--strategy: dataset names collide: {datasets}")
    if len({c.max_long_side for c in configs}) > 1:
        raise ValueError("--max-long-side: every dataset of one output folder needs the same "
                         "value (the manifest's prompt settings are per folder)")
    roots = [os.path.abspath(r) for r in exclude_dataset_roots]
    tasks = sorted({c.task for c in configs})
    forbidden = {t: set(shipped_hashes(t)) for t in tasks}
    root_counts, skipped_lines = {}, 0
    for root in roots:
        found, bad = reference_layout_hashes(root, tasks)
        skipped_lines += bad
        root_counts[root] = {t: len(h) for t, h in found.items()}
        for t, h in found.items():
            forbidden[t] |= h
    forbidden = {t: frozenset(h) for t, h in forbidden.items()}
    keys = {c.dataset: dataset_key(c, _digest(forbidden[c.task])) for c in configs}

    start = time.perf_counter()
    with FolderLock(out, "--out"):
        previous = _read_json(out / "manifest.json") or {}
        _check_folder(out, configs, keys, previous)
        _remove_leftovers(out, configs)
        jobs, resumed, stale = [], 0, []
        for cfg in configs:
            cfg_jobs, done, cfg_stale = _plan(out, cfg, keys[cfg.dataset])
            jobs += cfg_jobs
            resumed += done
            stale += cfg_stale
        for path in stale:
            with contextlib.suppress(OSError):
                path.unlink()
        for cfg in configs:   # recorded before any shard is written
            path = out / _shard_names(cfg, 0)["key"]
            if _read_json(path) != keys[cfg.dataset]:
                atomic_write(path, (json.dumps(keys[cfg.dataset], sort_keys=True, indent=1)
                                    + "\n").encode())
        # Compile (or load) every task's kernels here, announced when the cache is cold, so the
        # forked workers start with them. The warm-up decides nothing (a failure in it is met
        # again, and reported, by the shards).
        for cfg in dict.fromkeys(cfg for cfg, _, _ in jobs):
            with contextlib.suppress(Exception):
                warm_up(cfg.env_id, strategies=cfg.strategies(),
                        num_steps=cfg.num_steps[0] if cfg.num_steps else None,
                        announce=progress)
        todo = sum(cfg.shard_count(s) - have for cfg, s, have in jobs)
        bar = _Progress(todo, progress)
        timing = {"reset_solve_s": 0.0, "step_s": 0.0, "encode_s": 0.0, "write_s": 0.0,
                  "total_s": 0.0}

        def collect(stats: dict):
            bar.update(stats)
            for k in timing:
                timing[k] += stats["timing"].get(k, 0.0)

        _FORBIDDEN.clear()
        _FORBIDDEN.update(forbidden)
        try:
            _run_jobs(jobs, out, keys, forbidden, workers, ray_address, collect)
        finally:
            bar.close()
        run = {"elapsed_s": round(time.perf_counter() - start, 3), "shards_resumed": resumed,
               "shards_extended": sum(1 for _, _, have in jobs if have),
               "episodes_generated": todo,
               "timing_s": {k: round(v, 3) for k, v in timing.items()}}
        exclusion = {"hash_rule": HASH_RULE, "shipped_splits": True, "dataset_roots": roots,
                     "dataset_root_states": root_counts, "skipped_lines": skipped_lines,
                     "hashes": {t: len(forbidden[t]) for t in tasks},
                     "sha256": {t: _digest(forbidden[t]) for t in tasks}}
        return write_manifest(out, configs, keys, run, exclusion, previous)


def _run_jobs(jobs, out, keys, forbidden, workers, ray_address, collect) -> None:
    if not jobs:
        return
    if ray_address:
        # Ray workers may not share the filesystem: shards come back as bytes and the driver
        # writes them (the same files the local paths write).
        remote = _ray_build(ray_address)
        import ray

        pending = {}
        refs = {t: ray.put(h) for t, h in forbidden.items()}
        for cfg, s, have in jobs:
            pending[remote.remote(cfg, s, None, have, refs[cfg.task])] = cfg
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    shard = ray.get(ref)
                    cfg = pending.pop(ref)
                    write_shard(out, cfg, keys[cfg.dataset], shard)
                    collect(shard.stats)
        finally:
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
    elif (workers or os.cpu_count() or 1) <= 1 or len(jobs) <= 1:
        for cfg, s, have in jobs:
            collect(_build_and_write(cfg, s, have, keys[cfg.dataset], out))
    else:
        pool = worker_pool(min(workers or os.cpu_count(), len(jobs)), forbidden)
        try:
            for stats in pool.map(_build_in_worker, [(cfg, s, have, keys[cfg.dataset], out)
                                                     for cfg, s, have in jobs]):
                collect(stats)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _check_folder(out: Path, configs: list, keys: dict, previous: dict) -> None:
    """Refuse, before anything is written, a run whose settings differ from what ``out``
    holds: per dataset its key, per folder the prompt settings."""
    for cfg in configs:
        names = _shard_names(cfg, 0)
        old = _read_json(out / names["key"])
        if old is None:
            if any((out / cfg.dataset).glob("shard-*.jsonl")):
                raise ValueError(f"--out: {out / cfg.dataset} was made by an older visgym "
                                 f"(no settings recorded); use another --out, or remove "
                                 f"{cfg.dataset}/, images/{cfg.dataset}/ and .shards/"
                                 f"{cfg.dataset}/ there first")
            continue
        if old != keys[cfg.dataset]:
            raise ValueError(f"--out: {out / cfg.dataset} holds demonstrations made with other "
                             f"settings ({_key_differences(old, keys[cfg.dataset])}); use "
                             f"another --out, or remove {cfg.dataset}/, images/{cfg.dataset}/ "
                             f"and .shards/{cfg.dataset}/ there first")
    prompt = previous.get("prompt")
    others = {k: v for k, v in (previous.get("datasets") or {}).items()
              if k not in keys and isinstance(v, dict)}
    if not prompt or not others:
        return
    if prompt.get("max_long_side") != configs[0].max_long_side:
        raise ValueError(f"--max-long-side: {out} holds datasets ({', '.join(sorted(others))}) "
                         f"made with --max-long-side {prompt.get('max_long_side') or 0}; one "
                         f"folder's prompts must agree (use another --out)")
    budgets = {v["config"]["task"] + "/" + v["config"]["split"]: v["key"]["max_steps"]
               for v in others.values() if "key" in v}
    for cfg in configs:
        if budgets.get(cfg.env_id, cfg.budget) != cfg.budget:
            raise ValueError(f"--max-steps: {out} holds {cfg.env_id} demonstrations with a "
                             f"budget of {budgets[cfg.env_id]} steps; one folder's prompts must "
                             f"agree (use another --out)")


def _read_stats(out: Path, cfg: DemoConfig) -> list:
    stats = []
    for s in range(cfg.num_shards):
        with open(out / _shard_names(cfg, s)["stats"]) as f:
            stats.append(json.load(f))
    return stats


def _image_tokens(width: int, height: int, max_pixels: int = IMAGE_MAX_PIXELS) -> int:
    """Qwen2-VL / Qwen2.5-VL visual tokens of an image (their processor's smart_resize: sides
    rounded to multiples of 28, area capped at ``max_pixels``, one token per 28x28), plus the
    vision start/end tokens."""
    factor = 28
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    return (h // factor) * (w // factor) + 2


def max_tokens_estimate(cfg: DemoConfig, max_images: int, max_chars: int) -> int:
    """A generous bound on the longest conversation's length in Qwen2.5-VL tokens: every image
    taken as large as the long-side limit allows (a square), 1 token per 3 characters of text
    (English prompts run nearer 4), 6 tokens of chat template per turn and a default system
    prompt."""
    side = cfg.max_long_side
    if side is None:
        env = _batch_env(cfg.env_id, 1, cfg.budget)
        side = max(env.frames.shape[1:3])
    return (max_images * _image_tokens(side, side) + math.ceil(max_chars / 3)
            + 6 * 2 * max_images + 32)


def write_manifest(out: Path, configs: list, keys: dict, run: dict, exclusion: dict,
                   previous: dict | None = None) -> dict:
    from .. import __version__

    datasets = {}
    previous = previous or {}
    for name, entry in (previous.get("datasets") or {}).items():
        if name not in keys and isinstance(entry, dict) and "key" in entry:
            datasets[name] = entry    # another run's dataset in the same folder
    for cfg in configs:
        stats = _read_stats(out, cfg)
        per_strategy: dict = {}
        for s in stats:
            for k, v in s["per_strategy"].items():
                per_strategy[k] = per_strategy.get(k, 0) + v
        max_images = max(s["max_episode_images"] for s in stats)
        max_chars = max(s["max_episode_chars"] for s in stats)
        datasets[cfg.dataset] = {
            "config": {**asdict(cfg), "num_steps": list(cfg.num_steps) if cfg.num_steps else None},
            "key": keys[cfg.dataset],
            "shards": cfg.num_shards,
            "episodes": sum(s["kept"] for s in stats),
            "kept": sum(s["kept"] for s in stats),
            "attempted": sum(s["attempted"] for s in stats),
            "images": sum(s["images"] for s in stats),
            "dropped_unsuccessful": sum(s["dropped_unsuccessful"] for s in stats),
            "skipped_eval_overlap": sum(s["skipped_eval_overlap"] for s in stats),
            "per_strategy": dict(sorted(per_strategy.items())),
            "max_episode_images": max_images,
            "max_tokens_estimate": max_tokens_estimate(cfg, max_images, max_chars),
            "seed_rule": SEED_RULE,
            "hash_rule": HASH_RULE,
            "hashes": [h for s in stats for h in s["hashes"]],
        }
    datasets = dict(sorted(datasets.items()))
    prompt = {**PROMPT_SETTINGS, "max_long_side": configs[0].max_long_side,
              "max_steps": dict(sorted({
                  d["config"]["task"] + "/" + d["config"]["split"]: d["key"]["max_steps"]
                  for d in datasets.values()}.items()))}
    task_versions = dict(sorted({d["config"]["task"] + "/" + d["config"]["split"]:
                                 d["key"]["task_version"] for d in datasets.values()}.items()))
    cutoff = cutoff_len(d["max_tokens_estimate"] for d in datasets.values())
    manifest = {"package_version": __version__, "task_versions": task_versions,
                "prompt": prompt, "exclusion": exclusion, "datasets": datasets,
                "llamafactory": {"recipe": LLAMAFACTORY_YAML, "datasets": list(datasets),
                                 "cutoff_len": cutoff},
                "run": run}
    write_dataset_info(out, list(datasets))
    atomic_write(out / LLAMAFACTORY_YAML, llamafactory_yaml(out, list(datasets), cutoff))
    atomic_write(out / "manifest.json", (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def cutoff_len(estimates) -> int:
    """LlamaFactory's ``cutoff_len`` for conversations up to the given token estimates: the
    reference's 15000, or more, rounded up to a thousand, where an estimate (plus 10%) needs it
    (a conversation longer than cutoff_len is cut, losing its last turns)."""
    longest = max(estimates, default=0)
    return max(LLAMAFACTORY_MIN_CUTOFF, math.ceil(longest * 1.1 / 1000) * 1000)


def llamafactory_yaml(out: Path, datasets: list, cutoff: int) -> str:
    """A complete LlamaFactory SFT recipe for Qwen2.5-VL-7B-Instruct on ``datasets`` of ``out``
    (LoRA; the comment says how to make it the reference's full fine-tune)."""
    q = json.dumps   # JSON strings are valid YAML scalars, whatever the path holds
    path = os.path.abspath(out / LLAMAFACTORY_YAML)
    return f"""\
# LlamaFactory SFT recipe written by `visgym demos` for the datasets of this folder.
# Train: llamafactory-cli train {path}
# LoRA on Qwen2.5-VL-7B-Instruct (one GPU with ~40 GB). The reference's full fine-tune
# (spec sft_data.md 6): finetuning_type: full, learning_rate: 1.0e-5, no lora_* keys, and
# deepspeed: examples/deepspeed/ds_z2_config.json (from a LlamaFactory checkout), 8 GPUs.
# Image paths in the records are relative to dataset_dir, which LlamaFactory resolves them against.

### model
model_name_or_path: Qwen/Qwen2.5-VL-7B-Instruct
image_max_pixels: {IMAGE_MAX_PIXELS}
video_max_pixels: 16384
trust_remote_code: true

### method
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all

### dataset
dataset_dir: {q(os.path.abspath(out))}
dataset: {q(",".join(datasets))}
template: qwen2_vl
cutoff_len: {cutoff}
overwrite_cache: true
preprocessing_num_workers: 16
dataloader_num_workers: 4

### output
output_dir: saves/qwen2_5vl-7b/lora/visgym_sft
logging_steps: 10
save_steps: 500
plot_loss: true
overwrite_output_dir: true
save_only_model: false
report_to: none

### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 1.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
bf16: true
ddp_timeout: 180000000
"""


def dataset_info_entry(file_name: str) -> dict:
    return {"file_name": file_name, "formatting": "sharegpt",
            "columns": {"messages": "conversations", "images": "images"},
            "tags": {"role_tag": "from", "content_tag": "value", "user_tag": "human",
                     "assistant_tag": "gpt"}}


def write_dataset_info(out: Path, names: list) -> None:
    path = out / "dataset_info.json"
    info = _read_json(path) or {}
    for name in names:
        info[name] = dataset_info_entry(name)
    atomic_write(path, (json.dumps(info, indent=2, sort_keys=True) + "\n").encode())


# ------------------------------------------------------------------------------ reading back
def iter_records(out: str | os.PathLike, dataset: str):
    """Every record of a dataset folder (its ``*.jsonl`` files in name order: a demos dataset's
    shards or a mixture's file)."""
    folder = Path(out) / dataset
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such dataset folder")
    for path in sorted(folder.glob("*.jsonl")):
        if path.name.startswith("."):
            continue
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as e:
                        raise ValueError(f"{path}: line {n} is not valid JSON ({e.msg})") from None


def list_datasets(out: str | os.PathLike) -> list:
    path = Path(out) / "dataset_info.json"
    if not path.exists():
        raise ValueError(f"{path}: missing (is {out} a visgym demos output folder?)")
    with open(path) as f:
        return sorted(json.load(f))


def apportion(total: int, weights: list) -> list:
    """Exact integer counts proportional to ``weights`` summing to ``total`` (largest remainder,
    ties to the earlier source)."""
    w = np.asarray(weights, dtype=np.float64)
    if total < 0 or (w < 0).any() or w.sum() <= 0:
        raise ValueError("--weights: need non-negative weights with a positive sum")
    exact = w / w.sum() * total
    counts = np.floor(exact).astype(int)
    order = sorted(range(len(w)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: total - counts.sum()]:
        counts[i] += 1
    return counts.tolist()


def mix(sources: list, out: str | os.PathLike, total: int, weights: list | None = None,
        seed: int = 0) -> dict:
    """One shuffled mixture with exact counts per source. ``sources`` are dataset folders
    (``DIR/<dataset>``) or output dirs (every dataset inside), of ``visgym demos`` or of an
    earlier mix (a mixture of mixtures). Images are referenced, not copied: paths are rewritten
    relative to ``out``; each record's ``source`` names the demos dataset it came from."""
    out = Path(out)
    resolved = []
    for src in sources:
        src = Path(src)
        if (src / "dataset_info.json").exists():
            resolved += [(src, name) for name in list_datasets(src)]
        elif src.is_dir() and (src.parent / "dataset_info.json").exists():
            resolved.append((src.parent, src.name))
        else:
            raise ValueError(f"{src}: not a visgym demos output folder or dataset folder")
    weights = weights or [1.0] * len(resolved)
    if len(weights) != len(resolved):
        raise ValueError(f"--weights: {len(weights)} weights for {len(resolved)} sources "
                         f"({', '.join(f'{r[0]}/{r[1]}' for r in resolved)})")
    counts = apportion(total, weights)
    rng = np.random.default_rng(seed)
    chosen = []
    prompts = []
    for (root, name), n in zip(resolved, counts):
        records = list(iter_records(root, name))
        if n > len(records):
            raise ValueError(f"{root / name}: has {len(records)} episodes, the mixture needs {n}")
        prompts.append((_read_json(root / "manifest.json") or {}).get("prompt"))
        picks = sorted(rng.choice(len(records), size=n, replace=False).tolist())
        for i in picks:
            record = records[i]
            record["images"] = [os.path.relpath(os.path.abspath(root / p), os.path.abspath(out))
                                for p in record["images"]]
            record.setdefault("source", f"{root.name}/{name}")
            chosen.append(record)
    order = rng.permutation(len(chosen))
    lines = "".join(json.dumps(chosen[i], separators=(",", ":"), ensure_ascii=False) + "\n"
                    for i in order)
    with FolderLock(out, "--out"):
        atomic_write_staged(out / "mixture" / "mixture.jsonl", lines, out)
        info = {"mixture": dataset_info_entry("mixture")}
        atomic_write(out / "dataset_info.json", (json.dumps(info, indent=2) + "\n").encode())
        summary = {"total": total, "seed": seed, "sources": [
            {"source": f"{root}/{name}", "weight": w, "count": n}
            for (root, name), w, n in zip(resolved, weights, counts)]}
        prompt = _merge_prompts(prompts)
        if prompt is not None:
            summary["prompt"] = prompt
        estimate = max((_token_estimate(root) for root in {r for r, _ in resolved}), default=0)
        summary["max_tokens_estimate"] = estimate
        cutoff = cutoff_len([estimate])
        atomic_write(out / LLAMAFACTORY_YAML, llamafactory_yaml(out, ["mixture"], cutoff))
        summary["llamafactory"] = {"recipe": LLAMAFACTORY_YAML, "datasets": ["mixture"],
                                   "cutoff_len": cutoff}
        atomic_write(out / "manifest.json", (json.dumps(summary, indent=1) + "\n").encode())
    return summary


def _token_estimate(root: Path) -> int:
    """The longest conversation's token estimate recorded by a demos or mix output folder."""
    manifest = _read_json(root / "manifest.json") or {}
    estimates = [d.get("max_tokens_estimate", 0) for d in (manifest.get("datasets") or {}).values()
                 if isinstance(d, dict)]
    return max(estimates + [manifest.get("max_tokens_estimate", 0)])


def _merge_prompts(prompts: list) -> dict | None:
    """The sources' common prompt settings (their step budgets merged), or None if a source has
    none or they disagree."""
    if not prompts or any(not isinstance(p, dict) for p in prompts):
        return None
    rest = [{k: v for k, v in p.items() if k != "max_steps"} for p in prompts]
    if any(r != rest[0] for r in rest):
        return None
    budgets: dict = {}
    for p in prompts:
        for env_id, n in (p.get("max_steps") or {}).items():
            if budgets.setdefault(env_id, n) != n:
                return None
    return {**rest[0], "max_steps": dict(sorted(budgets.items()))}


def export_hf(out: str | os.PathLike, dataset: str, target: str | os.PathLike):
    """Save a dataset as a Hugging Face ``datasets`` dataset with the images embedded."""
    try:
        import datasets as hf
    except ImportError:
        raise ValueError("export: the 'datasets' package is not installed "
                         "(pip install 'visgym[hf]')") from None
    root = Path(out)
    rows = {"conversations": [], "images": [], "env_id": [], "seed": []}
    for record in iter_records(root, dataset):
        rows["conversations"].append(record["conversations"])
        rows["images"].append([str(root / p) for p in record["images"]])
        rows["env_id"].append(record["env_id"])
        rows["seed"].append(record["seed"])
    features = hf.Features({
        "conversations": [{"from": hf.Value("string"), "value": hf.Value("string")}],
        "images": hf.Sequence(hf.Image()),
        "env_id": hf.Value("string"),
        "seed": hf.Value("uint64"),
    })
    ds = hf.Dataset.from_dict(rows, features=features)
    # Embed the image bytes so the saved dataset does not depend on the JPEG files.
    ds = ds.cast_column("images", hf.Sequence(hf.Image(decode=False)))
    ds = ds.map(lambda r: {"images": [{"bytes": Path(i["path"]).read_bytes(), "path": None}
                                      for i in r["images"]]})
    ds = ds.cast_column("images", hf.Sequence(hf.Image()))
    target = Path(target)
    if target.exists():
        shutil.rmtree(target)
    ds.save_to_disk(str(target))
    return ds
