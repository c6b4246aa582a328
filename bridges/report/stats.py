"""Statistics of a run's episode records: the 95 % Wilson interval of a success rate and the
per-(task, split) summary rows (success rate with its interval, mean steps, invalid-action,
truncation and error-reply rates, and per split the unweighted mean over tasks) that every
table, chart and page of the report is drawn from.
"""
from __future__ import annotations

import math

from ..records import record_spoiled, record_success

ALL_TASK = "ALL"
# Splits of the evaluation set in their natural order; any other split sorts after them.
_SPLIT_ORDER = {"easy": 0, "hard": 1}

SUMMARY_FIELDS = [
    "task",
    "split",
    "n_tasks",
    "n",
    "successes",
    "success_rate",
    "ci_low",
    "ci_high",
    "mean_steps",
    "invalid_action_rate",
    "truncated_rate",
    "error_reply_rate",
    "server_spoiled",
]


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (z = 1.959964 gives 95 %).

    Chosen over the normal approximation because it stays inside [0, 1] and keeps a non-zero
    width at 0/n and n/n, which are common per-task outcomes over 70 episodes. With no trials
    nothing is known, so n = 0 gives (0.0, 1.0).
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = (z / denom) * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n))
    # In closed form the bound at 0/n is exactly 0 and at n/n exactly 1; pin them so that
    # rounding never puts the observed rate outside its own interval.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def _task_split(rec: dict) -> tuple[str, str]:
    env_id = str(rec.get("env_id") or "")
    head, _, tail = env_id.partition("/")
    task = rec.get("task") or head or "?"
    split = rec.get("split") or tail or "?"
    return str(task), str(split)


def _int(value, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _steps(rec: dict) -> int:
    if rec.get("steps") is not None:
        return _int(rec["steps"])
    log = rec.get("steps_log")
    return len(log) if isinstance(log, list) else 0


def _split_sort_key(split: str):
    return (_SPLIT_ORDER.get(split, len(_SPLIT_ORDER)), split)


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def summarize(records) -> list[dict]:
    """One row per (task, split), splits in easy, hard, other order and tasks alphabetical,
    each split closed by an ``ALL`` row.

    Task rows: ``n`` episodes, ``successes``, ``success_rate`` with its 95 % Wilson interval
    (``ci_low``, ``ci_high``), ``mean_steps``, ``invalid_action_rate`` (invalid actions per
    step taken), ``truncated_rate`` (per episode) and ``error_reply_rate`` (error placeholder
    replies per step). The ``ALL`` row holds the unweighted mean over its tasks of every rate
    and of ``mean_steps`` (the paper's per-split number: each task counts once however many
    episodes it has), totals for ``n`` and ``successes``, ``n_tasks`` tasks, and no interval,
    since a mean of rates is not a binomial proportion. Episodes the server spoiled (records.py)
    count in no rate and no ``n``: ``server_spoiled`` says how many there were (a resume plays
    them again); a task all of whose episodes were spoiled has no rates (None).
    """
    groups: dict[tuple[str, str], list[dict]] = {}
    for rec in records:
        groups.setdefault(_task_split(rec), []).append(rec)

    rows: list[dict] = []
    for split in sorted({s for _, s in groups}, key=_split_sort_key):
        task_rows = []
        for task in sorted(t for t, s in groups if s == split):
            recs = [r for r in groups[(task, split)] if not record_spoiled(r)]
            n = len(recs)
            successes = sum(record_success(r) for r in recs)
            steps = sum(_steps(r) for r in recs)
            invalid = sum(_int(r.get("invalid_actions")) for r in recs)
            errors = sum(_int(r.get("error_replies")) for r in recs)
            truncated = sum(bool(r.get("truncated")) for r in recs)
            low, high = wilson_interval(successes, n) if n else (None, None)
            task_rows.append({
                "task": task,
                "split": split,
                "n_tasks": 1,
                "n": n,
                "successes": successes,
                "success_rate": successes / n if n else None,
                "ci_low": low,
                "ci_high": high,
                "mean_steps": steps / n if n else None,
                # Per step, not per episode: an episode that hits the budget has more chances.
                "invalid_action_rate": invalid / steps if steps else None,
                "truncated_rate": truncated / n if n else None,
                "error_reply_rate": errors / steps if steps else None,
                "server_spoiled": len(groups[(task, split)]) - n,
            })
        rows.extend(task_rows)
        rows.append({
            "task": ALL_TASK,
            "split": split,
            "n_tasks": len(task_rows),
            "n": sum(r["n"] for r in task_rows),
            "successes": sum(r["successes"] for r in task_rows),
            "success_rate": _mean(r["success_rate"] for r in task_rows),
            "ci_low": None,
            "ci_high": None,
            "mean_steps": _mean(r["mean_steps"] for r in task_rows),
            "invalid_action_rate": _mean(r["invalid_action_rate"] for r in task_rows),
            "truncated_rate": _mean(r["truncated_rate"] for r in task_rows),
            "error_reply_rate": _mean(r["error_reply_rate"] for r in task_rows),
            "server_spoiled": sum(r["server_spoiled"] for r in task_rows),
        })
    return rows
