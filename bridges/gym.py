"""The gymnasium face: a single-episode ``gymnasium.Env``, a ``gymnasium.vector.VectorEnv``, and
the registration of every implemented id (``gymnasium.make("maze_2d/easy")``,
``gymnasium.make_vec("maze_2d/easy", num_envs=64)``), and mixed-task batches as a VectorEnv
(``VisGymMixedVectorEnv({"maze_2d/easy": 32, "jigsaw/easy": 32})``).

Both are thin layers over BatchEnv: the single env is a BatchEnv with B = 1 and the vector env
forwards whole batches. Actions are the reference's action strings; the action space is
``ActionText``, whose samples are well-formed random actions of the family's grammar. The single
env offers the reference's extra methods (``get_prompt``, ``solve``, ``get_init_state``,
``reset(init_state=...)``, through wrappers ``reset(options={"init_state": ...})``) and the
``env_feedback`` attribute.

Budget: like the evaluation harness (and unlike the reference env, which never truncates), an
episode is truncated after 20 steps on easy and 30 on hard. Through ``gymnasium.make`` that is
gymnasium's own ``TimeLimit`` (the registered ``max_episode_steps``; pass
``max_episode_steps=N`` to change it); a ``VisGymEnv`` built directly takes ``max_steps``
(``None`` disables it).
"""
from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

from ..core import registry


class ActionText(spaces.Space):
    """The strings a family's env accepts. ``sample()`` draws an action uniformly among the
    grammar's names and a payload uniformly from its kind, written as the reference writes
    actions, e.g. ``"('move', 2)"``. ``contains`` is True for strings that parse to a valid action."""

    def __init__(self, grammar, seed=None):
        super().__init__(shape=None, dtype=None, seed=seed)
        self.grammar = grammar

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask=None, probability=None) -> str:
        rng = self.np_random
        spec = self.grammar.actions[int(rng.integers(len(self.grammar.actions)))]
        return self.grammar.format_action(spec.name, spec.payload.sample(rng))

    def contains(self, x) -> bool:
        return isinstance(x, str) and self.grammar.parse_one(x)[3] == 0

    def __repr__(self) -> str:
        return f"ActionText({list(self.grammar.names)})"

    def __eq__(self, other) -> bool:
        # By value: a copy of the space in another process (gymnasium's async vector env checks
        # its workers' spaces against its own) is the same space.
        return isinstance(other, ActionText) and (
            other.grammar is self.grammar or other.grammar.actions == self.grammar.actions)


def _budget(env_id: str, max_steps):
    return registry.spec(env_id).default_max_steps if max_steps == "default" else max_steps


