"""Fault handling of the OpenAI-compatible agent inside the evaluation loop (agent_loop.md 5.3),
against the real HTTP server of tests/fake_openai.py with scripted faults: 429 with Retry-After,
5xx, dropped connections, malformed JSON and hangs past the client timeout are retried; exhausting
the attempts, ``content: null`` and ``content: ""`` become the placeholders of the reference and
still consume a step (the env reports an unparsable action); ``finish_reason: "length"`` is
flagged but its action is used; a context-length error ends the episode after that step.

What a server sends is untrusted: a reply holding a lone surrogate or a NUL is escaped, a body
that is not UTF-8 is a retried error, wrong-shaped JSON is a recorded error naming the field, an
over-long reply is cut to its end (what is stored is what is resent), usage that is not counts is
dropped, a key quoted in an error body is redacted; every failure is classified transient or
permanent (``Reply.transient``). The pre-flight (``OpenAIAgent.preflight``) names the cause and
the fix of an endpoint that cannot serve a run.

The solver policy reads the plan position off the current image, so a step wasted on a
placeholder does not derail it and the episode still succeeds.

Every test runs twice, over the SDK's own httpx stack and over the lean transport
(bridges/http_transport.py): each fault must behave the same through both.
"""
import asyncio
import json
import os
import socket
import time

import pytest

from fake_openai import FakeOpenAI, solver_entries
from visgym.bridges.agents import (MAX_REPLY_CHARS, Episode, GenerationSettings, OpenAIAgent,
                                   PreflightError, Turn)
from visgym.bridges.evaluate import EvalConfig, RunAborted, run_eval
from visgym.bridges.splits import load_split

KEY_ENV = "VISGYM_TEST_KEY"
KEY = "sk-dummy-fault-tests"
EXHAUSTED_4 = "Error in receiving a response after 4 trials"


AGENT_DEFAULTS = dict(backoff_s=0.01, max_backoff_s=0.05, timeout_s=1.0, max_attempts=4)


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


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


def test_a_server_that_answers_then_hangs_stops_the_run_resumably(tmp_path, entries,
                                                                  episodes):
    """After its first answers the server hangs on every request: the run stops within a few
    request timeouts (the agent's hung-endpoint count and the breaker), records nothing it did
    not finish, and a resume against a working server completes every episode."""
    out = tmp_path / "out"
    with FakeOpenAI(policy="solver", faults=lambda number, ctx: "hang" if number > 3 else None,
                    hang_s=30.0) as server:
        for entry in entries:
            server.register_entry(entry)
        start = time.perf_counter()
        with pytest.raises(RunAborted, match="stopped answering"):
            run_eval(agent_for(server, max_attempts=6),
                     EvalConfig(out=str(out), concurrency=2, gifs=False, progress=False),
                     episodes)
        wall = time.perf_counter() - start
        port = server.port
    # Without the count: 2 episodes x 6 attempts x 1 s a step, for every remaining step.
    assert wall < 8.0, wall
    assert not (out / "episodes.jsonl").exists() or not (out / "episodes.jsonl").read_text()
    with FakeOpenAI(policy="solver", port=port) as server:   # the same endpoint, working
        for entry in entries:
            server.register_entry(entry)
        run_eval(agent_for(server), EvalConfig(out=str(out), concurrency=2, gifs=False,
                                                progress=False, resume=True), episodes)
    records = [json.loads(line) for line in open(out / "episodes.jsonl")]
    assert sorted(r["key"] for r in records) == sorted(e.key for e in episodes)
    assert all(r["success"] for r in records)


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
    # The classification is kept with the step (the circuit breaker and the report use it).
    assert step["transient"] is True and step["error_kind"]
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


def test_all_requests_failing_spoil_the_episode(tmp_path, entries, episodes):
    """Every request fails after its retries: the placeholders use up the budget (as the
    reference's loop does), and the episode is recorded as spoiled by the server, not as the
    model's failure."""
    with FakeOpenAI(policy="solver", faults=lambda n, ctx: "500") as server:
        run_eval(agent_for(server), EvalConfig(out=str(tmp_path / "out"), max_steps=2,
                                               concurrency=1, gifs=False, progress=False),
                 episodes[:1])
        count = server.count
    (record,) = [json.loads(line) for line in open(tmp_path / "out" / "episodes.jsonl")]
    assert count == 8
    assert [s["reply"] for s in record["steps_log"]] == [EXHAUSTED_4] * 2
    assert record["end_reason"] == "server_error" and record["success"] is False
    assert record["truncated"] is True
    assert record["error_replies"] == 2 and record["server_errors"] == 2


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


