"""The ``visgym`` command line around the evaluation runner: its conventions (``--version``,
defaults in every ``--help``, ``visgym list`` naming what ``--tasks`` takes), one clear line and
a non-zero exit for an output folder that cannot be written or a disk that fills up (the state
left resumable, lost GIFs summarised once and written again by ``--resume``), the endpoint's
pre-flight check before any episode, the circuit breaker that stops a run whose requests all fail
the same way (server error texts in the progress line and the summary), and ``--prompt-from`` a
demonstrations folder.

Endpoints are local HTTP servers on 127.0.0.1: tests/fake_openai.py, and a scripted server here
that answers each request with a chosen status.
"""
import errno
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI
from visgym.bridges import cli
from visgym.bridges.records import load_records

KEY_ENV = "VISGYM_TEST_KEY"
NOT_FOUND = "The model `nope` does not exist or you do not have access to it."


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-dummy-cli-tests")


def main(capsys, *argv):
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def solver_eval(out, *extra, tasks="maze_2d", episodes=2):
    return ["eval", "--tasks", tasks, "--episodes", str(episodes), "--quiet", "--out", str(out),
            *extra]


def records(out):
    path = Path(out) / "episodes.jsonl"
    text = path.read_text() if path.exists() else ""
    assert text == "" or text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


# ---------------------------------------------------------------------------- conventions
def test_version_prints_the_package_version(capsys):
    from visgym import __version__

    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"visgym {__version__}"


SUBCOMMANDS = ["eval", "report", "gifs", "list", "demos", "demos-mix", "demos-export"]


def _subparsers():
    """{name: parser} of the CLI's subcommands, as main() builds them."""
    import argparse

    seen = {}
    original = argparse.ArgumentParser.parse_args

    def capture(self, args=None, namespace=None):
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                seen.update(action.choices)
        raise SystemExit(0)

    argparse.ArgumentParser.parse_args = capture
    try:
        with pytest.raises(SystemExit):
            cli.main(["list"])
    finally:
        argparse.ArgumentParser.parse_args = original
    return seen


def test_every_subcommand_help_shows_its_defaults(capsys):
    parsers = _subparsers()
    assert set(SUBCOMMANDS) <= set(parsers)
    for name in SUBCOMMANDS:
        parser = parsers[name]
        for action in parser._actions:
            if not action.option_strings or action.dest in ("help", "version") or \
                    action.default is None or action.default is False or action.required:
                continue
            shown = " ".join(parser._get_formatter()._format_action(action).split())
            assert f"default: {action.default}" in shown, (name, shown)
    # Every eval option that takes a value says what happens without it.
    for action in parsers["eval"]._actions:
        if action.option_strings and action.nargs != 0:
            shown = parsers["eval"]._get_formatter()._format_action(action)
            assert "default" in shown, shown
    for name in SUBCOMMANDS:
        with pytest.raises(SystemExit) as stop:
            cli.main([*name.split("-", 1), "--help"])
        assert stop.value.code == 0
    assert "--split {easy,hard,all}\n                        default: easy" in \
        parsers["eval"].format_help()


def test_list_prints_what_tasks_takes(capsys):
    from visgym.bridges.splits import tasks_with_splits
    from visgym.core import list_envs

    code, out, _ = main(capsys, "list")
    assert code == 0
    lines = out.splitlines()
    assert "--tasks" in lines[0]
    listed = [line.split()[0] for line in lines[1:]]
    assert listed == tasks_with_splits()
    for line in lines[1:]:
        task = line.split()[0]
        assert f"{task}/easy" in line and f"{task}/hard" in line
    code, out, _ = main(capsys, "list", "--ids")
    assert code == 0 and out.split() == list_envs()
    # Each listed task is accepted by --tasks (an unknown one is refused, pointing at list).
    code, _, err = main(capsys, "eval", "--tasks", "maze", "--quiet")
    assert code == 2 and "visgym list" in err


