"""The rollout collector (bridges/rollouts.py, docs/rl.md "Rollouts") against the real HTTP
server of tests/fake_openai.py: groups share their exact start (state hashes), the records keep
the documented schema, the token ids and log-probabilities the server sampled and the state
hashes along each trajectory; every JPEG is written once and referenced by its hash; injected
faults end trajectories with the right stop reasons; ``--require-logprobs`` refuses a server
that sends none; a run killed with SIGKILL and resumed records each trajectory exactly once;
the Parquet export round-trips; the in-process collector batches a trainer's policy."""
import asyncio
import gc
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path

import numpy as np
import pytest

from fake_openai import FakeOpenAI, fake_tokens
from visgym.bridges import cli
from visgym.bridges.rollout_export import image_shas, materialize
from visgym.bridges.rollout_policy import BatchedPolicyAgent, TokenOpenAIAgent
from visgym.bridges.records import to_json_line
from visgym.bridges.rollouts import (STOP_REASONS, Collector, RolloutConfig, collect,
                                     plan_groups, run_rollouts, trajectory_line)
from visgym.bridges.warmup import settled_heap

TESTS = Path(__file__).resolve().parent
KEY_ENV = "VISGYM_TEST_KEY"
TRAJECTORY_FIELDS = {
    "key", "run_id", "episode_id", "group_id", "member", "group_size", "env_id", "task", "split",
    "index", "family_version", "seed", "policy_model", "sampling", "reward_mode", "stop_reason",
    "return", "success", "steps", "terminated", "truncated", "invalid_actions",
    "start_state_hash", "final_state_hash", "time", "usage", "error", "turns"}
TURN_FIELDS = {
    "step", "messages", "reply", "reply_flag", "token_ids", "logprobs", "stepped", "action",
    "invalid", "reward", "reward_components", "terminated", "truncated", "feedback", "code",
    "state_hash_before", "state_hash_after", "latency_s", "attempts"}


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-dummy-rollout-tests")


@pytest.fixture(scope="module")
def starts():
    return plan_groups(["maze_2d/easy"], 2, 0)


def records(out) -> list:
    text = (Path(out) / "episodes.jsonl").read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def rollouts_cmd(url, out, *extra, episodes=2, group=3):
    return ["rollouts", "--policy-url", url, "--model", "fake", "--api-key-env", KEY_ENV,
            "--tasks", "maze_2d", "--split", "easy", "--episodes", str(episodes),
            "--group-size", str(group), "--quiet", "--out", str(out), *extra]


