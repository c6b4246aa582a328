"""Comparison of several runs: per task and split one success rate per run, as a markdown
table (``compare_runs``), as rows (``comparison_rows``), and as the files ``write_comparison``
writes (comparison.md, .csv, .png and .html).
"""
from __future__ import annotations

import os

from ..files import atomic_write
from .charts import _png_bytes, render_comparison_chart
from .formatting import _describe, _md_escape, _num, _pct, csv_text
from .html import _comparison_html
from .runs import _load_runs, _ordered_keys, _Run
from .stats import ALL_TASK, SUMMARY_FIELDS

COMPARISON_FIELDS = ["run", "model", "agent"] + SUMMARY_FIELDS


def _compare_table(runs: list[_Run]) -> str:
    splits, ordered = _ordered_keys(runs)
    out = ["| Task | Split | " + " | ".join(_md_escape(r.header) for r in runs) + " |",
           "|---|---|" + "---:|" * len(runs)]
    for task, split in ordered:
        cells = []
        for run in runs:
            r = run.by_key.get((task, split))
            cells.append("-" if r is None else
                         f"{_pct(r['success_rate'])} ({r['successes']}/{r['n']})")
        out.append(f"| {_md_escape(task)} | {_md_escape(split)} | " + " | ".join(cells) + " |")
    for split in splits:
        n_tasks = sum(1 for _, s in ordered if s == split)
        cells = []
        for run in runs:
            r = run.by_key.get((ALL_TASK, split))
            if r is None:
                cells.append("-")
            elif r["n_tasks"] < n_tasks:
                cells.append(f"**{_pct(r['success_rate'])}** ({r['n_tasks']}/{n_tasks} tasks)")
            else:
                cells.append(f"**{_pct(r['success_rate'])}**")
        out.append(f"| **mean** | {_md_escape(split)} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def compare_runs(run_dirs) -> str:
    """A markdown table with one row per task/split present in any run and one success-rate
    column per run (headed by the directory name and the model from run.json), closed by one
    mean row per split. A run's mean covers only the tasks it has; when that is fewer than the
    table's, the cell says so, because such means are not comparable."""
    run_dirs = [os.fspath(d) for d in run_dirs]
    if not run_dirs:
        raise ValueError("compare_runs needs at least one run directory")
    return _compare_table(_load_runs(run_dirs))


def comparison_rows(runs: list[_Run]) -> list[dict]:
    """The rows of comparison.csv: per (task, split) in summary order, one row per run that has
    it (``run``, ``model``, ``agent`` and the summary fields), then each split's ALL rows."""
    splits, ordered = _ordered_keys(runs)
    keys = [k for split in splits
            for k in [kk for kk in ordered if kk[1] == split] + [(ALL_TASK, split)]]
    rows = []
    for key in keys:
        for run in runs:
            r = run.by_key.get(key)
            if r is not None:
                rows.append({"run": run.label, "model": run.model,
                             "agent": _describe(run.info.get("agent") or ""), **r})
    return rows


def _comparison_csv(rows: list[dict]) -> str:
    return csv_text(rows, COMPARISON_FIELDS)


def _comparison_markdown(runs: list[_Run], rows: list[dict], skipped: list) -> str:
    out = ["# visgym comparison", "",
           "| Run | Model | Agent | Split | Episodes | Finished | Directory |",
           "|---|---|---|---|---:|---|---|"]
    for run in runs:
        out.append(f"| {_md_escape(run.label)} | {_md_escape(run.info.get('model') or '-')} | "
                   f"{_md_escape(_describe(run.info.get('agent') or '-'))} | "
                   f"{_md_escape(_describe(run.info.get('split') or '-'))} | "
                   f"{len(run.records)} | {_md_escape(run.info.get('finished') or 'no')} | "
                   f"`{_md_escape(run.dir)}` |")
    if skipped:
        out.append("")
        out.extend(f"_Skipped `{_md_escape(d)}`: {_md_escape(why)}._" for d, why in skipped)
    out += ["", "## Success rate", "", _compare_table(runs).rstrip("\n"), "",
            "## Per task and run", "",
            "| Task | Split | Run | Model | N | Success | 95% CI | Mean steps | Invalid actions "
            "| Error replies |",
            "|---|---|---|---|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        if r["task"] == ALL_TASK:
            task, ci = f"**{ALL_TASK}** (mean of {r['n_tasks']})", ""
            success = f"**{_pct(r['success_rate'])}**"
        else:
            task, ci = _md_escape(r["task"]), f"{_pct(r['ci_low'])} - {_pct(r['ci_high'])}"
            success = f"{_pct(r['success_rate'])} ({r['successes']}/{r['n']})"
        out.append(f"| {task} | {_md_escape(r['split'])} | {_md_escape(r['run'])} | "
                   f"{_md_escape(r['model'] or '-')} | {r['n']} | {success} | {ci} | "
                   f"{_num(r['mean_steps'])} | {_pct(r['invalid_action_rate'])} | "
                   f"{_pct(r['error_reply_rate'])} |")
    out += ["", "Success = reward 1.0. Intervals are 95% Wilson score intervals; ALL rows are "
            "unweighted means over a run's tasks (not comparable where runs cover different "
            "tasks). Invalid-action and error-reply rates are per step."]
    return "\n".join(out) + "\n"


def write_comparison(run_dirs, out_dir, html: bool = True, skipped=()) -> dict:
    """Write ``comparison.md``, ``comparison.csv`` (one row per model x task x split: success
    rate, 95 % Wilson interval, mean steps, invalid-action, truncation and error-reply rates),
    ``comparison.png`` (per task, the runs' bars side by side with their intervals) and, with
    ``html``, ``comparison.html`` (linking each run's report/index.html) into ``out_dir``, each
    atomically. ``run_dirs`` are folders (or runs ``main_report`` already loaded);
    ``skipped`` lists (dir, reason) pairs to mention. Returns the paths."""
    runs = list(run_dirs)
    if runs and not all(isinstance(r, _Run) for r in runs):
        runs = _load_runs(runs)
    if not runs:
        raise ValueError("a comparison needs at least one run directory")
    out_dir = os.fspath(out_dir)
    rows = comparison_rows(runs)
    paths = {"md": os.path.join(out_dir, "comparison.md"),
             "csv": os.path.join(out_dir, "comparison.csv"),
             "png": os.path.join(out_dir, "comparison.png")}
    atomic_write(paths["md"], _comparison_markdown(runs, rows, list(skipped)))
    atomic_write(paths["csv"], _comparison_csv(rows))
    title = "Success rate by task: " + ", ".join(run.label for run in runs)
    if len(title) > 120:
        title = f"Success rate by task: {len(runs)} runs"
    atomic_write(paths["png"], _png_bytes(render_comparison_chart(runs, title)))
    if html:
        paths["html"] = os.path.join(out_dir, "comparison.html")
        atomic_write(paths["html"], _comparison_html(runs, out_dir, list(skipped)))
    return paths