# --------------------------------------------------------------- unwritable and full disks
def _one_error_line(err: str, command: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(f"visgym {command}: error")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("command", [
    ["eval", "--tasks", "maze_2d", "--episodes", "1", "--quiet"],
    ["gifs", "--envs", "maze_2d/easy", "--episodes", "1"],
    ["demos", "--tasks", "maze_2d", "--episodes", "1", "--workers", "1", "--quiet"],
], ids=["eval", "gifs", "demos"])
def test_unwritable_out_is_one_line_naming_the_path_and_errno(tmp_path, capsys, command):
    # Tests run as root, whom file modes do not stop: a folder below a regular file cannot exist.
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    out = blocker / "sub"
    code, _, err = main(capsys, *command, "--out", str(out))
    assert code == 1
    line = _one_error_line(err, command[0])
    assert str(blocker) in line and "ENOTDIR" in line and "errno 20" in line, line
    assert blocker.read_text() == "not a folder"


def _fail_records_writes(monkeypatch, after: int):
    """Make appends to episodes.jsonl fail like a full disk once ``after`` records are in: the
    next write stores half of its line, the one after raises ENOSPC."""
    real_write = os.write
    state = {"records": 0, "half": False}

    def write(fd, data):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target.endswith("episodes.jsonl"):
            if state["records"] >= after:
                if not state["half"]:
                    state["half"] = True
                    return real_write(fd, bytes(data[: len(data) // 2]))
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            state["records"] += 1
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)


def test_full_disk_stops_the_run_with_one_line_and_resume_completes(tmp_path, capsys,
                                                                    monkeypatch):
    out = tmp_path / "run"
    _fail_records_writes(monkeypatch, after=2)
    code, _, err = main(capsys, *solver_eval(out, "--no-gifs", "--concurrency", "1",
                                             episodes=5))
    monkeypatch.undo()
    monkeypatch.setenv(KEY_ENV, "sk-dummy-cli-tests")
    assert code == 1
    line = _one_error_line(err, "eval")
    assert str(out / "episodes.jsonl") in line and "ENOSPC" in line and "--resume" in line, line
    # The half-written line was cut back off: two whole records, nothing torn.
    assert [r["index"] for r in records(out)] == [0, 1]
    code, _, err = main(capsys, *solver_eval(out, "--no-gifs", "--resume", episodes=5))
    assert code == 0, err
    assert sorted(r["index"] for r in records(out)) == [0, 1, 2, 3, 4]


GIF_FULL_DISK = """
import errno, sys
from PIL import Image
real_save = Image.Image.save
def save(self, fp, format=None, **kwargs):   # a disk with no room for GIFs
    if format == "GIF":
        raise OSError(errno.ENOSPC, "No space left on device")
    return real_save(self, fp, format=format, **kwargs)
Image.Image.save = save
from visgym.bridges import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def test_lost_gifs_are_reported_once_and_resume_writes_them(tmp_path):
    out = tmp_path / "run"
    args = solver_eval(out, episodes=4)
    full = subprocess.run([sys.executable, "-c", GIF_FULL_DISK, *args], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    assert "Traceback" not in full.stderr
    gif_lines = [line for line in full.stderr.splitlines() if "GIF" in line]
    assert len(gif_lines) == 1, full.stderr
    assert "4 GIF(s) not written" in gif_lines[0] and "No space left" in gif_lines[0]
    assert "--resume" in gif_lines[0]
    assert not list(out.rglob("*.gif")) and not list(out.rglob("*.tmp"))
    assert json.loads((out / "run.json").read_text())["gifs_missing"] == 4
    resumed = subprocess.run([sys.executable, "-m", "visgym.bridges.cli", *args, "--resume"],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert len(records(out)) == 4
    assert len(list(out.rglob("*.gif"))) == 4
    assert "gifs_missing" not in json.loads((out / "run.json").read_text())


# ------------------------------------------------------------------ a scripted endpoint
class ScriptedServer:
    """POST /v1/chat/completions answered by ``script(n) -> (status, message)`` for request n
    (1-based): 200 gives a chat completion whose content is ``message``, another status an
    OpenAI-style error body with ``message``. GET /v1/models lists model "fake"."""

    def __init__(self, script):
        self.script = script
        self.count = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                return

            def _send(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer._lock:
                    outer.count += 1
                    number = outer.count
                status, message = outer.script(number)
                if status == 200:
                    self._send(200, {"id": "x", "object": "chat.completion", "created": 0,
                                     "model": "fake", "choices": [{
                                         "index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": message}}],
                                     "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                               "total_tokens": 2}})
                else:
                    self._send(status, {"error": {"message": message, "type": "invalid_request_error",
                                                  "code": status}})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()


def openai_eval(base_url, out, *extra, episodes=4, max_steps=2):
    return ["eval", "--agent", "openai", "--model", "fake", "--base-url", base_url,
            "--api-key-env", KEY_ENV, "--tasks", "maze_2d", "--episodes", str(episodes),
            "--max-steps", str(max_steps), "--concurrency", "1", "--no-gifs",
            "--max-attempts", "1", "--timeout", "10", "--no-preflight", "--out", str(out),
            *extra]


def test_breaker_stops_a_run_whose_requests_fail_in_a_row_and_resume_continues(tmp_path,
                                                                              capsys):
    """Three answers, then 404 (a permanent error) for every request: with --abort-after 4
    the run stops at the fourth failure in a row, inside episode 4 (requests 7-8), which is
    not recorded; the episodes before it are, the two that lost a step to the server as
    spoiled by it, and --resume on a working server plays those three again."""
    out = tmp_path / "run"
    broken = {"from": 4}
    script = lambda n: (200, "no action") if n < broken["from"] else (404, NOT_FOUND)  # noqa
    with ScriptedServer(script) as server:
        code, _, err = main(capsys, *openai_eval(server.base_url, out, "--abort-after", "4"))
        requests = server.count
        assert code == 1, err
        line = _one_error_line(err, "eval")
        assert "4 requests in a row" in line and NOT_FOUND in line and "--resume" in line, line
        assert requests == 7
        assert [r["index"] for r in records(out)] == [0, 1, 2]
        assert [r["end_reason"] for r in records(out)] == ["budget", "server_error",
                                                           "server_error"]
        assert [r["server_errors"] for r in records(out)] == [0, 1, 2]
        # The progress line (on stderr) showed the server's text.
        assert "last error:" in err and "does not exist" in err
        broken["from"] = 10**9   # the model is served again
        code, stdout, err = main(capsys, *openai_eval(server.base_url, out, "--resume"))
    assert code == 0, err
    assert [r["index"] for r in records(out)] == [0, 1, 2, 1, 2, 3]   # spoiled ones replayed
    kept = load_records(out)
    assert [r["index"] for r in kept] == [0, 1, 2, 3]
    assert not any(r["end_reason"] == "server_error" for r in kept)
    # The summary names each task's most common server error.
    assert "Failed requests" in stdout and "maze_2d/easy: 3 failed request(s)" in stdout
    assert NOT_FOUND in stdout
    summary = (out / "summary.md").read_text()
    assert "## Failed requests" in summary and NOT_FOUND in summary


def test_breaker_stops_when_the_first_requests_all_fail_even_transiently(tmp_path, capsys):
    out = tmp_path / "run"
    with ScriptedServer(lambda n: (500, "upstream model worker crashed")) as server:
        code, _, err = main(capsys, *openai_eval(server.base_url, out, "--abort-after", "3",
                                                 max_steps=5))
        requests = server.count
    assert code == 1
    line = _one_error_line(err, "eval")
    assert "first 3 requests" in line and "upstream model worker crashed" in line, line
    assert requests == 3 and records(out) == []


def test_transient_errors_in_a_row_stop_the_run_even_after_answers(tmp_path, capsys):
    """A server that answers one request in four and fails the others with a 503 (each after
    its retries): the failures in a row stop the run at any point, resumably, and the episodes
    it spoiled are recorded as such, not scored as the model's failures."""
    out = tmp_path / "run"
    script = lambda n: (200, "no action") if n % 4 == 1 else (503, "overloaded")  # noqa: E731
    with ScriptedServer(script) as server:
        code, stdout, err = main(capsys, *openai_eval(server.base_url, out, "--abort-after", "2"))
    assert code == 1, err
    line = _one_error_line(err, "eval")
    assert "2 requests in a row failed the same way" in line and "overloaded" in line, line
    assert [r["end_reason"] for r in records(out)] == ["server_error"]


def test_episodes_the_server_spoiled_count_in_no_rate_and_are_replayed(tmp_path, capsys):
    """Failures that never come two in a row (--abort-after 3) do not stop the run, but each
    episode that lost a step to the server and did not succeed is spoiled: excluded from the
    summary's rates (its column counts it), the run exits 1 saying so, and --resume plays
    exactly those episodes again."""
    out = tmp_path / "run"
    script = lambda n: (200, "no action") if n % 2 == 1 else (503, "overloaded")  # noqa: E731
    with ScriptedServer(script) as server:
        code, stdout, err = main(capsys, *openai_eval(server.base_url, out, "--abort-after", "3"))
        assert code == 1 and "4 episode(s) spoiled by the server" in err, err
        assert [r["end_reason"] for r in records(out)] == ["server_error"] * 4
        summary = (out / "summary.csv").read_text().splitlines()
        header, row = summary[0].split(","), summary[1].split(",")
        assert header[-1] == "server_spoiled" and row[-1] == "4" and row[3] == "0", summary
        code, stdout, err = main(capsys, *openai_eval(server.base_url, out, "--resume",
                                                      "--abort-after", "3"))
    assert len(records(out)) == 8
    assert [r["index"] for r in load_records(out)] == [0, 1, 2, 3]


def test_abort_after_zero_never_stops(tmp_path, capsys):
    """Every request fails, and the run still plays every episode (each one spoiled by the
    server, so it exits 1 saying so)."""
    out = tmp_path / "run"
    with ScriptedServer(lambda n: (404, NOT_FOUND)) as server:
        code, _, err = main(capsys, *openai_eval(server.base_url, out, "--abort-after", "0",
                                                 episodes=3))
    assert code == 1 and "3 episode(s) spoiled by the server" in err, err
    assert len(records(out)) == 3


# ---------------------------------------------------------------------------- pre-flight
def test_preflight_failure_is_one_line_before_any_episode(tmp_path, capsys):
    from visgym.bridges import agents

    assert hasattr(agents.OpenAIAgent, "preflight"), "OpenAIAgent.preflight is missing"
    out = tmp_path / "run"
    with ScriptedServer(lambda n: (404, NOT_FOUND)) as server:
        argv = [a for a in openai_eval(server.base_url, out) if a != "--no-preflight"]
        code, _, err = main(capsys, *argv)
        preflight_requests = server.count
        assert code == 2
        line = _one_error_line(err, "eval")
        assert len(line) < 400
        assert not out.exists()      # nothing written: no run folder, no episodes
        # --no-preflight skips it: the episodes run (and the breaker stops them).
        code, _, err = main(capsys, *openai_eval(server.base_url, out, "--abort-after", "2"))
        assert code == 1 and "the first 2 requests failed" in err, err
    assert preflight_requests <= 3


def test_preflight_is_skipped_for_offline_agents(tmp_path, capsys):
    code, _, err = main(capsys, *solver_eval(tmp_path / "run", "--no-gifs", episodes=1))
    assert code == 0, err


# ---------------------------------------------------------------------------- --prompt-from
PROMPT = {"elicit_verbalization": True, "feedback": True, "history": -1, "max_long_side": 200,
          "text_mode": False, "final_goal": False, "max_steps": {"maze_2d/easy": 3,
                                                                  "maze_2d/hard": 4}}


def demos_folder(tmp_path, prompt=PROMPT):
    folder = tmp_path / "demos"
    folder.mkdir(exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps({"datasets": {}, "prompt": prompt}))
    return folder


def test_prompt_from_takes_the_demonstrations_prompt_settings(tmp_path, capsys):
    from visgym.bridges.conversation import episode_instructions  # noqa: F401 (same module)

    folder = demos_folder(tmp_path)
    out = tmp_path / "run"
    with FakeOpenAI(policy="garbage") as server:
        argv = [a for a in openai_eval(server.base_url, out, episodes=1)]
        i = argv.index("--max-steps")
        del argv[i:i + 2]
        code, _, err = main(capsys, *argv, "--prompt-from", str(folder))
        bodies = [r.body for r in server.requests_snapshot()]
    assert code == 0, err
    settings = json.loads((out / "run.json").read_text())["settings"]
    assert settings["elicit_verbalization"] is True and settings["max_long_side"] == 200
    assert settings["budgets"] == {"maze_2d/easy": 3}
    assert len(bodies) == 3              # the demonstrations' budget, not the default 20
    first = bodies[0]["messages"][0]["content"][-1]["text"]
    assert "<answer>" in first and "You are allowed to take 2 more steps" in first
    assert json.loads((out / "run.json").read_text())["prompt_from"] == str(folder)


@pytest.mark.parametrize("flag, fragment", [
    (["--history", "2"], "--history 2"),
    (["--no-feedback"], "--no-feedback"),
    (["--max-long-side", "336"], "--max-long-side 336"),
    (["--text-mode"], "--text-mode"),
    (["--max-steps", "20"], "--max-steps 20"),
])
def test_prompt_from_refuses_a_contradicting_flag(tmp_path, capsys, flag, fragment):
    folder = demos_folder(tmp_path)
    out = tmp_path / "run"
    code, _, err = main(capsys, *solver_eval(out, "--prompt-from", str(folder), *flag))
    assert code == 2
    line = _one_error_line(err, "eval")
    assert fragment in line and "manifest.json" in line, line
    assert not out.exists()


def test_prompt_from_accepts_flags_that_agree(tmp_path, capsys):
    folder = demos_folder(tmp_path)
    out = tmp_path / "run"
    code, _, err = main(capsys, *solver_eval(out, "--no-gifs", "--prompt-from", str(folder),
                                             "--history", "-1", "--max-long-side", "200",
                                             "--elicit-verbalization", "--max-steps", "3",
                                             episodes=1))
    assert code == 0, err


@pytest.mark.parametrize("manifest, fragment", [
    (None, "does not exist"),
    ({"datasets": {}}, "no \"prompt\""),
    ({"prompt": {**PROMPT, "history": "all"}}, "prompt.history"),
    ({"prompt": {**PROMPT, "max_steps": {"maze_2d/easy": 0}}}, "prompt.max_steps"),
    ({"prompt": {k: v for k, v in PROMPT.items() if k != "feedback"}}, "prompt.feedback"),
])
def test_prompt_from_refuses_a_bad_manifest(tmp_path, capsys, manifest, fragment):
    folder = tmp_path / "demos"
    folder.mkdir()
    if manifest is not None:
        (folder / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = main(capsys, *solver_eval(tmp_path / "run", "--prompt-from", str(folder)))
    assert code == 2
    assert fragment in _one_error_line(err, "eval")


def test_breaker_stops_a_run_of_several_processes(tmp_path, capsys):
    """With --processes 2 the run stops as a whole with the breaker's line and exit 1, long
    before the episodes would have used up their budgets."""
    out = tmp_path / "run"

    def script(n):
        time.sleep(0.2)   # slow answers: no process could finish its share meanwhile
        return (404, NOT_FOUND)

    with ScriptedServer(script) as server:
        code, _, err = main(capsys, *openai_eval(server.base_url, out, "--abort-after", "2",
                                                 "--processes", "2", episodes=12,
                                                 max_steps=20))
        requests = server.count
    assert code == 1, err
    assert "requests failed the same way" in _one_error_line(err, "eval")
    assert requests < 12, requests      # far from the 240 requests of the whole run
    assert records(out) == []