# ------------------------------------------------------------------------ a run, its records
def test_groups_share_their_start_and_records_keep_tokens_hashes_and_images(tmp_path, starts):
    out = tmp_path / "run"
    with FakeOpenAI(policy="solver", logprobs=True) as server:
        server.register_episodes(starts)
        assert cli.main(rollouts_cmd(server.base_url, out, "--reward", "progress")) == 0
        bodies = [r.body for r in server.requests_snapshot()]
    chats = [b for b in bodies if b]          # the pre-flight's test chat asks too
    assert chats and all(b["logprobs"] is True and b["return_tokens_as_token_ids"] is True
                         and b["temperature"] == 1.0 for b in chats)
    recs = records(out)
    assert sorted(r["key"] for r in recs) == sorted(
        f"maze_2d/easy#{i}.{m}" for i in range(2) for m in range(3))
    info = json.loads((out / "run.json").read_text())
    starts_by_group = {}
    for r in recs:
        assert set(r) == TRAJECTORY_FIELDS
        assert r["run_id"] == info["run_id"] and r["episode_id"] == r["key"]
        assert r["group_id"] == r["key"].rsplit(".", 1)[0] and r["group_size"] == 3
        assert (r["task"], r["split"], r["family_version"]) == ("maze_2d", "easy", 1)
        assert r["seed"] == starts[r["index"]].seed and r["policy_model"] == "fake"
        assert r["sampling"]["temperature"] == 1.0 and r["reward_mode"] == "progress"
        assert r["stop_reason"] == "solved" and r["success"] is True
        assert r["time"]["policy_s"] > 0 and r["time"]["env_s"] > 0
        starts_by_group.setdefault(r["group_id"], set()).add(r["start_state_hash"])
        assert r["turns"][0]["state_hash_before"] == r["start_state_hash"]
        assert r["turns"][-1]["state_hash_after"] == r["final_state_hash"]
        total = 0.0
        for before, after in zip(r["turns"], r["turns"][1:]):
            assert after["state_hash_before"] == before["state_hash_after"]
        for turn in r["turns"]:
            assert set(turn) >= TURN_FIELDS and turn["stepped"] and not turn["invalid"]
            _, ids, logprobs = fake_tokens(turn["reply"])
            assert turn["token_ids"] == ids and turn["logprobs"] == logprobs
            parts = turn["reward_components"]
            assert turn["reward"] == pytest.approx(parts["task"] + parts["shaping"])
            total += turn["reward"]
            sent = turn["messages"]
            assert sent[-1]["role"] == "user" and len(sent) == 2 * turn["step"] + 1
            assert sent[-1]["content"][0]["type"] == "image"
        assert r["return"] == pytest.approx(total)
        # A solved progress-shaped episode collects 1 + the potential of its start (rl.md).
        assert r["return"] == pytest.approx(1 + sum(not t["terminated"] for t in r["turns"]))
    assert all(len(h) == 1 for h in starts_by_group.values())          # one start per group
    assert len({h for hs in starts_by_group.values() for h in hs}) == 2
    # Every JPEG once, named by its content's hash, and every reference resolves.
    files = {p.stem: p for p in (out / "images").iterdir()}
    referenced = {sha for r in recs for sha in image_shas(r)}
    assert set(files) == referenced and info["images_written"] == len(files)
    assert all(hashlib.sha256(p.read_bytes()).hexdigest() == sha for sha, p in files.items())
    assert info["stop_reasons"] == {"solved": 6}


# ------------------------------------------------------------------------ several processes
def trajectory_digest(record: dict) -> tuple:
    """What a trajectory played: its start, its actions and the states they led to."""
    return (record["start_state_hash"], record["final_state_hash"], record["stop_reason"],
            tuple((t["action"] and str(t["action"]), t["state_hash_after"])
                  for t in record["turns"]))


def test_processes_share_one_records_file_and_play_each_trajectory_once(tmp_path, starts):
    with FakeOpenAI(policy="solver", logprobs=True) as server:
        server.register_episodes(starts)
        assert cli.main(rollouts_cmd(server.base_url, tmp_path / "one", "--concurrency",
                                     "2")) == 0
        assert cli.main(rollouts_cmd(server.base_url, tmp_path / "two", "--concurrency", "2",
                                     "--processes", "2")) == 0
    one, two = records(tmp_path / "one"), records(tmp_path / "two")
    keys = [r["key"] for r in two]
    assert len(keys) == len(set(keys)) == 6                       # each trajectory exactly once
    assert {r["key"]: trajectory_digest(r) for r in two} == \
        {r["key"]: trajectory_digest(r) for r in one}
    info = json.loads((tmp_path / "two" / "run.json").read_text())
    assert info["processes"] == 2 and info["stop_reasons"] == {"solved": 6}
    assert len({r["run_id"] for r in two}) == 1 and two[0]["run_id"] == info["run_id"]
    files = {p.stem for p in (tmp_path / "two" / "images").iterdir()}
    assert files == {sha for r in two for sha in image_shas(r)}


def test_an_endpoint_failing_in_one_process_stops_them_all_and_resume_completes(tmp_path):
    out = tmp_path / "run"
    broken = [True]
    options = ("--max-steps", "1", "--processes", "2", "--max-attempts", "1", "--abort-after",
               "2", "--no-preflight")
    with FakeOpenAI(policy="garbage", logprobs=True,
                    faults=lambda number, ctx: "500" if broken[0] else None) as server:
        assert cli.main(rollouts_cmd(server.base_url, out, *options)) == 1
        assert not (out / "episodes.jsonl").exists() or len(records(out)) < 6
        broken[0] = False
        assert cli.main(rollouts_cmd(server.base_url, out, *options, "--resume")) == 0
    keys = [r["key"] for r in records(out)]
    assert len(keys) == len(set(keys)) == 6
    # Ended by a failed request before the stop (recorded, not played again), or by the budget.
    assert {r["stop_reason"] for r in records(out)} <= {"server_error", "budget"}


