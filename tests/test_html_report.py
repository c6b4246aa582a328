"""The static HTML report of a run (``visgym.bridges.report.write_html_report``, written by
``visgym report DIR`` and at the end of ``visgym eval``): a small run made by the solver agent
(two tasks, GIFs on) plus one hand-made failing episode whose reply is hostile markup. Checked
from the files with html.parser (every episode listed and paged, frames taken from the GIFs,
untrusted text escaped, file names kept inside the report, frames extracted once), then in
headless Chromium (the page renders: a screenshot that is not blank; the DOM after the inline
filter script ran: every episode listed, the filters narrow the grid). Chromium comes from the
distribution's package (``apt-get install chromium``, done by ``make test``); without it the
browser tests skip, except under CI, where they fail.
"""
import copy
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from visgym.bridges import report

CHROMIUM_PACKAGE = "chromium"
HOSTILE = ("<script>document.title='pwned'</script><img src=x "
           "onerror=\"document.title='pwned'\"> ('move', 0)")


class Dom(HTMLParser):
    """Elements as (tag, attrs) in document order, plus the text inside each id'd element."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.elements, self.text_by_id, self._open = [], {}, []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs))
        if tag not in ("img", "meta", "br", "input", "link"):
            self._open.append(attrs.get("id"))
            if attrs.get("id"):
                self.text_by_id[attrs["id"]] = ""

    def handle_endtag(self, tag):
        if self._open and tag not in ("img", "meta", "br", "input", "link"):
            self._open.pop()

    def handle_data(self, data):
        for ident in self._open:
            if ident:
                self.text_by_id[ident] += data

    def all(self, tag, cls=None):
        return [a for t, a in self.elements
                if t == tag and (cls is None or cls in (a.get("class") or "").split())]


def parse(path):
    return Dom(Path(path).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A solver run of maze_2d and sliding_block (3 + 2 easy episodes, with GIFs) and one
    appended failing episode (error reply, invalid action, hostile reply, no GIF)."""
    from visgym.bridges.agents import SolverAgent
    from visgym.bridges.evaluate import EvalConfig, run_eval
    from visgym.bridges.splits import load_split

    out = tmp_path_factory.mktemp("html") / "solver_run"
    episodes = load_split("maze_2d", "easy")[:3] + load_split("sliding_block", "easy")[:2]
    run_eval(SolverAgent(), EvalConfig(out=str(out), progress=False), episodes)
    records = [json.loads(line) for line in open(out / "episodes.jsonl")]
    bad = copy.deepcopy(next(r for r in records if r["key"] == "maze_2d/easy#0"))
    bad.update(key="maze_2d/easy#9", index=9, success=False, reward=0.0, terminated=False,
               truncated=True, end_reason="budget", invalid_actions=1, error_replies=1)
    bad["steps_log"] = bad["steps_log"][:2]
    bad["steps"] = 2
    bad["steps_log"][0].update(reply=HOSTILE, reply_flag="error")
    bad["steps_log"][1].update(reply="('jump', 9)", action="('jump', 9)",
                               feedback="The action name 'jump' is not recognized.")
    with open(out / "episodes.jsonl", "a") as fh:
        fh.write(json.dumps(bad) + "\n")
    report.write_summary(out)
    return out, records + [bad]


# ---------------------------------------------------------------------------------------------
# the files

