"""One shard: its attempts rolled out, its images and records written, and its check.

Shard s of a dataset holds episodes s*S .. s*S+S-1 (S = ``--shard-size``). ``build_shard``
rolls out attempts ``ROLLOUT_BATCH`` at a time (rollout.py) until every episode has a successful
attempt that is not an excluded evaluation episode, and returns the records; ``write_shard``
writes the shard's files (images, then its stats, then its JSONL, renamed into place last);
``verify_shard`` / ``shard_done`` tell whether a shard on disk is complete and intact.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..files import atomic_write, atomic_write_staged
from . import exclusion
from .config import MAX_ATTEMPTS_PER_EPISODE, DemoConfig
from .rollout import ROLLOUT_BATCH, new_attempt, rollout

FORBIDDEN: dict = {}
"""task -> hashes excluded from the demonstrations, set by generate() (and in pool workers by
their initializer) for build_shard."""


@dataclass
class ShardOutput:
    index: int
    start: int = 0                                # episodes of the shard already on disk
    lines: list = field(default_factory=list)     # JSONL lines of the new episodes, in order
    images: dict = field(default_factory=dict)    # relative path -> bytes (if not written)
    image_files: list = field(default_factory=list)   # [name, size] of the new images
    counts: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)     # counts and timing, for progress


def shard_names(cfg: DemoConfig, index: int) -> dict:
    """The paths of shard ``index``'s files, relative to the output folder."""
    name = f"shard-{index:05d}"
    return {"jsonl": f"{cfg.dataset}/{name}.jsonl",
            "stats": f".shards/{cfg.dataset}/{name}.json",
            "key": f".shards/{cfg.dataset}/key.json",
            "staging": f".shards/{cfg.dataset}",
            "images": f"images/{cfg.dataset}/{name}"}


def read_json(path: Path):
    """The value of a JSON file, or None if it is missing or unreadable."""
    with contextlib.suppress(OSError, ValueError):
        with open(path) as f:
            return json.load(f)
    return None


def read_key(out: Path, cfg: DemoConfig) -> dict | None:
    """The dataset key recorded in ``out`` for ``cfg``'s dataset."""
    return read_json(out / shard_names(cfg, 0)["key"])


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
                size = os.write(fd, data)
                if size < len(data):   # a short write (rare): the rest
                    view = memoryview(data)[size:]
                    while view:
                        view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            self.written.append([name, len(data)])

    def close(self) -> None:
        os.close(self.fd)


def build_shard(cfg: DemoConfig, index: int, out: Path | None = None, start: int = 0,
                forbidden: frozenset | None = None) -> ShardOutput:
    """Roll out episodes ``start``.. of shard ``index`` and return what they produce.

    With ``out``, the images are written under ``out`` as episodes finish (the JSONL and stats
    are written by ``write_shard``); without, they are returned as bytes. ``forbidden``: the
    init-state hashes to skip (default: what generate() set, else the shipped splits')."""
    t_start = time.perf_counter()
    timing = {"reset_solve_s": 0.0, "step_s": 0.0, "encode_s": 0.0, "write_s": 0.0}
    if forbidden is None:
        forbidden = FORBIDDEN.get(cfg.task)
        if forbidden is None:
            forbidden = exclusion.shipped_hashes(cfg.task)
    first = index * cfg.shard_size
    count = cfg.shard_count(index)
    strategies = cfg.strategies()
    names = shard_names(cfg, index)
    wanted = count - start
    limit = MAX_ATTEMPTS_PER_EPISODE * wanted
    pending = [new_attempt(cfg, strategies, k, 0) for k in range(first + start, first + count)]
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
            rollout(cfg, batch, names["images"], timing,
                    images if sink is None else sink.write_all, forbidden)
            for e in batch:
                if e.success:
                    kept[e.number] = e
                    continue
                skipped += e.skipped
                dropped += not e.skipped
                pending.append(new_attempt(cfg, strategies, e.number, e.attempt + 1))
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
        # A record is a tree: no circular check (the same bytes, ~10% faster).
        lines.append(json.dumps(record, separators=(",", ":"), ensure_ascii=False,
                                check_circular=False))
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
    names = shard_names(cfg, shard.index)
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
    names = shard_names(cfg, index)
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
    stats = verify_shard(Path(out), cfg, key or read_key(Path(out), cfg), index)
    return stats is not None and stats["kept"] == cfg.shard_count(index)
