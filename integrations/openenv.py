"""visgym as an OpenEnv environment server (issue 27, "Trainer integrations"): ``visgym serve``
and ``create_server_app`` expose the tasks with the OpenEnv protocol, through OpenEnv's own
server framework (``openenv-core``: ``create_app`` wires the WebSocket sessions at ``/ws``, the
stateless HTTP ``/reset`` and ``/step``, ``/health``, ``/schema`` and ``/metadata``), and
``VisGymClient`` is an OpenEnv ``EnvClient`` for them.

Sessions share batched envs. OpenEnv makes one ``Environment`` object per session; here that
object is light: it holds a **slot** of a ``Broker`` (core/broker.py) over one batched env per
task, with ``sessions`` rows, so the pending resets and steps of all sessions of a task run as
batched kernel calls. The server's ``reset_async`` / ``step_async`` await the broker on the
server's event loop; nothing runs in OpenEnv's per-session thread pools. With ``--ray`` each
task's batched env lives in Ray actors instead (bridges/remote_env.py) and this process only
speaks the protocol.

The protocol as served:

- **reset** takes ``seed`` (the episode's seed; none draws one), ``task`` (one of the served env
  ids; default the first, or the session's current task) and ``episode_id`` (echoed back).
- **step** takes ``VisGymAction``: ``{"action": "<text>"}``, the action string, or a whole
  model reply: the action is read from it as the SkyRL environment reads it
  (bridges/action_words.py: a tuple ``('move', 1)`` anywhere, an ``<action>`` tag, a keyword
  such as ``left`` or ``stop``). A malformed action is the env's feedback, never an error.
- The **observation** (``VisGymObservation``) carries the episode's prompt (the task
  instructions), the turn's text as the evaluation would send it (instructions or feedback, and
  the step message), the feedback, the frame as a base64 JPEG (visgym's encoder: long side
  fitted into ``max_long_side``, quality 75), and the step's outcome as data: ``success``,
  ``invalid``, ``code``, ``terminated``, ``truncated``, ``state_hash`` (uint64),
  ``reward_components``, plus OpenEnv's ``reward`` and ``done``.
- **state** gives ``episode_id``, ``step_count``, ``task``, ``seed`` and ``done``.

Errors: a step before any reset, or after the episode ended, and a reset naming a task that is
not served or an unknown argument are refused with a message naming the problem (OpenEnv sends
it to the client as an error response; the session stays usable).
"""
from __future__ import annotations

import base64
import functools
import inspect
import json
import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field
from starlette.websockets import WebSocketDisconnect

from ..bridges.action_words import action_words, read_action
from ..bridges.conversation import episode_instructions, turn_text
from ..bridges.imaging import DEFAULT_MAX_LONG_SIDE, frame_encoder
from ..core.broker import Broker
from ..core.registry import consumer_kwargs, list_envs, make
from ..core.seeding import check_seeds
from ..core.validate import describe, integer, one_of, optional_integer, real

__all__ = ["VisGymAction", "VisGymObservation", "VisGymState", "ServeConfig", "VisGymServer",
           "VisGymEnvironment", "RequestError", "EpisodeStateError", "create_server_app", "serve",
           "VisGymClient"]

RESET_ARGUMENTS = ("seed", "episode_id", "task")


# ------------------------------------------------------------------------------- models
class RequestError(ValueError):
    """A reset or step argument the server cannot take (a session gets the message as an
    error; the stateless HTTP endpoints answer 422 with it)."""


class EpisodeStateError(RuntimeError):
    """A step the session's episode does not allow: none yet, or it has ended (HTTP: 409)."""


class VisGymAction(Action):
    """A step's action: the action text (``"('move', 1)"``) or a model's whole reply."""

    action: str = Field(..., description="the action string, e.g. \"('move', 1)\", or a model "
                        "reply holding one")


