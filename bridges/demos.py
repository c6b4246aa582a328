"""Demonstration synthesis: solver rollouts turned into supervised-finetuning conversations.

Implements spec/sft_data.md sections 1-4 as one pipeline: batched solver rollouts ->
multi-turn ShareGPT conversations (the layout LlamaFactory reads) with JPEG observations ->
test-set de-duplication -> ``dataset_info.json``; plus exact-count mixing and an optional Hugging
Face ``datasets`` export.

Work is split into shards: shard s of a dataset covers candidate episodes s*S .. s*S+S-1, whose
seeds are a hash of (task, split, base seed, episode number) and never one of the shipped
evaluation seeds. A shard is a pure function of the arguments, so it can run in any process or on
any Ray worker and gives the same bytes. Inside a shard all episodes are reset together in one
BatchEnv, planned by the batched solver, and every step renders and steps all of them in one call;
the frames are JPEG-encoded with the evaluation loop's encoder (same size limit) and the prompts
are the loop's own (bridges/conversation.py), with the think/answer suffix and feedback on, as
fine-tuned models are evaluated (spec 1.2).

Output layout under ``--out DIR`` (image paths in records are relative to DIR):

    DIR/dataset_info.json                       one LlamaFactory entry per dataset
    DIR/manifest.json                           counts, seeds, strategies, hashes, package and
                                                task versions, time
    DIR/<dataset>/shard-00000.jsonl ...         conversation records (only .jsonl files here)
    DIR/images/<dataset>/shard-00000/e000012_s003.jpg
    DIR/.shards/<dataset>/shard-00000.json      per-shard counts and hashes

A shard's JSONL is renamed into place last, after its images and counts, so an interrupted run
resumes by skipping every shard whose JSONL exists; rerunning with the same arguments gives
byte-identical shards (the manifest's elapsed time is the only field that changes).

Init-state hash (test-set de-duplication, spec 2.4): SHA-256 of ``task + "\\n" + canonical JSON``
of the episode's init-state dict, canonical JSON being ``json.dumps(d, sort_keys=True,
separators=(",", ":"), ensure_ascii=True)``. The shipped evaluation splits of every task and
split are hashed the same way; a candidate whose hash is among them is skipped and counted.

Reference quirks fixed (spec 9): datasets are named ``<task>`` or ``<task>_<strategy>`` (no
slash), so nothing is lost at consolidation (1); counts are reported exactly (2); solver
randomness and ``num_steps`` draws derive from the episode seed (5); the reply is
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
from ..core.registry import spec as env_spec
from .conversation import episode_instructions, sharegpt_turns, turn_text
from .files import atomic_write
from .imaging import frame_encoder
from .pools import pool_context
from .splits import task_versions
from .warmup import warm_up


# ------------------------------------------------------------------------------ hashing
def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def init_state_hash(task: str, init_state: dict) -> str:
    return hashlib.sha256((task + "\n" + canonical_json(init_state)).encode()).hexdigest()


@lru_cache(maxsize=1)
def evaluation_hashes() -> frozenset:
    """Hashes of every shipped evaluation episode (all tasks, both splits)."""
    from .splits import SPLITS, load_split, split_path, tasks_with_splits

    hashes = set()
    for task in tasks_with_splits():
        for split in SPLITS:
            if split_path(task, split).exists():
                hashes.update(init_state_hash(task, e.init_state) for e in load_split(task, split))
    return frozenset(hashes)


def demo_seed(task: str, split: str, base_seed: int, episode: int) -> int:
    digest = hashlib.sha256(f"visgym-demos/{task}/{split}/{base_seed}/{episode}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


# ------------------------------------------------------------------------------ config
@dataclass(frozen=True)
class DemoConfig:
    task: str
    split: str = "easy"
    episodes: int = 100
    strategy: str | None = None           # None: the family's default; "mixed": cycle them
    shard_size: int = 100
    seed: int = 0
    num_steps: tuple | None = None         # (lo, hi) inclusive, drawn per episode
    max_steps: int | None = None           # None: the evaluation budget (20 easy, 30 hard)
    max_long_side: int | None = 336
    quality: int = 75

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
        self.strategies()


# ------------------------------------------------------------------------------ one shard
@dataclass
class ShardOutput:
    index: int
    files: dict = field(default_factory=dict)   # path relative to the output dir -> bytes
    stats: dict = field(default_factory=dict)


def _shard_names(cfg: DemoConfig, index: int) -> dict:
    name = f"shard-{index:05d}"
    return {"jsonl": f"{cfg.dataset}/{name}.jsonl",
            "stats": f".shards/{cfg.dataset}/{name}.json",
            "images": f"images/{cfg.dataset}/{name}"}


class _ImageDir:
    """Writes a shard's JPEGs straight into its image folder (the process-pool path).

    The folder is emptied first: a shard is only rebuilt when its JSONL is missing, so anything
    there is from an interrupted run. Files are created relative to an open folder descriptor,
    which saves the path walk per image; there is no temp-and-rename per image because the
    shard's JSONL, renamed into place after every image is written, is what marks it complete.
    """

    def __init__(self, folder: Path):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        self.fd = os.open(folder, os.O_RDONLY)

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

    def close(self) -> None:
        os.close(self.fd)


_ENCODERS: dict = {}


def _encoders(count: int, shape: tuple, max_long_side, quality: int) -> list:
    pool = _ENCODERS.setdefault((shape, max_long_side, quality), [])
    pool.extend(frame_encoder(shape, max_long_side, quality) for _ in range(count - len(pool)))
    return pool[:count]


ROLLOUT_BATCH = 16
"""Episodes stepped together inside a shard. Small enough that the batch's frames, the
encoders' previous frames and block arrays of both workers stay in the shared L3 cache (at 100
encoding took 1.5x as long, at 32 the bench ran ~15% slower than at 16); episodes are
independent, so this does not change any output."""

_ENVS: dict = {}


def _batch_env(env_id: str, count: int, budget: int):
    key = (env_id, count, budget)
    if key not in _ENVS:
        _ENVS[key] = make(env_id, num_envs=count, autoreset="disabled", max_steps=budget)
    return _ENVS[key]


@dataclass
class _Episode:
    number: int
    seed: int
    strategy: str | None
    num_steps: int | None
    init_state: dict = None
    hash: str = ""
    skipped: bool = False
    success: bool = False
    turns: list = field(default_factory=list)
    images: list = field(default_factory=list)


def build_shard(cfg: DemoConfig, index: int, out: Path | None = None) -> ShardOutput:
    """Roll out shard ``index`` and return every file it produces (bytes, relative paths).

    With ``out``, the images are written under ``out`` as episodes finish instead of being
    returned (the JSONL and counts are still returned, for ``write_shard``)."""
    t_start = time.perf_counter()
    timing = {"reset_solve_s": 0.0, "step_s": 0.0, "encode_s": 0.0, "write_s": 0.0}
    first = index * cfg.shard_size
    count = min(cfg.shard_size, cfg.episodes - first)
    strategies = cfg.strategies()
    episodes = []
    for k in range(first, first + count):
        seed = demo_seed(cfg.task, cfg.split, cfg.seed, k)
        # Strategy and plan length per episode, from the episode number and seed only.
        num_steps = None
        if cfg.num_steps is not None:
            num_steps = int(np.random.default_rng(seed).integers(cfg.num_steps[0],
                                                                  cfg.num_steps[1] + 1))
        episodes.append(_Episode(k, seed, strategies[k % len(strategies)], num_steps))
    names = _shard_names(cfg, index)
    files: dict = {}
    sink = _ImageDir(out / names["images"]) if out is not None else None
    try:
        for lo in range(0, count, ROLLOUT_BATCH):
            _rollout(cfg, episodes[lo:lo + ROLLOUT_BATCH], names["images"], timing,
                     files if sink is None else sink.write_all)
    finally:
        if sink is not None:
            sink.close()

    lines = []
    kept_hashes = []
    per_strategy: dict = {}
    for e in episodes:
        if e.skipped or not e.success:
            continue
        record = {"episode": e.number, "env_id": cfg.env_id, "seed": e.seed,
                  "strategy": e.strategy, "num_steps": e.num_steps, "hash": e.hash,
                  "init_state": e.init_state, "conversations": e.turns, "images": e.images,
                  "stats": {"steps": len(e.images), "reward": 1.0, "terminated": True,
                            "truncated": False}}
        lines.append(json.dumps(record, separators=(",", ":"), ensure_ascii=False))
        kept_hashes.append(e.hash)
        key = e.strategy or "default"
        per_strategy[key] = per_strategy.get(key, 0) + 1
    stats = {"shard": index, "dataset": cfg.dataset, "first_episode": first, "attempted": count,
             "skipped_eval_overlap": sum(e.skipped for e in episodes),
             "dropped_unsuccessful": sum(not e.skipped and not e.success for e in episodes),
             "kept": len(lines),
             "images": sum(len(e.images) for e in episodes if e.success and not e.skipped),
             "per_strategy": per_strategy, "hashes": kept_hashes}
    files[names["stats"]] = (json.dumps(stats, sort_keys=True, indent=1) + "\n").encode()
    files[names["jsonl"]] = ("\n".join(lines) + "\n" if lines else "").encode()
    timing["total_s"] = time.perf_counter() - t_start
    return ShardOutput(index=index, files=files, stats={**stats, "timing": timing})


def _rollout(cfg: DemoConfig, episodes: list, image_dir: str, timing: dict, keep) -> None:
    """Step ``episodes`` together in one BatchEnv, filling in their outcome, turns and image
    paths; the JPEGs of successful episodes go to ``keep`` (a dict by relative path, or a
    callable taking a list of (file name, bytes)) when each episode ends."""
    count = len(episodes)
    budget = cfg.budget
    env = _batch_env(cfg.env_id, count, budget)
    t0 = time.perf_counter()
    env.reset(seeds=[e.seed for e in episodes])
    forbidden = evaluation_hashes()
    for e, state in zip(episodes, env.state_dicts()):
        e.init_state = state
        e.hash = init_state_hash(cfg.task, state)
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
        frames = env.frames
        for b in rows:
            episodes[b].images.append(f"{image_dir}/e{episodes[b].number:06d}_s{t:03d}.jpg")
            jpegs[b].append(encoders[b](frames[b]))
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


def write_shard(out: Path, cfg: DemoConfig, shard: ShardOutput) -> None:
    """Write a shard's files; its JSONL last, as the completion marker."""
    names = _shard_names(cfg, shard.index)
    for rel, data in shard.files.items():
        if rel != names["jsonl"]:
            atomic_write(out / rel, data)
    atomic_write(out / names["jsonl"], shard.files[names["jsonl"]])


