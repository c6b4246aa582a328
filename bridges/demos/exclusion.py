"""Test-set de-duplication (spec sft_data.md 2.4): the init-state hashes kept out of the data.

An init state's hash is SHA-256 of ``task + "\\n" + canonical JSON`` of its dict
(``HASH_RULE``). Excluded are the shipped evaluation splits of the task (``shipped_hashes``,
both splits) and the init states of every published evaluation set given with
``--exclude-dataset-root`` (``reference_layout_hashes``).
"""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from ...core import make

HASH_RULE = ("sha256(task + '\\n' + canonical JSON of init_state), canonical JSON = "
             "json.dumps(state, sort_keys=True, separators=(',', ':'), ensure_ascii=True)")


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def init_state_hash(task: str, init_state: dict) -> str:
    return hash_canonical(task, canonical_json(init_state))


def hash_canonical(task: str, canonical: str) -> str:
    """The hash of an init state given as its canonical JSON."""
    return hashlib.sha256((task + "\n" + canonical).encode()).hexdigest()


@lru_cache(maxsize=None)
def shipped_hashes(task: str) -> frozenset:
    """Hashes of the shipped evaluation episodes of ``task`` (both splits)."""
    from ..splits import SPLITS, load_split, split_path

    hashes = set()
    for split in SPLITS:
        if split_path(task, split).exists():
            hashes.update(init_state_hash(task, e.init_state) for e in load_split(task, split))
    return frozenset(hashes)


def evaluation_hashes() -> frozenset:
    """Hashes of every shipped evaluation episode (all tasks, both splits)."""
    from ..splits import tasks_with_splits

    return frozenset().union(*(shipped_hashes(t) for t in tasks_with_splits()))


def reference_layout_hashes(root, tasks: list) -> tuple[dict, int]:
    """``{task: hashes}`` of the init states of a published evaluation set in the reference
    layout (bridges/splits.load_reference_layout, both splits where present) for ``tasks``, and
    the number of unparsable lines skipped. Each state is hashed as stored and after a round trip
    through its env (the form generated candidates are hashed in)."""
    from ..splits import SPLITS, load_reference_layout

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


def digest(hashes) -> str:
    """The SHA-256 of a set of hashes (a dataset key's ``exclusion_sha256``)."""
    return hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()
