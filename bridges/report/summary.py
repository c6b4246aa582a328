"""The summary of one run: ``summary.md`` (run facts and the per-task table), ``summary.csv``
(the summary rows) and ``success.png`` next to the run's log, plus its HTML report, written by
``write_summary`` when ``visgym eval`` ends a run and by ``visgym report``.
"""
from __future__ import annotations

import os

from ..files import atomic_write
from ..records import EPISODES_FILE, load_records
from .charts import _png_bytes, render_success_chart
from .formatting import _describe, _md_escape, _num, _pct, csv_text
from .html import write_html_report
from .runs import _load_run_info
from .stats import ALL_TASK, SUMMARY_FIELDS, summarize


def _summary_markdown(run_dir: str, rows: list[dict], records: list, info: dict) -> str:
    name = os.path.basename(os.path.normpath(run_dir))
    out = [f"# visgym run `{name}`", ""]
    facts = [f"{k}: **{_md_escape(_describe(info[k]))}**" for k in ("model", "agent", "split")
             if info.get(k) not in (None, "")]
    n_tasks = len({r["task"] for r in rows if r["task"] != ALL_TASK})
    facts.append(f"episodes: **{len(records)}** over {n_tasks} task(s)")
    out.append(" | ".join(facts))
    times = [f"{k}: {info[k]}" for k in ("started", "finished") if info.get(k)]
    if times:
        out.append("")
        out.append(", ".join(times))
    garbled = getattr(records, "garbled", 0)
    duplicates = getattr(records, "duplicates", 0)
    if garbled or duplicates:
        out.append("")
        out.append(f"_{EPISODES_FILE}: {garbled} garbled line(s) skipped, "
                   f"{duplicates} repeated key(s) ignored._")
    out.append("")
    if not rows:
        out.append("No finished episodes yet.")
        return "\n".join(out) + "\n"
    out.append("| Task | Split | N | Success | 95% CI | Mean steps | Invalid actions "
               "| Truncated | Error replies | Spoiled by the server |")
    out.append("|---|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if r["task"] == ALL_TASK:
            task = f"**{ALL_TASK}** (mean of {r['n_tasks']})"
            success = f"**{_pct(r['success_rate'])}**"
            ci = ""
        else:
            task = _md_escape(r["task"])
            success = f"{_pct(r['success_rate'])} ({r['successes']}/{r['n']})"
            ci = f"{_pct(r['ci_low'])} - {_pct(r['ci_high'])}"
        out.append(
            f"| {task} | {_md_escape(r['split'])} | {r['n']} | {success} | {ci} | "
            f"{_num(r['mean_steps'])} | {_pct(r['invalid_action_rate'])} | "
            f"{_pct(r['truncated_rate'])} | {_pct(r['error_reply_rate'])} | "
            f"{r['server_spoiled']} |"
        )
    out.append("")
    out.append("Success = the agent stopped on a solved state (reward 1.0). Intervals are 95% "
               "Wilson score intervals; ALL rows are unweighted means over tasks. Invalid-action "
               "and error-reply rates are per step, truncation per episode. Episodes spoiled by "
               "the server (a request failed after its retries and the episode did not succeed) "
               "count in no rate; `visgym eval --resume` plays them again.")
    errors = info.get("errors")
    if isinstance(errors, dict) and errors:
        out += ["", "## Failed requests", "", "| Task | Failed requests | Most common error |",
                "|---|---:|---|"]
        for task, e in sorted(errors.items()):
            if isinstance(e, dict):
                text = f"{_md_escape(_describe(e.get('most_common')))} ({e.get('count')}x)"
                out.append(f"| {_md_escape(task)} | {e.get('errors')} | {text} |")
    return "\n".join(out) + "\n"


def _summary_csv(rows: list[dict]) -> str:
    return csv_text(rows, SUMMARY_FIELDS)


def write_summary(run_dir, records=None, html: bool = True) -> dict:
    """Write ``summary.md``, ``summary.csv`` and ``success.png`` into ``run_dir`` (each
    atomically) from ``records`` (loaded from the run's episodes.jsonl when None) and, with
    ``html``, the browsable report ``report/index.html`` (``write_html_report``). Returns the
    paths as ``{"md": ..., "csv": ..., "png": ...[, "html": ...]}``. ``visgym eval`` calls this
    when a run ends, so every finished run has its HTML report."""
    run_dir = os.fspath(run_dir)
    if records is None:
        records = load_records(run_dir)
    info = _load_run_info(run_dir)
    rows = summarize(records)
    paths = {
        "md": os.path.join(run_dir, "summary.md"),
        "csv": os.path.join(run_dir, "summary.csv"),
        "png": os.path.join(run_dir, "success.png"),
    }
    atomic_write(paths["md"], _summary_markdown(run_dir, rows, records, info).encode("utf-8"))
    atomic_write(paths["csv"], _summary_csv(rows).encode("utf-8"))

    name = os.path.basename(os.path.normpath(run_dir))
    title = f"Success rate: {name}"
    if info.get("model"):
        title += f" ({_describe(info['model'])})"
    sub = [f"agent {_describe(info['agent'])}"] if info.get("agent") else []
    sub.append(f"{len(records)} episodes; whiskers = 95% Wilson interval")
    chart = render_success_chart(rows, title, "; ".join(sub))
    atomic_write(paths["png"], _png_bytes(chart))
    if html:
        paths["html"] = write_html_report(run_dir, records, rows=rows, info=info)
    return paths
