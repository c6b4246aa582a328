"""Success-rate summaries of evaluation runs: reads the ``episodes.jsonl`` that ``visgym eval``
appends to a run directory, aggregates it per (task, split) with 95 % Wilson intervals and the
secondary counters of agent_loop.md section 8.5 (mean steps, invalid-action, truncation and
error-reply rates), adds per split the unweighted mean over tasks that the paper reports, and
writes ``summary.md``, ``summary.csv`` and a ``success.png`` bar chart next to the log.
``compare_runs`` lines several runs up in one markdown table and ``main_report`` is
``visgym report DIR [DIR...]``.
"""
from __future__ import annotations

import argparse
import csv
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
    "compare_runs",
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

    def x_of(rate: float) -> int:
        return plot_x0 + int(round(min(max(rate, 0.0), 1.0) * plot_w))

    # Grid lines and axis labels at every 25 %.
    ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
    tx = np.array([x_of(t) for t in ticks])
    raster.fill_rects(img, np.zeros(len(ticks), np.int64), tx, top - 4, tx + 1, plot_y1,
                      np.array([_AXIS if t == 0.0 else _GRID for t in ticks], np.uint8))
    tick_labels = [f"{int(t * 100)}%" for t in ticks]
    tick_x = [int(x) - text.text_size(s, font)[0] // 2 for x, s in zip(tx, tick_labels)]
    text.draw_text(img, np.zeros(len(ticks), np.int64), tick_labels, tick_x, plot_y1 + 6,
                   _AXIS, font)

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


def write_summary(run_dir, records=None) -> dict:
    """Write ``summary.md``, ``summary.csv`` and ``success.png`` into ``run_dir`` (each
    atomically) from ``records`` (loaded from the run's episodes.jsonl when None) and return
    their paths as ``{"md": ..., "csv": ..., "png": ...}``."""
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
    return paths


# ---------------------------------------------------------------------------------------------
# comparison and command line

def compare_runs(run_dirs) -> str:
    """A markdown table with one row per task/split present in any run and one success-rate
    column per run (headed by the directory name and the model from run.json), closed by one
    mean row per split. A run's mean covers only the tasks it has; when that is fewer than the
    table's, the cell says so, because such means are not comparable."""
    run_dirs = [os.fspath(d) for d in run_dirs]
    if not run_dirs:
        raise ValueError("compare_runs needs at least one run directory")
    summaries = []
    headers = []
    for d in run_dirs:
        rows = summarize(load_records(d))
        summaries.append({(r["task"], r["split"]): r for r in rows})
        info = _load_run_info(d)
        head = os.path.basename(os.path.normpath(d))
        if info.get("model"):
            head += f" ({_describe(info['model'])})"
        headers.append(_md_escape(head))

    keys = {k for s in summaries for k in s if k[0] != ALL_TASK}
    splits = sorted({s for _, s in keys}, key=_split_sort_key)
    ordered = [(t, s) for s in splits for t in sorted(t for t, s2 in keys if s2 == s)]

    out = ["| Task | Split | " + " | ".join(headers) + " |",
           "|---|---|" + "---:|" * len(headers)]
    for task, split in ordered:
        cells = []
        for s in summaries:
            r = s.get((task, split))
            cells.append("-" if r is None else
                         f"{_pct(r['success_rate'])} ({r['successes']}/{r['n']})")
        out.append(f"| {_md_escape(task)} | {_md_escape(split)} | " + " | ".join(cells) + " |")
    for split in splits:
        n_tasks = sum(1 for _, s in ordered if s == split)
        cells = []
        for s in summaries:
            r = s.get((ALL_TASK, split))
            if r is None:
                cells.append("-")
            elif r["n_tasks"] < n_tasks:
                cells.append(f"**{_pct(r['success_rate'])}** ({r['n_tasks']}/{n_tasks} tasks)")
            else:
                cells.append(f"**{_pct(r['success_rate'])}**")
        out.append(f"| **mean** | {_md_escape(split)} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main_report(argv=None) -> int:
    """``visgym report DIR [DIR...]``: rewrite each run's summary files, then print the summary
    table of a single run or the comparison table of several. Returns the exit status: 2 when a
    directory is missing or holds no episodes.jsonl."""
    parser = argparse.ArgumentParser(
        prog="visgym report",
        description="Summarise visgym eval run directories (success rates with 95% Wilson "
                    "intervals); several directories are also compared side by side.",
    )
    parser.add_argument("run_dirs", nargs="+", metavar="DIR", help="results/<run> directory")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return int(exc.code or 0)

    for d in args.run_dirs:
        if not os.path.isdir(d):
            print(f"visgym report: error: no such run directory: {d}", file=sys.stderr)
            return 2
        if not os.path.isfile(os.path.join(d, EPISODES_FILE)):
            print(f"visgym report: error: {d} has no {EPISODES_FILE} (not a visgym eval run "
                  f"directory?)", file=sys.stderr)
            return 2

    try:
        for d in args.run_dirs:
            paths = write_summary(d)
            print(f"visgym report: wrote {', '.join(os.path.basename(p) for p in paths.values())} "
                  f"in {d}", file=sys.stderr)
        if len(args.run_dirs) == 1:
            with open(os.path.join(args.run_dirs[0], "summary.md"), encoding="utf-8") as fh:
                sys.stdout.write(fh.read())
        else:
            sys.stdout.write(compare_runs(args.run_dirs))
    except (OSError, ValueError) as exc:
        print(f"visgym report: error: {exc}", file=sys.stderr)
        return 1
    return 0
