"""The static HTML report: a run's ``report/index.html`` (facts, summary table and chart, and
per task a filterable grid of episode cards linking the episode pages) and the comparison's
``comparison.html``.
"""
from __future__ import annotations

import os

from ..files import atomic_write
from ..records import EPISODES_FILE, load_records, record_key, record_success
from .episodes import _episode_frames, _episode_gif, _episode_page, _index_gifs
from .formatting import _describe, _num, _pct
from .page import _h, _page, _slug
from .runs import _load_run_info, _ordered_keys, _Run
from .stats import ALL_TASK, _int, _split_sort_key, _steps, _task_split, summarize

REPORT_DIR = "report"

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


def _summary_table_html(rows: list[dict], anchors: dict) -> str:
    out = ["<table class=\"summary\"><thead><tr><th>Task</th><th>Split</th><th>N</th>"
           "<th>Success</th><th>95% CI</th><th>Mean steps</th><th>Invalid actions</th>"
           "<th>Truncated</th><th>Error replies</th><th>Spoiled by the server</th>"
           "</tr></thead><tbody>"]
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
                   f"<td class=\"num\">{_pct(r['error_reply_rate'])}</td>"
                   f"<td class=\"num\">{r['server_spoiled']}</td></tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


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
        ok = record_success(rec)
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
            f"data-key=\"{_h(record_key(rec))}\" data-success=\"{int(ok)}\" "
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
