"""visgym as a SkyRL-Gym environment: importing this module registers the id ``visgym`` with
``skyrl_gym`` (through ``skyrl_gym.register``), so ``skyrl_gym.make("visgym", task=..., seed=...)``
and SkyRL's trainers (``environment.env_class=visgym``) get ``VisGymEnv``, a ``BaseTextEnv``
that plays one visgym episode per object (issue 27, "Trainer integrations").

The episode reads like the evaluation's (spec agent_loop.md section 2): ``init`` returns the first
user turn (the frame as a JPEG data URL from visgym's encoder, then the instructions and the step
message, built by bridges/conversation.py), and each ``step`` takes the model's whole reply,
reads an action from it, steps a one-row BatchEnv and returns the next user turn (the frame, the
env's feedback and the step message), the step's reward (sparse, or with ``reward="progress"``
potential-based shaping, docs/rl.md) and ``done``; the outcome is data in ``metadata`` (success,
feedback, code, invalid, state hash, reward components, task, seed). A malformed reply is the
env's feedback, never an exception.

Actions are read from the reply by bridges/action_words.py: a tuple action anywhere, as the
evaluation reads it, or a keyword action (an ``<action>`` tag holding ``left``, ``stop`` or a
call such as ``move(2)``), as SkyRL's instruct recipe asks for.

Settings come, in increasing precedence, from SkyRL's ``env_config`` (the trainer's
``environment.skyrl_gym.visgym`` block), from ``extras`` (the dataset row's columns; columns
that are not settings, such as SkyRL's ``reward_spec``, are ignored, and ``visgym_env_id``, the
column SkyRL's VisGym example writes, means ``task``) and from keyword arguments. docs/
integrations.md lists them. Family instances are immutable and shared (DESIGN.md "Threads"),
so they are cached across env objects; each env object has its own BatchEnv, parser and JPEG
encoder, so trainers may step different env objects from different threads.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import re
from typing import Any, Mapping

import numpy as np
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
from skyrl_gym.envs.registration import register, registry

from ..bridges.action_words import NAMED_ACTIONS, action_words, keyword_hint, read_action
from ..bridges.conversation import episode_instructions, turn_text, user_content
from ..bridges.imaging import DEFAULT_MAX_LONG_SIDE, frame_encoder
from ..core.batch_env import BatchEnv
from ..core.cache import BoundedCache
from ..core.mixed import task_specs
from ..core.registry import consumer_kwargs, list_envs, make_family, spec
from ..core.seeding import next_seeds
from ..core.validate import boolean, describe, integer, one_of, optional_integer, real

__all__ = ["ENV_ID", "VisGymEnv", "SETTINGS", "NAMED_ACTIONS", "action_words", "read_action"]

ENV_ID = "visgym"
ENTRY_POINT = "visgym.integrations.skyrl:VisGymEnv"

# The settings and their defaults ("default" budget: the task's own, 20 easy / 30 hard).
SETTINGS = {
    "task": None, "seed": None, "params": None, "reward": "sparse", "gamma": 1.0,
    "max_turns": None, "max_long_side": DEFAULT_MAX_LONG_SIDE, "actions": "tuple",
    "elicit_verbalization": False, "feedback": True,
}
# Dataset columns SkyRL's VisGym example writes, read as our settings.
_EXTRAS_ALIASES = {"visgym_env_id": "task"}
_SEED_MAX = (1 << 64) - 1

# Family instances, shared by every env object of a (task, params) (64 keep the tasks of any
# realistic mix, and each costs up to a few MB of tables).
_FAMILIES = BoundedCache("skyrl families", max_items=64)


# ----------------------------------------------------------------------------- settings
def _collect(env_config, extras, kwargs) -> dict:
    """The settings from SkyRL's env_config, the dataset row's extras and keyword arguments
    (later wins). Unknown names in env_config and kwargs are errors; extras may carry any
    column."""
    settings = dict(SETTINGS)
    if env_config is not None:
        if dataclasses.is_dataclass(env_config) and not isinstance(env_config, type):
            # SkyRL's typed config blocks are dataclasses (OmegaConf's DictConfig is a Mapping).
            env_config = {f.name: getattr(env_config, f.name)
                          for f in dataclasses.fields(env_config)}
        if not isinstance(env_config, Mapping):
            raise ValueError(f"env_config: expected a dict of visgym settings, got "
                             f"{describe(env_config)}")
        for name, value in env_config.items():
            if name not in SETTINGS:
                raise ValueError(f"env_config.{name}: not a visgym setting (settings: "
                                 f"{', '.join(SETTINGS)})")
            settings[name] = value
    if extras is not None:
        if not isinstance(extras, Mapping):
            raise ValueError(f"extras: expected a dict of the dataset row's columns, got "
                             f"{describe(extras)}")
        for name, value in extras.items():
            alias = _EXTRAS_ALIASES.get(name)
            if alias is not None and alias not in extras:    # the setting's own name wins
                settings[alias] = value
            elif name in SETTINGS:
                settings[name] = value
    for name, value in kwargs.items():
        if name not in SETTINGS:
            raise ValueError(f"{name}: not a visgym setting (settings: {', '.join(SETTINGS)})")
        settings[name] = value
    return settings


def _task_entries(task, params) -> list:
    """The task setting as make_mixed's task specs (an id is a mix of one); ValueError naming
    ``task`` (or ``params``)."""
    if isinstance(task, str):
        if task not in list_envs():
            raise ValueError(f"task: unknown environment {describe(task)}; the ids are "
                             f"visgym.list_envs()")
        if params is not None and not isinstance(params, Mapping):
            raise ValueError(f"params: expected a dict of the family's keywords, got "
                             f"{describe(params)}")
        return [{"id": task, "num_envs": 1, "params": dict(params or {})}]
    if task is None:
        raise ValueError("task: give an env id such as 'maze_2d/easy', or a mix")
    if params is not None:
        raise ValueError("params: with a mix, give each task's params in its own entry")
    if isinstance(task, np.ndarray):
        task = task.tolist()        # a list column read through pandas
    if isinstance(task, Mapping):
        # A dataset's struct column fills the keys other rows used with null: no weight.
        task = {k: v for k, v in task.items() if v is not None}
    elif isinstance(task, (list, tuple)):
        task = [(entry, 1) if isinstance(entry, str) else entry for entry in task]
    try:
        specs = task_specs(task)
    except ValueError as error:
        raise ValueError(re.sub(r"^tasks", "task", str(error))) from None
    for k, entry in enumerate(specs):
        if entry.env_id not in list_envs():
            raise ValueError(f"task[{k}].id: unknown environment {describe(entry.env_id)}; "
                             f"the ids are visgym.list_envs()")
    return [{"id": s.env_id, "num_envs": s.num_envs, "params": dict(s.params),
             "max_steps": s.max_steps} for s in specs]


def _pick(entries: list, seed: int) -> int:
    """The entry of a mix that ``seed`` plays: a pure function of the seed, each entry drawn
    with probability weight / total (a SplitMix64 hash of the seed, so neighbouring seeds are
    spread over the mix)."""
    weights = np.array([e["num_envs"] for e in entries], np.uint64)
    draw = next_seeds(np.array([seed], np.uint64))[0] % weights.sum()
    return int(np.searchsorted(np.cumsum(weights), draw, side="right"))


def _family(env_id: str, params: dict, max_long_side: int | None, where: str):
    """The shared family instance drawing ``env_id`` with ``params`` at the image size shown."""
    def build():
        try:
            kwargs = params if max_long_side is None else consumer_kwargs(
                env_id, params, max_long_side)
            return make_family(env_id, **kwargs)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None

    # repr for values JSON cannot write: a key only has to tell different params apart.
    key = (env_id, max_long_side, json.dumps(params, sort_keys=True, default=repr))
    return _FAMILIES.get_or_build(key, build)


# ---------------------------------------------------------------------------- the env
class VisGymEnv(BaseTextEnv):
    """One visgym episode as a SkyRL-Gym text environment (see the module docstring).

    ``env_config`` and ``extras`` are what SkyRL's generators pass; keyword arguments are the
    settings themselves: ``task`` (an env id such as ``"maze_2d/easy"``, or a mix: ``{id:
    weight}``, a list of ids, or make_mixed's task specs with ``num_envs`` as the weight; the
    seed picks the task), ``seed`` (the episode; None draws one), ``params`` (the family's
    keywords, for one id), ``reward`` ("sparse" or "progress"), ``gamma``, ``max_turns`` (the
    step budget; None: the task's), ``max_long_side`` (images fitted into this many pixels;
    None: full size), ``actions`` ("tuple": the family's prompt as the evaluation sends it;
    "keyword": plus a request for an ``<action>`` tag; both forms are read either way),
    ``elicit_verbalization`` (the think/answer suffix; the action read from ``<answer>``),
    ``feedback`` (the env's feedback in the next turn). ``batch`` is the episode's one-row
    BatchEnv (for solvers and inspection)."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None,
                 **kwargs):
        super().__init__()
        s = _collect(env_config, extras, kwargs)
        entries = _task_entries(s["task"], s["params"])
        seed = s["seed"]
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
        self.seed = integer("seed", seed, 0, _SEED_MAX)
        self.reward_mode = one_of("reward", s["reward"], ("sparse", "progress"))
        gamma = real("gamma", s["gamma"], 0.0, 1.0)
        max_turns = optional_integer("max_turns", s["max_turns"], 1)
        self.max_long_side = optional_integer("max_long_side", s["max_long_side"], 16)
        self.actions = one_of("actions", s["actions"], ("tuple", "keyword"))
        self.elicit_verbalization = boolean("elicit_verbalization", s["elicit_verbalization"])
        self.include_feedback = boolean("feedback", s["feedback"])

        # Every task of a mix is checked (and its family built once), so a bad entry fails
        # whichever task this seed plays.
        families = []
        for k, entry in enumerate(entries):
            where = "params" if len(entries) == 1 and isinstance(s["task"], str) else (
                f"task[{k}] ({entry['id']})")
            families.append(_family(entry["id"], entry["params"], self.max_long_side, where))
        index = _pick(entries, self.seed)
        entry, family = entries[index], families[index]
        self.task = entry["id"]
        if max_turns is None:
            budget = entry.get("max_steps", "default")
            max_turns = spec(self.task).default_max_steps if budget == "default" else budget
            max_turns = integer(f"task[{index}].max_steps", max_turns, 1)
        self.max_turns = max_turns
        try:
            self.batch = BatchEnv(family, 1, max_steps=max_turns, autoreset="disabled",
                                  env_id=self.task, reward=self.reward_mode, gamma=gamma)
        except ValueError as error:
            raise ValueError(f"{error} (task {self.task})") from None
        self.words = action_words(family)
        self._encode = frame_encoder(self.batch.frame_shape, self.max_long_side)
        self._instructions = ""
        self._started = False
        self._done = False
        self._return = 0.0
        self._success = False
        self._invalid_actions = 0

    # -- the episode -----------------------------------------------------------------------
    def _user_turn(self, text: str) -> dict:
        """A user message: the current frame as a JPEG data URL, then ``text``."""
        image_b64 = base64.b64encode(self._encode(self.batch.frame(0))).decode("ascii")
        return {"role": "user", "content": user_content(text, image_b64)}

    def init(self, prompt=None):
        """Start the episode; return (the conversation to send, metadata). The prompt's leading
        system messages are kept (a trainer's system prompt); the rest, a dataset's placeholder
        turn, is replaced by the episode's first user turn."""
        _, info = self.batch.reset(seeds=[self.seed])
        self.turns = 0
        self._started, self._done = True, False
        self._return, self._success, self._invalid_actions = 0.0, False, 0
        self._instructions = episode_instructions(
            self.batch, 0, elicit_verbalization=self.elicit_verbalization)
        if self.actions == "keyword":
            self._instructions += keyword_hint(self.batch.family, self.words)
        text = turn_text(0, self.max_turns, self._instructions, None, self.include_feedback)
        system = []
        for message in prompt or []:
            if not (isinstance(message, Mapping) and message.get("role") == "system"):
                break
            system.append(dict(message))
        metadata = {"task": self.task, "seed": self.seed, "max_turns": self.max_turns,
                    "state_hash": int(info["state_hash"][0]), "success": bool(info["success"][0])}
        return system + [self._user_turn(text)], metadata

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Read an action from the model's reply ``action``, step the episode and return the
        next user turn (none once done), the reward, done and the step's outcome."""
        if not self._started:
            raise RuntimeError("step() called before init()")
        if self._done:
            raise RuntimeError("step() called after the episode ended (done was True)")
        grammar = self.batch.grammar
        text = read_action(action, self.words, grammar.names, self.elicit_verbalization)
        _, reward, terminated, truncated, info = self.batch.step([text])
        self.turns += 1
        reward = float(reward[0])
        terminated, truncated = bool(terminated[0]), bool(truncated[0])
        done = terminated or truncated
        feedback = info["feedback"][0]
        invalid = bool(info["invalid"][0])
        success = bool(info["success"][0])
        self._return += reward
        self._invalid_actions += invalid
        self._done = done
        # An episode succeeds when it terminates with success on its last step.
        self._success = terminated and success
        observations = []
        if not done:
            next_text = turn_text(self.turns, self.max_turns, self._instructions, feedback,
                                  self.include_feedback)
            observations = [self._user_turn(next_text)]
        components = info["reward_components"]
        metadata = {
            "task": self.task, "seed": self.seed, "step": self.turns, "action": text,
            "feedback": feedback, "code": int(info["code"][0]), "invalid": invalid,
            "success": success, "terminated": terminated, "truncated": truncated,
            "state_hash": int(info["state_hash"][0]),
            "reward_components": {"task": float(components["task"][0]),
                                  "shaping": float(components["shaping"][0])},
        }
        return BaseTextEnvStepOutput(observations=observations, reward=reward, done=done,
                                     metadata=metadata, postprocessed_action=None)

    def get_metrics(self) -> dict:
        """The episode's numbers (SkyRL averages them over episodes)."""
        return {"steps": self.turns, "success": float(self._success), "return": self._return,
                "invalid_actions": self._invalid_actions}

    def close(self):
        self._done = True


def _register() -> None:
    """Register ``visgym`` with skyrl_gym once: importing again, or reloading, changes nothing
    (the entry point is this module's path, not a class object). An id ``visgym`` registered
    with another entry point is left to skyrl_gym's own RegistrationError."""
    existing = registry.get(ENV_ID)
    if existing is None or existing.entry_point != ENTRY_POINT:
        register(id=ENV_ID, entry_point=ENTRY_POINT)


_register()
