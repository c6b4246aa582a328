"""The stepper: many single-episode callers, one batched env per task.

An episode played by the turn loop (bridges/turns.py) asks for one step at a time, and most of
its life waits for its agent. ``SlotStepper`` holds one BatchEnv (``autoreset="disabled"``) of a
task with one row ("slot") per episode in flight: an episode ``acquire``s a slot, ``load``s its
init state into it, and ``await step(slot, action)``; every step request that arrives in the
same event-loop turn is applied in one ``BatchEnv.step`` call with an ``active`` mask
(micro-batching, as EnvPool's send/recv does for its callers), and each caller gets its own
``StepResult``: the outcome as data (reward and its task and shaping parts, flags, feedback,
code, invalid, success, the state hash after the step).

``Steppers`` keeps one ``SlotStepper`` per (env id, make keywords) for a run. Steppers live on
the event loop's thread: nothing here is thread-safe, and nothing needs to be.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import numpy as np

from ..core import make
from .imaging import frame_encoder


@dataclass
class StepResult:
    """One episode's outcome of a step (DESIGN.md "Outcomes are data")."""

    reward: float
    terminated: bool
    truncated: bool
    feedback: str
    code: int
    invalid: bool         # the action text was not an action of the family (parser codes)
    success: bool         # the state is solved now (info["success"])
    cost_s: float = 0.0   # this episode's share of the batched step call
    state_hash: int | None = None    # info["state_hash"] after the step (None: not hashed)
    task_reward: float = 0.0         # info["reward_components"]: reward = task + shaping
    shaping: float = 0.0


def kwargs_key(env_id: str, make_kwargs: dict | None) -> tuple:
    """The key of an env id with its make keywords (envs are shared per key)."""
    return env_id, json.dumps(make_kwargs or {}, sort_keys=True)


class SlotStepper:
    """One BatchEnv shared by the in-flight episodes of an env id; steps are micro-batched.
    ``encoders[slot]``: an incremental JPEG encoder per slot (an episode's consecutive
    observations differ in a few MCUs; same bytes as Pillow, render/jpeg.py)."""

    def __init__(self, env_id: str, slots: int, max_steps: int, make_kwargs: dict | None = None,
                 max_long_side: int | None = 336, reward: str = "sparse"):
        self.env = make(env_id, num_envs=slots, autoreset="disabled", max_steps=max_steps,
                        reward=reward, **(make_kwargs or {}))
        self.env.reset(seeds=list(range(slots)))
        self.free = list(range(slots))
        self._pending: dict[int, tuple[str, asyncio.Future]] = {}
        self._scheduled = False
        self._active = np.zeros(slots, np.bool_)
        self._actions: list = [None] * slots
        self.calls = 0
        self.encoders = [frame_encoder(self.env.frames.shape[1:], max_long_side)
                         for _ in range(slots)]

    def acquire(self) -> int:
        return self.free.pop()

    def release(self, slot: int) -> None:
        self.free.append(slot)

    def load(self, slot: int, seed: int, init_state: dict | None) -> int | None:
        """Start an episode in ``slot``: from ``init_state`` if given, else from ``seed``;
        return its start's state hash (None when the env does not hash states)."""
        _, info = self.env.reset(rows=[slot], seeds=[seed % 2**64],
                                 init_states=None if init_state is None else [init_state])
        hashes = info.get("state_hash")
        return None if hashes is None else int(hashes[slot])

    async def step(self, slot: int, action: str) -> StepResult:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending[slot] = (action, future)
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, {}
        self._active[:] = False
        for slot, (action, _) in pending.items():
            self._active[slot] = True
            self._actions[slot] = action
        t0 = time.perf_counter()
        try:
            _, reward, terminated, truncated, info = self.env.step(self._actions,
                                                                   active=self._active)
        except Exception as error:  # pragma: no cover - the env never raises on actions
            for _, future in pending.values():
                future.set_exception(error)
            return
        self.calls += 1
        share = (time.perf_counter() - t0) / len(pending)
        feedback, code, invalid, success = (info["feedback"], info["code"], info["invalid"],
                                            info["success"])
        hashes = info.get("state_hash")
        task, shaping = info["reward_components"]["task"], info["reward_components"]["shaping"]
        for slot, (_, future) in pending.items():
            self._actions[slot] = None
            if not future.cancelled():
                future.set_result(StepResult(
                    float(reward[slot]), bool(terminated[slot]), bool(truncated[slot]),
                    feedback[slot], int(code[slot]), bool(invalid[slot]), bool(success[slot]),
                    share, None if hashes is None else int(hashes[slot]), float(task[slot]),
                    float(shaping[slot])))


class Steppers:
    """The run's steppers, one per (env id, make keywords), created on first use."""

    def __init__(self, max_long_side: int | None = 336, reward: str = "sparse"):
        self.max_long_side = max_long_side
        self.reward = reward
        self._by_key: dict[tuple, SlotStepper] = {}

    def get(self, env_id: str, make_kwargs: dict | None, slots: int,
            budget: int) -> SlotStepper:
        key = kwargs_key(env_id, make_kwargs)
        stepper = self._by_key.get(key)
        if stepper is None:
            stepper = self._by_key[key] = SlotStepper(env_id, slots, budget, make_kwargs,
                                                      self.max_long_side, self.reward)
        return stepper

    @property
    def calls(self) -> int:
        """Batched step calls made so far, over all steppers."""
        return sum(s.calls for s in self._by_key.values())
