"""Tests for run summaries (``visgym.bridges.report``) and episode GIFs
(``visgym.bridges.gifs``): Wilson intervals against the closed form, tolerant loading of an
``episodes.jsonl`` cut by a kill, per-task and per-split aggregation as agent_loop.md section 8.5
recommends, the three summary files, run comparison, the ``visgym report`` exit codes, and the
captioned GIF layout and timing of section 8.3, including that a bad frame only logs a warning.
"""
import csv
import json
import logging
import math
import os

import numpy as np
import pytest
from PIL import Image

from visgym.bridges import gifs, report

Z95 = 1.959964


def wilson_closed_form(k, n, z=Z95):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def episode(task, split, index, success, steps=10, invalid=0, errors=0, truncated=False, **extra):
    rec = {
        "key": f"{task}/{split}#{index}", "env_id": f"{task}/{split}", "task": task,
        "split": split, "index": index, "seed": index, "init_state": {}, "success": success,
        "reward": 1.0 if success else 0.0, "steps": steps, "terminated": not truncated,
        "truncated": truncated, "end_reason": "budget" if truncated else "stop",
        "invalid_actions": invalid, "error_replies": errors, "elapsed_s": 1.0, "usage": None,
        "steps_log": [],
    }
    rec.update(extra)
    return rec


def write_run(run_dir, records, run_info=None, tail=""):
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "episodes.jsonl"), "w") as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")
        fh.write(tail)
    if run_info is not None:
        with open(os.path.join(run_dir, "run.json"), "w") as fh:
            json.dump(run_info, fh)
    return run_dir


def synthetic_records():
    """maze_2d: easy 3/4, hard 1/4; jigsaw: easy 1/2, hard 0/2."""
    recs = []
    for i, ok in enumerate([True, True, True, False]):
        recs.append(episode("maze_2d", "easy", i, ok, steps=10, invalid=1))
    for i, ok in enumerate([True, False, False, False]):
        recs.append(episode("maze_2d", "hard", i, ok, steps=20, invalid=4, errors=2,
                            truncated=not ok))
    for i, ok in enumerate([True, False]):
        recs.append(episode("jigsaw", "easy", i, ok, steps=5))
    for i, ok in enumerate([False, False]):
        recs.append(episode("jigsaw", "hard", i, ok, steps=8, truncated=True))
    return recs


def row(rows, task, split):
    (found,) = [r for r in rows if r["task"] == task and r["split"] == split]
    return found


# ---------------------------------------------------------------------------------------------
# Wilson interval

@pytest.mark.parametrize("k, n", [(0, 10), (10, 10), (5, 10), (1, 70), (35, 70), (69, 70)])
def test_wilson_interval_matches_closed_form(k, n):
    low, high = report.wilson_interval(k, n)
    want_low, want_high = wilson_closed_form(k, n)
    assert low == pytest.approx(max(0.0, want_low), abs=1e-12)
    assert high == pytest.approx(min(1.0, want_high), abs=1e-12)


def test_wilson_interval_known_values():
    # Published 95 % Wilson bounds (rounded to 4 places).
    assert report.wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert report.wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert report.wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)


def test_wilson_interval_is_symmetric_and_inside_unit_range():
    for n in (1, 7, 70):
        for k in range(n + 1):
            low, high = report.wilson_interval(k, n)
            assert 0.0 <= low <= k / n <= high <= 1.0
            mirror = report.wilson_interval(n - k, n)
            assert mirror == pytest.approx((1 - high, 1 - low), abs=1e-12)


def test_wilson_interval_without_trials_is_uninformative():
    assert report.wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_interval_rejects_impossible_counts():
    with pytest.raises(ValueError, match="successes"):
        report.wilson_interval(3, 2)


# ---------------------------------------------------------------------------------------------
# loading

def test_load_records_skips_truncated_last_line(tmp_path):
    recs = synthetic_records()[:3]
    cut = json.dumps(episode("maze_2d", "easy", 99, True))[:40]  # what a kill -9 leaves
    write_run(tmp_path, recs, tail=cut)
    loaded = report.load_records(tmp_path)
    assert [r["key"] for r in loaded] == [r["key"] for r in recs]
    assert loaded.garbled == 1


