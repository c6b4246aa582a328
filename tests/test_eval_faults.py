"""Fault handling of the OpenAI-compatible agent inside the evaluation loop (agent_loop.md 5.3),
against the real HTTP server of tests/fake_openai.py with scripted faults: 429 with Retry-After,
5xx, dropped connections, malformed JSON and hangs past the client timeout are retried; exhausting
the attempts, ``content: null`` and ``content: ""`` become the placeholders of the reference and
still consume a step (the env reports an unparsable action); ``finish_reason: "length"`` is
flagged but its action is used; a context-length error ends the episode after that step.

The solver policy reads the plan position off the current image, so a step wasted on a
placeholder does not derail it and the episode still succeeds.

Every test runs twice, over the SDK's own httpx stack and over the lean transport
(bridges/http_transport.py): each fault must behave the same through both.
"""
import json
import time

import pytest

from fake_openai import FakeOpenAI, solver_entries
from visgym.bridges.agents import OpenAIAgent
from visgym.bridges.evaluate import EvalConfig, run_eval
from visgym.bridges.splits import load_split

KEY_ENV = "VISGYM_TEST_KEY"
EXHAUSTED_4 = "Error in receiving a response after 4 trials"


AGENT_DEFAULTS = dict(backoff_s=0.01, max_backoff_s=0.05, timeout_s=1.0, max_attempts=4)


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-dummy-fault-tests")


@pytest.fixture(autouse=True, params=["lean", "httpx"])
def http_transport(request, monkeypatch):
    monkeypatch.setitem(AGENT_DEFAULTS, "http_transport", request.param)
    return request.param


@pytest.fixture(scope="module")
def episodes():
    return load_split("maze_2d", "easy")[:2]


@pytest.fixture(scope="module")
def entries(episodes):
    return solver_entries(episodes)


def agent_for(server, **overrides):
    kwargs = dict(AGENT_DEFAULTS, **overrides)
    agent = OpenAIAgent(model="fake", base_url=server.base_url, api_key_env=KEY_ENV, **kwargs)
    assert agent.describe()["http_transport"] == kwargs["http_transport"]
    return agent


def run_one(tmp_path, entries, episodes, faults, agent_kwargs=None, n=1, **server_kwargs):
    """Run the first ``n`` episodes one at a time; return (records, requests, wall seconds)."""
    with FakeOpenAI(policy="solver", faults=faults, **server_kwargs) as server:
        for entry in entries[:n]:
            server.register_entry(entry)
        start = time.perf_counter()
        run_eval(agent_for(server, **(agent_kwargs or {})),
                 EvalConfig(out=str(tmp_path / "out"), concurrency=1, gifs=False,
                            progress=False), episodes[:n])
        wall = time.perf_counter() - start
        requests = server.requests_snapshot()
    records = [json.loads(line) for line in open(tmp_path / "out" / "episodes.jsonl")]
    return records, requests, wall


def gap(requests, a, b):
    """Seconds between the arrival of request numbers a and b."""
    times = {r.number: r.received for r in requests}
    return times[b] - times[a]


def assert_clean_success(record, entry):
    assert record["success"] is True and record["end_reason"] == "stop"
    assert [s["action"] for s in record["steps_log"]] == entry.plan
    assert record["error_replies"] == 0 and record["invalid_actions"] == 0


# ------------------------------------------------------------------------------- retried
def test_429_retry_after_is_honoured_with_small_backoff(tmp_path, entries, episodes):
    (record,), requests, _ = run_one(tmp_path, entries, episodes, {2: "429"})
    assert requests[1].status == 429
    assert record["steps_log"][1]["attempts"] == 2
    assert_clean_success(record, entries[0])
    assert gap(requests, 2, 3) >= 0.9


def test_429_retry_after_is_honoured(tmp_path, entries, episodes):
    # With a backoff cap of 1 s the Retry-After cap (5x) does not bite; the exponential
    # backoff alone would wait about 0.01 s.
    (record,), requests, _ = run_one(tmp_path, entries, episodes, {2: "429"},
                                     agent_kwargs={"max_backoff_s": 1.0})
    assert requests[1].status == 429 and requests[1].fault == "429"
    assert record["steps_log"][1]["attempts"] == 2
    assert record["steps_log"][1]["reply_flag"] is None
    assert_clean_success(record, entries[0])
    assert gap(requests, 2, 3) >= 0.9


@pytest.mark.parametrize("kind", ["500", "503", "drop", "malformed"])
def test_transient_faults_are_retried(tmp_path, entries, episodes, kind):
    (record,), requests, _ = run_one(tmp_path, entries, episodes, {2: kind})
    assert requests[1].fault == kind
    step = record["steps_log"][1]
    assert step["attempts"] == 2 and step["reply_flag"] is None
    assert step["reply"] == entries[0].plan[1]
    assert_clean_success(record, entries[0])
    # The retry resends the same conversation.
    assert requests[1].body == requests[2].body


def test_several_faults_in_a_row_then_success(tmp_path, entries, episodes):
    faults = {3: "503", 4: "drop", 5: "malformed"}
    (record,), requests, _ = run_one(tmp_path, entries, episodes, faults)
    assert record["steps_log"][2]["attempts"] == 4
    assert record["steps_log"][2]["reply_flag"] is None
    assert_clean_success(record, entries[0])
    assert [r.fault for r in requests[:6]] == [None, None, "503", "drop", "malformed", None]


def test_hang_past_the_timeout_is_retried(tmp_path, entries, episodes):
    (record,), requests, _ = run_one(tmp_path, entries, episodes, {2: "hang"}, hang_s=6.0)
    assert requests[1].fault == "hang"
    assert record["steps_log"][1]["attempts"] == 2
    assert_clean_success(record, entries[0])
    waited = gap(requests, 2, 3)
    assert 0.9 <= waited < 5.0, waited   # the 1 s client timeout, not the 6 s hang


