"""visgym: batched, compiled VisGym environments for vision-language-model agents.

    import visgym
    env = visgym.make("maze_2d/easy", num_envs=256)
    frames, info = env.reset(seeds=range(256))
    frames, reward, terminated, truncated, info = env.step(["('move', 0)"] * 256)

Importing the package registers every implemented id with gymnasium as well, so
``gymnasium.make("maze_2d/easy")`` gives the single-episode env.
"""
from . import envs as _envs  # noqa: F401  (registers the families)
from .core import BatchEnv, list_envs, make

__version__ = "0.1.0"

try:  # the gymnasium face is optional at import time only if gymnasium is missing
    from .bridges import gym as _gym_bridge

    _gym_bridge.register_all()
except ImportError as _error:  # pragma: no cover - gymnasium is a declared dependency
    if "gymnasium" not in str(_error):
        raise

__all__ = ["BatchEnv", "list_envs", "make", "__version__"]
