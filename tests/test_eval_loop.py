"""The evaluation loop against a real OpenAI-compatible HTTP server (tests/fake_openai.py):
the exact chat-message structure of agent_loop.md 2.1 (alternating user/assistant turns, no
system message, image part then text part, instructions only in the first turn, the previous
step's feedback in the next turn, raw replies as assistant turns), the image encoding seen by the
server (225 px maze frames, ``max_long_side`` downscaling), every reply wrapping style solved, the
history window (section 4), the text-mode and final-goal ablations (section 7), the generation
settings carried by each request, provenance in run.json without credentials, concurrent episodes
with batched env steps, and per-episode GIFs.
"""
import csv
import dataclasses
import gc
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import visgym
from fake_openai import FakeOpenAI, solver_entries
from visgym.bridges import cli
from visgym.bridges.agents import GenerationSettings, OpenAIAgent
from visgym.bridges.conversation import GOAL_TEXT, MessageMemo, prune_history
from visgym.bridges.evaluate import EvalConfig, run_eval
from visgym.bridges.imaging import decode_b64_image
from visgym.bridges.replies import extract_action
from visgym.bridges.splits import load_split

KEY_ENV = "VISGYM_TEST_KEY"
KEY_VALUE = "sk-visgym-test-7c1e55d0-key-value"
IMAGE_PREFIX = "data:image/jpeg;base64,"
BUDGET = 20  # maze_2d easy


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY_VALUE)


@pytest.fixture(scope="module")
def episodes():
    return load_split("maze_2d", "easy")[:4]


@pytest.fixture(scope="module")
def entries(episodes):
    return solver_entries(episodes)


def make_agent(server, **kwargs):
    return OpenAIAgent(model="fake", base_url=kwargs.pop("base_url", server.base_url),
                       api_key_env=KEY_ENV, timeout_s=kwargs.pop("timeout_s", 30.0), **kwargs)


def run(server, out, episodes, agent=None, **config):
    config.setdefault("gifs", False)
    config.setdefault("progress", False)
    paths = run_eval(agent or make_agent(server), EvalConfig(out=str(out), **config), episodes)
    assert gc.get_freeze_count() == 0      # the run's settled heap is thawed again
    records = [json.loads(line) for line in open(Path(out) / "episodes.jsonl")]
    with open(Path(out) / "run.json") as f:
        info = json.load(f)
    return records, info, paths


def instructions_for(episode, text_mode=False):
    env = visgym.make(episode.env_id, num_envs=1, autoreset="disabled", max_steps=None)
    env.reset(seeds=[episode.episode_seed % 2**64], init_states=[episode.init_state])
    return env.prompt(text_mode=text_mode, index=0), env


def step_msg(i, budget=BUDGET):
    return f"This is step {i + 1}. You are allowed to take {budget - i - 1} more steps."


def by_episode(requests, entries):
    """Requests grouped by episode (the first user turn's image), each group in step order."""
    firsts = {e.first_image: n for n, e in enumerate(entries)}
    groups = {}
    for req in requests:
        first = req.body["messages"][0]["content"][0]["image_url"]["url"][len(IMAGE_PREFIX):]
        groups.setdefault(firsts[first], []).append(req)
    for group in groups.values():
        group.sort(key=lambda r: len(r.body["messages"]))
    return groups


def check_image_part(part):
    assert part["type"] == "image_url"
    assert set(part) == {"type", "image_url"}
    assert set(part["image_url"]) == {"url"}, "no detail field"
    assert part["image_url"]["url"].startswith(IMAGE_PREFIX)


def check_full_history_structure(body, instructions, feedbacks, replies, budget=BUDGET):
    """Spec 2.1 for one request of step i = len(replies): [M_0, R_0, ..., M_i]."""
    messages = body["messages"]
    i = len(replies)
    assert len(messages) == 2 * i + 1
    assert [m["role"] for m in messages] == ["user", "assistant"] * i + ["user"]
    for j in range(i + 1):
        user = messages[2 * j]
        assert set(user) == {"role", "content"}
        content = user["content"]
        assert isinstance(content, list) and len(content) == 2
        check_image_part(content[0])
        assert content[1] == {"type": "text", "text": content[1]["text"]}
        if j == 0:
            assert content[1]["text"] == instructions + "\n" + step_msg(0, budget)
        else:
            assert content[1]["text"] == ("Environment feedback: " + feedbacks[j - 1] + "\n\n"
                                          + step_msg(j, budget))
            assert instructions not in content[1]["text"]
        if j < i:
            assert messages[2 * j + 1] == {"role": "assistant", "content": replies[j]}