def test_random_faults_with_a_seed(tmp_path, entries, episodes):
    records, requests, _ = run_one(
        tmp_path, entries, episodes, None, n=2,
        agent_kwargs={"max_attempts": 10}, fault_rate=0.3, fault_seed=1234,
        fault_kinds=("429", "500", "503", "drop", "malformed"), retry_after="0")
    assert any(r.fault for r in requests)
    assert all(r["success"] for r in records)
    assert sum(s["attempts"] for r in records for s in r["steps_log"]) == len(requests)


# ------------------------------------------------------------------------------ placeholders
def test_exhausted_attempts_record_the_placeholder_and_consume_the_step(tmp_path, entries,
                                                                        episodes):
    faults = {3: "500", 4: "503", 5: "drop", 6: "500"}   # all four attempts of step 2
    (record,), requests, _ = run_one(tmp_path, entries, episodes, faults)
    plan = entries[0].plan
    step = record["steps_log"][2]
    assert step["reply"] == EXHAUSTED_4
    assert step["reply_flag"] == "error" and step["attempts"] == 4
    assert step["action"] == EXHAUSTED_4   # no tuple in it: passed through to the env
    assert step["feedback"].startswith("Cannot parse action string")
    assert step["reward"] == 0.0 and step["terminated"] is False
    assert "500" in step["error"] or "Error code" in step["error"]
    # The step counts; the solver then resumes the plan from the unchanged state.
    assert record["steps"] == len(plan) + 1 == len(record["steps_log"])
    assert record["error_replies"] == 1 and record["invalid_actions"] == 1
    assert record["success"] is True
    assert [s["action"] for s in record["steps_log"] if s["reply_flag"] is None] == plan
    # The placeholder is the assistant turn of the next request.
    nxt = requests[6].body["messages"]
    assert nxt[5] == {"role": "assistant", "content": EXHAUSTED_4}
    assert nxt[6]["content"][1]["text"].startswith(
        "Environment feedback: Cannot parse action string")
    assert len(requests) >= len(plan) + 4


def test_all_requests_failing_burns_the_budget(tmp_path, entries, episodes):
    with FakeOpenAI(policy="solver", faults=lambda n, ctx: "500") as server:
        run_eval(agent_for(server), EvalConfig(out=str(tmp_path / "out"), max_steps=2,
                                               concurrency=1, gifs=False, progress=False),
                 episodes[:1])
        count = server.count
    (record,) = [json.loads(line) for line in open(tmp_path / "out" / "episodes.jsonl")]
    assert count == 8
    assert [s["reply"] for s in record["steps_log"]] == [EXHAUSTED_4] * 2
    assert record["end_reason"] == "budget" and record["success"] is False
    assert record["error_replies"] == 2


def test_null_content_gives_the_exhaustion_placeholder(tmp_path, entries, episodes):
    (record,), _, _ = run_one(tmp_path, entries, episodes, {2: "null"})
    assert record["steps_log"][1]["reply"] == EXHAUSTED_4


def test_null_content_is_not_retried_and_consumes_the_step(tmp_path, entries, episodes):
    (record,), requests, _ = run_one(tmp_path, entries, episodes, {2: "null"})
    step = record["steps_log"][1]
    assert step["reply"].startswith("Error in receiving a response after ")
    assert step["reply_flag"] == "error" and step["attempts"] == 1
    assert step["feedback"].startswith("Cannot parse action string")
    assert record["steps"] == len(entries[0].plan) + 1
    assert record["error_replies"] == 1 and record["success"] is True
    assert requests[2].body["messages"][3] == {"role": "assistant", "content": step["reply"]}


def test_empty_content_gives_empty_response(tmp_path, entries, episodes):
    (record,), requests, _ = run_one(tmp_path, entries, episodes, {2: "empty"})
    step = record["steps_log"][1]
    assert step["reply"] == "Empty response"
    assert step["reply_flag"] == "empty" and step["attempts"] == 1
    assert step["feedback"].startswith("Cannot parse action string")
    assert record["steps"] == len(entries[0].plan) + 1
    assert record["error_replies"] == 1 and record["invalid_actions"] == 1
    assert record["success"] is True
    assert requests[2].body["messages"][3] == {"role": "assistant", "content": "Empty response"}


def test_length_finish_is_flagged_but_the_action_is_used(tmp_path, entries, episodes):
    (record,), _, _ = run_one(tmp_path, entries, episodes, {2: "length"})
    step = record["steps_log"][1]
    assert step["reply_flag"] == "too_long"
    assert step["action"] == entries[0].plan[1]
    assert step["feedback"] == "Action executed successfully."
    assert record["success"] is True and record["steps"] == len(entries[0].plan)
    assert record["invalid_actions"] == 0


def test_context_length_error_ends_the_episode(tmp_path, entries, episodes):
    (record,), requests, _ = run_one(tmp_path, entries, episodes, {3: "context"})
    assert len(requests) == 3 and requests[2].status == 400   # not retried
    assert record["end_reason"] == "context_length"
    assert record["steps"] == 3 == len(record["steps_log"])
    last = record["steps_log"][-1]
    assert last["reply"] == "Error: Maximum context length is exceeded."
    assert last["reply_flag"] == "error" and last["attempts"] == 1
    assert "maximum context length is 8192 tokens" in last["error"]
    assert last["feedback"].startswith("Cannot parse action string")
    assert record["success"] is False and record["truncated"] is False
    assert record["terminated"] is False
