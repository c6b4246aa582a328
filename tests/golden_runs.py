"""Small evaluation and demonstration runs whose outputs are kept as a golden record.

The episode layer of bridges/ (stepper, turn loop, records, run folder, faults, prompt
settings) was rebuilt from the evaluation runner's and the demonstration synthesizer's private
copies (issue 22). Before the move these runs were recorded; tests/test_golden_runs.py reruns
them and requires the same records (timings aside), the same GIFs and byte-identical demos
shards and images. The runs cover the solver agent on five families with GIFs, an
OpenAI-compatible server (tests/fake_openai.py) whose replies mix prose, unparsable text,
invalid and out-of-space actions, empty replies and a failed request, a history window and the
think/answer format, and demos of two tasks with several shards and a strategy mix.

When a family's behaviour changes on purpose (its version is bumped), regenerate the record:

    .venv/bin/python tests/golden_runs.py --write

and say why in the commit.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden" / "episode_layer.json"
KEY_ENV = "VISGYM_GOLDEN_KEY"

# Fields that measure time (or where the run happened), not behaviour.
VOLATILE_RECORD = ("elapsed_s",)
VOLATILE_STEP = ("latency_s",)
RUN_KEYS = ("agent", "model", "split", "settings", "tasks", "task_versions", "episodes",
            "generation")

SOLVER_TASKS = {"maze_2d": 3, "sliding_block": 2, "jigsaw": 2, "matchstick_equation": 2,
                "patch_reassembly": 1}
SERVER_TASKS = {"maze_2d": 3, "sliding_block": 2, "matchstick_rotation": 2}


def _episodes(tasks: dict, split: str = "easy") -> list:
    from visgym.bridges.splits import load_split

    return [e for task, n in tasks.items() for e in load_split(task, split)[:n]]


def _normalise_records(path: Path) -> list:
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for record in records:
        for key in VOLATILE_RECORD:
            record.pop(key, None)
        for entry in record.get("steps_log") or ():
            for key in VOLATILE_STEP:
                entry.pop(key, None)
    return sorted(records, key=lambda r: r["key"])


def _digests(root: Path, skip=()) -> dict:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel not in skip and not rel.startswith(".lock"):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _run_info(out: Path) -> dict:
    info = json.loads((out / "run.json").read_text())
    return {k: info.get(k) for k in RUN_KEYS}


def server_policy(ctx) -> str:
    """What the fake server answers: a pure function of the episode and step, so concurrency
    does not change a reply."""
    plan = ctx.entry.plan if ctx.entry is not None else ["('stop', 'stop')"]
    index = ctx.plan_index if ctx.plan_index is not None else ctx.step
    action = plan[min(index, len(plan) - 1)]
    step = ctx.step
    if step == 0:
        return "Let me look at the board first; I am not sure yet."          # no action
    if step == 1:
        return "<think>try something</think><answer>('fly', 3)</answer>"     # unknown name
    if step == 2:
        return "<answer>('move', 12345)</answer>"                           # bad payload
    if step == 3:
        return ""                                                            # empty reply
    return f"<think>step {step}</think><answer>{action}</answer>"


class ServerFaults:
    """A 500 on the first request of each episode's step 5 (the retry is answered): keyed by
    the episode and step, so the order in which episodes' requests arrive does not matter."""

    def __init__(self):
        import threading

        self.seen = set()
        self.lock = threading.Lock()

    def __call__(self, number, ctx):
        if ctx is None or ctx.entry is None or ctx.step != 5:
            return None
        with self.lock:
            key = id(ctx.entry)
            if key in self.seen:
                return None
            self.seen.add(key)
        return "500"


def record_runs(tmp: Path) -> dict:
    """Run everything and return the golden record."""
    from fake_openai import FakeOpenAI, solver_entries

    from visgym.bridges.agents import OpenAIAgent, make_agent
    from visgym.bridges.demos import DemoConfig, generate
    from visgym.bridges.evaluate import EvalConfig, run_eval

    result = {}
    out = tmp / "solver"
    run_eval(make_agent("solver"), EvalConfig(out=str(out), gifs=True, progress=False,
                                              concurrency=4), _episodes(SOLVER_TASKS))
    result["solver"] = {"records": _normalise_records(out / "episodes.jsonl"),
                        "run": _run_info(out),
                        "gifs": _digests(out / "gifs"),
                        "summary": (out / "summary.csv").read_text()}

    episodes = _episodes(SERVER_TASKS)
    with FakeOpenAI(policy=server_policy, faults=ServerFaults()) as server:
        for entry in solver_entries(episodes):
            server.register_entry(entry)
        agent = OpenAIAgent(model="fake", base_url=server.base_url, api_key_env=KEY_ENV,
                            timeout_s=30.0, max_attempts=3, backoff_s=0.0)
        out = tmp / "server"
        run_eval(agent, EvalConfig(out=str(out), gifs=False, progress=False, concurrency=3,
                                   history=2, elicit_verbalization=True), episodes)
    result["server"] = {"records": _normalise_records(out / "episodes.jsonl"),
                        "run": _run_info(out),
                        "summary": (out / "summary.csv").read_text()}

    out = tmp / "demos"
    manifest = generate([DemoConfig(task="maze_2d", episodes=5, shard_size=3),
                         DemoConfig(task="jigsaw", episodes=3, shard_size=2, strategy="mixed")],
                        out, workers=1, progress=False)
    manifest.pop("run")
    result["demos"] = {"files": _digests(out, skip=("manifest.json", "llamafactory_sft.yaml")),
                       "manifest": manifest}
    return json.loads(json.dumps(result))


def main(argv=None) -> int:
    import tempfile

    argv = sys.argv[1:] if argv is None else argv
    if argv != ["--write"]:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        record = record_runs(Path(tmp))
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
