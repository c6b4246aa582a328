"""The broker (core/broker.py): many threads and coroutines, each running its own episode through
one Broker, get exactly what the same seeds and actions give on a BatchEnv stepped directly;
their calls are batched; a lone caller is flushed by the window; env errors reach the callers of
the failing batch; shutdown wakes every waiter; misused slots raise ValueError."""
import asyncio
import threading
import time

import numpy as np
import pytest

import visgym
from visgym.bench.step import _action_pool
from visgym.core.broker import Broker, BrokerClosed

pytestmark = pytest.mark.timeout(60)

ENV_ID = "maze_2d/easy"
MAX_STEPS = 20
BAD = ["('fly', 9)", "no action here", ""]   # malformed text: feedback, not an error


def make(num_envs):
    return visgym.make(ENV_ID, num_envs=num_envs, autoreset="disabled", max_steps=MAX_STEPS)


def script(k):
    """Caller k's actions: for even k the solver's plan of its first episode (it ends in a
    rewarded stop), then random valid moves and stops with some malformed text; the episode
    is also restarted after action ``restart_at``."""
    rng = np.random.default_rng(k)
    env = make(1)
    pool = _action_pool(env, rng, 64)
    actions = [pool[j] for j in rng.integers(len(pool), size=24)]
    actions[3 + k % 5] = BAD[k % len(BAD)]
    if k % 2 == 0:
        env.reset(seeds=[1000 + k])
        actions = env.solve()[0] + actions[:10]
    return actions, len(actions) - 5


def record(obs, reward, terminated, truncated, info):
    assert isinstance(reward, float) and isinstance(terminated, bool)
    return (obs.copy(), reward, terminated, truncated, info["feedback"], info["code"],
            info["invalid"], info["success"], info["step"], info["seed"])


def run_direct(k):
    """Caller k's episodes on its own BatchEnv: reset from seed 1000 + k; a new episode (seed
    + 100) when one ends, and once more after action ``restart_at``."""
    env = make(1)
    seed = 1000 + k
    frames, info = env.reset(seeds=[seed])
    out = [("reset", env.frame(0).copy(), int(info["seed"][0]))]
    actions, restart_at = script(k)
    for t, action in enumerate(actions):
        _, reward, terminated, truncated, info = env.step([action])
        row = {key: info[key][0] if key == "feedback" else info[key][0].item()
               for key in ("feedback", "code", "invalid", "success", "step", "seed")}
        out.append(record(env.frame(0), float(reward[0]), bool(terminated[0]),
                          bool(truncated[0]), row))
        if terminated[0] or truncated[0] or t == restart_at:
            seed += 100
            env.reset(seeds=[seed])
            out.append(("reset", env.frame(0).copy(), seed))
    return out


def run_threaded(broker, slot, k, barrier):
    barrier.wait()
    seed = 1000 + k
    obs, info = broker.reset(slot, seed=seed)
    out = [("reset", obs.copy(), info["seed"])]
    actions, restart_at = script(k)
    for t, action in enumerate(actions):
        obs, reward, terminated, truncated, info = broker.step(slot, action)
        out.append(record(obs, reward, terminated, truncated, info))
        if terminated or truncated or t == restart_at:
            seed += 100
            obs, info = broker.reset(slot, seed=seed)
            out.append(("reset", obs.copy(), info["seed"]))
    return out


async def run_async(broker, slot, k):
    seed = 1000 + k
    obs, info = await broker.areset(slot, seed=seed)
    out = [("reset", obs.copy(), info["seed"])]
    actions, restart_at = script(k)
    for t, action in enumerate(actions):
        obs, reward, terminated, truncated, info = await broker.astep(slot, action)
        out.append(record(obs, reward, terminated, truncated, info))
        if terminated or truncated or t == restart_at:
            seed += 100
            obs, info = await broker.areset(slot, seed=seed)
            out.append(("reset", obs.copy(), info["seed"]))
    return out


def same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert len(x) == len(y)
        for u, v in zip(x, y):
            if isinstance(u, np.ndarray):
                assert np.array_equal(u, v)
            else:
                assert u == v


