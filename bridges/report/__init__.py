"""Success-rate summaries of evaluation runs: reads the ``episodes.jsonl`` that ``visgym eval``
appends to a run directory (through ``bridges/records.py``), aggregates it per (task, split)
with 95 % Wilson intervals and the secondary counters of agent_loop.md section 8.5 (mean steps,
invalid-action, truncation and error-reply rates), adds per split the unweighted mean over
tasks that the paper reports, and writes ``summary.md``, ``summary.csv`` and a ``success.png``
bar chart next to the log, plus a static HTML report (``report/index.html``: the summary, per
task a filterable grid of episodes, a page per episode with every step's observation, prompt,
reply, action and feedback). ``write_comparison`` lines several runs up
(comparison.md/.csv/.png/.html), ``compare_runs`` is its markdown table, and ``main_report`` is
``visgym report DIR [DIR...]``, which skips a directory that is not a complete run with one
warning line.
"""
from __future__ import annotations

from ..records import EPISODES_FILE, Records, load_records
from .charts import (_MEAN_BAR, _RUN_COLOURS, _TASK_BAR, render_comparison_chart,
                     render_success_chart)
from .cli import main_report
from .compare import COMPARISON_FIELDS, compare_runs, comparison_rows, write_comparison
from .episodes import FRAME_JPEG_QUALITY, GIFS_DIR
from .html import REPORT_DIR, write_html_report
from .runs import RUN_FILE, run_problem
from .stats import ALL_TASK, SUMMARY_FIELDS, summarize, wilson_interval
from .summary import write_summary

__all__ = [
    "Records",
    "wilson_interval",
    "load_records",
    "summarize",
    "write_summary",
    "write_html_report",
    "run_problem",
    "compare_runs",
    "comparison_rows",
    "write_comparison",
    "main_report",
]