class VisGymObservation(Observation):
    """What a session sees after a reset or a step (``reward`` and ``done`` are OpenEnv's)."""

    task: str = Field(..., description="the env id of the episode")
    seed: int = Field(..., description="the episode's seed")
    episode_id: Optional[str] = Field(default=None, description="the reset's episode_id")
    step: int = Field(..., description="steps taken in the episode")
    max_steps: int = Field(..., description="the episode's step budget")
    prompt: str = Field(..., description="the task instructions (the family's prompt)")
    text: str = Field(..., description="this turn's text as the evaluation sends it")
    feedback: str = Field(default="", description="the env's feedback on the last action")
    image: str = Field(..., description="the frame as a base64 JPEG (no data-URL header)")
    success: bool = Field(default=False, description="the state is solved")
    invalid: bool = Field(default=False, description="the action text was not an action")
    code: int = Field(default=0, description="the step's outcome code (info['code'])")
    terminated: bool = Field(default=False)
    truncated: bool = Field(default=False)
    state_hash: int = Field(default=0, description="canonical uint64 hash of the state")
    reward_components: dict = Field(default_factory=dict,
                                    description="the reward's parts: task and shaping")


class VisGymState(State):
    """The session's episode bookkeeping."""

    task: Optional[str] = None
    seed: Optional[int] = None
    done: bool = False


# ------------------------------------------------------------------------------- config
@dataclass
class ServeConfig:
    """What ``visgym serve`` serves: ``tasks`` (env ids), up to ``sessions`` concurrent
    sessions (each task's batched env has that many rows), frames fitted into
    ``max_long_side`` (None: full size), ``reward`` / ``gamma`` (docs/rl.md), ``max_steps``
    ("default": the task's budget), the broker's gathering ``window_s``, ``params`` per env id
    (the family's keywords), and ``ray_address`` / ``ray_actors`` to run the envs in Ray
    actors."""

    tasks: list
    sessions: int = 256
    max_long_side: Optional[int] = DEFAULT_MAX_LONG_SIDE
    reward: str = "sparse"
    gamma: float = 1.0
    max_steps: Any = "default"
    window_s: float = 0.002
    params: dict = field(default_factory=dict)
    ray_address: Optional[str] = None
    ray_actors: int = 1

    def validate(self) -> "ServeConfig":
        if isinstance(self.tasks, str) or not isinstance(self.tasks, (list, tuple)) \
                or not self.tasks:
            raise ValueError(f"tasks: expected a non-empty list of env ids, got "
                             f"{describe(self.tasks)}")
        known = set(list_envs())
        for task in self.tasks:
            if task not in known:
                raise ValueError(f"tasks: unknown env id {describe(task)}; the ids are "
                                 f"visgym.list_envs()")
        if len(set(self.tasks)) != len(self.tasks):
            raise ValueError("tasks: an env id is listed twice")
        self.tasks = list(self.tasks)
        self.sessions = integer("sessions", self.sessions, 1, 1 << 16)
        self.max_long_side = optional_integer("max_long_side", self.max_long_side, 16)
        self.reward = one_of("reward", self.reward, ("sparse", "progress"))
        self.gamma = real("gamma", self.gamma, 0.0, 1.0)
        if self.max_steps != "default":
            self.max_steps = integer("max_steps", self.max_steps, 1)
        self.window_s = real("window_s", self.window_s, 0.0, 1.0)
        if not isinstance(self.params, dict) or any(k not in self.tasks for k in self.params):
            raise ValueError(f"params: expected a dict from served env ids to keyword dicts, "
                             f"got {describe(self.params)}")
        self.ray_actors = integer("ray_actors", self.ray_actors, 1, 1024)
        return self