def test_a_resume_may_change_the_process_count(tmp_path):
    out = tmp_path / "run"
    with FakeOpenAI(policy="garbage", logprobs=True) as server:
        assert cli.main(rollouts_cmd(server.base_url, out, "--max-steps", "1", "--processes",
                                     "2", episodes=1)) == 0
        assert cli.main(rollouts_cmd(server.base_url, out, "--max-steps", "1", "--processes",
                                     "1", "--resume", episodes=2)) == 0
    keys = [r["key"] for r in records(out)]
    assert sorted(keys) == sorted(f"maze_2d/easy#{i}.{m}" for i in range(2) for m in range(3))


def test_processes_need_a_policy_another_process_can_rebuild(tmp_path):
    config = RolloutConfig(env_ids=["maze_2d/easy"], processes=2, out=str(tmp_path / "run"))
    with pytest.raises(ValueError, match="--processes"):
        asyncio.run(collect(lambda batch: ["x"] * len(batch), ["maze_2d/easy"], processes=2))
    with pytest.raises(ValueError, match="--processes"):
        Collector(object(), config)


def test_ray_run_records_what_the_local_run_records(tmp_path, starts, monkeypatch):
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    with FakeOpenAI(policy="solver", logprobs=True) as server:
        server.register_episodes(starts)
        assert cli.main(rollouts_cmd(server.base_url, tmp_path / "local", "--concurrency",
                                     "2")) == 0
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            assert cli.main(rollouts_cmd(server.base_url, tmp_path / "ray", "--concurrency",
                                         "2", "--processes", "2", "--ray", "auto")) == 0
        finally:
            ray.shutdown()
    local, remote = records(tmp_path / "local"), records(tmp_path / "ray")
    assert len({r["key"] for r in remote}) == len(remote) == 6
    assert {r["key"]: trajectory_digest(r) for r in remote} == \
        {r["key"]: trajectory_digest(r) for r in local}
    # The driver wrote every image the Ray tasks encoded, and only those.
    files = {p.stem for p in (tmp_path / "ray" / "images").iterdir()}
    assert files == {sha for r in remote for sha in image_shas(r)} == \
        {p.stem for p in (tmp_path / "local" / "images").iterdir()}
    info = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert info["stop_reasons"] == {"solved": 6} and info["settings"]["ray_address"] == "auto"


def test_speed_benchmark_counts_every_request_and_step(tmp_path):
    from visgym.bench import rollouts as bench

    result = bench.run(concurrency=4, delay_ms=5.0, starts=2, group_size=2, processes=2,
                       out=str(tmp_path / "run"))
    recs = records(tmp_path / "run")
    assert result["trajectories"] == len(recs) == 4 and result["processes"] == 2
    assert result["steps"] == sum(r["steps"] for r in recs) > 0
    # The benchmark server answers the collector's own starts, with tokens.
    assert result["stop_reasons"] == {"solved": 4}
    assert all(t["token_ids"] and t["logprobs"] for r in recs for t in r["turns"])
    assert result["ideal_requests_per_s"] == 800.0 and 0 < result["ratio"] <= 1.05
    assert result["collector_cpu_ms_per_step"] > 0 and result["busy_window_s"] > 0
    # The busy window's share is a part of the whole run's CPU (when the sampler caught it).
    busy = result["collector_busy_cpu_ms_per_step"]
    assert busy is None or 0 <= busy <= result["collector_cpu_ms_per_step"]


