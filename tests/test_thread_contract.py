"""Envs stepped from several threads at once give exactly what they give one after another.

DESIGN.md "Threads": a Grammar is immutable and shared, each BatchEnv parses with its own
Parser, family instances are immutable after construction except their caches (core/cache.py),
and drawing runs on the one shared pool. This test holds every registered id to it: two or three
BatchEnvs of different batch sizes built on one family instance are stepped concurrently, each
from its own thread, with a thread switch forced every microsecond, on a stream of novel valid,
invalid and unparsable action strings; every step's frames, rewards, flags, feedback and codes,
the solver's plans and the final states must equal those of the same envs run one after
another. The family instance must come out as it went in (no attribute set or replaced).
"""
import hashlib

import numpy as np
import pytest

import visgym
from contract_checks import run_concurrently
from visgym.core.batch_env import BatchEnv
from visgym.core.cache import BoundedCache
from visgym.core.registry import make_family

ENV_IDS = visgym.list_envs()


def _novel(action: str, rng) -> str:
    """The same action spelled a new way (spaces after commas), so the parser meets a string
    it has not seen."""
    return "".join(ch + " " * int(rng.integers(0, 3)) if ch == "," else ch for ch in action)


def _action_stream(grammar, batch: int, steps: int, seed: int) -> list[list[str]]:
    from visgym.bridges.gym import ActionText

    rng = np.random.default_rng(seed)
    space = ActionText(grammar, seed=seed)
    stream = []
    for t in range(steps):
        row = []
        for b in range(batch):
            pick = rng.random()
            if pick < 0.55:
                action = space.sample()
                if "'stop'" in action:   # keep episodes running: stops are tested elsewhere
                    action = space.sample()
                row.append(_novel(action, rng) if "'stop'" not in action else action)
            elif pick < 0.7:
                row.append(f"('{grammar.names[0]}', {int(rng.integers(-10**6, 10**6))})")
            elif pick < 0.8:
                row.append(f"('no_such_action_{t}_{b}', 1)")
            elif pick < 0.9:
                row.append(f"not an action {int(rng.integers(10**9))}")
            else:
                row.append(f"[{t}, {b}]")
        stream.append(row)
    return stream


def _digest(a: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(a).tobytes()).hexdigest()


def _play(env: BatchEnv, stream, seed: int) -> list:
    """Everything an env shows through its plans and a stream of steps."""
    record = []
    env.reset(seeds=range(seed, seed + env.num_envs))
    record.append(("reset", _digest(env.frames), env.frame_hw.tolist()))
    record.append(("plans", env.solve(rows=[0])))
    for actions in stream:
        frames, reward, terminated, truncated, info = env.step(actions)
        record.append((_digest(frames), reward.tolist(), terminated.tolist(), truncated.tolist(),
                       list(info["feedback"]), info["code"].tolist(), info["invalid"].tolist(),
                       info["success"].tolist(), env.frame_hw.tolist()))
    record.append(("states", env.state_dicts()))
    return record


def _snapshot(family) -> dict:
    """What a family instance holds: each attribute's identity, and an array's bytes."""
    out = {}
    for name, value in vars(family).items():
        if isinstance(value, np.ndarray):
            out[name] = (id(value), _digest(value))
        elif isinstance(value, BoundedCache):
            out[name] = (id(value), "cache")
        else:
            out[name] = (id(value), repr(type(value)))
    return out


@pytest.mark.timeout(600)
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_envs_stepped_from_threads_equal_envs_stepped_in_turn(env_id):
    fetch = env_id.startswith("fetch_")
    batches, steps = ((1, 2), 4) if fetch else ((3, 8, 16), 40)
    family = make_family(env_id)

    def envs():
        return [BatchEnv(family, n, max_steps=6, env_id=env_id) for n in batches]

    streams = [_action_stream(family.grammar, n, steps, seed=7 * k + 1)
               for k, n in enumerate(batches)]
    seeds = [100 * (k + 1) for k in range(len(batches))]
    before = _snapshot(family)
    in_turn = [_play(env, stream, seed) for env, stream, seed in zip(envs(), streams, seeds)]

    threaded = envs()
    results = run_concurrently([lambda k=k: _play(threaded[k], streams[k], seeds[k])
                                for k in range(len(batches))])
    for k, (got, want) in enumerate(zip(results, in_turn)):
        for t, (a, b) in enumerate(zip(got, want)):
            assert a == b, f"env {k} (B={batches[k]}), record {t}: threaded run differs"
    assert _snapshot(family) == before, "the family instance changed while its envs ran"
