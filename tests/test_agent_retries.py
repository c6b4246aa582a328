"""The two waits the OpenAI agent's retry policy closes, against the real HTTP server of
tests/fake_openai.py, over both transports:

- a 429 whose Retry-After is huge is waited at most the request timeout (``timeout_s``, the
  ``--timeout``), then retried; the step's error text says the wait was cut;
- an endpoint that answers and then hangs: attempts that time out are counted in a row across
  all of the agent's requests (concurrent ones included); at ``hung_after`` (3) the request in
  progress, and every later one whose attempt times out, returns at once a failed reply with
  ``error_kind`` "endpoint_hung" instead of spending ``max_attempts`` timeouts each; any answer
  in between (a reply, or an HTTP error) resets the count.
"""
import asyncio
import json
import re
import time

import pytest

from fake_openai import FakeOpenAI, solver_entries
from visgym.bridges.agents import Episode, OpenAIAgent, Turn
from visgym.bridges.evaluate import EvalConfig, run_eval
from visgym.bridges.splits import load_split

KEY_ENV = "VISGYM_RETRY_KEY"
TIMEOUT = 0.5
MAX_ATTEMPTS = 6
STOP = "('stop', 'stop')"
HUNG = re.compile(r"the endpoint stopped answering \((\d+) requests in a row timed out after "
                  r"0\.5 s each\)")


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-dummy-retry-tests")


@pytest.fixture(params=["lean", "httpx"])
def transport(request):
    return request.param


def agent_for(server, transport, **overrides) -> OpenAIAgent:
    kwargs = dict(timeout_s=TIMEOUT, max_attempts=MAX_ATTEMPTS, backoff_s=0.01,
                  max_backoff_s=0.02, http_transport=transport)
    kwargs.update(overrides)
    return OpenAIAgent(model="fake", base_url=server.base_url, api_key_env=KEY_ENV, **kwargs)


def turn(key: str = "k") -> Turn:
    return Turn(Episode(key, "maze_2d/easy", 0, 0), 0, [{"role": "user", "content": "hi"}], "hi")


def act_in_turn(agent, *batches):
    """Each batch (a list of episode keys) acted concurrently, batches one after the other; the
    replies and the seconds each batch took."""
    async def go():
        out = []
        try:
            for keys in batches:
                start = time.perf_counter()
                replies = await asyncio.gather(*(agent.act(turn(key)) for key in keys))
                out.append((replies, time.perf_counter() - start))
        finally:
            await agent.aclose()
        return out

    return asyncio.run(go())


def answers_then_hangs(number, ctx):
    return None if number == 1 else "hang"


def assert_hung(reply, count: int):
    assert reply.flag == "error" and reply.transient is True, reply
    assert reply.error_kind == "endpoint_hung", reply
    match = HUNG.fullmatch(reply.error)
    assert match and int(match.group(1)) >= count, reply.error


# ------------------------------------------------------------------------------ Retry-After
@pytest.mark.timeout(120)
def test_a_huge_retry_after_is_waited_only_up_to_the_timeout(transport):
    with FakeOpenAI(policy=lambda ctx: STOP, faults={1: "429"}, retry_after="3600") as server:
        [((reply,), took)] = act_in_turn(agent_for(server, transport), ["k"])
        requests = server.requests_snapshot()
    assert [r.status for r in requests][:1] == [429] and len(requests) == 2
    assert reply.flag is None and reply.text == STOP and reply.attempts == 2
    assert TIMEOUT * 0.9 <= took < TIMEOUT + 2.0, took
    assert reply.error.endswith("(Retry-After 3600 s; waited 0.5 s, the --timeout)"), reply.error
    assert reply.error_kind == "http_429" and reply.transient is None


@pytest.mark.timeout(120)
def test_a_normal_retry_after_is_honoured_without_a_note(transport):
    with FakeOpenAI(policy=lambda ctx: STOP, faults={1: "429"}, retry_after="0.3") as server:
        [((reply,), took)] = act_in_turn(agent_for(server, transport), ["k"])
    assert reply.flag is None and reply.attempts == 2 and reply.error is None
    assert took >= 0.25, took


@pytest.mark.timeout(120)
def test_the_step_record_says_the_retry_after_was_cut(tmp_path, transport):
    episodes = load_split("maze_2d", "easy")[:1]
    (entry,) = solver_entries(episodes)
    with FakeOpenAI(policy="solver", faults={2: "429"}, retry_after="3600") as server:
        server.register_entry(entry)
        run_eval(agent_for(server, transport, timeout_s=1.0),
                 EvalConfig(out=str(tmp_path / "out"), concurrency=1, gifs=False,
                            progress=False), episodes)
    (record,) = [json.loads(line) for line in open(tmp_path / "out" / "episodes.jsonl")]
    step = record["steps_log"][1]
    assert step["reply_flag"] is None and step["attempts"] == 2
    assert step["error"].endswith("(Retry-After 3600 s; waited 1 s, the --timeout)"), step
    assert step["error_kind"] == "http_429"
    assert record["success"] is True and record["error_replies"] == 0