# ------------------------------------------------------------------------ faults and stops
def collect_one(tmp_path, server, name, **config):
    agent = TokenOpenAIAgent(model="fake", base_url=server.base_url, api_key_env=KEY_ENV,
                             timeout_s=0.3, max_attempts=1, backoff_s=0.01, hung_after=0)
    options = dict(episodes=1, group_size=1, concurrency=1, progress=False, preflight=False,
                   max_steps=4)
    options.update(config)
    out = tmp_path / name
    run_rollouts(agent, RolloutConfig(env_ids=["maze_2d/easy"], out=str(out), **options))
    (record,) = records(out)
    return record


@pytest.mark.parametrize("fault, reason", [("hang", "timeout"), ("500", "server_error"),
                                           ("malformed", "server_error"),
                                           ("context", "context")])
def test_a_failed_request_ends_the_trajectory_with_its_stop_reason(tmp_path, fault, reason):
    with FakeOpenAI(policy=lambda ctx: "('move', 0)", faults={2: fault}, hang_s=1.0,
                    logprobs=True) as server:
        record = collect_one(tmp_path, server, fault)
    assert record["stop_reason"] == reason and not record["success"]
    first, last = record["turns"]
    assert first["stepped"] and first["token_ids"] is not None
    assert not last["stepped"] and last["reply_flag"] == "error" and last["token_ids"] is None
    assert last["state_hash_before"] == last["state_hash_after"] == first["state_hash_after"]
    assert record["steps"] == 1 and record["time"]["policy_s"] > 0


@pytest.mark.parametrize("policy, options, reason", [
    ("garbage", {"max_parse_errors": 2}, "parse_error"),
    (lambda ctx: "('move', 0)", {}, "budget"),
    (lambda ctx: "('stop', 'stop')", {}, "stopped"),
])
def test_model_outcomes_map_to_stop_reasons(tmp_path, policy, options, reason):
    with FakeOpenAI(policy=policy, logprobs=True) as server:
        record = collect_one(tmp_path, server, "run", **options)
    assert record["stop_reason"] == reason
    steps = {"parse_error": 2, "budget": 4, "stopped": 1}[reason]
    assert record["steps"] == steps == len(record["turns"])
    assert record["truncated"] == (reason == "budget")
    assert record["invalid_actions"] == (2 if reason == "parse_error" else 0)


def test_an_env_exception_is_recorded_as_env_error(tmp_path, monkeypatch):
    from visgym.bridges import stepper as stepper_module

    original = stepper_module.SlotStepper._flush

    def failing(self):
        if self.calls >= 1:
            self.env.step = _raise
        original(self)

    monkeypatch.setattr(stepper_module.SlotStepper, "_flush", failing)
    with FakeOpenAI(policy=lambda ctx: "('move', 0)", logprobs=True) as server:
        record = collect_one(tmp_path, server, "run")
    assert record["stop_reason"] == "env_error" and "kernel exploded" in record["error"]
    assert record["steps"] == 1 and len(record["turns"]) == 2


def _raise(*args, **kwargs):
    raise RuntimeError("kernel exploded")


def test_stop_reasons_are_the_documented_set():
    doc = (TESTS.parent / "docs" / "rl.md").read_text()
    section = doc[doc.index("## Rollouts"):]
    for reason in STOP_REASONS:
        assert f"`{reason}`" in section


# ------------------------------------------------------------------------ --require-logprobs
def test_require_logprobs_refuses_a_server_without_them(tmp_path, capsys):
    out = tmp_path / "run"
    with FakeOpenAI(policy="garbage", logprobs=False) as server:
        assert cli.main(rollouts_cmd(server.base_url, out, "--require-logprobs")) == 2
        assert len(server.requests_snapshot()) == 1        # the pre-flight's test chat only
    err = capsys.readouterr().err
    assert "without log-probabilities" in err and "--require-logprobs" in err
    assert not (out / "episodes.jsonl").exists()
    # Without the pre-flight the first answer stops the run (nothing half-recorded).
    with FakeOpenAI(policy="garbage", logprobs=False) as server:
        assert cli.main(rollouts_cmd(server.base_url, out, "--require-logprobs",
                                     "--no-preflight", "--max-steps", "2")) == 1
    assert "no log-probabilities" in capsys.readouterr().err
    assert not (out / "episodes.jsonl").exists()


