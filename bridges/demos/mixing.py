"""Reading demonstrations back, mixing datasets with exact counts, and the Hugging Face export.

``iter_records`` reads a dataset folder's records (a demos dataset's shards or a mixture's
file); ``mix`` draws one shuffled mixture with exact counts per source (``apportion``), its
images referenced, not copied; ``export_hf`` saves a dataset as a Hugging Face ``datasets``
dataset with the images embedded.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from ..files import FolderLock, atomic_write, atomic_write_staged
from .manifest import cutoff_len, dataset_info_entry, write_recipe
from .shards import read_json


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


def _resolve(sources: list) -> list:
    """(output folder, dataset) of every dataset the sources name."""
    resolved = []
    for src in sources:
        src = Path(src)
        if (src / "dataset_info.json").exists():
            resolved += [(src, name) for name in list_datasets(src)]
        elif src.is_dir() and (src.parent / "dataset_info.json").exists():
            resolved.append((src.parent, src.name))
        else:
            raise ValueError(f"{src}: not a visgym demos output folder or dataset folder")
    return resolved


def mix(sources: list, out: str | os.PathLike, total: int, weights: list | None = None,
        seed: int = 0) -> dict:
    """One shuffled mixture with exact counts per source. ``sources`` are dataset folders
    (``DIR/<dataset>``) or output dirs (every dataset inside), of ``visgym demos`` or of an
    earlier mix (a mixture of mixtures). Images are referenced, not copied: paths are rewritten
    relative to ``out``; each record's ``source`` names the demos dataset it came from."""
    out = Path(out)
    resolved = _resolve(sources)
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
        prompts.append((read_json(root / "manifest.json") or {}).get("prompt"))
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
        summary["llamafactory"] = write_recipe(out, ["mixture"], cutoff_len([estimate]))
        atomic_write(out / "manifest.json", (json.dumps(summary, indent=1) + "\n").encode())
    return summary


def _token_estimate(root: Path) -> int:
    """The longest conversation's token estimate recorded by a demos or mix output folder."""
    manifest = read_json(root / "manifest.json") or {}
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
