"""The offline agents: no endpoint, no key. ``SolverAgent`` replays the environment's own
solver through the loop, ``RandomAgent`` plays random well-formed actions of the family's
grammar, ``ReplayAgent`` plays recorded action lists, by episode key or index.
"""
from __future__ import annotations

import json

from ...core.grammar import STOP_ACTION
from .base import Agent, Reply, Turn


class SolverAgent(Agent):
    """Plays the environment's solver plan, one action per turn, then stops."""

    name = "solver"

    async def act(self, turn: Turn) -> Reply:
        plan = turn.episode.data.get("plan")
        if plan is None:
            plan = turn.episode.data["plan"] = turn.episode.solve()
        action = plan[turn.step] if turn.step < len(plan) else STOP_ACTION
        return Reply(text=action)


class RandomAgent(Agent):
    """Random well-formed actions (uniform over action names, then payloads), seeded per episode."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = seed

    async def act(self, turn: Turn) -> Reply:
        from ..gym import ActionText

        space = turn.episode.data.get("space")
        if space is None:
            seed = (self.seed * 1_000_003 + turn.episode.seed) % 2**32
            space = ActionText(turn.episode.grammar, seed=seed)
            turn.episode.data["space"] = space
        return Reply(text=space.sample())

    def describe(self) -> dict:
        return {"agent": self.name, "seed": self.seed}


class ReplayAgent(Agent):
    """Recorded actions: a JSON file mapping episode keys (``maze_2d/easy#3``) or indices to
    action lists, or a JSON list used for every episode. Past the end of a list it stops."""

    name = "replay"

    def __init__(self, path: str):
        try:
            with open(path) as f:
                self.actions = json.load(f)
        except OSError as e:
            raise ValueError(f"--replay: cannot read {path}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"--replay: {path} is not valid JSON ({e.msg} at line "
                             f"{e.lineno})") from None
        if not isinstance(self.actions, (list, dict)):
            raise ValueError(f"--replay: {path} must hold a list of actions or an object of lists")
        self.path = path

    async def act(self, turn: Turn) -> Reply:
        actions = self.actions
        if isinstance(actions, dict):
            ep = turn.episode
            actions = actions.get(ep.key, actions.get(str(ep.index), []))
        action = actions[turn.step] if turn.step < len(actions) else STOP_ACTION
        return Reply(text=str(action))

    def describe(self) -> dict:
        return {"agent": self.name, "replay_file": self.path}
