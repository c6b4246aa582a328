"""Success-rate summaries of evaluation runs: reads the ``episodes.jsonl`` that ``visgym eval``
appends to a run directory, aggregates it per (task, split) with 95 % Wilson intervals and the
secondary counters of agent_loop.md section 8.5 (mean steps, invalid-action, truncation and
error-reply rates), adds per split the unweighted mean over tasks that the paper reports, and
writes ``summary.md``, ``summary.csv`` and a ``success.png`` bar chart next to the log, plus a
static HTML report (``report/index.html``: the summary, per task a filterable grid of episodes,
a page per episode with every step's observation, prompt, reply, action and feedback).
``write_comparison`` lines several runs up (comparison.md/.csv/.png/.html), ``compare_runs`` is
its markdown table, and ``main_report`` is ``visgym report DIR [DIR...]``, which skips a
directory that is not a complete run with one warning line.
"""
from __future__ import annotations

import argparse
import csv
import html as html_lib
import io
import json
import logging
import math
import os
import sys

import numpy as np

from .files import atomic_write

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

logger = logging.getLogger(__name__)

EPISODES_FILE = "episodes.jsonl"
RUN_FILE = "run.json"
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
]


# ---------------------------------------------------------------------------------------------
# statistics

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


# ---------------------------------------------------------------------------------------------
# loading

class Records(list):
    """The episode records of one run (a plain list) plus what loading had to drop:
    ``garbled`` lines that were not a JSON object (a kill -9 leaves a truncated last line) and
    ``duplicates``, later records of a key already seen (a resumed run may redo an episode)."""

    def __init__(self, items=(), garbled: int = 0, duplicates: int = 0, path: str | None = None):
        super().__init__(items)
        self.garbled = garbled
        self.duplicates = duplicates
        self.path = path


def _record_key(rec: dict) -> str | None:
    key = rec.get("key")
    if isinstance(key, str) and key:
        return key
    if rec.get("env_id") is not None and rec.get("index") is not None:
        return f"{rec['env_id']}#{rec['index']}"
    return None


def load_records(run_dir) -> Records:
    """The episode records of ``run_dir/episodes.jsonl``, in file order, first record per key.

    Lines that do not parse as a JSON object with a usable key are skipped and counted (in
    ``.garbled`` of the returned list, and in a logged warning) rather than failing the report:
    the file is appended while episodes finish, so the last line of a killed run is often cut.
    The first record of a key wins because it is the one scored in the original pass.
    """
    run_dir = os.fspath(run_dir)
    path = os.path.join(run_dir, EPISODES_FILE)
    if not os.path.isdir(run_dir):
        raise ValueError(f"run directory {run_dir!r} does not exist (expected {path})")
    if not os.path.isfile(path):
        raise ValueError(f"{path} not found: {run_dir!r} is not a visgym eval run directory")
    with open(path, "rb") as fh:
        raw_lines = fh.read().split(b"\n")
    records: list[dict] = []
    seen: set[str] = set()
    garbled = duplicates = 0
    for raw in raw_lines:
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            garbled += 1
            continue
        key = _record_key(rec) if isinstance(rec, dict) else None
        if key is None:
            garbled += 1
            continue
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        records.append(rec)
    if garbled:
        logger.warning("%s: skipped %d garbled line(s)", path, garbled)
    if duplicates:
        logger.info("%s: ignored %d repeated episode key(s), kept the first", path, duplicates)
    return Records(records, garbled=garbled, duplicates=duplicates, path=path)