# ------------------------------------------------------------------------------ structure
def test_message_structure_matches_spec(tmp_path, episodes, entries):
    episode, entry = episodes[0], entries[0]
    plan = entry.plan
    scripted = [
        f"Looking at the maze, I would go with {plan[0]} since it opens the path (I think).",
        "Hmm, I honestly cannot tell where the agent is.",
        "```python\n('move', 9)\n```",
        "I am done: ('stop', 'stop')",
    ]

    def policy(ctx):
        return scripted[ctx.step]

    with FakeOpenAI(policy=policy) as server:
        records, _, _ = run(server, tmp_path / "out", [episode], concurrency=1)
        requests = server.requests_snapshot()

    assert len(requests) == 4
    instructions, env = instructions_for(episode)
    # Independent replay of the parsed replies gives the feedback each next turn must carry.
    feedbacks = []
    for reply in scripted:
        _, _, _, _, info = env.step([extract_action(reply)])
        feedbacks.append(info["feedback"][0])
    assert feedbacks[0] == "Action executed successfully."
    assert feedbacks[1].startswith("Cannot parse action string")
    assert "not in the valid action space" in feedbacks[2]

    for i, req in enumerate(requests):
        body = req.body
        assert body["model"] == "fake"
        assert all(m["role"] != "system" for m in body["messages"])
        check_full_history_structure(body, instructions, feedbacks, scripted[:i])
        assert req.n_images == i + 1
        assert req.image_sizes == [(225, 225)] * (i + 1)  # 225 px frames are not resized
        assert req.authorization == f"Bearer {KEY_VALUE}"
    # The first observation is exactly the runner's encoding of the initial frame.
    first_url = requests[0].body["messages"][0]["content"][0]["image_url"]["url"]
    assert first_url == IMAGE_PREFIX + entry.first_image
    # Assistant turns hold the raw reply (prose and fences included), never the parsed action.
    last = requests[-1].body["messages"]
    assert last[1]["content"] == scripted[0] != extract_action(scripted[0])
    assert last[5]["content"] == scripted[2]

    (record,) = records
    assert record["steps"] == 4 and record["end_reason"] == "stop"
    assert record["success"] is False and record["terminated"] is True
    assert [s["reply"] for s in record["steps_log"]] == scripted
    assert [s["feedback"] for s in record["steps_log"]] == feedbacks
    assert record["steps_log"][0]["action"] == plan[0]
    assert record["invalid_actions"] == 2
    assert [s["prompt"] for s in record["steps_log"]] == [
        m["content"][1]["text"] for m in requests[-1].body["messages"][::2]]


def test_max_long_side_downscales_images(tmp_path, episodes):
    with FakeOpenAI(policy="garbage") as server:
        records, info, _ = run(server, tmp_path / "out", episodes[:1], concurrency=1,
                               max_steps=3, max_long_side=100)
        requests = server.requests_snapshot()
    assert [r.n_images for r in requests] == [1, 2, 3]
    for req in requests:
        assert req.image_sizes == [(100, 100)] * req.n_images
        url = req.body["messages"][-1]["content"][0]["image_url"]["url"]
        assert decode_b64_image(url).shape == (100, 100, 3)
    assert info["settings"]["max_long_side"] == 100
    assert records[0]["steps"] == 3 and records[0]["end_reason"] == "budget"
    assert records[0]["truncated"] is True
    assert requests[-1].body["messages"][-1]["content"][1]["text"].endswith(
        "This is step 3. You are allowed to take 0 more steps.")