# ------------------------------------------------------------------------------- server
class _Task:
    """One served task: its batched env (local, or a Ray actor's), broker and action words."""

    def __init__(self, env_id: str, config: ServeConfig, env=None):
        if env is None:
            params = dict(config.params.get(env_id, {}))
            kwargs = params if config.max_long_side is None else consumer_kwargs(
                env_id, params, config.max_long_side)
            env = make(env_id, config.sessions, max_steps=config.max_steps,
                       autoreset="disabled", reward=config.reward, gamma=config.gamma,
                       **kwargs)
        self.env_id = env_id
        self.env = env
        # A remote env answers from another process: step it off the event loop.
        self.broker = Broker(env, window_s=config.window_s,
                             inline=not getattr(env, "remote", False))
        self.max_steps = env.max_steps
        self.words = action_words(env.family)
        self.names = env.grammar.names
        self.frame_shape = env.frame_shape
        self.max_long_side = config.max_long_side
        self.encoded = bool(getattr(env, "encoded", False))


class VisGymServer:
    """The served tasks (their envs and brokers), shared by every session of one server
    process. ``close()`` shuts the brokers down (and the Ray actors, if any)."""

    def __init__(self, config: ServeConfig):
        self.config = config.validate()
        self._remote = None
        envs = {}
        if config.ray_address:
            from ..bridges.remote_env import remote_envs

            self._remote = remote_envs(config)
            envs = self._remote.envs
        self.tasks = {env_id: _Task(env_id, config, envs.get(env_id))
                      for env_id in config.tasks}
        self.default_task = config.tasks[0]
        self._lock = threading.Lock()
        self._closed = False

    def task(self, env_id) -> _Task:
        served = self.tasks.get(env_id) if isinstance(env_id, str) else None
        if served is None:
            raise RequestError(f"task: {describe(env_id)} is not served here; the served tasks "
                             f"are {', '.join(self.tasks)}")
        return served

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for served in self.tasks.values():
            served.broker.shutdown()
        if self._remote is not None:
            self._remote.close()


