"""The OpenEnv server (integrations/openenv.py, ``visgym serve``): sessions driven through
OpenEnv's own client (``VisGymClient`` is an ``openenv`` ``EnvClient``) against servers the tests
start on 127.0.0.1, compared with the same episodes played on a local BatchEnv."""
import asyncio
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openenv")
uvicorn = pytest.importorskip("uvicorn")
requests = pytest.importorskip("requests")
from websockets.sync.client import connect  # noqa: E402

import visgym  # noqa: E402
from visgym.bridges.conversation import turn_text  # noqa: E402
from visgym.bridges.imaging import encode_jpeg_b64  # noqa: E402
from visgym.integrations.openenv import (ServeConfig, VisGymAction, VisGymClient,  # noqa: E402
                                         VisGymObservation, create_server_app)


class Served:
    """A server app running in a thread of this process on a free port."""

    def __init__(self, config: ServeConfig):
        self.app = create_server_app(config)
        self.server = self.app.state.visgym
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._uv = uvicorn.Server(uvicorn.Config(self.app, log_level="warning",
                                                 ws_per_message_deflate=False))
        self._thread = threading.Thread(target=self._uv.run, kwargs={"sockets": [sock]},
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self._uv.started:
            assert time.monotonic() < deadline and self._thread.is_alive(), "no server"
            time.sleep(0.02)

    def client(self):
        return VisGymClient(base_url=self.url).sync()

    def close(self):
        self._uv.should_exit = True
        self._thread.join(timeout=20)


@pytest.fixture(scope="module")
def served():
    s = Served(ServeConfig(tasks=["maze_2d/easy", "jigsaw/easy"], sessions=8))
    yield s
    s.close()


def local_episode(env_id, seed, actions):
    """The observations a local one-row BatchEnv gives for ``actions`` from ``seed``: (image,
    text, feedback, reward, done, state hash) per reset/step."""
    env = visgym.make(env_id, 1, autoreset="disabled")
    _, info = env.reset(seeds=[seed])
    prompt = env.prompt()
    out = [(encode_jpeg_b64(env.frame(0)), turn_text(0, env.max_steps, prompt, None), "", 0.0,
            False, int(info["state_hash"][0]))]
    for k, action in enumerate(actions):
        _, reward, term, trunc, info = env.step([action])
        done = bool(term[0] or trunc[0])
        feedback = info["feedback"][0]
        out.append((encode_jpeg_b64(env.frame(0)),
                    turn_text(k + 1, env.max_steps, prompt, feedback), feedback,
                    float(reward[0]), done, int(info["state_hash"][0])))
        if done:
            break
    return prompt, out


def wait_for_sessions_to_end(served):
    """Until every served task's broker has no open slot (sessions end as their sockets
    close, a moment after the client returns)."""
    deadline = time.monotonic() + 10
    brokers = [t.broker for t in served.server.tasks.values()]
    while any(b.open_slots for b in brokers):
        assert time.monotonic() < deadline, "sessions kept their slots"
        time.sleep(0.02)


def observed(obs: VisGymObservation):
    return (obs.image, obs.text, obs.feedback, float(obs.reward or 0.0), obs.done,
            obs.state_hash)


def solver_actions(env_id, seed):
    env = visgym.make(env_id, 1, autoreset="disabled")
    env.reset(seeds=[seed])
    return env.solve()[0]


def test_a_session_plays_the_episode_a_local_env_plays(served):
    actions = solver_actions("maze_2d/easy", 7)
    prompt, expected = local_episode("maze_2d/easy", 7, actions)
    with served.client() as client:
        first = client.reset(seed=7)
        assert first.observation.task == "maze_2d/easy" and first.observation.seed == 7
        assert first.observation.prompt == prompt and first.observation.step == 0
        assert first.observation.max_steps == 20
        got = [observed(first.observation)]
        for action in actions:
            result = client.step(VisGymAction(action=action))
            got.append(observed(result.observation))
            if result.done:
                break
        last = result.observation
    assert got == expected
    assert last.success and last.terminated and last.reward == 1.0 and result.done
    assert last.reward_components == {"task": 1.0, "shaping": 0.0}


def test_replies_keywords_and_malformed_actions_are_read_as_the_skyrl_env_reads_them(served):
    with served.client() as client:
        client.reset(seed=3)
        # A reply in prose with a tuple in it, and a keyword in an <action> tag, both step.
        a = client.step("I will go up: ('move', 1)").observation
        b = client.step("<action>left</action>").observation
        assert a.step == 1 and b.step == 2 and not a.invalid and not b.invalid
        bad = client.step("blah").observation
        assert bad.invalid and bad.step == 3 and "Cannot parse" in bad.feedback
        assert not bad.done and bad.reward == 0.0
        state = client.state()
        assert state.step_count == 3 and state.task == "maze_2d/easy" and state.seed == 3
        assert not state.done and state.episode_id == bad.episode_id


def test_groups_share_their_start_and_tasks_switch_on_reset(served):
    with served.client() as a, served.client() as b:
        ra, rb = a.reset(seed=11, task="jigsaw/easy"), b.reset(seed=11, task="jigsaw/easy")
        assert observed(ra.observation) == observed(rb.observation)
        assert ra.observation.task == "jigsaw/easy"
        # Each session's later reset keeps its task unless told otherwise.
        assert a.reset(seed=2).observation.task == "jigsaw/easy"
        assert a.reset(seed=2, task="maze_2d/easy").observation.task == "maze_2d/easy"
        assert a.reset(seed=2, episode_id="ep-1").observation.episode_id == "ep-1"


def test_errors_name_the_problem_and_leave_the_session_usable(served):
    with served.client() as client:
        with pytest.raises(RuntimeError, match="no episode yet; send reset first"):
            client.step("('move', 1)")
        with pytest.raises(RuntimeError, match="task: 'sudoku/easy' is not served here"):
            client.reset(task="sudoku/easy")
        with pytest.raises(RuntimeError, match=r"reset: unknown argument\(s\) colour"):
            client.reset(seed=1, colour="red")
        with pytest.raises(RuntimeError, match="seed"):
            client.reset(seed=-1)
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR|action"):
            client.step({"action": 5})            # not a string: OpenEnv's validation
        client.reset(seed=5)
        for _ in range(20):                       # the budget: truncated at step 20
            result = client.step("('move', 0)")
        assert result.done and result.observation.truncated
        with pytest.raises(RuntimeError, match="the episode ended"):
            client.step("('move', 0)")
        assert client.reset(seed=5).observation.step == 0


def test_concurrent_sessions_are_batched_and_each_gets_its_own_episode(served):
    broker = served.server.tasks["maze_2d/easy"].broker
    seeds = list(range(20, 28))
    plans = {s: solver_actions("maze_2d/easy", s) for s in seeds}
    expected = {s: local_episode("maze_2d/easy", s, plans[s])[1] for s in seeds}
    before = broker.env_steps

    async def play(seed):
        async with VisGymClient(base_url=served.url) as client:
            got = [observed((await client.reset(seed=seed)).observation)]
            for action in plans[seed]:
                result = await client.step(VisGymAction(action=action))
                got.append(observed(result.observation))
                if result.done:
                    break
            return got

    async def main():
        return await asyncio.gather(*(play(s) for s in seeds))

    results = asyncio.run(main())
    assert {s: r for s, r in zip(seeds, results)} == expected
    steps = sum(len(r) - 1 for r in results)
    assert broker.env_steps - before < steps        # some steps shared a batched env call
    wait_for_sessions_to_end(served)                # closed sessions gave their rows back


def test_capacity_and_the_stateless_http_endpoints(served):
    health = requests.get(served.url + "/health", timeout=10).json()
    assert health["status"] == "healthy"
    schema = requests.get(served.url + "/schema", timeout=10).json()
    assert "action" in schema["action"]["properties"]
    assert "image" in schema["observation"]["properties"]
    reset = requests.post(served.url + "/reset", json={"seed": 7}, timeout=30).json()
    assert reset["observation"]["seed"] == 7 and reset["done"] is False
    assert reset["observation"]["image"] == local_episode("maze_2d/easy", 7, [])[1][0][0]
    # A stateless /step has no episode behind it; the caller's mistakes are answered as such.
    step = requests.post(served.url + "/step", json={"action": {"action": "('move', 1)"}},
                         timeout=30)
    assert step.status_code == 409 and "no episode yet" in step.json()["detail"]
    for body, said in (({"task": "sliding_block/easy"}, "not served here"),
                       ({"seed": 2**64}, "seed"), ({"colour": 1}, "unknown argument")):
        refused = requests.post(served.url + "/reset", json=body, timeout=30)
        assert refused.status_code == 422 and said in refused.json()["detail"], body
    wait_for_sessions_to_end(served)
    clients = [served.client() for _ in range(8)]
    try:
        for c in clients:
            c.reset(seed=1)
        # A ninth session is told why, then the server closes it.
        with connect(served.url.replace("http", "ws") + "/ws") as ws:
            error = json.loads(ws.recv(timeout=30))
        assert error["type"] == "error" and error["data"]["code"] == "CAPACITY_REACHED"
    finally:
        for c in clients:
            c.close()
    wait_for_sessions_to_end(served)
    with served.client() as client:               # the rows are free again
        assert client.reset(seed=1).observation.step == 0


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="tasks: unknown env id 'nope/easy'"):
        ServeConfig(tasks=["nope/easy"]).validate()
    with pytest.raises(ValueError, match="sessions"):
        ServeConfig(tasks=["maze_2d/easy"], sessions=0).validate()
    with pytest.raises(ValueError, match="tasks: an env id is listed twice"):
        ServeConfig(tasks=["maze_2d/easy", "maze_2d/easy"]).validate()
    with pytest.raises(ValueError, match="reward"):
        ServeConfig(tasks=["maze_2d/easy"], reward="dense").validate()


