"""Run directories as the report sees them: a run's ``run.json``, whether a folder is a
complete run to report (``run_problem``), and runs loaded for a comparison (``_Run``: label,
run.json, records and summary rows), with the (task, split) order shared by every comparison.
"""
from __future__ import annotations

import json
import os

from ..records import EPISODES_FILE, load_records
from .formatting import _describe
from .stats import ALL_TASK, _split_sort_key, summarize

RUN_FILE = "run.json"


def _load_run_info(run_dir) -> dict:
    """run.json as a dict, or {} when absent or unreadable (a report must not need it)."""
    path = os.path.join(os.fspath(run_dir), RUN_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            info = json.load(fh)
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def run_problem(run_dir) -> str | None:
    """Why ``run_dir`` is not a complete run directory to report, or None when it is one.

    Incomplete: the folder is missing; it has no run.json (written when a run starts) or an
    unreadable one; its episodes.jsonl is missing or holds no record yet; or the file ends in a
    cut line, which only an interrupted write leaves (``visgym eval --resume`` cuts it off and
    continues the run)."""
    run_dir = os.fspath(run_dir)
    if not os.path.isdir(run_dir):
        return "no such run directory"
    run_json = os.path.join(run_dir, RUN_FILE)
    if not os.path.isfile(run_json):
        return f"no {RUN_FILE} (not a visgym eval run directory)"
    try:
        with open(run_json, encoding="utf-8") as fh:
            if not isinstance(json.load(fh), dict):
                return f"{RUN_FILE} does not hold a JSON object"
    except (OSError, ValueError) as exc:
        return f"{RUN_FILE} is unreadable ({type(exc).__name__})"
    path = os.path.join(run_dir, EPISODES_FILE)
    if not os.path.isfile(path):
        return f"no {EPISODES_FILE} (the run has not finished an episode)"
    try:
        with open(path, "rb") as fh:
            blank = not any(line.strip() for line in fh)   # stops at the first record
            size = fh.seek(0, os.SEEK_END)
            last = b""
            if size:
                fh.seek(size - 1)
                last = fh.read(1)
    except OSError as exc:
        return f"{EPISODES_FILE} is unreadable ({exc.strerror or exc})"
    if blank:
        return f"{EPISODES_FILE} is empty (the run has not finished an episode)"
    if last != b"\n":
        return (f"{EPISODES_FILE} ends in a cut line (the run was interrupted; "
                "'visgym eval --resume' repairs it and continues)")
    return None


class _Run:
    """One run directory loaded for a comparison: its label, run.json, records, summary rows."""

    def __init__(self, run_dir: str, label: str | None = None, records=None):
        self.dir = os.fspath(run_dir)
        self.info = _load_run_info(self.dir)
        self.records = load_records(self.dir) if records is None else records
        self.rows = summarize(self.records)
        self.by_key = {(r["task"], r["split"]): r for r in self.rows}
        self.label = label or os.path.basename(os.path.normpath(self.dir))

    @property
    def model(self) -> str:
        """The model from run.json; offline agents (solver, random, replay) have none, so
        their agent name stands in."""
        for key in ("model", "agent"):
            if self.info.get(key) not in (None, ""):
                return _describe(self.info[key])
        return ""

    @property
    def header(self) -> str:
        return f"{self.label} ({_describe(self.info['model'])})" if self.info.get("model") \
            else self.label


def _load_runs(run_dirs) -> list[_Run]:
    """The runs, labelled by folder name; where two share a name, by their last two path
    components (then the whole path) so that every column stays tellable apart."""
    dirs = [os.fspath(d) for d in run_dirs]
    labels = [os.path.basename(os.path.normpath(d)) for d in dirs]
    for depth in (2, None):
        if len(set(labels)) == len(labels):
            break
        labels = [os.path.join(*os.path.normpath(os.path.abspath(d)).split(os.sep)[-depth:])
                  if depth else os.path.normpath(d) for d in dirs]
    return [_Run(d, label) for d, label in zip(dirs, labels)]


def _ordered_keys(runs: list[_Run]) -> tuple[list[str], list[tuple[str, str]]]:
    keys = {k for run in runs for k in run.by_key if k[0] != ALL_TASK}
    splits = sorted({s for _, s in keys}, key=_split_sort_key)
    return splits, [(t, s) for s in splits for t in sorted(t for t, s2 in keys if s2 == s)]