def shard_done(out: Path, cfg: DemoConfig, index: int) -> bool:
    names = _shard_names(cfg, index)
    return (out / names["jsonl"]).exists() and (out / names["stats"]).exists()


def _build_and_write(cfg: DemoConfig, index: int, out: Path) -> dict:
    """One shard built and written by the process that rolled it out; returns its stats."""
    shard = build_shard(cfg, index, out)
    write_shard(out, cfg, shard)
    return shard.stats


def _build_in_worker(args):
    return _build_and_write(*args)


# ------------------------------------------------------------------------------ the run
class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled = total, enabled
        self.episodes = self.images = 0
        self.start = time.perf_counter()

    def update(self, stats: dict) -> None:
        self.episodes += stats["attempted"]
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


def generate(configs: list, out: str | os.PathLike, workers: int | None = None,
             ray_address: str | None = None, progress: bool = True) -> dict:
    """Generate every dataset of ``configs`` into ``out``; returns the manifest."""
    out = Path(out)
    for cfg in configs:
        cfg.validate()
    datasets = [c.dataset for c in configs]
    if len(set(datasets)) != len(datasets):
        raise ValueError(f"--tasks/--strategy: dataset names collide: {datasets}")
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    evaluation_hashes()  # computed once here; forked workers inherit it (~50 ms each otherwise)
    jobs = [(cfg, s) for cfg in configs for s in range(cfg.num_shards) if not shard_done(out, cfg, s)]
    # Compile (or load) every task's kernels here, announced when the cache is cold, so the
    # forked workers start with them. The warm-up decides nothing (a failure in it is met again,
    # and reported, by the shards).
    for cfg in dict.fromkeys(cfg for cfg, _ in jobs):
        with contextlib.suppress(Exception):
            warm_up(cfg.env_id, strategies=cfg.strategies(),
                    num_steps=cfg.num_steps[0] if cfg.num_steps else None, announce=progress)
    resumed = sum(c.num_shards for c in configs) - len(jobs)
    bar = _Progress(sum(min(cfg.shard_size, cfg.episodes - s * cfg.shard_size) for cfg, s in jobs),
                    progress)
    timing = {"reset_solve_s": 0.0, "step_s": 0.0, "encode_s": 0.0, "write_s": 0.0,
              "total_s": 0.0}

    def collect(stats: dict):
        bar.update(stats)
        for k in timing:
            timing[k] += stats["timing"].get(k, 0.0)

    if ray_address:
        # Ray workers may not share the filesystem: shards come back as bytes and the driver
        # writes them (the same files the local paths write).
        remote = _ray_build(ray_address)
        import ray

        pending = {remote.remote(cfg, s): cfg for cfg, s in jobs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                shard = ray.get(ref)
                write_shard(out, pending.pop(ref), shard)
                collect(shard.stats)
    elif (workers or os.cpu_count() or 1) <= 1 or len(jobs) <= 1:
        for cfg, s in jobs:
            collect(_build_and_write(cfg, s, out))
    else:
        with ProcessPoolExecutor(max_workers=workers or os.cpu_count(),
                                 mp_context=pool_context()) as pool:
            for stats in pool.map(_build_in_worker, [(cfg, s, out) for cfg, s in jobs]):
                collect(stats)
    bar.close()
    manifest = write_manifest(out, configs, time.perf_counter() - start, resumed, timing)
    write_dataset_info(out, configs)
    return manifest


def _read_stats(out: Path, cfg: DemoConfig) -> list:
    stats = []
    for s in range(cfg.num_shards):
        with open(out / _shard_names(cfg, s)["stats"]) as f:
            stats.append(json.load(f))
    return stats


def write_manifest(out: Path, configs: list, elapsed: float, resumed: int, timing: dict) -> dict:
    from .. import __version__

    datasets = {}
    for cfg in configs:
        stats = _read_stats(out, cfg)
        per_strategy: dict = {}
        for s in stats:
            for k, v in s["per_strategy"].items():
                per_strategy[k] = per_strategy.get(k, 0) + v
        datasets[cfg.dataset] = {
            "config": {**asdict(cfg), "num_steps": list(cfg.num_steps) if cfg.num_steps else None},
            "shards": cfg.num_shards,
            "attempted": sum(s["attempted"] for s in stats),
            "kept": sum(s["kept"] for s in stats),
            "images": sum(s["images"] for s in stats),
            "dropped_unsuccessful": sum(s["dropped_unsuccessful"] for s in stats),
            "skipped_eval_overlap": sum(s["skipped_eval_overlap"] for s in stats),
            "per_strategy": per_strategy,
            "seed_rule": "sha256('visgym-demos/<task>/<split>/<seed>/<episode>')[:8] little-endian >> 1",
            "hash_rule": "sha256(task + '\\n' + canonical JSON of init_state)",
            "hashes": [h for s in stats for h in s["hashes"]],
        }
    manifest = {"package_version": __version__,
                "task_versions": task_versions(cfg.env_id for cfg in configs),
                "datasets": datasets,
                "elapsed_s": round(elapsed, 3), "shards_resumed": resumed,
                "timing_s": {k: round(v, 3) for k, v in timing.items()}}
    atomic_write(out / "manifest.json", (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def dataset_info_entry(file_name: str) -> dict:
    return {"file_name": file_name, "formatting": "sharegpt",
            "columns": {"messages": "conversations", "images": "images"},
            "tags": {"role_tag": "from", "content_tag": "value", "user_tag": "human",
                     "assistant_tag": "gpt"}}


def write_dataset_info(out: Path, configs: list) -> None:
    path = out / "dataset_info.json"
    info = {}
    if path.exists():
        with open(path) as f:
            info = json.load(f)
    for cfg in configs:
        info[cfg.dataset] = dataset_info_entry(cfg.dataset)
    atomic_write(path, (json.dumps(info, indent=2, sort_keys=True) + "\n").encode())


# ------------------------------------------------------------------------------ reading back
def iter_records(out: str | os.PathLike, dataset: str):
    folder = Path(out) / dataset
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such dataset folder")
    for path in sorted(folder.glob("shard-*.jsonl")):
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
    (``DIR/<dataset>``) or output dirs (every dataset inside). Images are referenced, not copied:
    paths are rewritten relative to ``out``."""
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
    for (root, name), n in zip(resolved, counts):
        records = list(iter_records(root, name))
        if n > len(records):
            raise ValueError(f"{root / name}: has {len(records)} episodes, the mixture needs {n}")
        picks = sorted(rng.choice(len(records), size=n, replace=False).tolist())
        for i in picks:
            record = records[i]
            record["images"] = [os.path.relpath(root / p, out) for p in record["images"]]
            record["source"] = f"{root.name}/{name}"
            chosen.append(record)
    order = rng.permutation(len(chosen))
    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(chosen[i], separators=(",", ":"), ensure_ascii=False) + "\n"
                    for i in order)
    atomic_write(out / "mixture" / "mixture.jsonl", lines.encode())
    info = {"mixture": dataset_info_entry("mixture")}
    atomic_write(out / "dataset_info.json", (json.dumps(info, indent=2) + "\n").encode())
    summary = {"total": total, "seed": seed, "sources": [
        {"source": f"{root}/{name}", "weight": w, "count": n}
        for (root, name), w, n in zip(resolved, weights, counts)]}
    atomic_write(out / "manifest.json", (json.dumps(summary, indent=1) + "\n").encode())
    return summary


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