def test_index_lists_every_episode_with_its_page_and_frames(small_run):
    run, records = small_run
    index = run / "report" / "index.html"
    dom = parse(index)
    cards = {a["data-key"]: a for a in dom.all("a", "ep")}
    assert set(cards) == {r["key"] for r in records}
    assert cards["maze_2d/easy#9"]["data-success"] == "0"
    assert cards["maze_2d/easy#9"]["data-errors"] == "1"
    assert cards["maze_2d/easy#0"]["data-success"] == "1"
    assert {a.get("id") for a in dom.all("select")} == {"f-outcome", "f-errors"}
    assert len(dom.all("section", "task")) == 2
    assert len(dom.all("script")) == 1 and not any(a.get("src") for a in dom.all("script"))
    for t, attrs in dom.elements:   # nothing from elsewhere: every link and image is relative
        for key in ("src", "href"):
            assert "//" not in attrs.get(key, ""), (t, attrs)
    for rec in records:
        page = run / "report" / cards[rec["key"]]["href"]
        assert page.is_file()
        page_dom = parse(page)
        steps = page_dom.all("li", "step")
        text = page.read_text()
        assert len([s for s in steps if "final" not in s["class"]]) == rec["steps"]
        imgs = [a["src"] for a in page_dom.all("img")]
        if rec["index"] == 9:   # the hand-made episode has no GIF
            assert imgs == [] and "No frames" in text
            continue
        assert len(imgs) == rec["steps"] + 1   # one observation per step, then the final state
        for src in imgs:
            assert (page.parent / src).is_file()
        first = np.asarray(Image.open(page.parent / imgs[0]))
        assert first.shape[:2] in ((336, 336), (290, 420))   # observation only, no caption
        for entry in rec["steps_log"]:
            assert f"<code>{entry['action']}</code>".replace("'", "&#x27;") in text
        assert "Action executed successfully." in text
        assert "This is step 1. You are allowed to take" in text   # the prompt


def test_untrusted_text_is_escaped(small_run):
    run, _ = small_run
    page = run / "report" / "episodes" / "maze_2d__easy" / "009.html"
    dom = parse(page)
    assert dom.all("script") == [] and dom.all("img") == []
    text = page.read_text()
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in text
    assert "reply (error)" in text


def test_names_from_the_records_cannot_leave_the_report_folder(tmp_path):
    recs = [{"key": "k1", "env_id": "../../evil/x", "task": "../../evil", "split": "../x",
             "index": "../../../y", "success": True, "steps": 0, "steps_log": []}]
    run = tmp_path / "run"
    os.makedirs(run)
    with open(run / "episodes.jsonl", "w") as fh:
        fh.write(json.dumps(recs[0]) + "\n")
    report.write_summary(run)
    written = [os.path.join(root, f) for root, _, files in os.walk(tmp_path) for f in files]
    assert all(f.startswith(str(run) + os.sep) for f in written)
    assert not (tmp_path / "evil").exists()
    dom = parse(run / "report" / "index.html")
    (card,) = dom.all("a", "ep")
    assert (run / "report" / card["href"]).is_file()


def test_frames_are_extracted_once_then_refreshed_when_the_gif_changes(small_run, tmp_path):
    run, _ = small_run
    copy_dir = tmp_path / "run"
    shutil.copytree(run, copy_dir)
    frames = copy_dir / "report" / "frames" / "maze_2d__easy" / "000"
    first = frames / "00.jpg"
    stamp = os.stat(first).st_mtime_ns
    report.write_summary(copy_dir)
    assert os.stat(first).st_mtime_ns == stamp   # reused: the GIF did not change
    (gif,) = (copy_dir / "gifs" / "maze_2d__easy").glob("000_*.gif")
    Image.fromarray(np.zeros((40, 40, 3), np.uint8)).save(gif)   # a different GIF, one frame
    report.write_summary(copy_dir)
    assert np.asarray(Image.open(first)).shape[:2] == (40, 40)
    assert json.loads((frames / "source.json").read_text())["frames"] == ["00.jpg"]


def test_a_damaged_gif_costs_its_frames_not_the_report(small_run, tmp_path, caplog):
    run, _ = small_run
    copy_dir = tmp_path / "run"
    shutil.copytree(run, copy_dir, ignore=shutil.ignore_patterns("report"))
    (gif,) = (copy_dir / "gifs" / "maze_2d__easy").glob("001_*.gif")
    gif.write_bytes(b"GIF89a" + b"\0" * 10)   # what a bad disk might leave
    with caplog.at_level("WARNING", logger="visgym.bridges.report"):
        paths = report.write_summary(copy_dir)
    assert "cannot read the frames" in caplog.text and gif.name in caplog.text
    page = copy_dir / "report" / "episodes" / "maze_2d__easy" / "001.html"
    assert parse(page).all("img") == [] and "No frames" in page.read_text()
    assert len(parse(paths["html"]).all("a", "ep")) == 6