def test_require_logprobs_accepts_a_server_that_sends_them(tmp_path):
    out = tmp_path / "run"
    with FakeOpenAI(policy="garbage", logprobs=True) as server:
        assert cli.main(rollouts_cmd(server.base_url, out, "--require-logprobs",
                                     "--max-steps", "2", episodes=1, group=2)) == 0
    assert all(t["logprobs"] for r in records(out) for t in r["turns"])


# ------------------------------------------------------------------------ kill -9 and resume
@pytest.fixture
def standalone_server(tmp_path):
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, str(TESTS / "fake_openai.py"), "--port-file",
                             str(port_file), "--policy", "garbage", "--latency-ms", "40",
                             "--logprobs", "--no-record"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "no fake server"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{int(port_file.read_text())}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.timeout(120)
def test_kill9_then_resume_records_each_trajectory_exactly_once(tmp_path, standalone_server):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "visgym.bridges.cli",
           *rollouts_cmd(standalone_server, out, "--max-steps", "3", "--concurrency", "4",
                         episodes=6, group=3)]
    env = {**os.environ, KEY_ENV: "sk-dummy"}
    victim = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True)
    try:
        path = out / "episodes.jsonl"
        deadline = time.monotonic() + 60
        while not (path.exists() and path.read_bytes().count(b"\n") >= 3):
            assert victim.poll() is None, victim.communicate()[1].decode()
            assert time.monotonic() < deadline, "no records written"
            time.sleep(0.01)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            victim.kill()
        victim.communicate()
    before = records(out) if path.read_bytes().endswith(b"\n") else None
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    with open(path, "ab") as f:                 # what a kill inside a write leaves
        f.write(b'{"key": "maze_2d/easy#5.2", "turns": [{"st')
    (out / "images" / ".left.12345678.tmp").write_bytes(b"half a jpeg")
    assert cli.main(rollouts_cmd(standalone_server, out, "--max-steps", "3", "--resume",
                                 episodes=6, group=3)) == 0
    recs = records(out)
    keys = [r["key"] for r in recs]
    assert sorted(keys) == sorted(f"maze_2d/easy#{i}.{m}" for i in range(6) for m in range(3))
    assert len(keys) == len(set(keys)) == 18
    if before is not None:
        assert 3 <= len(before) < 18 and recs[:len(before)] == before
    assert {r["run_id"] for r in recs} == {run_id}
    assert not list((out / "images").glob(".*.tmp"))
    assert json.loads((out / "run.json").read_text())["resumed"] == 1


def test_resume_refuses_other_settings(tmp_path):
    out = tmp_path / "run"
    with FakeOpenAI(policy="garbage", logprobs=True) as server:
        assert cli.main(rollouts_cmd(server.base_url, out, "--max-steps", "1", episodes=1,
                                     group=2)) == 0
        assert cli.main(rollouts_cmd(server.base_url, out, "--max-steps", "1", episodes=1,
                                     group=2)) == 2          # an existing run needs --resume
        with pytest.raises(ValueError, match="group_size 2 \\(now 3\\)"):
            agent = TokenOpenAIAgent(model="fake", base_url=server.base_url,
                                     api_key_env=KEY_ENV)
            run_rollouts(agent, RolloutConfig(env_ids=["maze_2d/easy"], out=str(out),
                                              episodes=1, group_size=3, max_steps=1,
                                              resume=True, progress=False))
        # More starts on a resume add trajectories; the recorded ones are kept.
        assert cli.main(rollouts_cmd(server.base_url, out, "--max-steps", "1", "--resume",
                                     episodes=2, group=2)) == 0
    assert sorted(r["key"] for r in records(out)) == [
        "maze_2d/easy#0.0", "maze_2d/easy#0.1", "maze_2d/easy#1.0", "maze_2d/easy#1.1"]