class VisGymEnv(gymnasium.Env):
    """One episode of a visgym family as a gymnasium Env (a BatchEnv with B = 1)."""

    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 4}

    def __init__(self, env_id: str, render_mode: str | None = "rgb_array",
                 max_steps: int | None | str = "default", **params):
        if render_mode not in (None, "rgb_array", "ansi"):
            raise ValueError(f"render_mode: expected 'rgb_array', 'ansi' or None, got {render_mode!r}")
        seed = params.pop("seed", None)
        self.env_id = env_id
        self.batch = registry.make(env_id, 1, max_steps=_budget(env_id, max_steps),
                                   autoreset="disabled", seed=seed, **params)
        family = self.batch.family
        if render_mode == "ansi" and not family.has_text_mode:
            raise ValueError(f"render_mode: {family.name} has no ansi rendering")
        self.render_mode = render_mode
        self.metadata = dict(self.metadata)
        self.metadata["render_modes"] = ["rgb_array", "ansi"] if family.has_text_mode else ["rgb_array"]
        height, width, _ = self.batch.frame_shape
        self.observation_space = spaces.Box(0, 255, (height, width, 3), np.uint8)
        self.action_space = ActionText(family.grammar)
        self.env_feedback = None
        self._seed_seq = np.random.SeedSequence(seed)

    def reset(self, *, seed: int | None = None, options: dict | None = None,
              init_state: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._seed_seq = np.random.SeedSequence(seed)
            episode_seed = seed
        else:
            episode_seed = int(self._seed_seq.spawn(1)[0].generate_state(1, np.uint64)[0])
        if init_state is None and options:
            init_state = options.get("init_state")
        init_states = None if init_state is None else [init_state]
        frames, info = self.batch.reset(seeds=[episode_seed], init_states=init_states)
        self.env_feedback = None
        return frames[0].copy(), self._single_info(info, "")

    def step(self, action: str):
        frames, reward, terminated, truncated, info = self.batch.step([action])
        self.env_feedback = info["feedback"][0]
        return (frames[0].copy(), float(reward[0]), bool(terminated[0]), bool(truncated[0]),
                self._single_info(info, self.env_feedback))

    def _single_info(self, info: dict, feedback: str) -> dict:
        # The observation is padded to the family's capacity; frame_hw is the episode's own
        # (height, width), the part of it that render() returns (DESIGN.md "Frames"). The
        # family's own measures (jigsaw's proportion_matched, ...) come along, as the
        # reference's info carries them.
        h, w = info["frame_hw"][0].tolist()
        out = {"env_feedback": feedback, "code": int(info["code"][0]),
               "invalid": bool(info["invalid"][0]), "success": bool(info["success"][0]),
               "step": int(info["step"][0]), "frame_hw": (h, w),
               "reward_components": {k: float(v[0])
                                     for k, v in info["reward_components"].items()}}
        if "state_hash" in info:
            out["state_hash"] = info["state_hash"][0]   # np.uint64 (gymnasium keeps the dtype)
        for name, values in self.batch.metrics().items():
            out[name] = float(values[0])
        return out

    def render(self):
        if self.render_mode == "ansi":
            return self.batch.render_text()[0]
        if self.render_mode is None:
            return None
        return self.batch.frame(0).copy()   # the episode's own frame size, no padding

    def get_prompt(self, text_mode: bool | None = None) -> str:
        if text_mode is None:
            text_mode = self.render_mode == "ansi"
        return self.batch.prompt(text_mode=text_mode)

    def solve(self, strategy: str | None = None, num_steps: int | None = None) -> list[str]:
        return self.batch.solve(strategy=strategy, num_steps=num_steps)[0]

    def get_init_state(self) -> dict:
        return self.batch.state_dicts()[0]

    def goal_frame(self) -> np.ndarray:
        """The solved configuration's frame at the episode's own frame size."""
        frames = self.batch.goal_frames()
        h, w = self.batch.goal_frame_hw[0].tolist()
        return frames[0, :h, :w].copy()


class VisGymVectorEnv(VectorEnv):
    """A BatchEnv as a gymnasium VectorEnv (next-step autoreset). Infos follow gymnasium's
    vector convention: ``info[key]`` an array over envs and ``info["_" + key]`` its mask."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["rgb_array"]}

    def __init__(self, env_id: str, num_envs: int = 1, max_steps: int | None | str = "default",
                 render_mode: str | None = "rgb_array", **params):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode: expected 'rgb_array' or None, got {render_mode!r}")
        seed = params.pop("seed", None)
        self.env_id = env_id
        self.batch = registry.make(env_id, num_envs, max_steps=_budget(env_id, max_steps),
                                   autoreset="next_step", seed=seed, **params)
        self.num_envs = self.batch.num_envs
        self.render_mode = render_mode
        height, width, _ = self.batch.frame_shape
        self.single_observation_space = spaces.Box(0, 255, (height, width, 3), np.uint8)
        self.observation_space = spaces.Box(0, 255, (self.num_envs, height, width, 3), np.uint8)
        self.single_action_space = ActionText(self.batch.family.grammar)
        self.action_space = spaces.Tuple([ActionText(self.batch.family.grammar)
                                          for _ in range(self.num_envs)])
        self._mask = np.ones(self.num_envs, np.bool_)

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        init_states = (options or {}).get("init_states")
        frames, info = self.batch.reset(seeds=seed, init_states=init_states)
        return frames.copy(), self._vector_info(info)

    def step(self, actions):
        frames, reward, terminated, truncated, info = self.batch.step(list(actions))
        return (frames.copy(), reward.copy(), terminated.copy(), truncated.copy(),
                self._vector_info(info))

    def _vector_info(self, info: dict) -> dict:
        out = {}
        fields = [("feedback", np.array(info["feedback"], dtype=object))]
        fields += [(key, np.array(info[key])) for key in (
            "code", "invalid", "success", "step", "frame_hw", "state_hash", "task")
            if key in info]
        fields += [(f"reward_{name}", np.array(value))
                   for name, value in info["reward_components"].items()]
        for key, value in fields:
            out[key] = value
            out["_" + key] = self._mask
        return out

    def render(self):
        return self.batch.frames.copy()


class VisGymMixedVectorEnv(VisGymVectorEnv):
    """A mixed-task batch (``visgym.make_mixed``) as a gymnasium VectorEnv. Observations are
    the rows' frames padded to the largest task's capacity (a copy per call: what one
    ``uint8[B, H, W, 3]`` array costs; ``info["frame_hw"]`` gives each row's own size), the
    action space a Tuple of each row's ActionText, and ``info["task"]`` each row's task index
    into ``task_ids``."""

    def __init__(self, tasks, max_steps: int | None | str = "default",
                 render_mode: str | None = "rgb_array", **options):
        from ..core.mixed import make_mixed

        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode: expected 'rgb_array' or None, got {render_mode!r}")
        self.batch = make_mixed(tasks, max_steps=max_steps, autoreset="next_step", **options)
        self.env_id = None
        self.task_ids = self.batch.task_ids
        self.num_envs = self.batch.num_envs
        self.render_mode = render_mode
        height, width = self.batch.frames.capacity
        self.single_observation_space = spaces.Box(0, 255, (height, width, 3), np.uint8)
        self.observation_space = spaces.Box(0, 255, (self.num_envs, height, width, 3), np.uint8)
        grammars = [self.batch.env_of(i)[0].family.grammar for i in range(self.num_envs)]
        self.single_action_space = ActionText(grammars[0])
        self.action_space = spaces.Tuple([ActionText(g) for g in grammars])
        self._mask = np.ones(self.num_envs, np.bool_)

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        init_states = (options or {}).get("init_states")
        frames, info = self.batch.reset(seeds=seed, init_states=init_states)
        return frames.padded(), self._vector_info(info)

    def step(self, actions):
        frames, reward, terminated, truncated, info = self.batch.step(list(actions))
        return (frames.padded(), reward.copy(), terminated.copy(), truncated.copy(),
                self._vector_info(info))

    def render(self):
        return self.batch.frames.padded()


def _make_vector(env_id: str, num_envs: int = 1, max_steps=None, max_episode_steps=None,
                 **kwargs):
    # gymnasium.make_vec passes the registered max_episode_steps here (the single env gets a
    # TimeLimit instead); an explicit max_steps wins.
    budget = max_steps if max_steps is not None else max_episode_steps
    return VisGymVectorEnv(env_id, num_envs=num_envs, max_steps=budget, **kwargs)


def register_all() -> None:
    """Register every visgym id with gymnasium (idempotent)."""
    for env_id in registry.list_envs():
        if env_id in gymnasium.registry:
            continue
        gymnasium.register(
            id=env_id,
            entry_point=VisGymEnv,
            vector_entry_point=_make_vector,
            # The budget is gymnasium's TimeLimit, so the env itself does not truncate.
            max_episode_steps=registry.spec(env_id).default_max_steps,
            kwargs={"env_id": env_id, "max_steps": None},
            disable_env_checker=True,
        )