def test_load_records_skips_and_counts_garbled_middle_lines(tmp_path, caplog):
    recs = synthetic_records()[:2]
    with open(tmp_path / "episodes.jsonl", "w") as fh:
        fh.write(json.dumps(recs[0]) + "\n")
        fh.write("not json at all\n")
        fh.write("[1, 2, 3]\n")  # valid JSON, but not an episode record
        fh.write("\n")  # blank lines are not counted as garbled
        fh.write(json.dumps(recs[1]) + "\n")
    with caplog.at_level(logging.WARNING, logger="visgym.bridges.report"):
        loaded = report.load_records(tmp_path)
    assert len(loaded) == 2
    assert loaded.garbled == 2
    assert "garbled" in caplog.text


def test_load_records_keeps_first_record_of_a_duplicate_key(tmp_path):
    first = episode("maze_2d", "easy", 0, True, steps=3)
    again = episode("maze_2d", "easy", 0, False, steps=30)
    other = episode("maze_2d", "easy", 1, False)
    write_run(tmp_path, [first, other, again])
    loaded = report.load_records(tmp_path)
    assert len(loaded) == 2
    assert loaded[0]["success"] is True and loaded[0]["steps"] == 3
    assert loaded.duplicates == 1


def test_load_records_names_the_missing_file(tmp_path):
    with pytest.raises(ValueError, match="episodes.jsonl"):
        report.load_records(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        report.load_records(tmp_path / "nope")


# ---------------------------------------------------------------------------------------------
# aggregation

def test_summarize_orders_rows_by_split_then_task_with_an_all_row_per_split():
    rows = report.summarize(synthetic_records())
    assert [(r["task"], r["split"]) for r in rows] == [
        ("jigsaw", "easy"), ("maze_2d", "easy"), ("ALL", "easy"),
        ("jigsaw", "hard"), ("maze_2d", "hard"), ("ALL", "hard"),
    ]


def test_summarize_task_rows():
    rows = report.summarize(synthetic_records())
    maze_easy = row(rows, "maze_2d", "easy")
    assert (maze_easy["n"], maze_easy["successes"]) == (4, 3)
    assert maze_easy["success_rate"] == pytest.approx(0.75)
    assert (maze_easy["ci_low"], maze_easy["ci_high"]) == pytest.approx(report.wilson_interval(3, 4))
    assert maze_easy["mean_steps"] == pytest.approx(10.0)
    assert maze_easy["invalid_action_rate"] == pytest.approx(4 / 40)
    assert maze_easy["truncated_rate"] == 0.0
    assert maze_easy["error_reply_rate"] == 0.0

    maze_hard = row(rows, "maze_2d", "hard")
    assert maze_hard["success_rate"] == pytest.approx(0.25)
    assert maze_hard["invalid_action_rate"] == pytest.approx(16 / 80)
    assert maze_hard["truncated_rate"] == pytest.approx(0.75)
    assert maze_hard["error_reply_rate"] == pytest.approx(8 / 80)


def test_summarize_all_row_is_unweighted_mean_over_tasks():
    rows = report.summarize(synthetic_records())
    all_easy = row(rows, "ALL", "easy")
    # maze 3/4 and jigsaw 1/2: the mean of rates, not the pooled 4/6.
    assert all_easy["success_rate"] == pytest.approx((0.75 + 0.5) / 2)
    assert all_easy["mean_steps"] == pytest.approx((10 + 5) / 2)
    assert (all_easy["n"], all_easy["successes"], all_easy["n_tasks"]) == (6, 4, 2)
    assert all_easy["ci_low"] is None and all_easy["ci_high"] is None
    all_hard = row(rows, "ALL", "hard")
    assert all_hard["success_rate"] == pytest.approx(0.125)
    assert all_hard["truncated_rate"] == pytest.approx((0.75 + 1.0) / 2)


def test_summarize_of_nothing_is_empty():
    assert report.summarize([]) == []


# ---------------------------------------------------------------------------------------------
# summary files

RUN_INFO = {"model": "qwen3-vl-8b", "agent": "openai", "split": "easy,hard",
            "tasks": ["maze_2d", "jigsaw"], "started": "t0", "finished": "t1"}


def test_write_summary_writes_three_files_and_the_html_report(tmp_path):
    run = write_run(tmp_path / "run_a", synthetic_records(), RUN_INFO)
    paths = report.write_summary(run, html=False)
    assert set(paths) == {"md", "csv", "png"}
    for p in paths.values():
        assert os.path.isfile(p) and os.path.dirname(p) == str(run)
    assert not os.path.exists(run / "report")
    assert not [f for f in os.listdir(run) if f.endswith(".tmp")]  # no temp files left behind
    paths = report.write_summary(run)   # what visgym eval calls at the end of a run
    assert paths["html"] == str(run / "report" / "index.html") and os.path.isfile(paths["html"])


def test_summary_markdown_has_run_header_and_percent_table(tmp_path):
    run = write_run(tmp_path / "run_a", synthetic_records(), RUN_INFO)
    md = open(report.write_summary(run)["md"]).read()
    assert "qwen3-vl-8b" in md and "openai" in md and "easy,hard" in md
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 6  # header, rule, 4 task rows, 2 ALL rows
    maze_easy = next(line for line in table if line.startswith("| maze_2d | easy"))
    low, high = report.wilson_interval(3, 4)
    assert "75.0% (3/4)" in maze_easy
    assert f"{100 * low:.1f}% - {100 * high:.1f}%" in maze_easy
    assert any("ALL" in line and "62.5%" in line for line in table)


def test_summary_csv_matches_summarize(tmp_path):
    records = synthetic_records()
    run = write_run(tmp_path / "run_a", records)
    with open(report.write_summary(run)["csv"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    expected = report.summarize(records)
    assert len(rows) == len(expected)
    for got, want in zip(rows, expected):
        assert (got["task"], got["split"], int(got["n"])) == (want["task"], want["split"], want["n"])
        assert float(got["success_rate"]) == pytest.approx(want["success_rate"], abs=1e-6)
        if want["ci_low"] is None:
            assert got["ci_low"] == "" and got["ci_high"] == ""


def test_success_png_decodes_and_has_bar_pixels(tmp_path):
    run = write_run(tmp_path / "run_a", synthetic_records(), RUN_INFO)
    img = np.asarray(Image.open(report.write_summary(run)["png"]).convert("RGB"))
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 300
    assert (img[0, 0] == 255).all()  # white background
    bar = np.all(img == np.array(report._TASK_BAR, np.uint8), axis=2)
    mean_bar = np.all(img == np.array(report._MEAN_BAR, np.uint8), axis=2)
    assert bar.sum() > 500 and mean_bar.sum() > 200
    assert (img.min(axis=2) < 100).sum() > 500  # dark text and whiskers


def test_write_summary_accepts_records_and_works_without_run_json(tmp_path):
    run = write_run(tmp_path / "run_b", [])
    paths = report.write_summary(run, records=synthetic_records()[:4])
    md = open(paths["md"]).read()
    assert "maze_2d" in md and "jigsaw" not in md
    Image.open(paths["png"]).load()


def test_write_summary_of_an_empty_run(tmp_path):
    run = write_run(tmp_path / "empty", [], tail='{"key": "maze')
    paths = report.write_summary(run)
    assert "No finished episodes" in open(paths["md"]).read()
    Image.open(paths["png"]).load()


# ---------------------------------------------------------------------------------------------
# comparison and command line

def test_compare_runs_table_shape(tmp_path):
    a = write_run(tmp_path / "run_a", synthetic_records(), RUN_INFO)
    b_records = [r for r in synthetic_records() if r["task"] == "maze_2d"]
    b = write_run(tmp_path / "run_b", b_records, dict(RUN_INFO, model="gpt-x"))
    table = report.compare_runs([a, b]).strip().splitlines()
    assert table[0] == "| Task | Split | run_a (qwen3-vl-8b) | run_b (gpt-x) |"
    assert len(table) == 2 + 4 + 2  # header, rule, 4 task/split rows, mean row per split
    assert all(line.count("|") == 5 for line in table)
    jigsaw_easy = next(line for line in table if line.startswith("| jigsaw | easy"))
    assert jigsaw_easy.endswith("| 50.0% (1/2) | - |")
    assert table[-2].startswith("| **mean** | easy")
    assert "62.5%" in table[-2] and "75.0%" in table[-2] and "(1/2 tasks)" in table[-2]


def test_main_report_prints_summary_of_one_dir(tmp_path, capsys):
    run = write_run(tmp_path / "run_a", synthetic_records(), RUN_INFO)
    assert report.main_report([str(run)]) == 0
    out = capsys.readouterr().out
    assert "| maze_2d | easy" in out
    assert os.path.isfile(run / "success.png")


def test_main_report_compares_several_dirs(tmp_path, capsys):
    a = write_run(tmp_path / "run_a", synthetic_records(), RUN_INFO)
    b = write_run(tmp_path / "run_b", synthetic_records(), {"agent": "solver"})
    assert report.main_report([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "run_a (qwen3-vl-8b)" in out and "| run_b |" in out
    assert os.path.isfile(b / "summary.md")


def test_main_report_exits_2_when_no_dir_is_a_run(tmp_path, capsys):
    assert report.main_report([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "no such run directory" in err and "no complete run directory" in err
    os.makedirs(tmp_path / "not_a_run")
    assert report.main_report([str(tmp_path / "not_a_run")]) == 2
    assert "run.json" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# GIFs

def obs(i, h=84, w=84):
    frame = np.full((h, w, 3), (40, 40, 60), np.uint8)
    frame[10 + 5 * i: 20 + 5 * i, 10:20] = (250, 200, 0)
    return frame


def captions_for(n):
    return [[f"step {i}", "action: ('move', 0)", "feedback: Cannot move into a wall."]
            for i in range(n)]


def gif_frames(path):
    im = Image.open(path)
    frames, durations = [], []
    for k in range(im.n_frames):
        im.seek(k)
        durations.append(im.info["duration"])
        frames.append(np.asarray(im.convert("RGB")))
    return im, frames, durations


def test_gif_has_one_frame_per_step_with_hold_durations(tmp_path):
    path = tmp_path / "ep.gif"
    gifs.write_episode_gif(path, [obs(i) for i in range(5)], captions_for(5),
                           ms_per_frame=800, start_hold_ms=2500, end_hold_ms=2000)
    im, frames, durations = gif_frames(path)
    assert len(frames) == 5
    assert durations == [2500, 800, 800, 800, 2000]
    assert im.info.get("loop") == 0  # loop forever
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_gif_frames_share_one_size_despite_different_caption_lengths(tmp_path):
    caps = captions_for(3)
    caps[1] = caps[1] + ["reply: " + "a long rambling reply " * 30]
    out = gifs.caption_frames([obs(i) for i in range(3)], caps)
    assert len({f.shape for f in out}) == 1
    path = tmp_path / "ep.gif"
    gifs.write_episode_gif(path, [obs(i) for i in range(3)], caps)
    _, frames, _ = gif_frames(path)
    assert len({f.shape for f in frames}) == 1


def test_small_frames_are_upscaled_and_caption_band_is_white_with_text():
    out = gifs.caption_frames([obs(0)], captions_for(1))
    frame = out[0]
    assert frame.dtype == np.uint8 and frame.shape[1] >= 336
    image_h = 84 * frame.shape[1] // 84
    np.testing.assert_array_equal(frame[0, 0], (40, 40, 60))  # the observation on top
    band = frame[image_h:]
    assert band.shape[0] > 3 * 14
    assert (band == 255).all(axis=2).mean() > 0.8  # mostly white
    assert (band.max(axis=2) < 100).sum() > 50  # some dark text pixels
    # Left padding stays clear (a glyph's anti-aliased edge may reach one pixel into it).
    assert (band[:, : 12 - 2] == 255).all()


def test_caption_lines_wrap_within_the_padded_width():
    from visgym.render.text import glyph_atlas, text_size

    atlas = glyph_atlas(gifs.FONT_SIZE)
    long_line = "feedback: " + "word " * 200 + "x" * 300
    lines = gifs.wrap_text(gifs.truncate_text(long_line), 336 - 24, atlas)
    assert len(lines) > 3
    assert all(text_size(line, atlas)[0] <= 336 - 24 for line in lines)


def test_long_captions_are_truncated_at_a_word_boundary():
    text = "alpha " * 100
    cut = gifs.truncate_text(text, 400)
    assert len(cut) <= 400 and cut.endswith("...")
    assert cut[:-3].split()[-1] == "alpha"  # no word cut in half
    assert gifs.truncate_text("short", 400) == "short"


def test_gif_with_a_bad_frame_logs_a_warning_and_does_not_raise(tmp_path, caplog):
    path = tmp_path / "bad.gif"
    frames = [obs(0), obs(1).astype(np.float32)]
    with caplog.at_level(logging.WARNING, logger="visgym.bridges.gifs"):
        gifs.write_episode_gif(path, frames, captions_for(2))
    assert "dtype" in caplog.text
    assert not path.exists()
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_gif_with_mismatched_captions_logs_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="visgym.bridges.gifs"):
        gifs.write_episode_gif(tmp_path / "bad.gif", [obs(0)], captions_for(3))
    assert "caption" in caplog.text


def test_caption_tuple_caps_wrapped_lines_with_an_ellipsis():
    reply = ("reply: " + "the blue circle should go left then down " * 40, 4)
    (frame,) = gifs.caption_frames([obs(0)], [["step 0", reply]])
    (free,) = gifs.caption_frames([obs(0)], [["step 0", reply[0]]])
    from visgym.render.text import glyph_atlas

    pitch = glyph_atlas(gifs.FONT_SIZE).line_height + gifs.LINE_GAP_PX
    image_h = 336
    assert frame.shape[0] == image_h + 2 * gifs.PAD_PX + 5 * pitch - gifs.LINE_GAP_PX
    assert free.shape[0] > frame.shape[0]  # without the cap the reply runs on


# ---------------------------------------------------------------------------------------------
# GIF captions with the model's reply (agent_loop.md 8.3: the reference's frames show it)

def eval_record(n_steps=3, reply="I see the target to the left. ('move', 2)", **step_extra):
    log = [dict({"step": k, "prompt": f"This is step {k + 1}.", "reply": reply,
                 "reply_flag": None, "action": "('move', 2)",
                 "feedback": "Action executed successfully.", "reward": 0.0}, **step_extra)
           for k in range(n_steps)]
    return episode("maze_2d", "easy", 0, True, steps=n_steps, steps_log=log)


def test_episode_captions_show_step_action_feedback_and_reply():
    caps = gifs.episode_captions(eval_record())
    assert len(caps) == 4   # one per step, then the final state
    step1 = caps[1]
    assert step1[0] == "step 1"
    assert step1[1] == "action: ('move', 2)"
    assert step1[2] == "feedback: Action executed successfully."
    reply_line, max_lines = step1[3]
    assert reply_line == "reply: I see the target to the left. ('move', 2)"
    assert max_lines == gifs.REPLY_MAX_LINES
    assert caps[-1][0] == "final state after 3 steps" and caps[-1][1].startswith("reward=1.000")


def test_reply_excerpt_is_bounded_flattened_and_marks_flags():
    long_reply = "<think>\n" + "step by step, " * 500 + "</think>\n('move', 1)"
    line = gifs.reply_excerpt(long_reply)
    assert line.startswith("reply: <think> step by step,") and line.endswith("...")
    assert "\n" not in line and len(line) <= len("reply: ") + gifs.REPLY_EXCERPT_CHARS
    assert gifs.reply_excerpt("", "empty") == "reply (empty): (empty)"
    assert gifs.reply_excerpt("Error in receiving a response after 6 trials", "error") \
        .startswith("reply (error): Error in receiving")


def test_gif_caption_band_holds_the_reply_and_stays_bounded(tmp_path):
    caps = gifs.episode_captions(eval_record(1))
    short = gifs.caption_frames([obs(0)] * 2, [c[:3] for c in caps])
    with_reply = gifs.caption_frames([obs(0)] * 2, caps)
    huge = gifs.caption_frames([obs(0)] * 2, gifs.episode_captions(eval_record(1, "x y " * 20000)))
    from visgym.render.text import glyph_atlas

    pitch = glyph_atlas(gifs.FONT_SIZE).line_height + gifs.LINE_GAP_PX
    assert with_reply[0].shape[0] == short[0].shape[0] + pitch   # one more caption line
    # However long the reply, the band grows by at most REPLY_MAX_LINES lines.
    assert huge[0].shape[0] == short[0].shape[0] + gifs.REPLY_MAX_LINES * pitch
    reply_area = with_reply[0][short[0].shape[0] - gifs.PAD_PX:]
    assert (reply_area.max(axis=2) < 100).sum() > 20   # the reply line is drawn (dark pixels)


def test_gif_pixels_are_exact_for_frames_with_few_colours(tmp_path):
    """The fast encoder maps frames of <= 256 colours onto an exact palette (Pillow's own
    mapping onto a palette drops low bits), and 3-D-like frames stay close."""
    path = tmp_path / "ep.gif"
    frames = [obs(i) for i in range(4)]
    caps = gifs.episode_captions(eval_record(3))
    gifs.write_episode_gif(path, frames, caps)
    want = gifs.caption_frames(frames, caps)
    got = gifs.read_gif_frames(path, crop_captions=False)
    assert len(got) == 4
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    rng = np.random.default_rng(0)
    rich = [np.clip(rng.normal(128, 40, (96, 128, 3)), 0, 255).astype(np.uint8) for _ in range(3)]
    gifs.write_episode_gif(path, rich, captions_for(3))
    got = gifs.read_gif_frames(path, crop_captions=False)
    want = gifs.caption_frames(rich, captions_for(3))
    assert np.mean([np.abs(g.astype(int) - w).mean() for g, w in zip(got, want)]) < 12


def test_read_gif_frames_cuts_off_the_caption_bands(tmp_path):
    path = tmp_path / "ep.gif"
    gifs.write_episode_gif(path, [obs(i) for i in range(3)], gifs.episode_captions(eval_record(2)))
    frames = gifs.read_gif_frames(path)
    assert [f.shape for f in frames] == [(336, 336, 3)] * 3   # 84 px observations, upscaled 4x
    np.testing.assert_array_equal(frames[1], np.repeat(np.repeat(obs(1), 4, 0), 4, 1))
    # A GIF without the comment (another tool, an older visgym) comes back whole.
    Image.fromarray(obs(0)).save(tmp_path / "plain.gif")
    (plain,) = gifs.read_gif_frames(tmp_path / "plain.gif")
    assert plain.shape == (84, 84, 3)


# ---------------------------------------------------------------------------------------------
# comparison files and incomplete run directories

def two_runs(tmp_path):
    a = write_run(tmp_path / "run_a", synthetic_records(), RUN_INFO)
    b = write_run(tmp_path / "run_b", [r for r in synthetic_records() if r["task"] == "maze_2d"],
                  dict(RUN_INFO, model="gpt-x"))
    return a, b


def test_comparison_files_default_to_the_first_dirs_parent(tmp_path, capsys):
    a, b = two_runs(tmp_path)
    assert report.main_report([str(a), str(b)]) == 0
    for name in ("comparison.md", "comparison.csv", "comparison.png", "comparison.html"):
        assert os.path.isfile(tmp_path / name), name
    out = capsys.readouterr().out
    assert out == open(tmp_path / "comparison.md").read()
    assert "| run_a (qwen3-vl-8b) | run_b (gpt-x) |" in out


def test_comparison_csv_has_one_row_per_model_task_split(tmp_path):
    a, b = two_runs(tmp_path)
    paths = report.write_comparison([a, b], tmp_path / "cmp")
    with open(paths["csv"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == report.COMPARISON_FIELDS
    assert {"model", "success_rate", "ci_low", "ci_high", "mean_steps", "invalid_action_rate",
            "error_reply_rate"} <= set(rows[0])
    keys = [(r["model"], r["task"], r["split"]) for r in rows]
    assert len(keys) == len(set(keys))
    # run_a: 2 tasks x 2 splits + 2 ALL rows; run_b: maze_2d x 2 splits + 2 ALL rows.
    assert len(rows) == 6 + 4
    got = next(r for r in rows if r["model"] == "gpt-x" and r["task"] == "maze_2d"
               and r["split"] == "hard")
    low, high = report.wilson_interval(1, 4)
    assert got["run"] == "run_b" and int(got["n"]) == 4 and int(got["successes"]) == 1
    assert float(got["ci_low"]) == pytest.approx(low, abs=1e-6)
    assert float(got["ci_high"]) == pytest.approx(high, abs=1e-6)
    assert float(got["invalid_action_rate"]) == pytest.approx(16 / 80, abs=1e-6)
    assert float(got["error_reply_rate"]) == pytest.approx(8 / 80, abs=1e-6)
    assert not any(r["model"] == "gpt-x" and r["task"] == "jigsaw" for r in rows)


def test_comparison_png_draws_each_run_in_its_colour_with_whiskers(tmp_path):
    a, b = two_runs(tmp_path)
    img = np.asarray(Image.open(report.write_comparison([a, b], tmp_path)["png"]).convert("RGB"))
    assert (img[0, 0] == 255).all()
    for colour in report._RUN_COLOURS[:2]:
        assert np.all(img == np.array(colour, np.uint8), axis=2).sum() > 300
    assert np.all(img == np.array(report._RUN_COLOURS[2], np.uint8), axis=2).sum() == 0
    assert (img.max(axis=2) < 60).sum() > 300   # whiskers and text


def test_comparison_out_option_through_the_cli(tmp_path, capsys):
    from visgym.bridges import cli

    a, b = two_runs(tmp_path)
    out = tmp_path / "elsewhere"
    assert cli.main(["report", str(a), str(b), "--out", str(out), "--no-html"]) == 0
    assert sorted(os.listdir(out)) == ["comparison.csv", "comparison.md", "comparison.png"]
    assert not os.path.exists(a / "report") and not os.path.exists(tmp_path / "comparison.md")


@pytest.mark.parametrize("damage, reason", [
    ("no_run_json", "no run.json"),
    ("no_episodes", "no episodes.jsonl"),
    ("empty_episodes", "episodes.jsonl is empty"),
    ("cut_episodes", "ends in a cut line"),
])
def test_incomplete_run_dirs_are_skipped_with_one_warning(tmp_path, capsys, damage, reason):
    a, b = two_runs(tmp_path)
    bad = write_run(tmp_path / "run_bad", synthetic_records(), dict(RUN_INFO, model="bad-model"))
    if damage == "no_run_json":
        os.remove(bad / "run.json")
    elif damage == "no_episodes":
        os.remove(bad / "episodes.jsonl")
    elif damage == "empty_episodes":
        open(bad / "episodes.jsonl", "w").close()
    else:
        with open(bad / "episodes.jsonl", "a") as fh:
            fh.write(json.dumps(episode("maze_2d", "easy", 99, True))[:50])
    assert report.main_report([str(a), str(bad), str(b)]) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and str(bad) in warnings[0] and reason in warnings[0]
    assert "bad-model" not in captured.out and "run_bad |" not in captured.out
    assert "gpt-x" in captured.out
    with open(tmp_path / "comparison.csv", newline="") as fh:
        assert {r["run"] for r in csv.DictReader(fh)} == {"run_a", "run_b"}
    assert not os.path.exists(bad / "summary.md")   # nothing written into a skipped dir


def test_run_problem_accepts_a_complete_run(tmp_path):
    a, _ = two_runs(tmp_path)
    assert report.run_problem(a) is None


# ---------------------------------------------------------------------------------------------
# file permissions

def test_outputs_get_the_usual_permissions_under_the_umask(tmp_path):
    """Every file of a run (log, run.json, summaries, chart, GIFs, HTML report, extracted
    frames) and of a comparison is created 0666/0644 minus the umask, never 0600: with umask
    027 files are 0640 and folders 0750."""
    from visgym.bridges.agents import SolverAgent
    from visgym.bridges.evaluate import EvalConfig, run_eval
    from visgym.bridges.splits import load_split

    old = os.umask(0o027)
    try:
        out = tmp_path / "run"
        run_eval(SolverAgent(), EvalConfig(out=str(out), progress=False),
                 load_split("maze_2d", "easy")[:2])
        assert report.main_report([str(out), "--out", str(tmp_path)]) == 0   # + comparison
    finally:
        os.umask(old)
    files, dirs = [], []
    for root, dnames, fnames in os.walk(tmp_path):
        dirs += [os.path.join(root, d) for d in dnames]
        files += [os.path.join(root, f) for f in fnames]
    names = {os.path.relpath(f, out) for f in files}
    assert {"episodes.jsonl", "run.json", "summary.md", "summary.csv", "success.png",
            "report/index.html", "report/success.png"} <= names
    assert any(n.startswith("gifs/") and n.endswith(".gif") for n in names)
    assert any(n.startswith("report/frames/") and n.endswith(".jpg") for n in names)
    assert any(n.startswith("report/episodes/") for n in names)
    assert os.path.isfile(tmp_path / "comparison.html")
    bad = {f: oct(os.stat(f).st_mode & 0o777) for f in files if os.stat(f).st_mode & 0o777 != 0o640}
    assert not bad
    bad = {d: oct(os.stat(d).st_mode & 0o777) for d in dirs if os.stat(d).st_mode & 0o777 != 0o750}
    assert not bad