def _load_run_info(run_dir) -> dict:
    """run.json as a dict, or {} when absent or unreadable (a report must not need it)."""
    path = os.path.join(os.fspath(run_dir), RUN_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            info = json.load(fh)
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


# ---------------------------------------------------------------------------------------------
# aggregation

def _task_split(rec: dict) -> tuple[str, str]:
    env_id = str(rec.get("env_id") or "")
    head, _, tail = env_id.partition("/")
    task = rec.get("task") or head or "?"
    split = rec.get("split") or tail or "?"
    return str(task), str(split)


def _is_success(rec: dict) -> bool:
    # Spec 8.5: success <=> reward == 1.0; the runner stores that verdict as "success", and the
    # reward is only consulted for records written without it.
    if rec.get("success") is not None:
        return bool(rec["success"])
    try:
        return float(rec.get("reward")) == 1.0
    except (TypeError, ValueError):
        return False


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
    since a mean of rates is not a binomial proportion.
    """
    groups: dict[tuple[str, str], list[dict]] = {}
    for rec in records:
        groups.setdefault(_task_split(rec), []).append(rec)

    rows: list[dict] = []
    for split in sorted({s for _, s in groups}, key=_split_sort_key):
        task_rows = []
        for task in sorted(t for t, s in groups if s == split):
            recs = groups[(task, split)]
            n = len(recs)
            successes = sum(_is_success(r) for r in recs)
            steps = sum(_steps(r) for r in recs)
            invalid = sum(_int(r.get("invalid_actions")) for r in recs)
            errors = sum(_int(r.get("error_replies")) for r in recs)
            truncated = sum(bool(r.get("truncated")) for r in recs)
            low, high = wilson_interval(successes, n)
            task_rows.append({
                "task": task,
                "split": split,
                "n_tasks": 1,
                "n": n,
                "successes": successes,
                "success_rate": successes / n,
                "ci_low": low,
                "ci_high": high,
                "mean_steps": steps / n,
                # Per step, not per episode: an episode that hits the budget has more chances.
                "invalid_action_rate": invalid / steps if steps else None,
                "truncated_rate": truncated / n,
                "error_reply_rate": errors / steps if steps else None,
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
        })
    return rows


# ---------------------------------------------------------------------------------------------
# writing

def _pct(value) -> str:
    return "-" if value is None else f"{100.0 * value:.1f}%"


def _num(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def _md_escape(text) -> str:
    return str(text).replace("|", "\\|")


def _describe(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


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
               "| Truncated | Error replies |")
    out.append("|---|---|---:|---:|---|---:|---:|---:|---:|")
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
            f"{_pct(r['truncated_rate'])} | {_pct(r['error_reply_rate'])} |"
        )
    out.append("")
    out.append("Success = reward 1.0 (agent stopped on a solved state). Intervals are 95% Wilson "
               "score intervals; ALL rows are unweighted means over tasks. Invalid-action and "
               "error-reply rates are per step, truncation per episode.")
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
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=SUMMARY_FIELDS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ("" if r.get(k) is None else
                             f"{r[k]:.6f}" if isinstance(r[k], float) else r[k])
                         for k in SUMMARY_FIELDS})
    return buf.getvalue()


# Chart palette: task bars in a mid blue, the per-split mean in a dark slate so it stands out.
_WHITE = (255, 255, 255)
_BLACK = (20, 20, 20)
_GRID = (222, 222, 222)
_AXIS = (120, 120, 120)
_TASK_BAR = (76, 130, 200)
_MEAN_BAR = (52, 60, 80)
_WHISKER = (25, 25, 25)


def _percent_axis(img, font, plot_x0: int, plot_w: int, top: int, plot_y1: int):
    """Grid lines and labels at every 25 % of a horizontal success-rate axis; returns the
    function mapping a rate to its x pixel."""
    from ..render import raster, text

    def x_of(rate: float) -> int:
        return plot_x0 + int(round(min(max(rate, 0.0), 1.0) * plot_w))

    ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
    tx = np.array([x_of(t) for t in ticks])
    raster.fill_rects(img, np.zeros(len(ticks), np.int64), tx, top - 4, tx + 1, plot_y1,
                      np.array([_AXIS if t == 0.0 else _GRID for t in ticks], np.uint8))
    tick_labels = [f"{int(t * 100)}%" for t in ticks]
    tick_x = [int(x) - text.text_size(s, font)[0] // 2 for x, s in zip(tx, tick_labels)]
    text.draw_text(img, np.zeros(len(ticks), np.int64), tick_labels, tick_x, plot_y1 + 6,
                   _AXIS, font)
    return x_of


def render_success_chart(rows: list[dict], title: str, subtitle: str = "") -> np.ndarray:
    """The success chart as an RGB uint8 image: one horizontal bar per summary row (the ALL
    rows in a darker colour), the 95 % interval as a whisker, the rate printed to the right."""
    from ..render import raster, text

    font = text.glyph_atlas(14)
    title_font = text.glyph_atlas(17)
    margin, gap = 16, 12
    plot_w = 420
    row_pitch, bar_h, split_gap = 26, 16, 10

    labels = [f"{r['task']}/{r['split']}" if r["task"] != ALL_TASK
              else f"{ALL_TASK} {r['split']} (mean of {r['n_tasks']})" for r in rows]
    values = [f"{_pct(r['success_rate'])}" + (f" ({r['successes']}/{r['n']})"
                                              if r["task"] != ALL_TASK else "") for r in rows]
    label_w = max([text.text_size(s, font)[0] for s in labels] + [40])
    value_w = max([text.text_size(s, font)[0] for s in values] + [40])
    plot_x0 = margin + label_w + gap
    width = max(plot_x0 + plot_w + gap + value_w + margin,
                margin * 2 + text.text_size(title, title_font)[0],
                margin * 2 + text.text_size(subtitle, font)[0])

    top = margin + title_font.line_height + 4 + (font.line_height + 4 if subtitle else 0) + 12
    # Row positions, with a little space between splits so each ALL row closes its block.
    ys, y = [], top
    for i, r in enumerate(rows):
        if i and r["split"] != rows[i - 1]["split"]:
            y += split_gap
        ys.append(y)
        y += row_pitch
    plot_y1 = y if rows else top + row_pitch
    height = plot_y1 + 6 + font.line_height + margin

    img = np.full((1, height, width, 3), 255, dtype=np.uint8)
    zero = np.zeros(1, dtype=np.int64)
    x_of = _percent_axis(img, font, plot_x0, plot_w, top, plot_y1)
    text.draw_text(img, zero, [title], margin, margin, _BLACK, title_font)
    if subtitle:
        text.draw_text(img, zero, [subtitle], margin, margin + title_font.line_height + 4,
                       _AXIS, font)
    if not rows:
        text.draw_text(img, zero, ["no finished episodes"], plot_x0 + 8,
                       top + (row_pitch - font.line_height) // 2, _AXIS, font)
        return img[0]

    n = len(rows)
    idx = np.zeros(n, np.int64)
    ys_arr = np.array(ys, np.int64)
    bar_y0 = ys_arr + (row_pitch - bar_h) // 2
    rates = [r["success_rate"] or 0.0 for r in rows]
    bar_x1 = np.array([x_of(v) for v in rates], np.int64)
    colors = np.array([_MEAN_BAR if r["task"] == ALL_TASK else _TASK_BAR for r in rows], np.uint8)
    raster.fill_rects(img, idx, plot_x0, bar_y0, bar_x1, bar_y0 + bar_h, colors)

    text_y = ys_arr + (row_pitch - font.line_height) // 2
    label_x = [plot_x0 - gap - text.text_size(s, font)[0] for s in labels]  # right-aligned
    text.draw_text(img, idx, labels, label_x, text_y, _BLACK, font)
    text.draw_text(img, idx, values, plot_x0 + plot_w + gap, text_y, _BLACK, font)

    # Whiskers: a horizontal line across the interval with short caps at both ends.
    with_ci = [i for i, r in enumerate(rows) if r["ci_low"] is not None and r["ci_high"] is not None]
    if with_ci:
        lo = np.array([x_of(rows[i]["ci_low"]) for i in with_ci], np.float64)
        hi = np.array([x_of(rows[i]["ci_high"]) for i in with_ci], np.float64)
        mid = bar_y0[with_ci] + bar_h / 2.0
        cap = bar_h / 2.0 - 1.0
        k = len(with_ci)
        x0 = np.concatenate([lo, lo, hi])
        x1 = np.concatenate([hi, lo, hi])
        y0 = np.concatenate([mid, mid - cap, mid - cap])
        y1 = np.concatenate([mid, mid + cap, mid + cap])
        raster.draw_lines(img, np.zeros(3 * k, np.int64), x0, y0, x1, y1, 2.0, _WHISKER)
    return img[0]


def _png_bytes(image: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


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


# ---------------------------------------------------------------------------------------------
# which directories can be reported

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


# ---------------------------------------------------------------------------------------------
# comparison of several runs

COMPARISON_FIELDS = ["run", "model", "agent"] + SUMMARY_FIELDS

# One colour per run in the comparison chart (Tableau 10), cycled beyond ten runs.
_RUN_COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
                (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]


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
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COMPARISON_FIELDS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ("" if r.get(k) is None else
                             f"{r[k]:.6f}" if isinstance(r[k], float) else r[k])
                         for k in COMPARISON_FIELDS})
    return buf.getvalue()


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


def render_comparison_chart(runs: list[_Run], title: str) -> np.ndarray:
    """The comparison chart as an RGB uint8 image: per task and split (and per split's mean
    over tasks) one horizontal bar per run, side by side in the run's colour, each with its
    95 % Wilson interval as a whisker and its rate printed to the right; a legend names the
    runs. A run without that task gets a "-" and no bar."""
    from ..render import raster, text

    font = text.glyph_atlas(14)
    title_font = text.glyph_atlas(17)
    margin, gap = 16, 12
    plot_w = 420
    bar_pitch, bar_h, group_gap, split_gap = 17, 13, 9, 14
    colours = [_RUN_COLOURS[j % len(_RUN_COLOURS)] for j in range(len(runs))]

    splits, ordered = _ordered_keys(runs)
    groups = []   # (label, key, split)
    for split in splits:
        groups += [(f"{t}/{split}", (t, split), split) for t, s in ordered if s == split]
        n_tasks = sum(1 for _, s in ordered if s == split)
        groups.append((f"{ALL_TASK} {split} (mean of {n_tasks})", (ALL_TASK, split), split))

    def value_text(r, key):
        if r is None:
            return "-"
        if key[0] == ALL_TASK:
            n_tasks = sum(1 for _, s in ordered if s == key[1])
            partial = f" ({r['n_tasks']}/{n_tasks} tasks)" if r["n_tasks"] < n_tasks else ""
            return _pct(r["success_rate"]) + partial
        return f"{_pct(r['success_rate'])} ({r['successes']}/{r['n']})"

    values = [[value_text(run.by_key.get(key), key) for run in runs] for _, key, _ in groups]
    legend = [run.header for run in runs]
    label_w = max([text.text_size(g[0], font)[0] for g in groups] + [40])
    value_w = max([text.text_size(v, font)[0] for vs in values for v in vs] + [40])
    legend_w = max([text.text_size(s, font)[0] for s in legend] + [0]) + 22
    plot_x0 = margin + label_w + gap
    width = max(plot_x0 + plot_w + gap + value_w + margin,
                margin * 2 + text.text_size(title, title_font)[0], margin * 2 + legend_w)

    legend_y0 = margin + title_font.line_height + 10
    legend_pitch = font.line_height + 4
    top = legend_y0 + legend_pitch * len(runs) + 16
    ys, y = [], top
    for i, (_, _, split) in enumerate(groups):
        if i:
            y += split_gap if split != groups[i - 1][2] else group_gap
        ys.append(y)
        y += bar_pitch * len(runs)
    plot_y1 = y if groups else top + bar_pitch
    height = plot_y1 + 6 + font.line_height + margin

    img = np.full((1, height, width, 3), 255, dtype=np.uint8)
    zero = np.zeros(1, dtype=np.int64)
    x_of = _percent_axis(img, font, plot_x0, plot_w, top, plot_y1)
    text.draw_text(img, zero, [title], margin, margin, _BLACK, title_font)
    if runs:
        ly = np.array([legend_y0 + j * legend_pitch for j in range(len(runs))], np.int64)
        sw = (font.line_height - 12) // 2
        raster.fill_rects(img, np.zeros(len(runs), np.int64), margin, ly + sw, margin + 12,
                          ly + sw + 12, np.array(colours, np.uint8))
        text.draw_text(img, np.zeros(len(runs), np.int64), legend, margin + 20, ly, _BLACK, font)
    if not groups:
        text.draw_text(img, zero, ["no finished episodes"], plot_x0 + 8, top, _AXIS, font)
        return img[0]

    bars, whiskers, value_items, label_items = [], [], [], []
    for (label, key, _), y0, vals in zip(groups, ys, values):
        group_h = bar_pitch * len(runs)
        label_items.append((label, y0 + (group_h - font.line_height) // 2))
        for j, run in enumerate(runs):
            by = y0 + j * bar_pitch + (bar_pitch - bar_h) // 2
            value_items.append((vals[j], y0 + j * bar_pitch + (bar_pitch - font.line_height) // 2))
            r = run.by_key.get(key)
            if r is None:
                continue
            bars.append((x_of(r["success_rate"] or 0.0), by, colours[j]))
            if r["ci_low"] is not None and r["ci_high"] is not None:
                whiskers.append((x_of(r["ci_low"]), x_of(r["ci_high"]), by + bar_h / 2.0))
    if bars:
        x1 = np.array([b[0] for b in bars], np.int64)
        by = np.array([b[1] for b in bars], np.int64)
        raster.fill_rects(img, np.zeros(len(bars), np.int64), plot_x0, by, x1, by + bar_h,
                          np.array([b[2] for b in bars], np.uint8))
    labels = [s for s, _ in label_items]
    text.draw_text(img, np.zeros(len(labels), np.int64), labels,
                   [plot_x0 - gap - text.text_size(s, font)[0] for s in labels],
                   np.array([yy for _, yy in label_items], np.int64), _BLACK, font)
    text.draw_text(img, np.zeros(len(value_items), np.int64), [v for v, _ in value_items],
                   plot_x0 + plot_w + gap, np.array([yy for _, yy in value_items], np.int64),
                   _BLACK, font)
    if whiskers:
        lo = np.array([w[0] for w in whiskers], np.float64)
        hi = np.array([w[1] for w in whiskers], np.float64)
        mid = np.array([w[2] for w in whiskers], np.float64)
        cap = bar_h / 2.0 - 1.0
        raster.draw_lines(img, np.zeros(3 * len(whiskers), np.int64),
                          np.concatenate([lo, lo, hi]), np.concatenate([mid, mid - cap, mid - cap]),
                          np.concatenate([hi, lo, hi]), np.concatenate([mid, mid + cap, mid + cap]),
                          2.0, _WHISKER)
    return img[0]


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


# ---------------------------------------------------------------------------------------------
# HTML report

REPORT_DIR = "report"
GIFS_DIR = "gifs"
FRAME_JPEG_QUALITY = 90

_CSS = """
:root { --ok: #1b7f3b; --fail: #b3261e; --warn: #a15c00; --line: #d9d9de; --muted: #5f6368; }
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
       color: #1f1f24; background: #f6f7f9; }
header, main { max-width: 1280px; margin: 0 auto; padding: 12px 20px; }
header { background: #24344d; color: #fff; max-width: none; }
header a { color: #cfe0ff; }
h1 { font-size: 22px; margin: 4px 0; }
h1 code { font-size: inherit; }
h2 { font-size: 18px; margin: 20px 0 8px; }
h3 { font-size: 15px; margin: 14px 0 6px; }
code, pre { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { white-space: pre-wrap; word-break: break-word; margin: 2px 0; background: #fff;
      border: 1px solid var(--line); border-radius: 4px; padding: 6px 8px; max-height: 24em;
      overflow: auto; }
.facts { margin: 4px 0; color: inherit; }
table { border-collapse: collapse; background: #fff; margin: 6px 0 10px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #e8ecf3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.all td { font-weight: 600; background: #f0f3f8; }
img.chart { display: block; max-width: 100%; border: 1px solid var(--line); background: #fff; }
.filters { position: sticky; top: 0; z-index: 1; background: #fff; border: 1px solid var(--line);
           border-radius: 6px; padding: 8px 12px; display: flex; gap: 16px; align-items: center;
           flex-wrap: wrap; }
.filters label { font-weight: 600; }
#f-count { color: var(--muted); }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 10px; }
.ep { display: block; background: #fff; border: 1px solid var(--line); border-left: 5px solid
      var(--fail); border-radius: 6px; padding: 6px; color: inherit; text-decoration: none; }
.ep.ok { border-left-color: var(--ok); }
.ep:hover { box-shadow: 0 1px 6px rgba(0, 0, 0, .18); }
.ep img, .ep .noframe { display: block; width: 100%; height: 120px; object-fit: contain;
                        background: #eceef2; image-rendering: pixelated; }
.ep .noframe { line-height: 120px; text-align: center; color: var(--muted); font-size: 12px; }
.ep .meta { display: block; margin-top: 4px; font-size: 12.5px; }
.badge { display: inline-block; padding: 0 6px; border-radius: 9px; font-size: 12px;
         font-weight: 600; color: #fff; background: var(--fail); }
.badge.ok { background: var(--ok); }
.badge.warn { background: var(--warn); }
.none { color: var(--muted); font-style: italic; }
.steps { list-style: none; padding: 0; }
.step { display: grid; grid-template-columns: minmax(200px, 380px) 1fr; gap: 14px;
        background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px;
        margin: 10px 0; }
.noframes .step { grid-template-columns: 1fr; }
.step .frame img { width: 100%; image-rendering: pixelated; border: 1px solid var(--line); }
.step .frame .noframe { color: var(--muted); font-style: italic; }
.step dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 10px; margin: 0; }
.step dt { font-weight: 600; color: var(--muted); }
.step dd { margin: 0; min-width: 0; }
nav.pager { display: flex; gap: 14px; }
"""

# Filters: outcome (success/failure) and errors (error replies / invalid actions / neither),
# preset from the page's query string (index.html?outcome=failure&errors=error) so a filtered
# view can be linked. Without JavaScript every episode stays visible.
_FILTER_JS = """
(function () {
  var outcome = document.getElementById('f-outcome');
  var errors = document.getElementById('f-errors');
  var params = new URLSearchParams(window.location.search);
  [[outcome, 'outcome'], [errors, 'errors']].forEach(function (pair) {
    var want = params.get(pair[1]);
    if (want && pair[0].querySelector('option[value="' + want + '"]')) pair[0].value = want;
  });
  function keep(card) {
    var ok = card.dataset.success === '1', err = card.dataset.errors !== '0',
        inv = card.dataset.invalid !== '0', o = outcome.value, e = errors.value;
    if ((o === 'success' && !ok) || (o === 'failure' && ok)) return false;
    if ((e === 'error' && !err) || (e === 'invalid' && !inv) || (e === 'clean' && (err || inv)))
      return false;
    return true;
  }
  function apply() {
    var shown = 0, total = 0;
    document.querySelectorAll('section.task').forEach(function (section) {
      var n = 0;
      section.querySelectorAll('.ep').forEach(function (card) {
        var k = keep(card);
        card.hidden = !k;
        total += 1;
        if (k) { n += 1; shown += 1; }
      });
      section.querySelector('.none').hidden = n > 0;
    });
    document.getElementById('f-count').textContent = shown + ' of ' + total + ' episodes shown';
  }
  outcome.addEventListener('change', apply);
  errors.addEventListener('change', apply);
  apply();
})();
"""


def _h(value) -> str:
    return html_lib.escape("" if value is None else str(value), quote=True)


def _slug(text) -> str:
    """A file-name-safe form of a task or split name (records come from a file: never let one
    name a path outside the report)."""
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in str(text)).strip(".-")
    return slug or "x"


def _page(title: str, body: str, script: str = "") -> str:
    tail = f"<script>{script}</script>\n" if script else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{_h(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n"
            f"{tail}</body>\n</html>\n")


def _summary_table_html(rows: list[dict], anchors: dict) -> str:
    out = ["<table class=\"summary\"><thead><tr><th>Task</th><th>Split</th><th>N</th>"
           "<th>Success</th><th>95% CI</th><th>Mean steps</th><th>Invalid actions</th>"
           "<th>Truncated</th><th>Error replies</th></tr></thead><tbody>"]
    for r in rows:
        if r["task"] == ALL_TASK:
            task = f"{ALL_TASK} (mean of {r['n_tasks']})"
            success, ci, cls = _pct(r["success_rate"]), "", " class=\"all\""
        else:
            anchor = anchors.get((r["task"], r["split"]))
            task = (f"<a href=\"#{_h(anchor)}\">{_h(r['task'])}</a>" if anchor
                    else _h(r["task"]))
            success = f"{_pct(r['success_rate'])} ({r['successes']}/{r['n']})"
            ci, cls = f"{_pct(r['ci_low'])} - {_pct(r['ci_high'])}", ""
        out.append(f"<tr{cls}><td>{task if r['task'] != ALL_TASK else _h(task)}</td>"
                   f"<td>{_h(r['split'])}</td><td class=\"num\">{r['n']}</td>"
                   f"<td class=\"num\">{_h(success)}</td><td>{_h(ci)}</td>"
                   f"<td class=\"num\">{_num(r['mean_steps'])}</td>"
                   f"<td class=\"num\">{_pct(r['invalid_action_rate'])}</td>"
                   f"<td class=\"num\">{_pct(r['truncated_rate'])}</td>"
                   f"<td class=\"num\">{_pct(r['error_reply_rate'])}</td></tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _index_gifs(run_dir: str) -> dict:
    """{(group folder, file-name prefix): path} for the run's GIFs (gifs/<task>__<split>/
    <index>_seed<episode_seed>_r<reward>.gif); temp files (leading dot) are ignored."""
    found = {}
    root = os.path.join(run_dir, GIFS_DIR)
    if not os.path.isdir(root):
        return found
    for group in sorted(os.listdir(root)):
        folder = os.path.join(root, group)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if name.endswith(".gif") and not name.startswith(".") and "_r" in name:
                found.setdefault((group, name.rsplit("_r", 1)[0] + "_"), os.path.join(folder, name))
    return found


def _episode_gif(gifs: dict, rec: dict) -> str | None:
    task, split = _task_split(rec)
    index, seed = rec.get("index"), rec.get("episode_seed", rec.get("seed"))
    if not isinstance(index, int):
        return None
    return gifs.get((f"{task}__{split}", f"{index:03d}_seed{seed}_"))


def _episode_frames(gif_path: str, frames_dir: str, rel_dir: str) -> list[str]:
    """The observations of an episode's GIF as JPEG files in ``frames_dir`` (relative paths
    from the report folder), extracted once: a ``source.json`` stamp (GIF name, size, mtime)
    lets later reports reuse them until the GIF changes. A GIF that cannot be read gives no
    frames and a logged warning."""
    from PIL import Image

    from .gifs import read_gif_frames

    st = os.stat(gif_path)
    stamp = {"gif": os.path.basename(gif_path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    stamp_path = os.path.join(frames_dir, "source.json")
    try:
        with open(stamp_path, encoding="utf-8") as fh:
            old = json.load(fh)
        names = old.pop("frames")
        if old == stamp and all(os.path.isfile(os.path.join(frames_dir, n)) for n in names):
            return [f"{rel_dir}/{n}" for n in names]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    try:
        frames = read_gif_frames(gif_path)
    except Exception as exc:  # noqa: BLE001 - a damaged GIF costs its pictures, not the report
        logger.warning("report: cannot read the frames of %s: %s: %s", gif_path,
                       type(exc).__name__, exc)
        return []
    width = max(2, len(str(len(frames) - 1)))
    names = []
    for k, frame in enumerate(frames):
        # JPEG: the model itself was shown JPEGs (quality 75), and it is ~8x cheaper to write
        # than PNG for these frames at about the same size.
        buf = io.BytesIO()
        Image.fromarray(frame).save(buf, format="JPEG", quality=FRAME_JPEG_QUALITY)
        names.append(f"{k:0{width}d}.jpg")
        atomic_write(os.path.join(frames_dir, names[-1]), buf.getvalue())
    atomic_write(stamp_path, json.dumps({**stamp, "frames": names}))
    return [f"{rel_dir}/{n}" for n in names]


def _fmt_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(", ", ": "))
    return str(value)


def _episode_page(run_name: str, rec: dict, frames: list[str], back: str, prev_next) -> str:
    task, split = _task_split(rec)
    ok = _is_success(rec)
    title = f"{task}/{split} #{rec.get('index')}"
    facts = [("key", rec.get("key")), ("seed", rec.get("seed")),
             ("episode seed", rec.get("episode_seed")), ("reward", rec.get("reward")),
             ("steps", _steps(rec)), ("end", rec.get("end_reason")),
             ("terminated", rec.get("terminated")), ("truncated", rec.get("truncated")),
             ("invalid actions", rec.get("invalid_actions")),
             ("error replies", rec.get("error_replies")), ("elapsed s", rec.get("elapsed_s")),
             ("usage", rec.get("usage"))]
    nav = [f"<a href=\"{_h(back)}\">&larr; run {_h(run_name)}</a>"]
    if prev_next[0]:
        nav.append(f"<a href=\"{_h(prev_next[0])}\" rel=\"prev\">previous episode</a>")
    if prev_next[1]:
        nav.append(f"<a href=\"{_h(prev_next[1])}\" rel=\"next\">next episode</a>")
    badge = ("<span class=\"badge ok\">success</span>" if ok
             else "<span class=\"badge\">failure</span>")
    body = [f"<header><nav class=\"pager\">{' '.join(nav)}</nav>",
            f"<h1>{_h(title)} {badge}</h1></header>", "<main>",
            "<table class=\"facts\"><tbody>"]
    body += [f"<tr><th>{_h(k)}</th><td>{_h(_fmt_value(v))}</td></tr>" for k, v in facts
             if v is not None]
    body.append("</tbody></table>")
    if rec.get("init_state") is not None:
        body.append("<details><summary>init state</summary><pre>"
                    f"{_h(json.dumps(rec['init_state'], indent=1))}</pre></details>")
    if not frames:
        body.append("<p class=\"none\">No frames for this episode (GIFs are written for the "
                    "episodes --gifs selects, and not in text mode).</p>")
    log = rec.get("steps_log") if isinstance(rec.get("steps_log"), list) else []
    body.append("<ol class=\"steps\">" if frames else "<ol class=\"steps noframes\">")
    for k, entry in enumerate(log):
        entry = entry if isinstance(entry, dict) else {}
        step = entry.get("step", k)
        frame = (f"<img src=\"{_h(frames[k])}\" alt=\"observation before step {_h(step)}\" "
                 "loading=\"lazy\">" if k < len(frames) else
                 "<span class=\"noframe\">no frame</span>")
        frame = f"<div class=\"frame\">{frame}</div>" if frames else ""
        flag = entry.get("reply_flag")
        items = [("action", f"<code>{_h(entry.get('action'))}</code>"),
                 ("feedback", _h(entry.get("feedback"))),
                 ("reply" + (f" ({_h(flag)})" if flag else ""),
                  f"<pre class=\"reply\">{_h(entry.get('reply'))}</pre>")]
        if entry.get("think") is not None:
            items.append(("think", f"<pre>{_h(entry['think'])}</pre>"))
        if entry.get("error"):
            items.append(("error", _h(entry["error"])))
        extra = [f"reward {_fmt_value(entry['reward'])}" if entry.get("reward") is not None
                 else "", f"latency {entry['latency_s']} s" if entry.get("latency_s") else "",
                 f"attempts {entry['attempts']}" if (entry.get("attempts") or 1) > 1 else "",
                 f"usage {_fmt_value(entry['usage'])}" if entry.get("usage") else ""]
        extra = [e for e in extra if e]
        if extra:
            items.append(("details", _h("; ".join(extra))))
        dl = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in items)
        body.append(f"<li class=\"step\" id=\"step-{_h(step)}\">{frame}<div class=\"text\">"
                    f"<h3>step {_h(step)}</h3><dl>{dl}</dl><details><summary>prompt</summary>"
                    f"<pre class=\"prompt\">"
                    f"{_h(entry.get('prompt'))}</pre></details></div></li>")
    if len(frames) > len(log):
        body.append(f"<li class=\"step final\" id=\"final\"><div class=\"frame\"><img "
                    f"src=\"{_h(frames[len(log)])}\" alt=\"final state\" loading=\"lazy\"></div>"
                    f"<div class=\"text\"><h3>final state</h3><p>after {len(log)} steps: "
                    f"reward {_h(_fmt_value(rec.get('reward')))} "
                    f"({_h(rec.get('end_reason'))})</p></div></li>")
    body += ["</ol>", "</main>"]
    return _page(f"{title} - {run_name}", "\n".join(body))


def write_html_report(run_dir, records=None, rows=None, info=None) -> str:
    """Write the run's static HTML report into ``run_dir/report/`` and return the path of its
    ``index.html``. The folder is self-contained (no script, style or font from elsewhere):

    - ``index.html``: the run's facts, the summary table and chart, and per task and split a
      grid of episode cards (first frame, outcome, steps, why it ended) that two filters
      narrow to successes or failures and to episodes with error replies or invalid actions
      (also from the query string: ``index.html?outcome=failure&errors=error``);
    - ``episodes/<task>__<split>/<index>.html``: one page per episode with, per step, the
      observation, the parsed action, the feedback, the raw reply and the prompt;
    - ``frames/<task>__<split>/<index>/NN.jpg``: the observations, taken from the episode's GIF
      (caption bands cut off), extracted once and reused while the GIF is unchanged; episodes
      without a GIF are shown as text only;
    - ``success.png``, ``summary.md`` and ``summary.csv`` copied from the run directory.

    Every file is written atomically with mode 0644 minus the umask; all text from the
    records is HTML-escaped."""
    run_dir = os.fspath(run_dir)
    if records is None:
        records = load_records(run_dir)
    if info is None:
        info = _load_run_info(run_dir)
    if rows is None:
        rows = summarize(records)
    report = os.path.join(run_dir, REPORT_DIR)
    name = os.path.basename(os.path.normpath(run_dir))
    gifs = _index_gifs(run_dir)

    groups: dict[tuple[str, str], list[dict]] = {}
    for rec in records:
        groups.setdefault(_task_split(rec), []).append(rec)
    order = sorted(groups, key=lambda k: (_split_sort_key(k[1]), k[0]))
    anchors = {key: f"task-{_slug(key[0])}-{_slug(key[1])}" for key in order}

    # Page names first, so that every page can link its neighbours.
    pages: list[tuple[dict, str, str]] = []   # (record, group folder, page stem)
    used: set[str] = set()
    for key in order:
        folder = f"{_slug(key[0])}__{_slug(key[1])}"
        for pos, rec in enumerate(groups[key]):
            index = rec.get("index")
            stem = f"{index:03d}" if isinstance(index, int) and index >= 0 else f"n{pos:03d}"
            while f"{folder}/{stem}" in used:
                stem += "-b"
            used.add(f"{folder}/{stem}")
            pages.append((rec, folder, stem))

    cards: dict[tuple[str, str], list[str]] = {key: [] for key in order}
    for i, (rec, folder, stem) in enumerate(pages):
        gif = _episode_gif(gifs, rec)
        frames = []
        if gif is not None:
            frames = _episode_frames(gif, os.path.join(report, "frames", folder, stem),
                                     f"frames/{folder}/{stem}")
        page_rel = f"episodes/{folder}/{stem}.html"
        neighbours = tuple(f"../{pages[j][1]}/{pages[j][2]}.html" if 0 <= j < len(pages) else None
                           for j in (i - 1, i + 1))
        key = _task_split(rec)
        atomic_write(os.path.join(report, page_rel),
                     _episode_page(name, rec, ["../../" + f for f in frames],
                                   f"../../index.html#{anchors[key]}", neighbours))
        ok = _is_success(rec)
        errors, invalid = _int(rec.get("error_replies")), _int(rec.get("invalid_actions"))
        thumb = (f"<img src=\"{_h(frames[0])}\" alt=\"first frame\" loading=\"lazy\">" if frames
                 else "<span class=\"noframe\">no frames</span>")
        badges = ["<span class=\"badge ok\">success</span>" if ok
                  else "<span class=\"badge\">failure</span>"]
        if errors:
            badges.append(f"<span class=\"badge warn\">{errors} error repl"
                          f"{'y' if errors == 1 else 'ies'}</span>")
        if invalid:
            badges.append(f"<span class=\"badge warn\">{invalid} invalid</span>")
        cards[key].append(
            f"<a class=\"ep{' ok' if ok else ''}\" href=\"{_h(page_rel)}\" "
            f"data-key=\"{_h(_record_key(rec))}\" data-success=\"{int(ok)}\" "
            f"data-errors=\"{errors}\" data-invalid=\"{invalid}\">{thumb}"
            f"<span class=\"meta\">{' '.join(badges)}</span><span class=\"meta\">"
            f"#{_h(rec.get('index'))} &middot; {_steps(rec)} steps &middot; "
            f"{_h(rec.get('end_reason') or '-')}</span></a>")

    for src in ("success.png", "summary.md", "summary.csv"):
        path = os.path.join(run_dir, src)
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                atomic_write(os.path.join(report, src), fh.read())

    facts = [f"{k}: <b>{_h(_describe(info[k]))}</b>" for k in ("model", "agent", "split",
                                                                 "endpoint")
             if info.get(k) not in (None, "")]
    facts.append(f"episodes: <b>{len(records)}</b> over {len(order)} task/split(s)")
    times = ", ".join(f"{k}: {_h(info[k])}" for k in ("started", "finished") if info.get(k))
    garbled = getattr(records, "garbled", 0)
    body = [f"<header><h1>visgym run <code>{_h(name)}</code></h1>",
            f"<p class=\"facts\">{' | '.join(facts)}</p>"]
    if times:
        body.append(f"<p class=\"facts\">{times}</p>")
    body += ["</header>", "<main>", "<section id=\"summary\"><h2>Summary</h2>"]
    if garbled:
        body.append(f"<p class=\"none\">{EPISODES_FILE}: {garbled} garbled line(s) skipped.</p>")
    body.append(_summary_table_html(rows, anchors) if rows
                else "<p class=\"none\">No finished episodes yet.</p>")
    if os.path.isfile(os.path.join(report, "success.png")):
        body.append("<img class=\"chart\" src=\"success.png\" alt=\"success rate per task with "
                    "95% Wilson intervals\">")
    body.append("<p><a href=\"summary.csv\">summary.csv</a> &middot; "
                "<a href=\"summary.md\">summary.md</a></p></section>")
    body += ["<section id=\"episodes\"><h2>Episodes</h2>",
             "<form class=\"filters\" id=\"filters\" onsubmit=\"return false\">",
             "<label for=\"f-outcome\">Outcome</label><select id=\"f-outcome\" name=\"outcome\">"
             "<option value=\"all\">all</option><option value=\"success\">success</option>"
             "<option value=\"failure\">failure</option></select>",
             "<label for=\"f-errors\">Errors</label><select id=\"f-errors\" name=\"errors\">"
             "<option value=\"all\">all</option><option value=\"error\">with error replies"
             "</option><option value=\"invalid\">with invalid actions</option>"
             "<option value=\"clean\">neither</option></select>",
             f"<span id=\"f-count\">{len(pages)} episodes</span></form>"]
    by_key = {(r["task"], r["split"]): r for r in rows}
    for key in order:
        r = by_key.get(key)
        score = f"{r['successes']}/{r['n']} succeeded ({_pct(r['success_rate'])})" if r else ""
        body.append(f"<section class=\"task\" id=\"{_h(anchors[key])}\" data-task=\"{_h(key[0])}\""
                    f" data-split=\"{_h(key[1])}\"><h3>{_h(key[0])} / {_h(key[1])} "
                    f"<small>{_h(score)}</small></h3><div class=\"grid\">")
        body.extend(cards[key])
        body.append("</div><p class=\"none\" hidden>No episode of this task matches the "
                    "filters.</p></section>")
    body += ["</section>", "</main>"]
    index = os.path.join(report, "index.html")
    atomic_write(index, _page(f"visgym run {name}", "\n".join(body), _FILTER_JS))
    return index


def _comparison_html(runs: list[_Run], out_dir: str, skipped: list) -> str:
    """comparison.html: the runs, the chart, and the success table whose cells link each
    run's task section in its own report (relative links, so publishing ``out_dir`` with the
    run folders under it keeps them working)."""
    links = []
    for run in runs:
        index = os.path.join(run.dir, REPORT_DIR, "index.html")
        links.append(os.path.relpath(index, out_dir).replace(os.sep, "/")
                     if os.path.isfile(index) else None)
    body = ["<header><h1>visgym comparison</h1>",
            f"<p class=\"facts\">{len(runs)} runs; success = reward 1.0, intervals 95% "
            "Wilson</p></header>", "<main>", "<h2>Runs</h2>",
            "<table><thead><tr><th>Run</th><th>Model</th><th>Agent</th><th>Split</th>"
            "<th>Episodes</th><th>Finished</th></tr></thead><tbody>"]
    for run, link in zip(runs, links):
        label = (f"<a href=\"{_h(link)}\">{_h(run.label)}</a>" if link else _h(run.label))
        body.append(f"<tr><td>{label}</td><td>{_h(run.info.get('model') or '-')}</td>"
                    f"<td>{_h(_describe(run.info.get('agent') or '-'))}</td>"
                    f"<td>{_h(_describe(run.info.get('split') or '-'))}</td>"
                    f"<td class=\"num\">{len(run.records)}</td>"
                    f"<td>{_h(run.info.get('finished') or 'no')}</td></tr>")
    body.append("</tbody></table>")
    if skipped:
        body.append("<ul>" + "".join(f"<li>skipped <code>{_h(d)}</code>: {_h(why)}</li>"
                                     for d, why in skipped) + "</ul>")
    body += ["<h2>Success rate</h2>",
             "<img class=\"chart\" src=\"comparison.png\" alt=\"success rate per task, runs side "
             "by side, with 95% Wilson intervals\">",
             "<table><thead><tr><th>Task</th><th>Split</th>"
             + "".join(f"<th>{_h(run.header)}</th>" for run in runs) + "</tr></thead><tbody>"]
    splits, ordered = _ordered_keys(runs)
    for split in splits:
        keys = [k for k in ordered if k[1] == split] + [(ALL_TASK, split)]
        for task, _ in keys:
            cells = []
            for run, link in zip(runs, links):
                r = run.by_key.get((task, split))
                if r is None:
                    cells.append("<td class=\"num\">-</td>")
                    continue
                n_tasks = len(keys) - 1
                text = ((_pct(r["success_rate"]) + (f" ({r['n_tasks']}/{n_tasks} tasks)"
                                                    if r["n_tasks"] < n_tasks else ""))
                        if task == ALL_TASK else
                        f"{_pct(r['success_rate'])} ({r['successes']}/{r['n']}; "
                        f"{_pct(r['ci_low'])}-{_pct(r['ci_high'])})")
                if link and task != ALL_TASK:
                    text = (f"<a href=\"{_h(link)}#task-{_h(_slug(task))}-{_h(_slug(split))}\">"
                            f"{_h(text)}</a>")
                else:
                    text = _h(text)
                cells.append(f"<td class=\"num\">{text}</td>")
            cls = " class=\"all\"" if task == ALL_TASK else ""
            body.append(f"<tr{cls}><td>{_h(task)}</td><td>{_h(split)}</td>{''.join(cells)}</tr>")
    body += ["</tbody></table>", "<p><a href=\"comparison.csv\">comparison.csv</a> &middot; "
             "<a href=\"comparison.md\">comparison.md</a></p>", "</main>"]
    return _page("visgym comparison", "\n".join(body))


# ---------------------------------------------------------------------------------------------
# command line

def main_report(argv=None) -> int:
    """``visgym report DIR [DIR...] [--out OUT] [--no-html]``: rewrite each run's summary
    files and HTML report (DIR/report/index.html), then print the summary of a single run,
    or, for several runs (or with ``--out``), write comparison.md/.csv/.png/.html into OUT
    (default: the folder holding the first run directory) and print comparison.md. A
    directory that is not a complete run (``run_problem``) is skipped with one warning line.
    Returns the exit status: 2 when no directory could be reported, 1 on a write error."""
    parser = argparse.ArgumentParser(
        prog="visgym report",
        description="Summarise visgym eval run directories (success rates with 95% Wilson "
                    "intervals, an HTML report per run); several directories are also compared "
                    "side by side (comparison.md/.csv/.png/.html).",
    )
    parser.add_argument("run_dirs", nargs="+", metavar="DIR", help="results/<run> directory")
    parser.add_argument("--out", default=None, metavar="OUT",
                        help="folder for the comparison files (default: the folder holding the "
                             "first run directory)")
    parser.add_argument("--no-html", action="store_true",
                        help="skip the HTML reports (DIR/report/, OUT/comparison.html)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return int(exc.code or 0)

    usable, skipped = [], []
    for d in args.run_dirs:
        problem = run_problem(d)
        if problem is None:
            usable.append(d)
        else:
            skipped.append((d, problem))
            print(f"visgym report: warning: skipping {d}: {problem}", file=sys.stderr)
    if not usable:
        print("visgym report: error: no complete run directory to report", file=sys.stderr)
        return 2

    html = not args.no_html
    try:
        runs = _load_runs(usable)   # each episodes.jsonl read once for both reports
        for run in runs:
            paths = write_summary(run.dir, records=run.records, html=html)
            names = [os.path.relpath(p, run.dir) for p in paths.values()]
            print(f"visgym report: wrote {', '.join(names)} in {run.dir}", file=sys.stderr)
        if len(args.run_dirs) == 1 and args.out is None:
            with open(os.path.join(usable[0], "summary.md"), encoding="utf-8") as fh:
                sys.stdout.write(fh.read())
            return 0
        out = args.out or os.path.dirname(os.path.abspath(os.path.normpath(usable[0])))
        paths = write_comparison(runs, out, html=html, skipped=skipped)
        print(f"visgym report: wrote {', '.join(os.path.basename(p) for p in paths.values())} "
              f"in {out}", file=sys.stderr)
        with open(paths["md"], encoding="utf-8") as fh:
            sys.stdout.write(fh.read())
    except (OSError, ValueError) as exc:
        print(f"visgym report: error: {exc}", file=sys.stderr)
        return 1
    return 0