# ------------------------------------------------------------------------ Parquet export
def test_parquet_export_round_trips(tmp_path, starts):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "run"
    with FakeOpenAI(policy="solver", logprobs=True) as server:
        server.register_episodes(starts)
        assert cli.main(rollouts_cmd(server.base_url, out, "--max-steps", "5", group=2)) == 0
    parquet = tmp_path / "export" / "rollouts.parquet"
    assert cli.main(["rollouts", "export", str(out), str(parquet)]) == 0
    dataset = datasets.load_dataset("parquet", data_files=str(parquet), split="train",
                                    cache_dir=str(tmp_path / "hf"))
    recs = {r["key"]: r for r in records(out)}
    assert len(dataset) == len(recs) == 4
    dataset = dataset.cast_column("images", datasets.List(datasets.Image(decode=False)))
    for row in dataset:
        record = recs[row["episode_id"]]
        for name in ("run_id", "group_id", "member", "seed", "stop_reason", "return",
                     "start_state_hash", "final_state_hash", "success"):
            assert row[name] == record[name], name
        assert json.loads(row["sampling"]) == record["sampling"]
        assert row["policy_s"] == record["time"]["policy_s"]
        assert len(row["turns"]) == len(record["turns"])
        for got, want in zip(row["turns"], record["turns"]):
            assert json.loads(got["messages"]) == want["messages"]
            assert got["token_ids"] == want["token_ids"] and got["logprobs"] == want["logprobs"]
            assert got["reward_shaping"] == want["reward_components"]["shaping"]
            assert got["state_hash_after"] == want["state_hash_after"]
        assert row["image_sha256"] == image_shas(record)
        for sha, image in zip(row["image_sha256"], row["images"]):
            assert hashlib.sha256(image["bytes"]).hexdigest() == sha
    # Stored messages materialize back into what an OpenAI-compatible server takes.
    turn = next(iter(recs.values()))["turns"][1]
    sent = materialize(turn["messages"], out)
    assert sent[0]["content"][0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert materialize(turn["messages"], out, form="path")[0]["content"][0]["image_url"][
        "url"].endswith(".jpg")


# ------------------------------------------------------------------------ in process
def test_in_process_collector_batches_the_policy_and_keeps_tokens():
    batches = []

    async def policy(conversations):
        batches.append(len(conversations))
        await asyncio.sleep(0)
        replies = []
        for messages in conversations:
            step = (len(messages) - 1) // 2
            text = "('stop', 'stop')" if step == 2 else "('move', 0)"
            replies.append({"text": text, "token_ids": [step, 7], "logprobs": [-0.5, -0.25]})
        return replies

    result = asyncio.run(collect(policy, ["maze_2d/easy", "maze_2d/hard"], episodes=2,
                                 group_size=4, reward="progress", concurrency=16))
    assert len(result.trajectories) == 16
    assert max(batches) == 16 and len(batches) == 3      # one call per step of every episode
    groups = {}
    for r in result.trajectories:
        assert r["stop_reason"] == "stopped" and r["steps"] == 3
        assert r["policy_model"] == "in-process" and r["run_id"] == result.run_id
        assert [t["token_ids"] for t in r["turns"]] == [[0, 7], [1, 7], [2, 7]]
        assert all(t["logprobs"] == [-0.5, -0.25] for t in r["turns"])
        groups.setdefault(r["group_id"], set()).add(r["start_state_hash"])
        for sha in image_shas(r):
            assert hashlib.sha256(result.images[sha]).hexdigest() == sha
    assert len(groups) == 4 and all(len(h) == 1 for h in groups.values())
    # The images in memory put the messages back together.
    sent = materialize(result.trajectories[0]["turns"][0]["messages"], result.images)
    assert sent[0]["content"][0]["image_url"]["url"].startswith("data:image/jpeg;base64,")


def test_in_process_collector_takes_a_plain_function_and_writes_a_run_folder(tmp_path):
    def policy(conversations):
        return ["('stop', 'stop')" for _ in conversations]

    result = asyncio.run(collect(policy, ["maze_2d/easy"], episodes=1, group_size=2,
                                 out=str(tmp_path / "run"), sampling={"temperature": 0.7}))
    assert sorted(r["key"] for r in result.trajectories) == ["maze_2d/easy#0.0",
                                                            "maze_2d/easy#0.1"]
    assert records(tmp_path / "run") == result.trajectories
    assert all(r["sampling"] == {"temperature": 0.7} and r["turns"][0]["token_ids"] is None
               for r in result.trajectories)


@pytest.mark.parametrize("history", [-1, 2])
def test_turns_share_their_recorded_messages_and_lines_are_plain_json(history):
    def policy(conversations):
        return ["('move', 0)" for _ in conversations]

    result = asyncio.run(collect(policy, ["maze_2d/easy"], episodes=1, group_size=1,
                                 max_steps=6, history=history))
    (record,) = result.trajectories
    turns = record["turns"]
    assert len(turns) == 6
    # Each turn lists the messages as sent; a message sent again is the same recorded dict.
    for before, after in zip(turns, turns[1:]):
        shared = [m for m in after["messages"] if any(m is n for n in before["messages"])]
        if history < 0:
            assert len(shared) == len(after["messages"]) - 2     # all but the two new ones
        elif before["step"] > 0:   # turn 1 resends none of turn 0's: its first is rebuilt
            assert shared
    if history > 0:   # the window's first message is rebuilt (instructions prepended)
        assert len(turns[-1]["messages"]) == 2 * history + 1
        assert turns[-1]["messages"][0] is not turns[-2]["messages"][0]
    # The fast line is the plain JSON line, byte for byte, for this record and odd ones.
    assert trajectory_line(record) == to_json_line(record)
    odd = [{}, {"turns": []}, {"turns": [{"step": 0, "messages": []}]},
           {"turns": [{"messages": [], "step": 1}], "after": True},
           {"a": np.int64(3), "turns": [{"step": np.int32(2), "messages": [
               {"role": "user", "content": "h\u00e9 \ud83d\ude00"}, {"role": "assistant"}],
               "reward": np.float32(0.5)}, "not a turn"]}]
    for value in odd:
        assert trajectory_line(value) == to_json_line(value)


def test_commands_play_with_the_start_up_heap_frozen_and_thaw_it_after(tmp_path):
    seen = []

    def policy(conversations):
        seen.append(gc.get_freeze_count())
        return ["('stop', 'stop')" for _ in conversations]

    assert gc.get_freeze_count() == 0
    config = RolloutConfig(env_ids=["maze_2d/easy"], episodes=1, group_size=2, preflight=False,
                           out=str(tmp_path / "run"), progress=False)
    assert run_rollouts(BatchedPolicyAgent(policy), config)["stop_reasons"] == {"stopped": 2}
    assert min(seen) > 10_000 and gc.get_freeze_count() == 0
    # A trainer's own process (collect) is left as it is.
    seen.clear()
    asyncio.run(collect(policy, ["maze_2d/easy"], episodes=1, group_size=2))
    assert seen == [0] and gc.get_freeze_count() == 0


def test_settled_heap_keeps_a_frozen_cycle_until_the_block_ends():
    class Node:
        """Refers to itself: only the cyclic collector can free it."""

    node = Node()
    node.loop = node
    alive = weakref.ref(node)
    with settled_heap():
        del node
        gc.collect()
        assert alive() is not None          # frozen: not collected inside the block
    gc.collect()
    assert alive() is None and gc.get_freeze_count() == 0


def test_in_process_policy_errors_reach_the_caller():
    def policy(conversations):
        return ["one reply for many"]

    with pytest.raises(ValueError, match="returned 1 replies for a batch of 2"):
        asyncio.run(collect(policy, ["maze_2d/easy"], episodes=1, group_size=2))


def test_bad_settings_name_their_field():
    for options, field in [({"group_size": 0}, "--group-size"), ({"reward": "dense"}, "--reward"),
                           ({"episodes": 0}, "--episodes"), ({"env_ids": ["maze_2d/x"]}, "tasks"),
                           ({"processes": 0}, "--processes")]:
        config = RolloutConfig(**{"env_ids": ["maze_2d/easy"], **options})
        with pytest.raises(ValueError, match=field):
            Collector(object(), config)