class VisGymEnvironment(Environment):
    """One OpenEnv session: a slot of the served task's broker (see the module docstring)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, server: VisGymServer):
        super().__init__()
        self._server = server
        self._task: _Task | None = None
        self._slot = None
        self._encode = None
        self._encoded_for = None
        self._episode_id = None
        self._seed = None
        self._steps = 0
        self._done = False
        self._started = False
        self._instructions = ""

    # -- reset ------------------------------------------------------------------------------
    def _prepare_reset(self, seed, task, extra) -> tuple:
        if extra:
            raise RequestError(f"reset: unknown argument(s) {', '.join(sorted(extra))}; reset "
                             f"takes {', '.join(RESET_ARGUMENTS)}")
        if seed is not None:
            try:
                seed = int(check_seeds([seed], 1, "seed")[0])
            except ValueError as error:
                raise RequestError(str(error)) from None
        if task is None:
            served = self._task or self._server.task(self._server.default_task)
        else:
            served = self._server.task(task)
        if served is not self._task or self._slot is None:
            if self._slot is not None:
                self._slot.close()
                self._slot = None
            self._slot = served.broker.open()
            self._task = served
        if self._encoded_for is not served and not served.encoded:
            self._encode = frame_encoder(served.frame_shape, served.max_long_side)
            self._encoded_for = served
        return served, seed

    def _begin(self, obs, info, episode_id) -> VisGymObservation:
        served = self._task
        self._started, self._done, self._steps = True, False, 0
        self._seed = int(info["seed"])
        self._episode_id = episode_id if episode_id is not None else uuid.uuid4().hex
        self._instructions = episode_instructions(served.env, self._slot.row)
        text = turn_text(0, served.max_steps, self._instructions, None)
        return self._observation(obs, info, text, 0.0, False, False)

    async def reset_async(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
                          task: Optional[str] = None, **kwargs: Any) -> VisGymObservation:
        served, seed = self._prepare_reset(seed, task, kwargs)
        obs, info = await served.broker.areset(self._slot, seed=seed)
        return self._begin(obs, info, episode_id)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task: Optional[str] = None, **kwargs: Any) -> VisGymObservation:
        served, seed = self._prepare_reset(seed, task, kwargs)
        obs, info = served.broker.reset(self._slot, seed=seed)
        return self._begin(obs, info, episode_id)

    # -- step -------------------------------------------------------------------------------
    def _prepare_step(self, action) -> str:
        if not self._started:
            raise EpisodeStateError("step: no episode yet; send reset first (a stateless HTTP "
                               "/step has no episode: use a WebSocket session at /ws)")
        if self._done:
            raise EpisodeStateError("step: the episode ended (done was true); send reset to start "
                               "another")
        text = action.action if isinstance(action, VisGymAction) else action
        if not isinstance(text, str):
            raise RequestError(f"action: expected the action text, got {describe(text)}")
        served = self._task
        return read_action(text, served.words, served.names)

    def _stepped(self, result) -> VisGymObservation:
        obs, reward, terminated, truncated, info = result
        self._steps = info["step"]
        self._done = terminated or truncated
        text = turn_text(self._steps, self._task.max_steps, self._instructions,
                         info["feedback"])
        return self._observation(obs, info, text, reward, terminated, truncated)

    async def step_async(self, action: VisGymAction, timeout_s: Optional[float] = None,
                         **kwargs: Any) -> VisGymObservation:
        text = self._prepare_step(action)
        return self._stepped(await self._task.broker.astep(self._slot, text))

    def step(self, action: VisGymAction, timeout_s: Optional[float] = None,
             **kwargs: Any) -> VisGymObservation:
        text = self._prepare_step(action)
        return self._stepped(self._task.broker.step(self._slot, text))

    # -- observation and state ------------------------------------------------------------
    def _observation(self, obs, info, text, reward, terminated, truncated) -> VisGymObservation:
        served = self._task
        jpeg = obs if served.encoded else self._encode(obs)   # a remote env sends JPEGs
        image = base64.b64encode(jpeg).decode("ascii")
        components = info["reward_components"]
        # Our own, already typed values: built without a second validation pass.
        return VisGymObservation.model_construct(
            done=terminated or truncated, reward=reward, metadata={},
            task=served.env_id, seed=self._seed, episode_id=self._episode_id,
            step=self._steps, max_steps=served.max_steps, prompt=self._instructions,
            text=text, feedback=info["feedback"], image=image, success=info["success"],
            invalid=info["invalid"], code=info["code"], terminated=terminated,
            truncated=truncated, state_hash=info.get("state_hash", 0),
            reward_components={"task": components["task"], "shaping": components["shaping"]})

    @property
    def state(self) -> VisGymState:
        return VisGymState(episode_id=self._episode_id, step_count=self._steps,
                           task=None if self._task is None else self._task.env_id,
                           seed=self._seed, done=self._done)

    def get_metadata(self) -> EnvironmentMetadata:
        from .. import __version__

        return EnvironmentMetadata(
            name="visgym", version=__version__,
            description=f"visgym visual tasks served as OpenEnv sessions: "
                        f"{', '.join(self._server.tasks)}")

    def close(self) -> None:
        slot, self._slot = self._slot, None
        if slot is not None:
            try:
                slot.close()
            except Exception:   # the broker was shut down with the server: nothing to give back
                return


class _QuietDisconnects:
    """ASGI middleware: a WebSocket client that leaves first makes OpenEnv's session endpoint
    raise while it closes the socket (after the session was already closed and its slot given
    back); that is a normal end of a session, not a server error to log with a traceback."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        try:
            return await self.app(scope, receive, send)
        except (WebSocketDisconnect, OSError):   # uvicorn's ClientDisconnected is an OSError
            return None


def create_server_app(config: ServeConfig):
    """The FastAPI app of OpenEnv's ``create_app`` serving ``config``'s tasks (the server is
    ``app.state.visgym``; it is closed when the app shuts down)."""
    server = VisGymServer(config)
    app = create_app(functools.partial(VisGymEnvironment, server), VisGymAction,
                     VisGymObservation, env_name="visgym",
                     max_concurrent_envs=config.sessions)
    app.state.visgym = server
    app.add_middleware(_QuietDisconnects)
    # A caller's mistake over the stateless HTTP endpoints is answered as one, not logged as a
    # server error with a traceback.
    for error, status in ((RequestError, 422), (EpisodeStateError, 409)):
        app.add_exception_handler(error, functools.partial(_refused, status))
    app.router.on_shutdown.append(server.close)
    return app


