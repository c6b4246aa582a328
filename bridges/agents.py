"""Agents: what answers each turn of the evaluation loop.

One small interface: ``await agent.act(turn) -> Reply``. A ``Turn`` carries the chat messages to
send (OpenAI format, full history or the configured window), the current observation and prompt
text, and the episode it belongs to. Four agents:

- ``OpenAIAgent``: any OpenAI-compatible chat-completions endpoint (OpenAI, OpenRouter, vLLM,
  SGLang) through the official ``openai`` client, with our own timeout, retries (exponential
  backoff with jitter on 429, 5xx and connection errors, honouring Retry-After) and the reply
  bookkeeping of spec/agent_loop.md 5.3: empty, refused and over-long replies are recorded as
  such and still count as a step; a context-length error ends the episode.
- ``SolverAgent``: the environment's own solver, replayed through the same loop (offline, no key).
- ``RandomAgent``: random well-formed actions of the family's grammar.
- ``ReplayAgent``: recorded action lists, by episode key or index.

The API key is read from the environment variable the user names and is never logged or
written anywhere; the endpoint is recorded without credentials.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ..core.grammar import STOP_ACTION

# Placeholders of the reference (spec 5.3): stored as the assistant turn and parsed like a reply.
EXHAUSTED_REPLY = "Error in receiving a response after {n} trials"
EMPTY_REPLY = "Empty response"
CONTEXT_REPLY = "Error: Maximum context length is exceeded."
IMAGES_REPLY = "Error: Total number of images exceeds the maximum context length"
MAX_REPLY_CHARS = 32768
MAX_RETRY_AFTER_S = 300.0   # the longest Retry-After we honour
HTTP_TRANSPORTS = ("auto", "lean", "httpx")
# Connection pools (clients) per agent, by transport. httpcore checks every pooled connection
# on each request, so one pool of 64 connections costs ~64 checks per request: episodes are
# spread over 8 clients by key. The lean transport takes an idle connection in O(1): one client.
CLIENT_SHARDS = {"httpx": 8, "lean": 1}


class AgentFatalError(ValueError):
    """The endpoint refuses to serve at all (e.g. a rejected API key): stop the run."""


@dataclass
class Episode:
    """What an agent may know about the episode it is playing."""

    key: str
    env_id: str
    index: int
    seed: int
    solve: Callable[[], list] | None = None   # the solver's plan from the initial state
    grammar: Any = None
    data: dict = field(default_factory=dict)  # per-episode agent scratch space


@dataclass
class Turn:
    episode: Episode
    step: int
    messages: list          # the chat messages to send, user turn last
    prompt: str             # the text of this turn's user message
    frame: np.ndarray | None = None


@dataclass
class Reply:
    text: str
    flag: str | None = None          # None, "empty", "refused", "too_long", "error"
    fatal: str | None = None         # "context_length": the episode ends after this step
    usage: dict | None = None
    attempts: int = 1
    latency_s: float = 0.0
    error: str | None = None         # last error message (no credentials)


class Agent:
    """Base class; subclasses implement ``act``."""

    name = "agent"
    spec = None   # (kind, options) for make_agent, set by make_agent

    async def act(self, turn: Turn) -> Reply:
        raise TypeError(f"{type(self).__name__} does not implement act()")

    def describe(self) -> dict:
        return {"agent": self.name}

    async def aclose(self) -> None:
        return None


# ---------------------------------------------------------------------------- offline agents
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
        from .gym import ActionText

        space = turn.episode.data.get("space")
        if space is None:
            space = ActionText(turn.episode.grammar, seed=(self.seed * 1_000_003 + turn.episode.seed) % 2**32)
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
            raise ValueError(f"--replay: {path} is not valid JSON ({e.msg} at line {e.lineno})") from None
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


# ------------------------------------------------------------------------------ OpenAI agent
def redact_url(url: str | None) -> str | None:
    """The endpoint without user info, query or fragment (never record credentials)."""
    if not url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass
class GenerationSettings:
    temperature: float | None = None
    max_tokens: int | None = 8192
    top_p: float | None = None
    reasoning_effort: str | None = None
    extra_body: dict | None = None

    def request_kwargs(self) -> dict:
        kwargs = {}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.max_tokens is not None:
            kwargs["max_completion_tokens"] = self.max_tokens
        if self.top_p is not None:
            kwargs["top_p"] = self.top_p
        if self.reasoning_effort is not None:
            kwargs["reasoning_effort"] = self.reasoning_effort
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        return kwargs


def _is_context_error(text: str) -> str | None:
    lowered = text.lower()
    if "total number of images exceeds" in lowered:
        return IMAGES_REPLY
    if ("maximum context length" in lowered or "context_length_exceeded" in lowered
            or "context length" in lowered and "exceed" in lowered):
        return CONTEXT_REPLY
    return None


DEFAULT_ENDPOINT = "https://api.openai.com/v1"


class OpenAIAgent(Agent):
    """Chat completions against any OpenAI-compatible endpoint. ``http_transport``: "lean"
    (``http_transport.LeanTransport``, less client CPU per request), "httpx" (the SDK's own
    stack; needed behind an HTTP proxy) or "auto" (lean unless a proxy variable applies to the
    endpoint)."""

    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 settings: GenerationSettings | None = None, timeout_s: float = 120.0,
                 max_attempts: int = 6, backoff_s: float = 1.0, max_backoff_s: float = 60.0,
                 client=None, http_transport: str = "auto"):
        if not model:
            raise ValueError("--model: a model name is required for the openai agent")
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.settings = settings or GenerationSettings()
        self.timeout_s = timeout_s
        self.max_attempts = max(1, int(max_attempts))
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._rng = random.Random()
        if http_transport not in HTTP_TRANSPORTS:
            raise ValueError(f"--http-transport: expected one of {', '.join(HTTP_TRANSPORTS)}; "
                             f"got {http_transport!r}")
        self.http_transport = http_transport if client is None else "custom"
        if client is None:
            import openai

            key = os.environ.get(api_key_env)
            if not key:
                if base_url and urlsplit(base_url).hostname in ("127.0.0.1", "localhost", "::1"):
                    key = "EMPTY"  # local servers (vLLM, SGLang) accept any key
                else:
                    raise ValueError(f"--api-key-env: environment variable {api_key_env} is not "
                                     "set (it must hold the API key for the endpoint)")
            if http_transport == "auto":
                from .http_transport import proxy_applies

                endpoint = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_ENDPOINT
                self.http_transport = "httpx" if proxy_applies(endpoint) else "lean"
            self.clients = [openai.AsyncOpenAI(api_key=key, base_url=base_url, timeout=timeout_s,
                                               max_retries=0, http_client=self._http_client())
                            for _ in range(CLIENT_SHARDS[self.http_transport])]
        else:
            self.clients = [client]
        self.client = self.clients[0]

    def _http_client(self):
        """The httpx client under one SDK client: None (the SDK's own) for the httpx transport;
        for the lean one, an httpx client with the SDK's defaults around ``LeanTransport``."""
        if self.http_transport != "lean":
            return None
        from .http_transport import LeanTransport, httpx

        return httpx.AsyncClient(transport=LeanTransport(), timeout=self.timeout_s,
                                 follow_redirects=True)

    def describe(self) -> dict:
        return {"agent": self.name, "model": self.model, "endpoint": redact_url(self.base_url)
                or DEFAULT_ENDPOINT, "api_key_env": self.api_key_env,
                "generation": {k: v for k, v in vars(self.settings).items()},
                "timeout_s": self.timeout_s, "max_attempts": self.max_attempts,
                "http_transport": self.http_transport, "client_shards": len(self.clients)}

    async def aclose(self) -> None:
        for client in self.clients:
            close = getattr(client, "close", None)
            if close is not None:
                result = close()
                if asyncio.iscoroutine(result):
                    await result

    def _retry_delay(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        delay *= 0.5 + self._rng.random()  # full jitter around the exponential schedule
        if retry_after is not None:
            delay = max(delay, min(retry_after, MAX_RETRY_AFTER_S))
        return delay

    async def act(self, turn: Turn) -> Reply:
        import openai

        start = time.perf_counter()
        last_error = None
        kwargs = self.settings.request_kwargs()
        for attempt in range(1, self.max_attempts + 1):
            retry_after = None
            try:
                client = self.clients[hash(turn.episode.key) % len(self.clients)]
                response = await asyncio.wait_for(
                    self._create(client, turn.messages, kwargs,
                                 turn.episode.data.setdefault("json_cache", {})),
                    timeout=self.timeout_s + 5.0)
            except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
                raise AgentFatalError(f"the endpoint rejected the request ({_error_text(e)[:300]}); "
                                      f"check the key in ${self.api_key_env} and --base-url") from None
            except openai.BadRequestError as e:
                text = _error_text(e)
                placeholder = _is_context_error(text)
                if placeholder:
                    return Reply(placeholder, flag="error", fatal="context_length",
                                 attempts=attempt, latency_s=time.perf_counter() - start,
                                 error=text[:500])
                return Reply(EXHAUSTED_REPLY.format(n=attempt), flag="error", attempts=attempt,
                             latency_s=time.perf_counter() - start, error=text[:500])
            except (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError,
                    openai.APIResponseValidationError, asyncio.TimeoutError, json.JSONDecodeError) as e:
                last_error = _error_text(e)
                retry_after = _retry_after(e)
            except openai.APIStatusError as e:
                last_error = _error_text(e)
                if e.status_code < 500 and e.status_code not in (408, 409, 429):
                    placeholder = _is_context_error(last_error)
                    return Reply(placeholder or EXHAUSTED_REPLY.format(n=attempt), flag="error",
                                 fatal="context_length" if placeholder else None,
                                 attempts=attempt, latency_s=time.perf_counter() - start,
                                 error=last_error[:500])
                retry_after = _retry_after(e)
            else:
                return self._reply_from(response, attempt, time.perf_counter() - start)
            if attempt < self.max_attempts:
                await asyncio.sleep(self._retry_delay(attempt, retry_after))
        return Reply(EXHAUSTED_REPLY.format(n=self.max_attempts), flag="error",
                     attempts=self.max_attempts, latency_s=time.perf_counter() - start,
                     error=(last_error or "")[:500])

    async def _create(self, client, messages: list, kwargs: dict, cache: dict | None = None):
        """POST /chat/completions with the messages as they are. The loop builds plain JSON
        dicts already; the SDK's typed ``create`` would walk the whole (growing) history again
        on every request, which was most of the client's CPU time at high concurrency. With a
        per-episode ``cache``, each message is JSON-encoded once for the whole episode (the
        history is resent every turn) and the body goes out as bytes."""
        from .http_transport import httpx   # the SDK's HTTP library (httpx2 in openai 3)

        extra = dict(kwargs)
        fields = dict(extra.pop("extra_body", None) or {})
        fields.update(extra)
        if not hasattr(client, "post"):  # a stand-in client without the raw transport
            return await client.chat.completions.create(model=self.model, messages=messages,
                                                        **fields)
        if cache is not None and _post_takes_content(client):
            encoded = cache.setdefault("messages", [])
            del encoded[len(messages):]
            for i, message in enumerate(messages):
                if i >= len(encoded) or encoded[i][0] is not message:
                    encoded[i:i + 1] = [(message, json.dumps(message, ensure_ascii=False)
                                         .encode("utf-8"))]
            head = json.dumps({"model": self.model, **fields}, ensure_ascii=False).encode("utf-8")
            # One copy of the (growing) history per request: bytes joined once.
            body = b"".join((head[:-1], b", " if len(head) > 2 else b"", b'"messages": [',
                             b", ".join([e for _, e in encoded]), b"]}"))
            response = await client.post("/chat/completions", content=body,
                                         cast_to=httpx.Response,
                                         options={"headers": {"Content-Type": "application/json"}})
        else:
            body = {"model": self.model, "messages": messages, **fields}
            # The raw response, parsed as plain JSON: building the SDK's typed response object
            # cost more CPU than everything else in the loop.
            response = await client.post("/chat/completions", body=body, cast_to=httpx.Response,
                                         options={})
        data = json.loads(response.content)
        if not isinstance(data, dict):
            raise json.JSONDecodeError("the response is not a JSON object", "", 0)
        return data

    def _reply_from(self, response, attempt: int, latency: float) -> Reply:
        usage = None
        u = _field(response, "usage")
        if u is not None:
            usage = {"prompt_tokens": _field(u, "prompt_tokens"),
                     "completion_tokens": _field(u, "completion_tokens")}
        choices = _field(response, "choices") or []
        # Null content and no choices are treated as exhaustion, as the reference does (5.3).
        if not choices:
            return Reply(EXHAUSTED_REPLY.format(n=self.max_attempts), flag="error", usage=usage,
                         attempts=attempt, latency_s=latency, error="response without choices")
        message = _field(choices[0], "message") or {}
        content = _field(message, "content")
        refusal = _field(message, "refusal")
        if content is None:
            flag = "refused" if refusal else "error"
            return Reply(EXHAUSTED_REPLY.format(n=self.max_attempts), flag=flag, usage=usage,
                         attempts=attempt, latency_s=latency,
                         error=f"refusal: {refusal}"[:500] if refusal else "content is null")
        if not isinstance(content, str):
            content = str(content)
        if content == "":
            return Reply(EMPTY_REPLY, flag="empty", usage=usage, attempts=attempt,
                         latency_s=latency)
        flag = None
        if _field(choices[0], "finish_reason") == "length" or len(content) > MAX_REPLY_CHARS:
            flag = "too_long"
        return Reply(content, flag=flag, usage=usage, attempts=attempt, latency_s=latency)


_CONTENT_SUPPORT: dict = {}


def _post_takes_content(client) -> bool:
    """Whether this SDK's ``post`` accepts raw ``content`` bytes (newer openai releases)."""
    kind = type(client)
    if kind not in _CONTENT_SUPPORT:
        import inspect

        try:
            _CONTENT_SUPPORT[kind] = "content" in inspect.signature(client.post).parameters
        except (TypeError, ValueError):
            _CONTENT_SUPPORT[kind] = False
    return _CONTENT_SUPPORT[kind]


def _field(obj, name: str):
    """A field of a JSON dict or of an SDK object (tests may pass either)."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _error_text(error: BaseException) -> str:
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            text = f"{text} ({inner['message']})" if inner["message"] not in text else text
    return f"{type(error).__name__}: {text}"


def _retry_after(error: BaseException) -> float | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def make_agent(kind: str, **options) -> Agent:
    agent = _build_agent(kind, options)
    # What rebuilds this agent in another runner process (--processes).
    agent.spec = (kind, dict(options))
    return agent


def _build_agent(kind: str, options: dict) -> Agent:
    if kind == "solver":
        return SolverAgent()
    if kind == "random":
        return RandomAgent(seed=options.get("seed", 0))
    if kind == "replay":
        if not options.get("replay"):
            raise ValueError("--replay: the replay agent needs a file of recorded actions")
        return ReplayAgent(options["replay"])
    if kind == "openai":
        return OpenAIAgent(model=options.get("model"), base_url=options.get("base_url"),
                           api_key_env=options.get("api_key_env") or "OPENAI_API_KEY",
                           settings=options.get("settings"),
                           timeout_s=options.get("timeout_s", 120.0),
                           max_attempts=options.get("max_attempts", 6),
                           backoff_s=options.get("backoff_s", 1.0),
                           max_backoff_s=options.get("max_backoff_s", 60.0),
                           http_transport=options.get("http_transport") or "auto")
    raise ValueError(f"--agent: expected one of openai, solver, random, replay; got {kind!r}")