def threads_and_coroutines(broker, n_threads, n_async):
    """Run n_threads threaded callers and n_async coroutines (on one loop in its own thread)
    at once; returns {k: record} for callers k = 0 .. n_threads + n_async - 1."""
    slots = [broker.open() for _ in range(n_threads + n_async)]
    results, errors = {}, []
    barrier = threading.Barrier(n_threads + (1 if n_async else 0))

    def thread_caller(k):
        try:
            results[k] = run_threaded(broker, slots[k], k, barrier)
        except Exception as exc:   # reported by the test below
            errors.append(exc)

    def loop_thread():
        async def main():
            return await asyncio.gather(*[run_async(broker, slots[k], k)
                                          for k in range(n_threads, n_threads + n_async)])
        try:
            if n_threads:
                barrier.wait()
            for k, out in zip(range(n_threads, n_threads + n_async), asyncio.run(main())):
                results[k] = out
        except Exception as exc:
            errors.append(exc)

    workers = [threading.Thread(target=thread_caller, args=(k,)) for k in range(n_threads)]
    if n_async:
        workers.append(threading.Thread(target=loop_thread))
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=50)
    assert not errors, errors
    return results


@pytest.mark.parametrize("n_threads,n_async", [(10, 0), (0, 10), (6, 6)])
def test_callers_get_exactly_what_direct_stepping_gives(n_threads, n_async):
    n = n_threads + n_async
    broker = Broker(make(n + 2), window_s=0.05)   # two rows never opened
    try:
        results = threads_and_coroutines(broker, n_threads, n_async)
    finally:
        broker.shutdown()
    calls = rewarded = 0
    for k in range(n):
        direct = run_direct(k)
        same(results[k], direct)
        calls += sum(1 for r in direct if not isinstance(r[0], str))
        rewarded += sum(1 for r in direct if not isinstance(r[0], str) and r[1] > 0)
    assert rewarded >= n // 2   # the plans' stops were rewarded
    # The calls were batched: far fewer env steps than caller steps.
    assert broker.env_steps <= calls / 3


def test_a_lone_caller_is_flushed_by_the_window():
    broker = Broker(make(4), window_s=0.05)
    try:
        slot = broker.open()
        broker.open()   # open, but never calls: the batch is never full
        t0 = time.perf_counter()
        obs, info = broker.reset(slot, seed=7)
        obs, reward, terminated, truncated, info = broker.step(slot, "('move', 1)")
        elapsed = time.perf_counter() - t0
        assert 0.08 <= elapsed < 5.0   # two windows, not a hang
        assert info["step"] == 1 and info["seed"] == 7
    finally:
        broker.shutdown()


def test_a_full_batch_does_not_wait_for_the_window():
    broker = Broker(make(3), window_s=30.0)
    try:
        slots = [broker.open() for _ in range(3)]

        async def main():
            await asyncio.gather(*[broker.areset(s, seed=i) for i, s in enumerate(slots)])
            return await asyncio.gather(*[broker.astep(s, "('move', 0)") for s in slots])

        t0 = time.perf_counter()
        out = asyncio.run(main())
        assert time.perf_counter() - t0 < 5.0
        assert [o[4]["step"] for o in out] == [1, 1, 1]
        assert broker.env_steps == 1 and broker.env_resets == 1
    finally:
        broker.shutdown()


class Faulty:
    """A batched env (duck-typed) whose step raises while ``fail`` is set."""

    def __init__(self, env):
        self.env, self.fail = env, False
        self.num_envs, self.autoreset = env.num_envs, env.autoreset

    def reset(self, **kwargs):
        return self.env.reset(**kwargs)

    def step(self, actions, active=None):
        if self.fail:
            raise RuntimeError("the env broke")
        return self.env.step(actions, active=active)

    def frame(self, i):
        return self.env.frame(i)


def test_an_env_error_reaches_every_caller_of_that_batch_and_the_broker_goes_on():
    env = Faulty(make(3))
    broker = Broker(env, window_s=30.0)
    slots = [broker.open() for _ in range(3)]

    async def step_all():
        return await asyncio.gather(*[broker.astep(s, "('move', 2)") for s in slots],
                                    return_exceptions=True)

    async def main():
        await asyncio.gather(*[broker.areset(s, seed=i) for i, s in enumerate(slots)])
        env.fail = True
        failed = await step_all()
        env.fail = False
        return failed, await step_all()

    try:
        failed, ok = asyncio.run(main())
    finally:
        broker.shutdown()
    assert all(isinstance(e, RuntimeError) and "the env broke" in str(e) for e in failed)
    assert [o[4]["step"] for o in ok] == [1, 1, 1]


