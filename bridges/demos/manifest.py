"""A demos folder's manifest, its LlamaFactory files, and the token estimates behind them.

``write_manifest`` sums the shards' stats per dataset into ``manifest.json`` (counts, seeds,
strategies, hashes, the prompt settings, the exclusions, package and task versions and the
run's timing) and writes ``dataset_info.json`` (one LlamaFactory entry per dataset) and
``llamafactory_sft.yaml`` (a training recipe naming every dataset, its ``cutoff_len`` large
enough for the longest conversation's token estimate).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, replace
from pathlib import Path

from ..files import atomic_write
from ..prompts import DEMO_PROMPT
from .config import SEED_RULE, DemoConfig
from .exclusion import HASH_RULE
from .rollout import batch_env
from .shards import read_json, shard_names

LLAMAFACTORY_YAML = "llamafactory_sft.yaml"
LLAMAFACTORY_MIN_CUTOFF = 15000   # the reference's training configs (spec sft_data.md 6.1)
IMAGE_MAX_PIXELS = 262144         # ditto: image_max_pixels of the reference's configs


def _read_stats(out: Path, cfg: DemoConfig) -> list:
    stats = []
    for s in range(cfg.num_shards):
        with open(out / shard_names(cfg, s)["stats"]) as f:
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
        env = batch_env(cfg.env_id, 1, cfg.budget)
        side = max(env.frames.shape[1:3])
    return (max_images * _image_tokens(side, side) + math.ceil(max_chars / 3)
            + 6 * 2 * max_images + 32)


def _dataset_entry(out: Path, cfg: DemoConfig, key: dict) -> dict:
    """A dataset's manifest entry, summed from its shards' stats."""
    stats = _read_stats(out, cfg)
    per_strategy: dict = {}
    for s in stats:
        for k, v in s["per_strategy"].items():
            per_strategy[k] = per_strategy.get(k, 0) + v
    max_images = max(s["max_episode_images"] for s in stats)
    max_chars = max(s["max_episode_chars"] for s in stats)
    return {
        "config": {**asdict(cfg), "num_steps": list(cfg.num_steps) if cfg.num_steps else None},
        "key": key,
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


def write_manifest(out: Path, configs: list, keys: dict, run: dict, exclusion: dict,
                   previous: dict | None = None) -> dict:
    """Write the folder's manifest, dataset_info.json and LlamaFactory recipe; return the
    manifest. ``previous``: the manifest there before (its other datasets are kept)."""
    from ... import __version__

    datasets = {}
    previous = previous or {}
    for name, entry in (previous.get("datasets") or {}).items():
        if name not in keys and isinstance(entry, dict) and "key" in entry:
            datasets[name] = entry    # another run's dataset in the same folder
    for cfg in configs:
        datasets[cfg.dataset] = _dataset_entry(out, cfg, keys[cfg.dataset])
    datasets = dict(sorted(datasets.items()))
    budgets = {d["config"]["task"] + "/" + d["config"]["split"]: d["key"]["max_steps"]
               for d in datasets.values()}
    prompt = replace(DEMO_PROMPT, max_long_side=configs[0].max_long_side,
                     max_steps=budgets).manifest()
    task_versions = dict(sorted({d["config"]["task"] + "/" + d["config"]["split"]:
                                 d["key"]["task_version"] for d in datasets.values()}.items()))
    cutoff = cutoff_len(d["max_tokens_estimate"] for d in datasets.values())
    write_dataset_info(out, list(datasets))
    manifest = {"package_version": __version__, "task_versions": task_versions,
                "prompt": prompt, "exclusion": exclusion, "datasets": datasets,
                "llamafactory": write_recipe(out, list(datasets), cutoff), "run": run}
    atomic_write(out / "manifest.json", (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def cutoff_len(estimates) -> int:
    """LlamaFactory's ``cutoff_len`` for conversations up to the given token estimates: the
    reference's 15000, or more, rounded up to a thousand, where an estimate (plus 10%) needs it
    (a conversation longer than cutoff_len is cut, losing its last turns)."""
    longest = max(estimates, default=0)
    return max(LLAMAFACTORY_MIN_CUTOFF, math.ceil(longest * 1.1 / 1000) * 1000)


def write_recipe(out: Path, datasets: list, cutoff: int) -> dict:
    """Write the LlamaFactory recipe of ``datasets``; return the manifest's "llamafactory"
    block."""
    atomic_write(out / LLAMAFACTORY_YAML, llamafactory_yaml(out, datasets, cutoff))
    return {"recipe": LLAMAFACTORY_YAML, "datasets": list(datasets), "cutoff_len": cutoff}


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
# No trust_remote_code: Qwen2.5-VL is built into transformers (4.49 and later), so no code from
# the model's repository needs to run; set it only for a model that ships its own code.

### model
model_name_or_path: Qwen/Qwen2.5-VL-7B-Instruct
image_max_pixels: {IMAGE_MAX_PIXELS}
video_max_pixels: 16384

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
    info = read_json(path) or {}
    for name in names:
        info[name] = dataset_info_entry(name)
    atomic_write(path, (json.dumps(info, indent=2, sort_keys=True) + "\n").encode())
