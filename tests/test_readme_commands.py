"""The README's commands keep working as written: every ``visgym eval``, ``visgym report`` and
``visgym list`` line of its shell blocks that needs no real endpoint (the solver agent, or a
server on 127.0.0.1; a report of runs that those lines make) is run, in README order, in one
scratch folder, against the local test server (tests/fake_openai.py) standing in for vLLM. The only changes made to a line: the local
server's URL is the test server's, and ``--episodes 1`` keeps it short. What the lines read is
prepared as the README says: the published layout under ``inference_dataset/`` (built from the
shipped episodes) and a ``visgym demos`` folder for ``--prompt-from``.
"""
import json
import re
import shlex
from pathlib import Path

import pytest

import fake_openai
from fake_openai import FakeOpenAI
from visgym.bridges import cli
from visgym.bridges.splits import load_split

README = Path(__file__).resolve().parents[1] / "README.md"
LOCAL = re.compile(r"^http://(127\.0\.0\.1|localhost):\d+/v1$")


def shell_commands(text: str) -> list[list[str]]:
    """The command lines of the README's plain (shell) code blocks, as argv lists; a trailing
    backslash joins lines, ``#`` starts a comment."""
    commands = []
    for lang, body in re.findall(r"^```([^\n`]*)\n(.*?)^```", text, re.S | re.M):
        if lang.strip() not in ("", "sh", "bash", "shell"):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv:
                commands.append(argv)
    return commands


def option(argv, name):
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def runnable(argv) -> bool:
    """A visgym eval/report/list line that needs no real endpoint."""
    if Path(argv[0]).name != "visgym" or len(argv) < 2 or argv[1] not in ("eval", "report",
                                                                          "list"):
        return False
    if argv[1] != "eval":
        return True
    base_url = option(argv, "--base-url")
    if base_url is not None:
        return bool(LOCAL.match(base_url))
    return option(argv, "--model") is None and option(argv, "--agent") in (None, "solver",
                                                                             "random")


def report_dirs(argv) -> list[str]:
    """The run directories a ``visgym report`` line names."""
    dirs, skip = [], False
    for arg in argv[2:]:
        if skip:
            skip = False
        elif arg in ("--out",):
            skip = True
        elif not arg.startswith("-"):
            dirs.append(arg)
    return dirs


def adapted(argv, base_url: str) -> list[str]:
    """The line as run here: the local URL is the test server's, one episode per task."""
    args = [base_url if LOCAL.match(a) else a for a in argv[1:]]
    if args[0] == "eval":
        if "--episodes" in args:
            args[args.index("--episodes") + 1] = "1"
        else:
            args += ["--episodes", "1"]
        args.append("--quiet")
    return args


def published_layout(root: Path, per_split: int = 2) -> None:
    """The reference's metadata layout (agent_loop.md 10.1) for maze_2d, from shipped episodes."""
    for split in ("easy", "hard"):
        folder = root / f"test_set_{split}" / f"maze_2d__{split}"
        folder.mkdir(parents=True)
        lines = []
        for e in load_split("maze_2d", split)[:per_split]:
            lines.append(json.dumps({"env_id": e.env_id, "seed": e.seed,
                                     "episode_seed": e.episode_seed}))
            state = (root / f"initial_states_{split}" / f"maze_2d__{split}"
                     / f"seed{e.seed}_episode{e.episode_seed}")
            state.mkdir(parents=True)
            (state / "initial_state.json").write_text(json.dumps(e.init_state))
        (folder / "episodes.jsonl").write_text("\n".join(lines) + "\n")


def test_readme_commands_run_as_written(tmp_path, monkeypatch, capsys):
    commands = [c for c in shell_commands(README.read_text()) if runnable(c)]
    kinds = [(c[1], option(c, "--base-url") is not None) for c in commands]
    # The README shows a local endpoint, the offline solver, the published set, the
    # finetuned checkpoint, a report and the list: all of them are exercised.
    assert kinds.count(("eval", True)) >= 3 and ("eval", False) in kinds, kinds
    assert ("report", False) in kinds and ("list", False) in kinds, kinds
    assert any("--dataset-root" in c for c in commands)
    assert any("--prompt-from" in c for c in commands)

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    published_layout(tmp_path / "inference_dataset")
    assert cli.main(["demos", "--tasks", "maze_2d", "--split", "easy", "--episodes", "2",
                     "--workers", "1", "--quiet", "--out", "data/visgym_sft"]) == 0
    models = sorted({option(c, "--model") for c in commands if option(c, "--model")})

    def list_models(handler):   # the test server serves the README's model names
        handler._json(200, {"object": "list",
                            "data": [{"id": m, "object": "model"} for m in models]})

    monkeypatch.setattr(fake_openai._Handler, "do_GET", list_models)
    made, reports = set(), 0
    with FakeOpenAI(policy="garbage") as server:
        for argv in commands:
            if argv[1] == "report" and not set(report_dirs(argv)) <= made:
                continue   # a report of runs that need a real endpoint (gpt-4o, ...)
            reports += argv[1] == "report"
            args = adapted(argv, server.base_url)
            capsys.readouterr()
            code = cli.main(args)
            out, err = capsys.readouterr()
            assert code == 0, (" ".join(argv), err)
            assert "Traceback" not in err
            if args[0] == "eval":
                run_dir = Path(option(args, "--out") or next(
                    line.rsplit("-> ", 1)[1] for line in err.splitlines() if "-> " in line))
                assert (run_dir / "summary.md").exists(), " ".join(argv)
                made.add(str(run_dir))
                info = json.loads((run_dir / "run.json").read_text())
                if "--prompt-from" in args:
                    assert info["settings"]["elicit_verbalization"] is True
                    assert info["settings"]["budgets"] == {"maze_2d/easy": 20}
                if "--dataset-root" in args:
                    assert info["dataset"] == str(tmp_path / "inference_dataset")
                    assert info["episodes"] == 2
            elif args[0] == "report":
                assert "Task" in out and "|" in out
            else:
                assert "maze_2d" in out and "--tasks" in out
    assert reports >= 2


@pytest.mark.parametrize("line, expected", [
    ("visgym eval --model m --base-url http://127.0.0.1:8000/v1", True),
    ("visgym eval --model gpt-4o --split easy", False),
    ("visgym eval --model m --base-url https://openrouter.ai/api/v1", False),
    ("visgym eval --tasks maze_2d", True),
    (".venv/bin/visgym demos --tasks maze_2d", False),
    ("vllm serve x --port 8000", False),
])
def test_selection_of_the_readme_lines_to_run(line, expected):
    assert runnable(shlex.split(line)) is expected