# ---------------------------------------------------------------------------------------------
# in the browser

def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def chromium():
    path = find_chromium()
    if path is None:
        reason = (f"headless Chromium not found: install the '{CHROMIUM_PACKAGE}' package "
                  f"(apt-get install -y {CHROMIUM_PACKAGE}; 'make test' does it where it can)")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def browse(chromium, tmp_path, url, *args):
    """Run headless Chromium on ``url`` with its own profile; return its stdout."""
    env = dict(os.environ, HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--no-default-browser-check", "--disable-extensions",
           "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}", *args, url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_screenshot_of_the_index_is_not_blank(chromium, small_run, tmp_path):
    run, _ = small_run
    shot = tmp_path / "index.png"
    browse(chromium, tmp_path, (run / "report" / "index.html").as_uri(),
           "--window-size=1280,1300", f"--screenshot={shot}")
    img = np.asarray(Image.open(shot).convert("RGB"))
    assert img.shape[:2] == (1300, 1280)
    colours = np.unique(img.reshape(-1, 3), axis=0)
    assert len(colours) > 100   # text, frames, badges: far from a blank page
    assert (img[:60, :, :].astype(int).sum(axis=2) < 300).mean() > 0.8   # the dark header bar
    # The summary table: its header cells' colour and dark text, below the header bar.
    table = img[130:340, :800]
    assert np.all(table == (232, 236, 243), axis=2).sum() > 2000
    assert (table.max(axis=2) < 90).sum() > 500
    # The episode grid: success badges (green) and the failing card's badge (red).
    assert np.all(img == (27, 127, 59), axis=2).sum() > 300
    assert np.all(img == (179, 38, 30), axis=2).sum() > 50


def test_dom_lists_every_episode_and_the_filters_work(chromium, small_run, tmp_path):
    run, records = small_run
    index = (run / "report" / "index.html").as_uri()
    n = len(records)

    dom = Dom(browse(chromium, tmp_path, index, "--dump-dom"))
    cards = dom.all("a", "ep")
    assert sorted(a["data-key"] for a in cards) == sorted(r["key"] for r in records)
    assert not any("hidden" in a for a in cards)
    assert dom.text_by_id["f-count"] == f"{n} of {n} episodes shown"   # the script ran
    options = {a["value"] for t, a in dom.elements if t == "option"}
    assert {"all", "success", "failure", "error", "invalid", "clean"} <= options

    dom = Dom(browse(chromium, tmp_path, index + "?outcome=failure", "--dump-dom"))
    shown = [a["data-key"] for a in dom.all("a", "ep") if "hidden" not in a]
    assert shown == ["maze_2d/easy#9"]
    assert dom.text_by_id["f-count"] == f"1 of {n} episodes shown"
    # sliding_block has no failure: its section (only its) says that nothing matches.
    nones = [a for t, a in dom.elements if t == "p" and "none" in (a.get("class") or "")]
    assert len(nones) == 2 and sum("hidden" not in a for a in nones) == 1

    dom = Dom(browse(chromium, tmp_path, index + "?outcome=success&errors=error", "--dump-dom"))
    assert all("hidden" in a for a in dom.all("a", "ep"))
    assert dom.text_by_id["f-count"] == f"0 of {n} episodes shown"

    page = run / "report" / "episodes" / "maze_2d__easy" / "009.html"
    out = browse(chromium, tmp_path, page.as_uri(), "--dump-dom")
    assert "<title>maze_2d/easy #9" in out and "<title>pwned" not in out   # nothing ran
    dom = Dom(out)
    assert dom.all("img") == [] and dom.all("script") == []