def test_a_bad_init_state_fails_only_its_caller():
    env = make(2)
    env.reset(seeds=[5, 6])
    good = env.state_dicts()[0]
    broker = Broker(make(2), window_s=30.0)
    a, b = broker.open(), broker.open()

    async def main():
        return await asyncio.gather(broker.areset(a, init_state=good),
                                    broker.areset(b, init_state={"maze_map": "nonsense"}),
                                    return_exceptions=True)

    try:
        first, second = asyncio.run(main())
    finally:
        broker.shutdown()
    assert isinstance(second, ValueError) and "init_states" in str(second)
    assert np.array_equal(first[0], env.frame(0))


def test_shutdown_wakes_a_waiting_thread_and_a_waiting_coroutine():
    broker = Broker(make(3), window_s=30.0)
    slots = [broker.open() for _ in range(3)]
    got = {}

    def thread_caller():
        try:
            broker.reset(slots[0], seed=1)
        except BrokerClosed as exc:
            got["thread"] = exc

    async def coroutine_caller():
        try:
            await broker.areset(slots[1], seed=2)
        except BrokerClosed as exc:
            got["coroutine"] = exc

    loop = asyncio.new_event_loop()
    waiter = threading.Thread(target=thread_caller)
    waiter.start()
    task = loop.create_task(coroutine_caller())
    loop.run_until_complete(asyncio.sleep(0.05))   # both wait: the third slot never calls
    assert not got
    loop.call_later(0.01, broker.shutdown)
    loop.run_until_complete(task)
    waiter.join(timeout=5)
    loop.close()
    assert set(got) == {"thread", "coroutine"}
    with pytest.raises(BrokerClosed):
        broker.step(slots[2], "('move', 0)")
    with pytest.raises(BrokerClosed):
        broker.open()


def test_misused_slots_and_arguments_raise_value_error():
    broker = Broker(make(2), window_s=0.01)
    other = Broker(make(1), window_s=0.01)
    try:
        slot = broker.open()
        with pytest.raises(ValueError, match="reset before its first step"):
            broker.step(slot, "('move', 0)")
        broker.reset(slot, seed=3)
        with pytest.raises(ValueError, match="another broker"):
            broker.step(other.open(), "('move', 0)")
        with pytest.raises(ValueError, match="expected a Slot"):
            broker.step(0, "('move', 0)")
        with pytest.raises(ValueError, match="action"):
            broker.step(slot, 3)
        with pytest.raises(ValueError, match="seed"):
            broker.reset(slot, seed=-1)
        with pytest.raises(ValueError, match="init_state"):
            broker.reset(slot, init_state="not a dict")
        with pytest.raises(ValueError, match="window_s"):
            Broker(make(1), window_s=-1)
        with pytest.raises(ValueError, match="env"):
            Broker(object())
        broker.close(slot)
        with pytest.raises(ValueError, match="closed"):
            broker.step(slot, "('move', 0)")
        with broker.open() as again:   # the row is free again, and must be reset again
            assert again.row == slot.row
            with pytest.raises(ValueError, match="reset before"):
                broker.step(again, "('move', 0)")
        with pytest.raises(RuntimeError, match="slots"):
            [broker.open() for _ in range(3)]
    finally:
        broker.shutdown()
        other.shutdown()


def test_one_call_at_a_time_per_slot_and_closing_answers_a_waiting_call():
    broker = Broker(make(3), window_s=30.0)
    slots = [broker.open() for _ in range(3)]

    async def main():
        first = asyncio.ensure_future(broker.areset(slots[0], seed=1))
        await asyncio.sleep(0.01)
        with pytest.raises(ValueError, match="already has a call waiting"):
            await broker.areset(slots[0], seed=1)
        broker.close(slots[0])   # the waiting call is dropped and told so
        with pytest.raises(ValueError, match="closed while its call waited"):
            await first
        # The two other slots still work, and now form full batches by themselves.
        return await asyncio.gather(broker.areset(slots[1], seed=2),
                                    broker.areset(slots[2], seed=3))

    try:
        out = asyncio.run(main())
    finally:
        broker.shutdown()
    assert [o[1]["seed"] for o in out] == [2, 3]


