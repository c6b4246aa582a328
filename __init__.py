"""visgym: batched, compiled VisGym environments for vision-language-model agents.

    import visgym
    env = visgym.make("maze_2d/easy", num_envs=256)
    frames, info = env.reset(seeds=range(256))
    frames, reward, terminated, truncated, info = env.step(["('move', 0)"] * 256)

Importing the package registers every implemented id with gymnasium as well, so
``gymnasium.make("maze_2d/easy")`` gives the single-episode env.
"""
__version__ = "0.1.0"

# The repository root is this package. Tools that walk the checkout (pytest collects the root as
# a package named after the folder) would import it a second time under another name, with its
# own registry and compiled modules; only the real ``visgym`` import loads anything.
if __name__ == "visgym":
    from . import envs as _envs  # noqa: F401  (registers the families)
    from .bridges import gym as _gym_bridge
    from .core import BatchEnv, list_envs, make
    from .core.mixed import MixedEnv, make_mixed

    _gym_bridge.register_all()

    __all__ = ["BatchEnv", "MixedEnv", "list_envs", "make", "make_mixed", "__version__"]
