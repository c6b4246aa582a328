"""How the report writes values into its markdown, CSV, chart and HTML text: rates as
percentages, step means, markdown escapes, run.json values, and summary-style rows as CSV.
"""
from __future__ import annotations

import csv
import io


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


def csv_text(rows: list[dict], fields: list[str]) -> str:
    """``rows`` as CSV with columns ``fields`` (floats to 6 places, None as empty)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ("" if r.get(k) is None else
                             f"{r[k]:.6f}" if isinstance(r[k], float) else r[k])
                         for k in fields})
    return buf.getvalue()
