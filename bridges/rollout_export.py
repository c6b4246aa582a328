"""A rollout run folder as a Hugging Face ``datasets`` Parquet file, and helpers for trainers.

``export_parquet(run_dir, path)`` (``visgym rollouts-export DIR PATH.parquet``) writes one row
per trajectory of ``run_dir/episodes.jsonl`` (bridges/rollouts.py; first record per key, a torn
last line skipped): the trajectory's fields as typed columns, its turns as a list of structs
(the messages as sent kept as a JSON string per turn, since their content parts differ in shape;
the token ids and log-probabilities as lists), and the JPEGs its messages refer to embedded
once per trajectory (``images``, in the order of ``image_sha256``), so the Parquet file is
self-contained. The rows go through an Arrow cache in a temporary folder, so a run of any size
is exported without holding it in memory.

``materialize(messages, images)`` turns stored messages back into what a chat template or an
OpenAI-compatible server takes: each ``{"type": "image", "sha256": ...}`` part becomes an
``image_url`` part with a data URL (or the file's path), from a run folder or from the
``images`` of an in-process ``collect``.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
from pathlib import Path

from .records import RecordFile

SCALARS = {
    "run_id": "string", "episode_id": "string", "group_id": "string", "member": "int32",
    "group_size": "int32", "env_id": "string", "task": "string", "split": "string",
    "index": "int64", "family_version": "int32", "seed": "uint64", "policy_model": "string",
    "reward_mode": "string", "stop_reason": "string", "return": "float64", "success": "bool",
    "steps": "int32", "terminated": "bool", "truncated": "bool", "invalid_actions": "int32",
    "start_state_hash": "string", "final_state_hash": "string", "error": "string",
}
TIMES = ("policy_s", "env_s", "elapsed_s")
TURN_SCALARS = {
    "step": "int32", "reply": "string", "reply_flag": "string", "stepped": "bool",
    "action": "string", "invalid": "bool", "reward": "float64", "terminated": "bool",
    "truncated": "bool", "feedback": "string", "code": "int32", "state_hash_before": "string",
    "state_hash_after": "string", "latency_s": "float64", "attempts": "int32", "error": "string",
}


def features():
    """The dataset's ``datasets.Features`` (see the module docstring)."""
    hf = _datasets()
    turn = {name: hf.Value(kind) for name, kind in TURN_SCALARS.items()}
    turn.update(messages=hf.Value("string"), token_ids=hf.List(hf.Value("int64")),
                logprobs=hf.List(hf.Value("float64")), reward_task=hf.Value("float64"),
                reward_shaping=hf.Value("float64"))
    columns = {name: hf.Value(kind) for name, kind in SCALARS.items()}
    columns.update({name: hf.Value("float64") for name in TIMES})
    columns.update(sampling=hf.Value("string"), turns=hf.List(turn),
                   image_sha256=hf.List(hf.Value("string")), images=hf.List(hf.Image()))
    return hf.Features(columns)


def _datasets():
    try:
        import datasets
    except ImportError:
        raise ValueError("export: the 'datasets' package is not installed "
                         "(pip install 'visgym[hf]')") from None
    return datasets


def image_shas(record: dict) -> list:
    """The hashes of the images a trajectory's messages refer to, each once, in order."""
    seen: dict = {}
    for turn in record.get("turns") or ():
        for message in turn.get("messages") or ():
            content = message.get("content")
            if isinstance(content, list):
                for part in content:
                    if part.get("type") == "image":
                        seen.setdefault(part["sha256"], None)
    return list(seen)


def row(record: dict, run_dir: Path) -> dict:
    """A trajectory record as a dataset row."""
    out = {name: record.get(name) for name in SCALARS}
    times = record.get("time") or {}
    out.update({name: times.get(name) for name in TIMES})
    out["sampling"] = json.dumps(record.get("sampling"), sort_keys=True)
    turns = []
    for turn in record.get("turns") or ():
        entry = {name: turn.get(name) for name in TURN_SCALARS}
        components = turn.get("reward_components") or {}
        entry.update(messages=json.dumps(turn.get("messages"), ensure_ascii=False),
                     token_ids=turn.get("token_ids"), logprobs=turn.get("logprobs"),
                     reward_task=components.get("task"), reward_shaping=components.get("shaping"))
        turns.append(entry)
    out["turns"] = turns
    shas = image_shas(record)
    out["image_sha256"] = shas
    out["images"] = [{"bytes": (run_dir / "images" / f"{sha}.jpg").read_bytes(), "path": None}
                     for sha in shas]
    return out


def export_parquet(run_dir, path) -> int:
    """Write the trajectories of ``run_dir`` to the Parquet file ``path``; return the rows."""
    hf = _datasets()
    run_dir = Path(run_dir)
    records = RecordFile(run_dir)
    if not records.exists():
        raise ValueError(f"export: {records.path} not found: {str(run_dir)!r} is not a "
                         "'visgym rollouts' folder")

    def generate(run_dir: str, stamp: str):
        # One row per key, the first record of it (records.py's rule); ``stamp`` only
        # distinguishes exports in the cache's fingerprint.
        seen = set()
        for record in RecordFile(run_dir):
            if record["key"] not in seen:
                seen.add(record["key"])
                yield row(record, Path(run_dir))

    cache = tempfile.mkdtemp(prefix="visgym-rollouts-export-")
    bars = not hf.utils.are_progress_bars_disabled()
    hf.utils.disable_progress_bars()     # the CLI prints one line of its own
    try:
        if next(iter(records), None) is None:
            dataset = hf.Dataset.from_list([], features=features())
        else:
            dataset = hf.Dataset.from_generator(
                generate, features=features(), cache_dir=cache,
                gen_kwargs={"run_dir": str(run_dir), "stamp": cache})
        path = Path(path)
        if path.parent != Path(""):
            path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        dataset.to_parquet(str(tmp))
        os.replace(tmp, path)
        return len(dataset)
    finally:
        if bars:
            hf.utils.enable_progress_bars()
        shutil.rmtree(cache, ignore_errors=True)


def materialize(messages: list, images, form: str = "data_url") -> list:
    """Stored messages with their images put back: ``images`` is a run folder (its
    ``images/<sha256>.jpg``) or a ``{sha256: bytes}`` mapping (an in-process ``collect``);
    ``form`` "data_url" (JPEG data URLs, what an OpenAI-compatible server takes) or "path"
    (the files' paths; run folders only)."""
    if form not in ("data_url", "path"):
        raise ValueError(f"form: expected 'data_url' or 'path', got {form!r}")
    folder = None if isinstance(images, dict) else Path(images) / "images"
    if folder is None and form == "path":
        raise ValueError("form: 'path' needs a run folder, not images in memory")
    out = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            out.append(dict(message))
            continue
        parts = []
        for part in content:
            if part.get("type") != "image":
                parts.append(dict(part))
                continue
            sha = part["sha256"]
            if form == "path":
                url = str(folder / f"{sha}.jpg")
            else:
                data = images[sha] if folder is None else (folder / f"{sha}.jpg").read_bytes()
                url = "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")
            parts.append({"type": "image_url", "image_url": {"url": url}})
        out.append({"role": message["role"], "content": parts})
    return out