# ----------------------------------------------------------- what a server sends is untrusted
def files_text(folder) -> str:
    return "".join(open(os.path.join(d, f), encoding="utf-8", errors="replace").read()
                   for d, _, names in os.walk(folder) for f in names)


@pytest.mark.parametrize("kind, tail", [("surrogate", " \\ud800"), ("nul", " \\x00")])
def test_unencodable_reply_is_escaped_and_the_run_goes_on(tmp_path, entries, episodes, kind,
                                                          tail):
    # A "\ud800" escape in the JSON once made the next request's body unencodable: the whole
    # run ended (exit 2), and a deterministic model repeated it on --resume.
    (record,), requests, _ = run_one(tmp_path, entries, episodes, {2: kind})
    step = record["steps_log"][1]
    assert step["reply"] == entries[0].plan[1] + tail
    assert step["action"] == entries[0].plan[1] and step["reply_flag"] is None
    assert_clean_success(record, entries[0])
    assert requests[2].body["messages"][3] == {"role": "assistant", "content": step["reply"]}


def test_body_that_is_not_utf8_is_retried(tmp_path, entries, episodes):
    (record,), requests, _ = run_one(tmp_path, entries, episodes, {2: "not_utf8"})
    assert requests[1].fault == "not_utf8"
    assert record["steps_log"][1]["attempts"] == 2 and record["steps_log"][1]["reply_flag"] is None
    assert_clean_success(record, entries[0])


def test_body_that_is_never_utf8_is_a_recorded_error(tmp_path, entries, episodes):
    faults = {n: "not_utf8" for n in range(2, 6)}
    (record,), _, _ = run_one(tmp_path, entries, episodes, faults)
    step = record["steps_log"][1]
    assert step["reply"] == EXHAUSTED_4 and step["reply_flag"] == "error"
    assert "not UTF-8" in step["error"]
    assert record["success"] is True


@pytest.mark.parametrize("kind, reason", [
    ("choices_int", "choices is a number (5), not a list"),
    ("choices_dict", "choices is an object (keys: 0), not a list"),
    ("message_null", "choices[0].message is null, not an object"),
    ("content_number", "choices[0].message.content is a number (42), not a string"),
    ("not_object", "the response is a list of 3, not a chat completion object"),
])
def test_wrong_shaped_response_is_a_recorded_error(tmp_path, entries, episodes, kind, reason):
    (record,), requests, _ = run_one(tmp_path, entries, episodes, {2: kind})
    step = record["steps_log"][1]
    assert step["reply_flag"] == "error" and step["attempts"] == 1   # not retried
    assert step["error"] == reason
    assert step["feedback"].startswith("Cannot parse action string")
    assert record["success"] is True and record["error_replies"] == 1


def test_usage_counts_that_are_not_numbers_are_dropped(tmp_path, entries, episodes):
    # "prompt_tokens": "many" once crashed the runner's usage sum with a TypeError.
    (record,), _, _ = run_one(tmp_path, entries, episodes, {2: "usage_text"})
    assert record["steps_log"][1]["usage"] == {"prompt_tokens": None, "completion_tokens": None}
    assert record["usage"]["prompt_tokens"] == sum(s["usage"]["prompt_tokens"] or 0
                                                   for s in record["steps_log"])
    assert_clean_success(record, entries[0])


def test_content_given_as_text_parts_is_joined(tmp_path, entries, episodes):
    (record,), _, _ = run_one(tmp_path, entries, episodes, {2: "content_parts"})
    assert record["steps_log"][1]["reply"] == entries[0].plan[1]
    assert_clean_success(record, entries[0])


def test_error_object_in_a_200_body_is_retried(tmp_path, entries, episodes):
    (record,), _, _ = run_one(tmp_path, entries, episodes, {2: "error_200"})
    assert record["steps_log"][1]["attempts"] == 2
    assert_clean_success(record, entries[0])


def test_long_reply_is_cut_to_its_end_and_resent_cut(tmp_path, entries, episodes):
    (record,), requests, _ = run_one(tmp_path, entries, episodes, {2: "long_reply"},
                                     long_reply_chars=200_000)
    step = record["steps_log"][1]
    assert len(step["reply"]) <= MAX_REPLY_CHARS and step["reply_flag"] == "too_long"
    assert step["reply"].startswith("[reply of 200012 characters cut: only its end is kept]")
    assert step["action"] == entries[0].plan[1]
    # What the next turns resend is the cut reply, not the 200,000 characters.
    assert all(r.body["messages"][3]["content"] == step["reply"] for r in requests[2:])


