"""The report's PNG bar charts: ``success.png`` (one bar per task and split of a run, with its
95 % Wilson interval) and ``comparison.png`` (the runs' bars side by side per task), drawn
with visgym's own rasteriser and encoded as PNG.
"""
from __future__ import annotations

import io

import numpy as np

from .formatting import _pct
from .runs import _ordered_keys, _Run
from .stats import ALL_TASK

# Chart palette: task bars in a mid blue, the per-split mean in a dark slate so it stands out.
_WHITE = (255, 255, 255)
_BLACK = (20, 20, 20)
_GRID = (222, 222, 222)
_AXIS = (120, 120, 120)
_TASK_BAR = (76, 130, 200)
_MEAN_BAR = (52, 60, 80)
_WHISKER = (25, 25, 25)

# One colour per run in the comparison chart (Tableau 10), cycled beyond ten runs.
_RUN_COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
                (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]


def _percent_axis(img, font, plot_x0: int, plot_w: int, top: int, plot_y1: int):
    """Grid lines and labels at every 25 % of a horizontal success-rate axis; returns the
    function mapping a rate to its x pixel."""
    from ...render import raster, text

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


def _canvas(height, width, font, plot_x0, plot_w, top, plot_y1, title, title_font, margin):
    """A white chart of ``height`` x ``width`` with its percent axis and title drawn: the
    image, the zero row index the text calls take, and the axis' x of a rate."""
    from ...render import text

    img = np.full((1, height, width, 3), 255, dtype=np.uint8)
    zero = np.zeros(1, dtype=np.int64)
    x_of = _percent_axis(img, font, plot_x0, plot_w, top, plot_y1)
    text.draw_text(img, zero, [title], margin, margin, _BLACK, title_font)
    return img, zero, x_of


def render_success_chart(rows: list[dict], title: str, subtitle: str = "") -> np.ndarray:
    """The success chart as an RGB uint8 image: one horizontal bar per summary row (the ALL
    rows in a darker colour), the 95 % interval as a whisker, the rate printed to the right."""
    from ...render import raster, text

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

    img, zero, x_of = _canvas(height, width, font, plot_x0, plot_w, top, plot_y1, title,
                              title_font, margin)
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
    with_ci = [i for i, r in enumerate(rows)
               if r["ci_low"] is not None and r["ci_high"] is not None]
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


def render_comparison_chart(runs: list[_Run], title: str) -> np.ndarray:
    """The comparison chart as an RGB uint8 image: per task and split (and per split's mean
    over tasks) one horizontal bar per run, side by side in the run's colour, each with its
    95 % Wilson interval as a whisker and its rate printed to the right; a legend names the
    runs. A run without that task gets a "-" and no bar."""
    from ...render import raster, text

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

    img, zero, x_of = _canvas(height, width, font, plot_x0, plot_w, top, plot_y1, title,
                              title_font, margin)
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


def _png_bytes(image: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", optimize=True)
    return buf.getvalue()
