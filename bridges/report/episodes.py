"""The episode pages of the HTML report: finding an episode's GIF, extracting its
observations as JPEG frames (once, reused while the GIF is unchanged), and the page that shows
every step's observation, action, feedback, reply and prompt.
"""
from __future__ import annotations

import io
import json
import logging
import os

from ..files import atomic_write
from ..records import record_success
from .page import _h, _page
from .stats import _steps, _task_split

logger = logging.getLogger(__name__)

GIFS_DIR = "gifs"
FRAME_JPEG_QUALITY = 90


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

    from ..gifs import read_gif_frames

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
    ok = record_success(rec)
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