def test_full_history_structure_on_solved_episodes(tmp_path, episodes, entries):
    with FakeOpenAI(policy="solver", style="prose") as server:
        for entry in entries:
            server.register_entry(entry)
        records, _, _ = run(server, tmp_path / "out", episodes, concurrency=4)
        requests = server.requests_snapshot()
    groups = by_episode(requests, entries)
    assert sorted(groups) == [0, 1, 2, 3]
    by_key = {r["key"]: r for r in records}
    for n, episode in enumerate(episodes):
        record = by_key[episode.key]
        group = groups[n]
        assert len(group) == record["steps"] == len(entries[n].plan)
        instructions, _ = instructions_for(episode)
        feedbacks = [s["feedback"] for s in record["steps_log"]]
        replies = [s["reply"] for s in record["steps_log"]]
        for i, req in enumerate(group):
            check_full_history_structure(req.body, instructions, feedbacks, replies[:i])
        assert [s["action"] for s in record["steps_log"]] == entries[n].plan


# ---------------------------------------------------------------------------- styles / scoring
@pytest.mark.parametrize("style", ["plain", "prose", "fence", "think", "bare"])
def test_solver_server_solves_every_episode(tmp_path, episodes, entries, style):
    out = tmp_path / "out"
    with FakeOpenAI(policy="solver", style=style) as server:
        for entry in entries:
            server.register_entry(entry)
        records, info, paths = run(server, out, episodes, concurrency=4)
        answered = server.answered
    assert sorted(r["key"] for r in records) == sorted(e.key for e in episodes)
    for record, entry in zip(sorted(records, key=lambda r: r["index"]), entries):
        assert record["success"] is True, record["steps_log"][-1]
        assert record["reward"] == 1.0 and record["end_reason"] == "stop"
        assert record["steps"] == len(entry.plan)
        assert [s["action"] for s in record["steps_log"]] == entry.plan
        assert record["invalid_actions"] == 0 and record["error_replies"] == 0
        assert record["usage"]["prompt_tokens"] > 0
    assert answered == sum(r["steps"] for r in records)
    assert info["steps"] == answered and info["finished"]
    assert os.path.exists(paths["md"]) and os.path.exists(paths["csv"])
    assert "100.0%" in open(paths["md"]).read()
    rows = list(csv.DictReader(open(paths["csv"])))
    maze = [r for r in rows if r["task"] == "maze_2d"]
    assert len(maze) == 1 and float(maze[0]["success_rate"]) == 1.0 and maze[0]["n"] == "4"


def test_garbage_replies_burn_the_budget(tmp_path, episodes):
    with FakeOpenAI(policy="garbage") as server:
        records, _, _ = run(server, tmp_path / "out", episodes[:2], concurrency=2, max_steps=5)
    for record in records:
        assert record["success"] is False and record["steps"] == 5
        assert record["end_reason"] == "budget" and record["invalid_actions"] == 5


# ------------------------------------------------------------------------------ ablations
@pytest.mark.parametrize("window", [-1, 2])
def test_message_memo_converts_each_message_sent_once(window):
    # What the request encoder and the rollout records rely on: with the whole history or a
    # sliding window (whose first message is rebuilt every turn), each message dict sent is
    # converted once, and a message sent again gets the same converted object.
    calls = []
    memo = MessageMemo(lambda message: calls.append(message) or {"of": message["content"]})
    messages, sent, previous = [], [], {}
    for step in range(6):
        if step and window > 0:
            messages = prune_history(messages, window, "INSTRUCTIONS ")
        messages.append({"role": "user", "content": [{"type": "text", "text": f"step {step}"}]})
        converted = memo(list(messages))
        assert [c["of"] for c in converted] == [m["content"] for m in messages]
        for message, c in zip(messages, converted):
            assert previous.get(id(message), c) is c
            previous[id(message)] = c
        sent += messages
        messages.append({"role": "assistant", "content": f"reply {step}"})
    assert len(calls) == len({id(m) for m in sent})


