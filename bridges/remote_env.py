"""Batched envs in Ray actors, behind the batched-env surface a ``Broker`` drives (issue 27,
"Scale-out": the OpenEnv server's sessions on a Ray cluster).

``RemoteBatchEnv`` looks like a BatchEnv to a broker (``num_envs``, ``reset(seeds=,
init_states=, rows=)``, ``step(actions, active=)`` with per-row info, ``frame(i)``,
``prompt(index=)``), but its rows live in ``actors`` Ray actors, each holding a BatchEnv of its
share of the rows: a step sends each actor its rows' actions at once and waits for all of them,
so the actors step in parallel on the cluster's cores. The actors also encode each stepped row's
frame as JPEG (visgym's encoder, one incremental encoder per row: the same bytes as
``encode_jpeg``), so what crosses the network is a few KB per row, not its pixels; ``frame(i)``
therefore gives row ``i``'s **JPEG bytes** (``encoded = True`` says so), and ``remote = True``
tells a broker to step off the event loop. A row's episode depends only on its task and seed, so
a session sees the same observations here as from a local env.
"""
from __future__ import annotations

import numpy as np

from ..core.registry import make
from .imaging import frame_encoder

__all__ = ["RemoteBatchEnv", "RemoteEnvs", "remote_envs"]


class _EnvShard:
    """The body of one Ray actor: a BatchEnv of some rows and a JPEG encoder per row."""

    def __init__(self, env_id: str, num_envs: int, make_kwargs: dict, max_long_side):
        self.env = make(env_id, num_envs, **make_kwargs)
        self.max_long_side = max_long_side
        shape = self.env.frame_shape
        self.encoders = [frame_encoder(shape, max_long_side) for _ in range(num_envs)]

    def _encoded(self, rows) -> list:
        return [self.encoders[i](self.env.frame(i)) for i in rows]

    def reset(self, seeds, init_states, rows):
        _, info = self.env.reset(seeds=seeds, init_states=init_states, rows=rows)
        rows = range(self.env.num_envs) if rows is None else rows
        prompts = [self.env.prompt(index=i) for i in rows]
        return info, self._encoded(rows), prompts

    def step(self, actions, active):
        _, reward, terminated, truncated, info = self.env.step(actions, active=active)
        rows = np.flatnonzero(active).tolist()
        return reward, terminated, truncated, info, self._encoded(rows)


def _concat(parts: list, counts: list):
    """One batch-wide value from the actors' per-shard values: per-row arrays and lists are
    joined, nested dicts recursively, anything else taken from the first shard."""
    first = parts[0]
    if isinstance(first, dict):
        return {k: _concat([p[k] for p in parts], counts) for k in first}
    if isinstance(first, np.ndarray) and first.ndim and first.shape[0] == counts[0]:
        return np.concatenate(parts)
    if isinstance(first, list) and len(first) == counts[0]:
        return [x for p in parts for x in p]
    return first