@pytest.mark.parametrize("kind", ["huge_reply", "gzip_bomb", "garbage"])
def test_body_over_the_size_limit_is_a_retried_error(tmp_path, entries, episodes, kind):
    (record,), _, _ = run_one(tmp_path, entries, episodes, {2: kind},
                              agent_kwargs={"max_response_bytes": 1 << 20},
                              huge_bytes=3 << 20, bomb_bytes=8 << 20)
    assert record["steps_log"][1]["attempts"] == 2
    assert_clean_success(record, entries[0])


def test_key_quoted_in_an_error_body_is_redacted(tmp_path, entries, episodes):
    faults = {n: "echo_auth" for n in range(2, 6)}   # every attempt of step 1
    (record,), _, _ = run_one(tmp_path, entries, episodes, faults, echo_auth=True)
    error = record["steps_log"][1]["error"]
    assert "Authorization: Bearer [redacted]" in error and KEY not in error
    assert KEY not in files_text(tmp_path / "out")


def act_once(server, messages=None, **overrides) -> object:
    agent = agent_for(server, **overrides)

    async def go():
        try:
            return await agent.act(Turn(Episode("k", "maze_2d/easy", 0, 0), 0,
                                        messages or [{"role": "user", "content": "hi"}], "hi"))
        finally:
            await agent.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("kind, transient, error_kind", [
    ("500", True, "http_500"), ("429", True, "http_429"), ("drop", True, "protocol"),
    ("malformed", True, "undecodable"), ("not_utf8", True, "undecodable"),
    ("partial", True, "protocol"), ("hang", True, "timeout"), ("400", False, "http_400"),
    ("404", False, "http_404"), ("context", False, "context_length"),
    ("choices_int", False, "bad_shape"), ("redirect_loop", False, "redirects"),
])
def test_failures_are_classified_transient_or_permanent(kind, transient, error_kind):
    with FakeOpenAI(policy="solver", faults=lambda n, ctx: kind, retry_after="0",
                    hang_s=2.0) as server:
        reply = act_once(server, max_attempts=2, timeout_s=0.5)
    assert reply.flag == "error"
    assert reply.transient is transient and reply.error_kind == error_kind
    assert reply.attempts == (2 if transient else 1)
    assert reply.error


def test_an_answer_is_not_a_failure():
    with FakeOpenAI(policy="solver") as server:
        reply = act_once(server)
    assert reply.flag is None and reply.transient is None and reply.error_kind is None
    assert reply.truncated is False


# ------------------------------------------------------------------------------ pre-flight
def preflight(base_url, images=2, api_key_env=KEY_ENV, **kwargs):
    agent = OpenAIAgent(model=kwargs.pop("model", "fake"), base_url=base_url,
                        api_key_env=api_key_env, **dict(AGENT_DEFAULTS, **kwargs))
    asyncio.run(agent.preflight(images=images))


def preflight_error(base_url, **kwargs) -> str:
    start = time.perf_counter()
    with pytest.raises(PreflightError) as error:
        preflight(base_url, **kwargs)
    assert time.perf_counter() - start < 5.0
    message = str(error.value)
    assert "\n" not in message and KEY not in message
    return message


def test_preflight_passes_on_a_working_server():
    with FakeOpenAI(policy="solver") as server:
        preflight(server.base_url)
        (chat,) = server.requests_snapshot()
    assert server.gets == ["/v1/models"]
    assert chat.n_images == 2 and len(chat.image_sizes) == 2
    # The run's own generation settings, so that a max_tokens over the context shows.
    assert chat.body["max_completion_tokens"] == 8192


def free_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_preflight_names_the_host_and_port_that_refused():
    port = free_port()
    message = preflight_error(f"http://127.0.0.1:{port}/v1")
    assert message.startswith(f"nothing is listening at 127.0.0.1:{port} (connection refused)")


def test_preflight_gives_up_on_a_silent_port_within_the_timeout():
    with socket.socket() as listener:   # accepts, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        message = preflight_error(f"http://127.0.0.1:{port}/v1", timeout_s=0.5)
    assert message.startswith(f"no answer from 127.0.0.1:{port} within 0.5 s")


