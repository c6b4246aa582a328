"""The frame of every page of the HTML report: its one stylesheet, the HTML escape, the
file-name-safe slug of a task or split name, and the page shell.
"""
from __future__ import annotations

import html as html_lib

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