def test_a_cancelled_coroutine_does_not_disturb_its_neighbours():
    broker = Broker(make(3), window_s=0.05)
    slots = [broker.open() for _ in range(3)]

    async def main():
        tasks = [asyncio.ensure_future(broker.areset(s, seed=i)) for i, s in enumerate(slots[:2])]
        await asyncio.sleep(0.005)
        tasks[0].cancel()
        with pytest.raises(asyncio.CancelledError):
            await tasks[0]
        return await tasks[1]

    try:
        obs, info = asyncio.run(main())
    finally:
        broker.shutdown()
    assert info["seed"] == 1 and obs.shape == (225, 225, 3)


def test_a_callers_obs_stays_valid_while_other_callers_step():
    """obs is the row's own frame view: nobody else's call redraws it."""
    broker = Broker(make(2), window_s=0.005)
    a, b = broker.open(), broker.open()
    try:
        kept, _ = broker.reset(a, seed=11)
        copy = kept.copy()
        broker.reset(b, seed=12)
        for action in ["('move', 0)", "('move', 1)", "('move', 2)", "('move', 3)"] * 2:
            broker.step(b, action)
        assert np.array_equal(kept, copy)
        direct = make(1)
        direct.reset(seeds=[11])
        assert np.array_equal(kept, direct.frame(0))
    finally:
        broker.shutdown()


def test_a_mixed_env_is_brokered_through_the_same_surface():
    """The broker only uses the batched-env surface, so a mix of tasks works unchanged: each
    caller gets what its own task's BatchEnv gives for the same seed and actions."""
    if not hasattr(visgym, "make_mixed"):
        pytest.skip("visgym.make_mixed is not in this checkout")
    mix = visgym.make_mixed({"maze_2d/easy": 2, "sliding_block/easy": 2}, autoreset="disabled",
                            max_steps=MAX_STEPS)
    broker = Broker(mix, window_s=0.05)
    slots = [broker.open() for _ in range(mix.num_envs)]
    task_of = [mix.task_ids[t] for t in mix.task.tolist()]
    plans = {}
    for k, task in enumerate(task_of):
        rng = np.random.default_rng(k)
        pool = _action_pool(visgym.make(task, num_envs=1), rng, 32)
        plans[k] = [pool[j] for j in rng.integers(len(pool), size=8)] + [BAD[0]]

    async def caller(k):
        obs, info = await broker.areset(slots[k], seed=50 + k)
        out = [obs.copy()]
        for action in plans[k]:
            obs, reward, terminated, truncated, info = await broker.astep(slots[k], action)
            out.append((obs.copy(), reward, terminated, truncated, info["feedback"],
                        info["task"]))
            if terminated or truncated:
                break
        return out

    async def main():
        return await asyncio.gather(*[caller(k) for k in range(mix.num_envs)])

    try:
        results = asyncio.run(main())
    finally:
        broker.shutdown()
    for k, task in enumerate(task_of):
        env = visgym.make(task, num_envs=1, autoreset="disabled", max_steps=MAX_STEPS)
        env.reset(seeds=[50 + k])
        assert np.array_equal(results[k][0], env.frame(0))
        for action, got in zip(plans[k], results[k][1:]):
            _, reward, terminated, truncated, info = env.step([action])
            assert np.array_equal(got[0], env.frame(0))
            assert got[1:5] == (float(reward[0]), bool(terminated[0]), bool(truncated[0]),
                                info["feedback"][0])
            assert mix.task_ids[got[5]] == task


def test_the_benchmark_runs_and_reports_fractions_of_the_batched_rate(tmp_path, capsys):
    import json

    from visgym.bench.__main__ import main

    out = tmp_path / "broker.json"
    assert main(["broker", "--callers", "8", "--seconds", "0.2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report["results"]) == {"batched env", "asyncio callers", "threaded callers"}
    for result in report["results"].values():
        assert result["env_steps_per_s"] > 0 and result["fraction_of_batched"] > 0
    assert "asyncio callers" in capsys.readouterr().out