def test_preflight_says_the_base_url_lacks_v1():
    with FakeOpenAI(policy="solver", route_prefix="/v1") as server:
        url = server.base_url[:-len("/v1")]
        message = preflight_error(url)
    assert message.startswith(f"--base-url {url} probably lacks /v1")
    assert f"try {url}/v1" in message


def test_preflight_lists_the_served_models_for_a_wrong_model():
    served = ["Qwen/Qwen2.5-VL-7B-Instruct", "a", "b", "c", "d", "e", "f"]
    with FakeOpenAI(policy="solver", served_models=served) as server:
        message = preflight_error(server.base_url, model="qwen2.5-vl")
        preflight(server.base_url, model="Qwen/Qwen2.5-VL-7B-Instruct")
    assert message == (f"--model 'qwen2.5-vl' is not served by 127.0.0.1:{server.port}; it "
                       "serves Qwen/Qwen2.5-VL-7B-Instruct, a, b, c, d and 2 more")


def test_preflight_catches_a_server_limited_to_one_image():
    with FakeOpenAI(policy="solver", max_images=1) as server:
        message = preflight_error(server.base_url)
        preflight(server.base_url, images=1)   # --history 0 or one image per request: fine
        preflight(server.base_url, images=0)   # text mode
    assert "accepts at most 1 image(s) per request" in message
    assert "start vLLM with --limit-mm-per-prompt '{\"image\": 30}'" in message


def test_preflight_says_max_tokens_exceeds_the_context():
    with FakeOpenAI(policy="solver", max_context=4096) as server:
        message = preflight_error(server.base_url)
        preflight(server.base_url, settings=GenerationSettings(max_tokens=1024))
    assert message.startswith("--max-tokens 8192 exceeds the model's context: lower it")


def test_preflight_names_the_key_variable_when_the_key_is_rejected():
    with FakeOpenAI(policy="solver", api_key="the-right-key-123456", echo_auth=True) as server:
        message = preflight_error(server.base_url)
    assert f"rejected the API key in ${KEY_ENV}" in message


def test_preflight_on_a_local_server_that_wants_a_key_names_the_variable(monkeypatch):
    monkeypatch.delenv(KEY_ENV)   # a local URL: the agent sends "EMPTY"
    with FakeOpenAI(policy="solver", api_key="the-right-key-123456") as server:
        message = preflight_error(server.base_url)
    assert f"wants an API key" in message and f"environment variable {KEY_ENV}" in message


def test_preflight_passes_a_rate_limited_server():
    with FakeOpenAI(policy="solver", faults=lambda n, ctx: "429", retry_after="0") as server:
        preflight(server.base_url)


@pytest.mark.parametrize("kind, start", [
    ("503", "127.0.0.1:{port} failed a test chat 3 times"),
    ("choices_int", "the answer of 127.0.0.1:{port} to a test chat is not a chat completion"),
    ("malformed", "the answer of 127.0.0.1:{port} to a test chat is not a chat completion"),
    ("redirect_loop", "http://127.0.0.1:{port}/v1 redirects in a loop"),
])
def test_preflight_reports_a_server_that_does_not_answer_chats(kind, start):
    with FakeOpenAI(policy="solver", faults=lambda n, ctx: kind) as server:
        message = preflight_error(server.base_url)
    assert message.startswith(start.format(port=server.port))


@pytest.mark.parametrize("url, says", [
    ("127.0.0.1:8000/v1",
     "'127.0.0.1:8000/v1' has no scheme; write it as http://127.0.0.1:8000/v1"),
    ("localhost:8000/v1", "'localhost:8000/v1' has no scheme"),
    ("ftp://example.com/v1", "has the scheme 'ftp'"),
    ("me:secret-pass@host:8000/v1", "'[redacted]@host:8000/v1' has no scheme"),
])
def test_base_url_without_a_usable_scheme_is_named(url, says):
    # "localhost:8000/v1" parses as scheme "localhost": this once said the key was missing.
    with pytest.raises(ValueError, match="--base-url") as error:
        OpenAIAgent(model="fake", base_url=url, api_key_env="VISGYM_UNSET_KEY_VARIABLE")
    assert says in str(error.value) and "secret-pass" not in str(error.value)


def test_remote_server_without_a_key_says_how_to_run_keyless():
    with pytest.raises(ValueError) as error:
        OpenAIAgent(model="fake", base_url="http://10.0.0.7:8000/v1",
                    api_key_env="VISGYM_UNSET_KEY_VARIABLE")
    assert "set VISGYM_UNSET_KEY_VARIABLE=EMPTY" in str(error.value)
    assert "10.0.0.7:8000" in str(error.value)
