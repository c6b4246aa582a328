"""Interrupting and resuming ``visgym eval`` (spec agent_loop.md 5.4 resume; our episodes.jsonl
layout): the runner is killed with SIGKILL part-way and rerun with ``--resume``, and the union is
exactly one record per episode, equal (success, steps, actions) to an uninterrupted run of the
same command; Ctrl-C (SIGINT) exits 130 and resumes the same way; an existing run directory
without ``--resume``, or a resume with a different model, is refused with exit code 2.

Everything runs as real processes: the OpenAI-compatible server (tests/fake_openai.py, solver
policy, 150 ms latency) and ``python -m visgym.bridges.cli eval``.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
KEY_ENV = "VISGYM_TEST_KEY"
EPISODES = 12


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fake_server")
    port_file = folder / "port"
    log = open(folder / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, str(TESTS / "fake_openai.py"), "--port-file", str(port_file),
         "--policy", "solver", "--latency-ms", "150", "--register", "maze_2d/easy",
         "--no-record"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not port_file.exists():
            if proc.poll() is not None:
                raise RuntimeError(f"fake server exited early: {open(folder / 'server.log').read()}")
            if time.monotonic() > deadline:
                raise RuntimeError("fake server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{int(port_file.read_text())}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def eval_cmd(base_url, out, *extra, model="fake", episodes=EPISODES):
    return [sys.executable, "-m", "visgym.bridges.cli", "eval", "--agent", "openai",
            "--model", model, "--base-url", base_url, "--api-key-env", KEY_ENV,
            "--tasks", "maze_2d", "--split", "easy", "--episodes", str(episodes),
            "--concurrency", "3", "--no-gifs", "--quiet", "--out", str(out), *extra]


def env():
    return {**os.environ, KEY_ENV: "sk-dummy-resume-tests"}


@pytest.fixture
def start():
    """Start an eval process; any still running at teardown is killed (by its own pid)."""
    procs = []

    def _start(cmd, cwd):
        proc = subprocess.Popen(cmd, cwd=cwd, env=env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        procs.append(proc)
        return proc

    yield _start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def run(cmd, cwd, timeout=120):
    return subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=timeout)


def lines(out):
    path = Path(out) / "episodes.jsonl"
    if not path.exists():
        return []
    return path.read_bytes().split(b"\n")


def wait_for_records(proc, out, n, timeout=90):
    deadline = time.monotonic() + timeout
    while sum(1 for line in lines(out) if line.strip()) < n:
        if proc.poll() is not None:
            raise AssertionError(f"eval exited ({proc.returncode}) before {n} records: "
                                 f"{proc.stderr.read()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {n} records after {timeout} s")
        time.sleep(0.02)


def records(out):
    """All records, each line parsed (a torn line fails the test)."""
    text = (Path(out) / "episodes.jsonl").read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def results(recs):
    return {r["key"]: (r["success"], r["steps"], [s["action"] for s in r["steps_log"]])
            for r in recs}


def expected_keys(n=EPISODES):
    return sorted(f"maze_2d/easy#{i}" for i in range(n))


def test_kill9_then_resume_equals_an_uninterrupted_run(server, tmp_path, start):
    ref_out, out = tmp_path / "reference", tmp_path / "interrupted"
    # The uninterrupted reference runs alongside (the server serves both).
    reference = start(eval_cmd(server, ref_out), tmp_path)
    victim = start(eval_cmd(server, out), tmp_path)
    wait_for_records(victim, out, 3)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    before = [json.loads(line) for line in lines(out) if line.strip()]
    assert 3 <= len(before) < EPISODES

    resumed = run(eval_cmd(server, out, "--resume"), tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    ref_stdout, ref_stderr = reference.communicate(timeout=120)
    assert reference.returncode == 0, ref_stderr

    recs = records(out)
    keys = [r["key"] for r in recs]
    assert sorted(keys) == expected_keys(), keys      # every key exactly once
    assert results(recs) == results(records(ref_out))
    assert {r["key"] for r in before} <= set(keys)
    # The records written before the kill are kept as they were.
    assert recs[:len(before)] == before
    info = json.loads((out / "run.json").read_text())
    assert info["resumed"] == 1 and info["finished"] and info["model"] == "fake"
    assert "Success" in resumed.stdout and (out / "summary.md").exists()


def test_existing_run_needs_resume_and_the_same_model(server, tmp_path):
    out = tmp_path / "run"
    first = run(eval_cmd(server, out, "--max-steps", "1", episodes=1), tmp_path)
    assert first.returncode == 0, first.stderr
    again = run(eval_cmd(server, out, "--max-steps", "1", episodes=1), tmp_path)
    assert again.returncode == 2
    assert "--resume" in again.stderr
    other = run(eval_cmd(server, out, "--max-steps", "1", "--resume", model="other-model",
                         episodes=1), tmp_path)
    assert other.returncode == 2
    assert "model" in other.stderr and "--resume" in other.stderr
    # Neither refused run touched the records.
    assert len(records(out)) == 1


def test_sigint_exits_130_and_resume_completes(server, tmp_path, start):
    out = tmp_path / "run"
    n = 6
    proc = start(eval_cmd(server, out, episodes=n), tmp_path)
    wait_for_records(proc, out, 1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr
    done = records(out)
    assert 1 <= len(done) < n
    resumed = run(eval_cmd(server, out, "--resume", episodes=n), tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    recs = records(out)
    assert sorted(r["key"] for r in recs) == expected_keys(n)
    assert recs[:len(done)] == done


# ------------------------------------------------------- what a resume must (not) agree on
# In-process (fake server thread + run_eval), one one-step episode per run: fast.
def _resume_pair(tmp_path, monkeypatch, first: dict, second: dict, between=None):
    """Run once with ``first`` then resume with ``second`` (after calling ``between()``); return
    the second run's error or None. Keys: agent (GenerationSettings kwargs under "generation"),
    config, provenance."""
    from fake_openai import FakeOpenAI
    from visgym.bridges.agents import GenerationSettings, OpenAIAgent
    from visgym.bridges.evaluate import EvalConfig, run_eval
    from visgym.bridges.splits import load_split

    monkeypatch.setenv(KEY_ENV, "sk-dummy-resume-tests")
    episodes = load_split("maze_2d", "easy")[:2]
    out = str(tmp_path / "run")
    with FakeOpenAI(policy="garbage") as server:
        for n, (options, resume) in enumerate(((first, False), (second, True))):
            if resume and between is not None:
                between()
            agent = OpenAIAgent(model="fake", base_url=server.base_url, api_key_env=KEY_ENV,
                                settings=GenerationSettings(**options.get("generation", {})))
            config = EvalConfig(**{"out": out, "max_steps": 1, "gifs": False,
                                   "progress": False, "resume": resume,
                                   **options.get("config", {})})
            try:
                run_eval(agent, config, episodes[: n + 1], options.get("provenance"))
            except ValueError as error:
                assert resume, error
                return str(error)
    return None


def test_resume_accepts_identical_settings(tmp_path, monkeypatch):
    options = {"generation": {"temperature": 0.5}, "provenance": {"dataset": "shipped splits"}}
    assert _resume_pair(tmp_path, monkeypatch, options, options) is None
    assert len(records(tmp_path / "run")) == 2


def test_resume_refuses_a_different_history_window(tmp_path, monkeypatch):
    error = _resume_pair(tmp_path, monkeypatch, {}, {"config": {"history": 2}})
    assert error is not None and "--resume" in error and "settings" in error


def test_resume_refuses_different_generation_settings(tmp_path, monkeypatch):
    error = _resume_pair(tmp_path, monkeypatch, {"generation": {"temperature": 0.0}},
                         {"generation": {"temperature": 1.0}})
    assert error is not None and "generation" in error


def test_resume_refuses_a_different_dataset(tmp_path, monkeypatch):
    error = _resume_pair(tmp_path, monkeypatch, {"provenance": {"dataset": "shipped splits"}},
                         {"provenance": {"dataset": "/data/inference_dataset"}})
    assert error is not None and "dataset" in error


def test_resume_accepts_a_different_concurrency(tmp_path, monkeypatch):
    error = _resume_pair(tmp_path, monkeypatch, {"config": {"concurrency": 8}},
                         {"config": {"concurrency": 2, "gifs": True}})
    assert error is None


def test_run_json_records_task_versions_and_resume_refuses_a_changed_one(tmp_path, monkeypatch):
    from visgym.core.registry import spec

    family = spec("maze_2d/easy").family
    error = _resume_pair(tmp_path, monkeypatch, {}, {},
                         between=lambda: monkeypatch.setattr(family, "version", family.version + 1))
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["task_versions"] == {"maze_2d/easy": family.version - 1}
    assert error is not None and "--resume" in error and "maze_2d/easy version" in error


def test_resume_names_only_the_settings_that_changed(tmp_path, monkeypatch):
    error = _resume_pair(tmp_path, monkeypatch, {"generation": {"temperature": 0.0}},
                         {"config": {"history": 2, "max_long_side": 200},
                          "generation": {"temperature": 1.0}})
    assert error is not None and "\n" not in error and error.startswith("--resume:")
    assert "history -1 (now 2)" in error and "max_long_side 336 (now 200)" in error, error
    assert "generation.temperature 0.0 (now 1.0)" in error, error
    for unchanged in ("text_mode", "include_feedback", "max_tokens", "top_p", "concurrency",
                      "final_goal"):
        assert unchanged not in error, error


def test_resume_accepts_a_run_made_before_a_setting_existed(tmp_path, monkeypatch):
    """A run.json written before a setting was added (here: the per-task budgets and the
    circuit breaker's limit) resumes when the setting is at its default."""
    path = tmp_path / "run" / "run.json"

    def drop_new_settings():
        info = json.loads(path.read_text())
        for key in ("budgets", "abort_after"):
            info["settings"].pop(key)
        path.write_text(json.dumps(info))

    assert _resume_pair(tmp_path, monkeypatch, {}, {}, between=drop_new_settings) is None
    error = _resume_pair(tmp_path / "again", monkeypatch, {},
                         {"config": {"budgets": {"maze_2d/easy": 3}}}, between=None)
    assert error is not None and "budgets None (now {'maze_2d/easy': 3})" in error, error


def gif_names(recs):
    return {f"{r['task']}__{r['split']}/{r['index']:03d}_seed{r['episode_seed']}"
            f"_r{r['reward']:.3f}.gif" for r in recs}


def test_kill9_then_resume_writes_every_missing_gif(tmp_path, start):
    """The GIF thread runs behind the records, so a kill -9 loses the GIFs of recorded
    episodes; --resume redraws them from the records (init state and actions), removes the
    temp files the kill left, and every recorded episode ends with its GIF."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "visgym.bridges.cli", "eval", "--tasks", "maze_2d,sliding_block",
           "--episodes", "6", "--concurrency", "2", "--quiet", "--out", str(out)]
    victim = start(cmd, tmp_path)
    wait_for_records(victim, out, 4)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    before = [json.loads(line) for line in lines(out) if line.strip()]
    written = {str(p.relative_to(out / "gifs")) for p in out.rglob("*.gif")} \
        if (out / "gifs").exists() else set()
    assert gif_names(before) - written, "the kill lost no GIF: the test proves nothing"
    stale = out / "gifs" / "maze_2d__easy" / ".000_seed1_r1.000.gif.0123abcd.tmp"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(b"")                     # what a kill inside an atomic write leaves

    resumed = run(cmd + ["--resume"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    recs = records(out)
    assert sorted(r["key"] for r in recs) == sorted(
        [f"maze_2d/easy#{i}" for i in range(6)] + [f"sliding_block/easy#{i}" for i in range(6)])
    gifs = {str(p.relative_to(out / "gifs")): p for p in out.rglob("*.gif")}
    assert set(gifs) == gif_names(recs)
    assert not list(out.rglob("*.tmp")) and not list(out.rglob(".*.tmp"))
    from PIL import Image

    by_name = {name: r for r in recs for name in gif_names([r])}
    for name, path in gifs.items():
        with Image.open(path) as gif:
            assert gif.n_frames == by_name[name]["steps"] + 1, name


def _solver_run(out, resume=False, episodes=3):
    from visgym.bridges.agents import make_agent
    from visgym.bridges.evaluate import EvalConfig, run_eval
    from visgym.bridges.splits import load_split

    run_eval(make_agent("solver"), EvalConfig(out=str(out), progress=False, resume=resume),
             load_split("maze_2d", "easy")[:episodes])


def test_resume_redraws_missing_gifs_byte_for_byte(tmp_path):
    out = tmp_path / "run"
    _solver_run(out)
    written = {p.name: p.read_bytes() for p in out.rglob("*.gif")}
    assert len(written) == 3
    for path in list(out.rglob("*.gif"))[:2]:
        path.unlink()
    _solver_run(out, resume=True)
    assert {p.name: p.read_bytes() for p in out.rglob("*.gif")} == written
    assert len(records(out)) == 3


def test_a_second_run_on_the_same_folder_is_refused(tmp_path):
    from visgym.bridges.files import FolderLock

    out = tmp_path / "run"
    _solver_run(out, episodes=1)
    held = FolderLock(out, "--out").acquire()   # as a run still going would hold it
    try:
        with pytest.raises(ValueError, match="in use by another process"):
            _solver_run(out, resume=True, episodes=2)
    finally:
        held.release()
    assert len(records(out)) == 1
    _solver_run(out, resume=True, episodes=2)
    assert len(records(out)) == 2