def test_history_window_of_two(tmp_path, episodes, entries):
    with FakeOpenAI(policy="solver") as server:
        for entry in entries:
            server.register_entry(entry)
        records, info, _ = run(server, tmp_path / "out", episodes[:2], concurrency=2, history=2)
        requests = server.requests_snapshot()
    assert info["settings"]["history"] == 2
    assert all(r["success"] for r in records)
    instructions, _ = instructions_for(episodes[0])
    by_key = {r["key"]: r for r in records}
    pruned = 0
    for req in requests:
        messages = req.body["messages"]
        assert req.n_images <= 3
        assert [m["role"] for m in messages] == ["user", "assistant"] * (len(messages) // 2) + ["user"]
        current = messages[-1]["content"][1]["text"]
        step = int(current.split("This is step ")[1].split(".")[0])
        if step >= 3:
            pruned += 1
            assert len(messages) == 5 and req.n_images == 3
            oldest = messages[0]["content"][1]["text"]
            assert oldest.startswith(instructions)
            assert "Environment feedback:" not in oldest
            if step == 3:  # M_0 is still the oldest kept turn, untouched
                assert oldest == instructions + "\n" + step_msg(0)
            else:  # instructions prepended, no separator, to the oldest kept step message
                assert oldest == instructions + step_msg(step - 3)
            for m in messages[2::2]:
                assert m["content"][1]["text"].startswith("Environment feedback: ")
                assert instructions not in m["content"][1]["text"]
    assert pruned == sum(r["steps"] - 2 for r in by_key.values())


def test_text_mode_sends_ascii_without_images(tmp_path, episodes):
    with FakeOpenAI(policy="solver") as server:
        entries = server.register_episodes(episodes[:2], text=True)
        records, info, _ = run(server, tmp_path / "out", episodes[:2], concurrency=2,
                               text_mode=True)
        requests = server.requests_snapshot()
    assert info["settings"]["text_mode"] is True
    assert all(r["success"] for r in records)
    assert all(r.n_images == 0 for r in requests)
    firsts = {e.text_states[0]: (n, e) for n, e in enumerate(entries)}
    seen = set()
    for req in requests:
        for m in req.body["messages"]:
            if m["role"] == "user":
                assert isinstance(m["content"], list) and len(m["content"]) == 1
                assert m["content"][0]["type"] == "text"
        first = req.body["messages"][0]["content"][0]["text"]
        matches = [(n, e) for a, (n, e) in firsts.items() if first.startswith(a + "\n")]
        assert len(matches) == 1
        n, entry = matches[0]
        seen.add(n)
        instructions, _ = instructions_for(episodes[n], text_mode=True)
        assert first == entry.text_states[0] + "\n" + instructions + "\n" + step_msg(0)
        assert "#" in entry.text_states[0] and "A" in entry.text_states[0]
    assert seen == {0, 1}


def _blobs(rgb):
    """Boolean masks of the (JPEG-approximate) red target and blue agent."""
    r, g, b = (rgb[..., k].astype(int) for k in range(3))
    red = (r > 180) & (g < 90) & (b < 90)
    blue = (b > 160) & (r < 90) & (g < 90)
    return red, blue


def test_final_goal_image_in_first_turn(tmp_path, episodes, entries):
    with FakeOpenAI(policy="solver") as server:
        server.register_entry(entries[0])
        records, info, _ = run(server, tmp_path / "out", episodes[:1], concurrency=1,
                               final_goal=True)
        requests = server.requests_snapshot()
    assert info["settings"]["final_goal"] is True
    assert records[0]["success"] is True
    for req in requests:
        first = req.body["messages"][0]["content"]
        assert len(first) == 4
        check_image_part(first[0])
        assert first[1]["type"] == "text" and first[1]["text"].endswith(step_msg(0))
        assert first[2] == {"type": "text", "text": GOAL_TEXT}
        assert GOAL_TEXT.endswith("following image: ")
        check_image_part(first[3])
        for m in req.body["messages"][2::2]:
            assert len(m["content"]) == 2
        assert req.n_images == len(req.body["messages"]) // 2 + 2
    goal = decode_b64_image(requests[0].body["messages"][0]["content"][3]["image_url"]["url"])
    start = decode_b64_image(requests[0].body["messages"][0]["content"][0]["image_url"]["url"])
    assert goal.shape == start.shape == (225, 225, 3)
    for image, on_target in ((goal, True), (start, False)):
        red, blue = _blobs(image)
        assert blue.sum() > 30
        ys, xs = np.nonzero(blue)
        cy, cx = ys.mean(), xs.mean()
        ry, rx = np.nonzero(red)
        inside = bool(ry.min() <= cy <= ry.max() and rx.min() <= cx <= rx.max())
        assert inside is on_target
    # The disc covers part of the square: fewer red pixels in the goal than at the start.
    assert _blobs(goal)[0].sum() < _blobs(start)[0].sum()


# ------------------------------------------------------------------ settings and provenance
def _all_bytes(folder):
    for path in Path(folder).rglob("*"):
        if path.is_file():
            yield path, path.read_bytes()


def test_generation_settings_and_provenance_without_credentials(tmp_path, episodes):
    out = tmp_path / "out"
    settings = GenerationSettings(temperature=0.3, max_tokens=123, top_p=0.9,
                                  reasoning_effort="low",
                                  extra_body={"provider": {"order": ["together"],
                                                           "allow_fallbacks": False},
                                              "seed": 7})
    with FakeOpenAI(policy="garbage") as server:
        url = f"http://user:secret@127.0.0.1:{server.port}/v1"
        agent = make_agent(server, base_url=url, settings=settings)
        records, info, _ = run(server, out, episodes[:1], agent=agent, max_steps=2)
        requests = server.requests_snapshot()
    assert len(requests) == 2
    for req in requests:
        body = req.body
        assert body["temperature"] == 0.3
        assert body["max_completion_tokens"] == 123
        assert body["top_p"] == 0.9
        assert body["reasoning_effort"] == "low"
        assert body["provider"] == {"order": ["together"], "allow_fallbacks": False}
        assert body["seed"] == 7
        assert "max_tokens" not in body and "extra_body" not in body
    assert info["agent"] == "openai" and info["model"] == "fake"
    assert info["endpoint"] == f"http://127.0.0.1:{server.port}/v1"
    assert info["api_key_env"] == KEY_ENV
    assert info["generation"] == {"temperature": 0.3, "max_tokens": 123, "top_p": 0.9,
                                  "reasoning_effort": "low",
                                  "extra_body": settings.extra_body}
    assert info["settings"]["history"] == -1 and info["settings"]["max_steps"] == 2
    assert info["split"] == "easy" and info["tasks"] == ["maze_2d"]
    files = dict(_all_bytes(out))
    assert out / "run.json" in files and out / "episodes.jsonl" in files
    for path, data in files.items():
        assert b"secret" not in data, path
        assert KEY_VALUE.encode() not in data, path
        assert b"user:" not in data, path


def test_cli_does_not_record_credentials_in_base_url(tmp_path, episodes):
    out = tmp_path / "out"
    with FakeOpenAI(policy="garbage") as server:
        url = f"http://user:secret@127.0.0.1:{server.port}/v1"
        code = cli.main(["eval", "--agent", "openai", "--model", "fake", "--base-url", url,
                         "--api-key-env", KEY_ENV, "--tasks", "maze_2d", "--split", "easy",
                         "--episodes", "1", "--max-steps", "2", "--no-gifs", "--quiet",
                         "--out", str(out)])
    assert code == 0
    assert json.load(open(out / "run.json"))["endpoint"] == f"http://127.0.0.1:{server.port}/v1"
    for path, data in _all_bytes(out):
        assert KEY_VALUE.encode() not in data, path
        assert b"secret" not in data, path


# ------------------------------------------------------------------------------ concurrency
def test_concurrent_episodes_overlap_and_batch_env_steps(tmp_path):
    episodes8 = load_split("maze_2d", "easy")[:8]
    latency = 0.1
    with FakeOpenAI(policy="solver", latency_ms=latency * 1000) as server:
        server.register_episodes(episodes8)
        start = time.perf_counter()
        records, info, _ = run(server, tmp_path / "out", episodes8, concurrency=8)
        wall = time.perf_counter() - start
        requests = server.count
    assert len(records) == 8 and all(r["success"] for r in records)
    assert requests == info["steps"] == sum(r["steps"] for r in records)
    sequential = requests * latency  # a lower bound for one episode at a time
    print(f"concurrency 8: {wall:.2f} s for {requests} requests (sequential >= {sequential:.1f} s)")
    assert wall < 0.6 * sequential, (wall, sequential)
    assert info["step_calls"] < info["steps"], info
    assert info["settings"]["concurrency"] == 8
    assert info["loop_overhead_ms_per_step"] is not None


def test_benchmark_fast_server_answers_the_solver_plan(entries):
    # bench.eval's default server reads the plan position off the raw body (fake_openai --fast).
    from visgym.bench.eval import run as bench_run

    result = bench_run(concurrency=4, latency_ms=0.0, episodes=4)
    assert result["server"] == "fast" and result["server_cpu_s"] is not None
    assert result["requests"] == result["steps"] == sum(min(len(e.plan), BUDGET) for e in entries)
    assert result["success_rate"] == sum(len(e.plan) <= BUDGET for e in entries) / 4
    assert result["http_transport"] == "lean"


# ------------------------------------------------------------------------------------ GIFs
def test_gifs_written_one_per_episode(tmp_path, episodes, entries):
    out = tmp_path / "out"
    with FakeOpenAI(policy="solver") as server:
        for entry in entries[:2]:
            server.register_entry(entry)
        records, _, _ = run(server, out, episodes[:2], concurrency=2, gifs=True)
    gifs = sorted((out / "gifs").rglob("*.gif"))
    assert len(gifs) == 2
    by_index = {r["index"]: r for r in records}
    for path in gifs:
        index = int(path.name.split("_")[0])
        assert path.name.endswith("_r1.000.gif")
        with Image.open(path) as gif:
            assert gif.format == "GIF"
            assert gif.n_frames == by_index[index]["steps"] + 1
            gif.seek(gif.n_frames - 1)
            gif.convert("RGB").load()


# ------------------------------------------------------------------------- the fake server
def test_fake_server_rejects_undecodable_images_and_unknown_routes():
    import urllib.error
    import urllib.request

    def post(url, body):
        request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    good = {"type": "text", "text": "hello"}
    bad_image = {"type": "image_url", "image_url": {"url": IMAGE_PREFIX + "bm90IGFuIGltYWdl"}}
    with FakeOpenAI(policy="garbage") as server:
        status, body = post(server.base_url + "/chat/completions",
                            {"model": "m", "messages": [{"role": "user", "content": [good]}]})
        assert status == 200
        assert body["object"] == "chat.completion" and body["model"] == "m"
        choice = body["choices"][0]
        assert choice["index"] == 0 and choice["finish_reason"] == "stop"
        assert choice["message"] == {"role": "assistant", "content": choice["message"]["content"]}
        assert set(body["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
        status, body = post(server.base_url + "/chat/completions",
                            {"model": "m", "messages": [{"role": "user",
                                                         "content": [bad_image, good]}]})
        assert status == 400 and "does not decode" in body["error"]["message"]
        status, _ = post(server.base_url + "/nothing", {})
        assert status == 404
        assert [r.status for r in server.requests_snapshot()] == [200, 400, 404]


def test_several_processes_share_the_episodes_and_give_the_same_results(tmp_path, episodes,
                                                                       entries):
    """--processes 2: the episodes are split between this process and a spawned one, both
    appending to one episodes.jsonl; every episode is recorded once, with the results of a
    one-process run."""
    from visgym.bridges import agents

    more = [dataclasses.replace(e, key=f"{e.env_id}#{i}", index=i)
            for i, e in enumerate(episodes * 2)]
    with FakeOpenAI(policy="solver") as server:
        for entry in entries:
            server.register_entry(entry)

        def agent():
            return agents.make_agent("openai", model="fake", base_url=server.base_url,
                                     api_key_env=KEY_ENV, timeout_s=30.0)

        one, _, _ = run(server, tmp_path / "one", more, agent=agent())
        two, info, _ = run(server, tmp_path / "two", more, agent=agent(), processes=2,
                           concurrency=2)
    assert info["processes"] == 2 and info["steps"] == sum(r["steps"] for r in two)
    assert sorted(r["key"] for r in two) == sorted(r["key"] for r in one)
    by_key = {r["key"]: r for r in one}
    for r in two:
        assert r["success"] == by_key[r["key"]]["success"]
        assert [s["action"] for s in r["steps_log"]] == [
            s["action"] for s in by_key[r["key"]]["steps_log"]]


def test_processes_need_a_rebuildable_agent(tmp_path, episodes):
    class Custom(visgym.bridges.agents.Agent):
        async def act(self, turn):
            return visgym.bridges.agents.Reply("('stop', 'stop')")

    with pytest.raises(ValueError, match="--processes"):
        run_eval(Custom(), EvalConfig(out=str(tmp_path), processes=2, progress=False,
                                      gifs=False), episodes)