# ---------------------------------------------------------------------------- a hung endpoint
@pytest.mark.timeout(120)
def test_an_endpoint_that_stops_answering_ends_requests_within_a_few_timeouts(transport):
    with FakeOpenAI(policy=lambda ctx: STOP, faults=answers_then_hangs, hang_s=60) as server:
        (first, _), (second, took2), (third, took3) = act_in_turn(
            agent_for(server, transport), ["a"], ["b"], ["c"])
        received = server.count
    assert first[0].flag is None and first[0].text == STOP
    # The second request stops retrying at the third timeout in a row, the third at its first.
    assert_hung(second[0], 3)
    assert second[0].attempts == 3
    assert_hung(third[0], 4)
    assert third[0].attempts == 1
    assert received == 1 + 3 + 1
    # Without the count: MAX_ATTEMPTS timeouts per request, 2 x 6 x 0.5 s = 6 s.
    assert took2 + took3 < 8 * TIMEOUT, (took2, took3)


@pytest.mark.timeout(120)
def test_concurrent_requests_count_their_timeouts_together(transport):
    with FakeOpenAI(policy=lambda ctx: STOP, faults=answers_then_hangs, hang_s=60) as server:
        (first, _), (replies, took) = act_in_turn(agent_for(server, transport), ["a"],
                                                  ["b", "c", "d", "e"])
    assert first[0].flag is None
    for reply in replies:
        assert_hung(reply, 3)
    assert sorted(r.attempts for r in replies) == [1, 1, 2, 2]
    # Two rounds of timeouts for all four, not 6 each.
    assert took < 5 * TIMEOUT, took


@pytest.mark.timeout(120)
@pytest.mark.parametrize("faults, attempts", [
    ({2: "hang", 3: "hang", 5: "hang", 6: "hang"}, [1, 3, 3]),   # an answer between
    ({2: "hang", 3: "hang", 4: "500", 5: "hang", 6: "hang"}, [1, 6]),   # an HTTP error between
])
def test_an_answer_in_between_resets_the_count(transport, faults, attempts):
    with FakeOpenAI(policy=lambda ctx: STOP, faults=faults, hang_s=60) as server:
        results = act_in_turn(agent_for(server, transport), *[[f"k{n}"] for n in attempts])
    replies = [batch[0] for batch, _ in results]
    assert [r.attempts for r in replies] == attempts
    for reply in replies:
        assert reply.flag is None and reply.text == STOP, reply


@pytest.mark.timeout(120)
def test_the_count_spans_requests_and_zero_turns_it_off(transport):
    with FakeOpenAI(policy=lambda ctx: STOP, faults=answers_then_hangs, hang_s=60) as server:
        results = act_in_turn(agent_for(server, transport, max_attempts=2), ["a"], ["b"], ["c"])
    replies = [batch[0] for batch, _ in results]
    assert replies[1].error_kind == "timeout" and replies[1].attempts == 2   # 2 in a row
    assert_hung(replies[2], 3)
    assert replies[2].attempts == 1
    with FakeOpenAI(policy=lambda ctx: STOP, faults=answers_then_hangs, hang_s=60) as server:
        results = act_in_turn(agent_for(server, transport, max_attempts=2, hung_after=0),
                              ["a"], ["b"], ["c"])
    assert [batch[0].error_kind for batch, _ in results] == [None, "timeout", "timeout"]


def test_a_cancellation_as_the_response_completes_is_not_dropped(monkeypatch):
    """Ctrl-C cancels the run's tasks. A task cancelled in the very loop turn its response
    arrives must end cancelled, not return the reply (Python 3.11's wait_for dropped such a
    cancellation, and an interrupted eval then played on to the end)."""
    agent = OpenAIAgent(model="fake", base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV,
                        timeout_s=5.0, max_attempts=1)

    async def go():
        loop = asyncio.get_running_loop()
        arrived = loop.create_future()
        started = asyncio.Event()

        async def create(client, messages, kwargs, cache=None):
            started.set()
            return await arrived

        monkeypatch.setattr(agent, "_create", create)
        task = asyncio.create_task(agent.act(turn()))
        await started.wait()
        arrived.set_result({"choices": [{"message": {"content": STOP}}]})
        task.cancel()                       # the same loop turn as the response
        try:
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            await agent.aclose()

    asyncio.run(go())
