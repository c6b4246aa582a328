"""The env registry: ids such as ``maze_2d/easy`` mapped to a family and a difficulty preset.

``make(env_id, num_envs=B, **kwargs)`` builds a BatchEnv. Keyword arguments are either BatchEnv
options (max_steps, autoreset, seed) or parameter overrides of the family, named as the
reference's constructor keywords, so the reference's ``make_kwargs`` apply unchanged. A few
reference keywords that only steer the reference's own rendering or bookkeeping are accepted and
ignored (``IGNORED_KWARGS``).
"""
from __future__ import annotations

from dataclasses import dataclass

from .batch_env import BatchEnv
from .validate import describe

DEFAULT_MAX_STEPS = {"easy": 20, "hard": 30}
# Reference constructor keywords with no effect here: render_mode (we always render rgb frames;
# the gymnasium bridge handles render modes). Their values are still checked.
IGNORED_KWARGS = frozenset({"render_mode"})
RENDER_MODES = (None, "rgb_array", "ansi")


@dataclass(frozen=True)
class EnvSpec:
    """An id's entry: its family (a Family subclass, or ``"module:Class"`` imported on first
    use, so ``import visgym`` loads no family's kernels) and difficulty preset."""

    env_id: str
    family_ref: object
    difficulty: str | None

    @property
    def family(self) -> type:
        ref = self.family_ref
        if isinstance(ref, str):
            return _load_family(ref)
        return ref

    @property
    def default_max_steps(self) -> int:
        return DEFAULT_MAX_STEPS.get(self.difficulty or "", 30)


_REGISTRY: dict[str, EnvSpec] = {}


def _load_family(ref: str) -> type:
    import importlib

    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def register(family, difficulties=("easy", "hard"), name: str | None = None) -> None:
    """Register ``<name>/<difficulty>`` for each preset. ``family``: a Family subclass (its
    ``name`` is the family name), or ``"module:Class"`` with ``name`` given, imported when an
    env of it is first made."""
    if isinstance(family, str):
        if not name:
            raise ValueError("name: a family registered by reference needs its name")
    else:
        name = family.name
    for difficulty in difficulties:
        env_id = f"{name}/{difficulty}"
        _REGISTRY[env_id] = EnvSpec(env_id, family, difficulty)


def unregister(family: type) -> None:
    """Remove every id of ``family`` (tests register a test-only family and remove it after)."""
    for env_id in [k for k, v in _REGISTRY.items() if v.family_ref is family]:
        del _REGISTRY[env_id]


def list_envs() -> list[str]:
    return sorted(_REGISTRY)


def spec(env_id: str) -> EnvSpec:
    entry = _REGISTRY.get(env_id) if isinstance(env_id, str) else None
    if entry is None:
        families = sorted({i.split("/")[0] for i in list_envs()})
        raise ValueError(f"env_id: unknown environment {describe(env_id)}; known ids are "
                         f"<family>/easy and <family>/hard for: {', '.join(families)} "
                         f"(visgym.list_envs())")
    return entry


def make_family(env_id: str, **overrides):
    """The family instance for an id plus parameter overrides (no BatchEnv)."""
    entry = spec(env_id)
    render_mode = overrides.get("render_mode")
    if not (render_mode is None or (isinstance(render_mode, str)
                                    and render_mode in RENDER_MODES)):
        raise ValueError(f"render_mode: expected one of {RENDER_MODES}, got "
                         f"{describe(render_mode)}")
    if render_mode == "ansi" and not entry.family.has_text_mode:
        raise ValueError(f"render_mode: {entry.family.name} has no ansi rendering")
    overrides = {k: v for k, v in overrides.items() if k not in IGNORED_KWARGS}
    params = entry.family.make_params(entry.difficulty, overrides)
    return entry.family(params)


def consumer_kwargs(env_id: str, make_kwargs: dict | None, max_long_side: int | None) -> dict:
    """``make_kwargs`` plus the family's ``consumer_overrides`` for frames shown with their long
    side fitted into ``max_long_side`` (ValueError for bad keywords, as ``make`` raises)."""
    entry = spec(env_id)
    make_kwargs = dict(make_kwargs or {})
    given = {k: v for k, v in make_kwargs.items() if k not in IGNORED_KWARGS}
    params = entry.family.make_params(entry.difficulty, given)
    return {**make_kwargs, **entry.family.consumer_overrides(params, max_long_side)}


def make(env_id: str, num_envs: int = 1, *, max_steps: int | None | str = "default",
         autoreset: str = "next_step", seed: int | None = None, reward: str = "sparse",
         gamma: float = 1.0, state_hash: bool = True, **overrides) -> BatchEnv:
    """A BatchEnv of ``num_envs`` episodes of ``env_id``.

    max_steps: step budget per episode ("default": 20 for easy, 30 for hard; None: no budget).
    autoreset: "next_step" (gymnasium's: an episode that ended is reset by the next step call)
    or "disabled". seed: seeds the episodes drawn when reset() is called without seeds.
    reward: "sparse" (the reference's) or "progress" (plus potential-based shaping with discount
    ``gamma``; docs/rl.md). state_hash: put each episode's canonical state hash in
    info["state_hash"].
    Other keywords override the family's parameters (ValueError naming an unknown or bad one).
    """
    entry = spec(env_id)
    family = make_family(env_id, **overrides)
    if max_steps == "default":
        max_steps = entry.default_max_steps
    return BatchEnv(family, num_envs, max_steps=max_steps, autoreset=autoreset, seed=seed,
                    env_id=env_id, reward=reward, gamma=gamma, state_hash=state_hash)
