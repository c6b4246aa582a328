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
attempts are stepped ``ROLLOUT_BATCH`` at a time in one BatchEnv, planned by the batched solver
and played by one turn loop each (bridges/turns.EpisodeLoop, prompted with
prompts.DEMO_PROMPT: the think/answer suffix, feedback on, the full history; spec 1.2), so the
prompts, the episode's end and its success are the evaluation loop's own; frames are
JPEG-encoded with the evaluation loop's encoder.

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

Modules: ``config`` (DemoConfig, the dataset key, the seeds), ``exclusion`` (init-state hashes
and the excluded evaluation episodes), ``rollout`` (a batch of attempts through the turn loop),
``shards`` (building, writing and checking a shard), ``run`` (``generate``: folder checks, the
plan, the worker pool / Ray / in-process jobs), ``manifest`` (the manifest, token estimates and
the LlamaFactory files), ``mixing`` (reading back, ``mix``, ``export_hf``).
"""
from __future__ import annotations

from . import config, exclusion, manifest, mixing, rollout, run, shards
from .config import (FORMAT, MAX_ATTEMPTS_PER_EPISODE, PROMPT_SETTINGS, SEED_RULE, DemoConfig,
                     attempt_seed, dataset_key, demo_seed, key_differences)
from .exclusion import (HASH_RULE, canonical_json, evaluation_hashes, init_state_hash,
                        reference_layout_hashes, shipped_hashes)
from .manifest import (IMAGE_MAX_PIXELS, LLAMAFACTORY_MIN_CUTOFF, LLAMAFACTORY_YAML, cutoff_len,
                       dataset_info_entry, llamafactory_yaml, max_tokens_estimate,
                       write_dataset_info, write_manifest)
from .mixing import apportion, export_hf, iter_records, list_datasets, mix
from .rollout import ROLLOUT_BATCH
from .run import generate, worker_pool
from .shards import ShardOutput, build_shard, shard_done, verify_shard, write_shard

__all__ = ["FORMAT", "HASH_RULE", "IMAGE_MAX_PIXELS", "LLAMAFACTORY_MIN_CUTOFF",
           "LLAMAFACTORY_YAML", "MAX_ATTEMPTS_PER_EPISODE", "PROMPT_SETTINGS", "ROLLOUT_BATCH",
           "SEED_RULE", "DemoConfig", "ShardOutput", "apportion", "attempt_seed", "build_shard",
           "canonical_json", "config", "cutoff_len", "dataset_info_entry", "dataset_key",
           "demo_seed", "evaluation_hashes", "exclusion", "export_hf", "generate",
           "init_state_hash", "iter_records", "key_differences", "list_datasets",
           "llamafactory_yaml", "manifest", "max_tokens_estimate", "mix", "mixing",
           "reference_layout_hashes", "rollout", "run", "shard_done", "shards",
           "shipped_hashes", "verify_shard", "worker_pool", "write_dataset_info",
           "write_manifest", "write_shard"]