def doc_example() -> str:
    """The python block of docs/integrations.md's OpenEnv section."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "integrations.md").read_text()
    section = text.split("## OpenEnv", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "VisGymClient" in block
    return block


def start_cli(tmp_path, *args):
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, "-m", "visgym.bridges.cli", "serve", "--port", "0",
                             "--port-file", str(port_file), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the server did not start: " + proc.communicate()[1])
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port_file.read_text()}"


def stop_cli(proc):
    proc.send_signal(signal.SIGINT)
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise


@pytest.mark.timeout(300)
def test_the_cli_serves_with_several_workers(tmp_path):
    proc, url = start_cli(tmp_path, "--tasks", "maze_2d", "--workers", "2", "--sessions", "8")
    try:
        actions = solver_actions("maze_2d/easy", 9)
        _, expected = local_episode("maze_2d/easy", 9, actions)
        clients = [VisGymClient(base_url=url).sync() for _ in range(6)]
        for client in clients:
            got = [observed(client.reset(seed=9).observation)]
            for action in actions:
                result = client.step(action)
                got.append(observed(result.observation))
            assert got == expected
        for client in clients:
            client.close()
        # docs/integrations.md's client example, against this server.
        code = doc_example().replace("http://127.0.0.1:8000", url)
        exec(compile(code, "docs/integrations.md", "exec"), {})
    finally:
        stop_cli(proc)
    assert proc.returncode in (0, -signal.SIGINT, 130)


def test_the_cli_refuses_bad_arguments_with_exit_2():
    out = subprocess.run([sys.executable, "-m", "visgym.bridges.cli", "serve", "--tasks",
                          "maze_2d/medium"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--tasks: unknown task or env id 'maze_2d/medium'" in out.stderr


@pytest.mark.timeout(300)
def test_ray_actors_serve_the_same_observations(monkeypatch):
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    plans = {("maze_2d/easy", 4): solver_actions("maze_2d/easy", 4),
             ("jigsaw/easy", 6): solver_actions("jigsaw/easy", 6)}
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        served = Served(ServeConfig(tasks=["maze_2d/easy", "jigsaw/easy"], sessions=4,
                                    ray_address="auto", ray_actors=2))
        try:
            with served.client() as client:
                for (env_id, seed), actions in plans.items():
                    _, expected = local_episode(env_id, seed, actions)
                    got = [observed(client.reset(seed=seed, task=env_id).observation)]
                    for action in actions:
                        result = client.step(action)
                        got.append(observed(result.observation))
                        if result.done:
                            break
                    assert got == expected
        finally:
            served.close()
        with pytest.raises(ValueError, match="ray_actors: 2 task.* need 20 CPUs"):
            Served(ServeConfig(tasks=["maze_2d/easy", "jigsaw/easy"], sessions=4,
                               ray_address="auto", ray_actors=10))
    finally:
        ray.shutdown()


def test_progress_rewards_reach_the_session():
    served = Served(ServeConfig(tasks=["maze_2d/easy"], sessions=2, reward="progress"))
    try:
        env = visgym.make("maze_2d/easy", 1, autoreset="disabled", reward="progress")
        env.reset(seeds=[13])
        actions = env.solve()[0]
        rewards = []
        for action in actions:
            _, reward, *_ = env.step([action])
            rewards.append(float(reward[0]))
        with served.client() as client:
            client.reset(seed=13)
            got = [client.step(a).observation for a in actions]
        assert [o.reward for o in got] == pytest.approx(rewards)
        assert all(o.reward_components["shaping"] != 0.0 for o in got[:-1])
        assert np.isclose(sum(o.reward for o in got), sum(rewards))
    finally:
        served.close()



@pytest.mark.timeout(300)
def test_the_serve_benchmark_prints_its_figures():
    out = subprocess.run([sys.executable, "-m", "visgym.bench", "serve", "--sessions", "4",
                          "--seconds", "1", "--warmup", "0.2", "--json"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["env"] == "maze_2d/easy" and figures["sessions"] == 4
    assert figures["steps"] > 0 and figures["step_req_per_s"] > 0
    assert 0 < figures["p50_ms"] <= figures["p99_ms"]
    assert figures["server_cpu_ms_per_step"] > 0
