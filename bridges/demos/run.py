"""A demos run: the folder checks, the plan of shards to build, and the jobs that build them.

``generate`` takes the output folder's lock, refuses settings that differ from what the folder
holds (``_check_folder``), removes what an interrupted run left (temp files, JSONLs of shards to
rebuild), plans the shards still to build or extend (``_plan``), warms up the kernels and runs
the jobs in this process, on a process pool whose workers die with the run (``worker_pool``), or
on Ray, then writes the manifest.
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..files import FolderLock, atomic_write
from ..pools import die_with_parent, pool_context
from ..progress import Progress
from ..run_folder import remove_stale_temp_files
from ..warmup import warm_up_all
from . import exclusion
from .config import DemoConfig, dataset_key, key_differences
from .exclusion import HASH_RULE, digest, reference_layout_hashes
from .manifest import write_manifest
from .shards import (FORBIDDEN, build_shard, read_json, shard_names, verify_shard,
                     write_shard)

TIMING = ("reset_solve_s", "step_s", "encode_s", "write_s", "total_s")
"""The parts of the workers' time a run adds up (the manifest's ``run.timing_s``)."""


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
    FORBIDDEN.clear()
    FORBIDDEN.update(forbidden)


def worker_pool(workers: int, forbidden: dict) -> ProcessPoolExecutor:
    """The run's process pool: workers forked when that is safe (bridges/pools.pool_context),
    dying with this process, holding ``forbidden`` (task -> excluded hashes)."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=pool_context(),
                               initializer=_worker_init, initargs=(os.getpid(), forbidden))


def _ray_build(ray_address: str):
    try:
        import ray
    except ImportError:
        raise ValueError("--ray: Ray is not installed (pip install 'visgym[ray]')") from None
    if not ray.is_initialized():
        ray.init(address=None if ray_address == "local" else ray_address,
                 ignore_reinit_error=True, log_to_driver=False)
    return ray.remote(build_shard)


def _safe_strategies(cfg: DemoConfig) -> list:
    """The dataset's strategies ([None] when they cannot be listed: the shards report why)."""
    try:
        return cfg.strategies()
    except Exception:  # noqa: BLE001 - warming decides nothing
        return [None]


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
            stale.append(out / shard_names(cfg, s)["jsonl"])
        jobs.append((cfg, s, have))
    return jobs, done, stale


def _exclusions(tasks: list, roots: list) -> tuple[dict, dict]:
    """(task -> excluded hashes, the manifest's "exclusion" block): the shipped splits' and
    those of the published evaluation sets under ``roots``."""
    forbidden = {t: set(exclusion.shipped_hashes(t)) for t in tasks}
    root_counts, skipped_lines = {}, 0
    for root in roots:
        found, bad = reference_layout_hashes(root, tasks)
        skipped_lines += bad
        root_counts[root] = {t: len(h) for t, h in found.items()}
        for t, h in found.items():
            forbidden[t] |= h
    forbidden = {t: frozenset(h) for t, h in forbidden.items()}
    block = {"hash_rule": HASH_RULE, "shipped_splits": True, "dataset_roots": roots,
             "dataset_root_states": root_counts, "skipped_lines": skipped_lines,
             "hashes": {t: len(forbidden[t]) for t in tasks},
             "sha256": {t: digest(forbidden[t]) for t in tasks}}
    return forbidden, block


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
    forbidden, excluded = _exclusions(tasks, roots)
    keys = {c.dataset: dataset_key(c, excluded["sha256"][c.task]) for c in configs}

    start = time.perf_counter()
    with FolderLock(out, "--out"):
        previous = read_json(out / "manifest.json") or {}
        _check_folder(out, configs, keys, previous)
        # Temporary files of an interrupted run (the run holds the lock: nobody else writes).
        remove_stale_temp_files([out] + [out / d for c in configs
                                         for d in (c.dataset, f".shards/{c.dataset}")])
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
            path = out / shard_names(cfg, 0)["key"]
            if read_json(path) != keys[cfg.dataset]:
                atomic_write(path, (json.dumps(keys[cfg.dataset], sort_keys=True, indent=1)
                                    + "\n").encode())
        # Compile (or load) every task's kernels here, announced when the cache is cold, so the
        # forked workers start with them. The warm-up decides nothing (a failure in it is met
        # again, and reported, by the shards).
        warm_up_all([(cfg.env_id, {"strategies": _safe_strategies(cfg),
                                   "num_steps": cfg.num_steps[0] if cfg.num_steps else None})
                     for cfg in dict.fromkeys(cfg for cfg, _, _ in jobs)], announce=progress)
        todo = sum(cfg.shard_count(s) - have for cfg, s, have in jobs)
        bar = Progress(todo, enabled=progress, style="demos")
        timing = dict.fromkeys(TIMING, 0.0)

        def collect(stats: dict):
            bar.done += stats["episodes"]
            bar.images += stats["images"]
            bar.show()
            for k in timing:
                timing[k] += stats["timing"].get(k, 0.0)

        FORBIDDEN.clear()
        FORBIDDEN.update(forbidden)
        try:
            _run_jobs(jobs, out, keys, forbidden, workers, ray_address, collect)
        finally:
            bar.close()
        run = {"elapsed_s": round(time.perf_counter() - start, 3), "shards_resumed": resumed,
               "shards_extended": sum(1 for _, _, have in jobs if have),
               "episodes_generated": todo,
               "timing_s": {k: round(v, 3) for k, v in timing.items()}}
        return write_manifest(out, configs, keys, run, excluded, previous)


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
        old = read_json(out / shard_names(cfg, 0)["key"])
        if old is None:
            if any((out / cfg.dataset).glob("shard-*.jsonl")):
                raise ValueError(f"--out: {out / cfg.dataset} was made by an older visgym "
                                 f"(no settings recorded); use another --out, or remove "
                                 f"{cfg.dataset}/, images/{cfg.dataset}/ and .shards/"
                                 f"{cfg.dataset}/ there first")
            continue
        if old != keys[cfg.dataset]:
            raise ValueError(f"--out: {out / cfg.dataset} holds demonstrations made with other "
                             f"settings ({key_differences(old, keys[cfg.dataset])}); use "
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