class RemoteBatchEnv:
    """``num_envs`` rows of ``env_id`` spread over Ray actors (see the module docstring)."""

    remote = True
    encoded = True

    def __init__(self, ray, env_id: str, num_envs: int, make_kwargs: dict, max_long_side,
                 actors: int = 1):
        actors = max(1, min(int(actors), int(num_envs)))
        self._ray = ray
        self.env_id = env_id
        self.num_envs = int(num_envs)
        bounds = np.linspace(0, self.num_envs, actors + 1).astype(int)
        self._bounds = bounds
        self._counts = np.diff(bounds).tolist()
        cls = ray.remote(num_cpus=1)(_EnvShard)
        self._actors = [cls.remote(env_id, n, make_kwargs, max_long_side)
                        for n in self._counts]
        # The family, its grammar, frame size and budget, here (what a server reads locally).
        local = make(env_id, 1, **make_kwargs)
        self.family = local.family
        self.grammar = local.grammar
        self.frame_shape = local.frame_shape
        self.max_steps = local.max_steps
        self.autoreset = local.autoreset
        self._jpegs = [b""] * self.num_envs
        self._prompts = [""] * self.num_envs

    def _split_rows(self, rows):
        """rows (global) -> per actor: (local rows, positions in ``rows``)."""
        shard = np.searchsorted(self._bounds, rows, side="right") - 1
        out = []
        for k in range(len(self._actors)):
            picked = np.flatnonzero(shard == k)
            out.append(((np.asarray(rows)[picked] - self._bounds[k]).tolist(), picked))
        return out

    def reset(self, seeds=None, init_states=None, options=None, rows=None):
        all_rows = rows is None
        rows = list(range(self.num_envs)) if all_rows else [int(r) for r in rows]
        if seeds is not None and np.ndim(seeds) == 0:
            seeds = [int(seeds) + i for i in range(len(rows))]
        calls = []
        for k, (local, picked) in enumerate(self._split_rows(rows)):
            if not local:
                continue
            shard_seeds = None if seeds is None else [seeds[j] for j in picked]
            shard_states = None if init_states is None else [init_states[j] for j in picked]
            calls.append((k, local, self._actors[k].reset.remote(
                shard_seeds, shard_states, None if all_rows else local)))
        results = self._ray.get([c[2] for c in calls])
        for (k, local, _), (_, jpegs, prompts) in zip(calls, results):
            for i, jpeg, prompt in zip(local, jpegs, prompts):
                self._jpegs[self._bounds[k] + i] = jpeg
                self._prompts[self._bounds[k] + i] = prompt
        infos = [r[0] for r in results]
        if len(calls) == len(self._actors):
            return None, _concat(infos, self._counts)
        # Some actors had no row to reset: their rows' entries are not used by the caller.
        full = []
        for k in range(len(self._actors)):
            match = [info for (j, _, _), info in zip(calls, infos) if j == k]
            full.append(match[0] if match else _blank_like(infos[0], self._counts[k]))
        return None, _concat(full, self._counts)

    def step(self, actions, active=None):
        active = np.ones(self.num_envs, np.bool_) if active is None else np.asarray(active)
        refs = []
        for k, actor in enumerate(self._actors):
            lo, hi = self._bounds[k], self._bounds[k + 1]
            refs.append(actor.step.remote(list(actions[lo:hi]), active[lo:hi]))
        results = self._ray.get(refs)
        for k, result in enumerate(results):
            for i, jpeg in zip(np.flatnonzero(active[self._bounds[k]:self._bounds[k + 1]]),
                               result[4]):
                self._jpegs[self._bounds[k] + int(i)] = jpeg
        parts = list(zip(*[r[:4] for r in results]))
        reward, terminated, truncated = (np.concatenate(p) for p in parts[:3])
        return None, reward, terminated, truncated, _concat(list(parts[3]), self._counts)

    def frame(self, index: int) -> bytes:
        """Row ``index``'s current frame as JPEG bytes."""
        return self._jpegs[index]

    def prompt(self, text_mode: bool = False, index: int = 0) -> str:
        return self._prompts[index]

    def close(self) -> None:
        for actor in self._actors:
            self._ray.kill(actor)
        self._actors = []


def _blank_like(info: dict, n: int) -> dict:
    """An info dict of ``n`` rows shaped like ``info`` (for actors a reset did not touch)."""
    out = {}
    for key, value in info.items():
        if isinstance(value, dict):
            out[key] = _blank_like(value, n)
        elif isinstance(value, np.ndarray) and value.ndim:
            out[key] = np.zeros((n,) + value.shape[1:], value.dtype)
        elif isinstance(value, list):
            out[key] = [""] * n
        else:
            out[key] = value
    return out


class RemoteEnvs:
    """The remote envs of a server (``envs``: env id -> RemoteBatchEnv); ``close()`` ends the
    actors."""

    def __init__(self, envs: dict):
        self.envs = envs

    def close(self) -> None:
        for env in self.envs.values():
            env.close()


def remote_envs(config) -> RemoteEnvs:
    """A RemoteBatchEnv per served task of a ServeConfig, on the Ray cluster at
    ``config.ray_address`` ('local' starts one here, 'auto' joins the running one)."""
    from .rollouts import _ray_init
    from ..core.registry import consumer_kwargs

    ray = _ray_init(config.ray_address)
    # Each actor asks for one CPU; more actors than the cluster has CPUs would wait for ever.
    needed = len(config.tasks) * config.ray_actors
    free = ray.available_resources().get("CPU", 0.0)
    if needed > free:
        raise ValueError(f"ray_actors: {len(config.tasks)} task(s) x {config.ray_actors} "
                         f"actor(s) need {needed} CPUs, the Ray cluster has {free:g} free")
    envs = {}
    for env_id in config.tasks:
        params = dict(config.params.get(env_id, {}))
        kwargs = params if config.max_long_side is None else consumer_kwargs(
            env_id, params, config.max_long_side)
        make_kwargs = dict(kwargs, max_steps=config.max_steps, autoreset="disabled",
                           reward=config.reward, gamma=config.gamma)
        envs[env_id] = RemoteBatchEnv(ray, env_id, config.sessions, make_kwargs,
                                      config.max_long_side, config.ray_actors)
    return RemoteEnvs(envs)