async def _refused(status: int, request, error: Exception):
    from starlette.responses import JSONResponse

    return JSONResponse({"detail": str(error)}, status_code=status)


_CONFIG_ENV = "VISGYM_SERVE_CONFIG"


def app_from_environ():
    """The app of a ``serve(workers > 1)`` worker process: its config is read from the
    environment variable the parent set (uvicorn starts workers from an import string)."""
    config = ServeConfig(**json.loads(os.environ[_CONFIG_ENV]))
    app = create_server_app(config)
    _announce(app, os.environ.get(_CONFIG_ENV + "_PORT_FILE"), os.environ.get(
        _CONFIG_ENV + "_PORT"))
    return app


def _announce(app, port_file, port) -> None:
    """Write ``port`` into ``port_file`` once the app has started (a caller waiting for the
    file knows the server answers)."""
    if not port_file:
        return

    def write():
        tmp = f"{port_file}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, port_file)

    app.router.on_startup.append(write)


def serve(config: ServeConfig, host: str = "127.0.0.1", port: int = 8000, *,
          workers: int = 1, port_file: str | None = None, log_level: str = "warning",
          on_listen=None) -> None:
    """Serve ``config`` on ``host``:``port`` (0: a free port) until interrupted, with
    ``workers`` processes sharing the listening socket (each with its own envs and up to
    ``config.sessions`` sessions). ``port_file`` receives the port once the server answers;
    ``on_listen(port)`` is called once the socket is bound."""
    import uvicorn

    config.validate()
    workers = integer("workers", workers, 1, 256)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise OSError(error.errno, f"cannot listen on {host}:{port} ({error.strerror})") \
            from None
    sock.set_inheritable(True)
    port = sock.getsockname()[1]
    if on_listen is not None:
        on_listen(port)
    # JPEG frames do not deflate: compressing every message only costs CPU.
    options = dict(log_level=log_level, ws_max_size=16 << 20, ws_per_message_deflate=False,
                   timeout_graceful_shutdown=5)
    if workers == 1:
        app = create_server_app(config)
        _announce(app, port_file, port)
        uvicorn.Server(uvicorn.Config(app, **options)).run(sockets=[sock])
        return
    from uvicorn.supervisors import Multiprocess

    os.environ[_CONFIG_ENV] = json.dumps(config.__dict__)
    os.environ[_CONFIG_ENV + "_PORT"] = str(port)
    if port_file:
        os.environ[_CONFIG_ENV + "_PORT_FILE"] = port_file
    uv_config = uvicorn.Config(f"{__name__}:app_from_environ", factory=True, workers=workers,
                               **options)
    if "target" in inspect.signature(Multiprocess).parameters:     # uvicorn before 0.30
        Multiprocess(uv_config, target=uvicorn.Server(uv_config).run, sockets=[sock]).run()
    else:
        Multiprocess(uv_config, sockets=[sock]).run()


# ------------------------------------------------------------------------------- client
class VisGymClient(EnvClient[VisGymAction, VisGymObservation, VisGymState]):
    """OpenEnv's WebSocket client for a visgym server: ``await client.reset(seed=, task=)``,
    ``await client.step(VisGymAction(action=...))`` (or the action text itself), or
    ``client.sync()`` for blocking calls."""

    def _step_payload(self, action) -> dict:
        if isinstance(action, str):
            return {"action": action}
        if isinstance(action, dict):
            return dict(action)
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict) -> StepResult:
        fields = dict(payload.get("observation", {}))
        fields["reward"] = payload.get("reward")
        fields["done"] = payload.get("done", False)
        observation = VisGymObservation(**fields)
        return StepResult(observation=observation, reward=observation.reward,
                          done=observation.done)

    def _parse_state(self, payload: dict) -> VisGymState:
        return VisGymState(**payload)
