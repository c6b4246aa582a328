"""Agents: what answers each turn of the evaluation loop.

One small interface: ``await agent.act(turn) -> Reply``. A ``Turn`` carries the chat messages to
send (OpenAI format, full history or the configured window), the current observation and prompt
text, and the episode it belongs to. Four agents:

- ``OpenAIAgent``: any OpenAI-compatible chat-completions endpoint (OpenAI, OpenRouter, vLLM,
  SGLang) through the official ``openai`` client, with our own timeout, retries (exponential
  backoff with jitter on 429, 5xx and connection errors, honouring Retry-After) and the reply
  bookkeeping of spec/agent_loop.md 5.3: empty, refused and over-long replies are recorded as
  such and still count as a step; a context-length error ends the episode. ``preflight()``
  checks the endpoint before a run (reachable, key accepted, model served, two images and
  ``max_tokens`` accepted) and raises ``PreflightError`` naming the cause and the fix.
- ``SolverAgent``: the environment's own solver, replayed through the same loop (offline, no key).
- ``RandomAgent``: random well-formed actions of the family's grammar.
- ``ReplayAgent``: recorded action lists, by episode key or index.

The API key is read from the environment variable the user names and is never logged or
written anywhere; the endpoint is recorded without credentials.

The agent boundary (what a server sends is untrusted): the response must be a JSON object in the
chat-completions shape, checked once in ``_reply_from``; anything else (``"choices": 5``, a
null message, a body that is not UTF-8 or not JSON, one over the size limit) becomes a recorded
error ``Reply`` with its reason, never an exception out of ``act``. Content given as a list of
parts (valid in the API) is joined from its text parts; usage counts that are not counts are
dropped. Reply texts and error texts are made encodable where they are created (lone surrogates
and NULs escaped, ``replies.encodable``), replies over ``MAX_REPLY_CHARS`` keep their end and
are marked ``truncated``, and error texts pass through ``redact`` (the key, ``Bearer``/``sk-``
tokens, URL credentials) before they are stored or printed. Every failed request is classified
(``Reply.transient``: True for 429, 5xx, connection errors, timeouts and bodies that do not
decode, which are retried; False for 400/401/403/404/422, context length, redirect loops and
malformed chat completions, which are not).
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ..core.grammar import STOP_ACTION
from .replies import MAX_REPLY_CHARS, bound_reply, encodable   # MAX_REPLY_CHARS: re-exported

# Placeholders of the reference (spec 5.3): stored as the assistant turn and parsed like a reply.
EXHAUSTED_REPLY = "Error in receiving a response after {n} trials"
EMPTY_REPLY = "Empty response"
CONTEXT_REPLY = "Error: Maximum context length is exceeded."
IMAGES_REPLY = "Error: Total number of images exceeds the maximum context length"
MAX_ERROR_CHARS = 500       # an error text as stored with the step
MAX_RETRY_AFTER_S = 300.0   # the longest Retry-After we honour
HTTP_TRANSPORTS = ("auto", "lean", "httpx")
# Connection pools (clients) per agent, by transport. httpcore checks every pooled connection
# on each request, so one pool of 64 connections costs ~64 checks per request: episodes are
# spread over 8 clients by key. The lean transport takes an idle connection in O(1): one client.
CLIENT_SHARDS = {"httpx": 8, "lean": 1}


class AgentFatalError(ValueError):
    """The endpoint refuses to serve at all (e.g. a rejected API key): stop the run."""


class PreflightError(ValueError):
    """The endpoint cannot serve this run; the message is one line naming the cause and the
    fix (``OpenAIAgent.preflight``)."""


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
    """One answer of an agent. ``text`` and ``error`` are always encodable (lone surrogates and
    NULs escaped on creation), ``error`` at most ``MAX_ERROR_CHARS`` long; the OpenAI agent has
    redacted credentials from it and cut an over-long ``text`` (``truncated``)."""

    text: str
    flag: str | None = None          # None, "empty", "refused", "too_long", "error"
    fatal: str | None = None         # "context_length": the episode ends after this step
    usage: dict | None = None
    attempts: int = 1
    latency_s: float = 0.0
    error: str | None = None         # last error message (no credentials)
    # Of a failed request (flag "error"): True when a retry may cure it (429, 5xx, connection,
    # timeout, an undecodable body), False when not (4xx, context length, a malformed answer);
    # None for an answer.
    transient: bool | None = None
    error_kind: str | None = None    # short cause of a failure: "http_404", "timeout", ...
    truncated: bool = False          # text was cut to MAX_REPLY_CHARS (its end kept)

    def __post_init__(self):
        if not isinstance(self.text, str):
            self.text = "" if self.text is None else str(self.text)
        self.text = encodable(self.text)
        if self.error is not None:
            self.error = encodable(str(self.error))[:MAX_ERROR_CHARS]


class Agent:
    """Base class; subclasses implement ``act``."""

    name = "agent"
    spec = None   # (kind, options) for make_agent, set by make_agent

    async def act(self, turn: Turn) -> Reply:
        raise TypeError(f"{type(self).__name__} does not implement act()")

    async def preflight(self, images: int = 2) -> None:
        """Check that the agent can serve a run (raise ``PreflightError``); offline agents can."""
        return None

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


# Credential shapes that a server may quote back in an error text (its own echo of the request
# headers, a proxy's debug page). Applied after the exact key is replaced.
_SECRET_PATTERNS = (
    (re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=:-]{4,}"), r"\1\2[redacted]"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"), "sk-[redacted]"),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@"), r"\1[redacted]@"),
    (re.compile(r"""(?i)\b(api[_-]?key|x-api-key|access[_-]?token|password)(["']?\s*[:=]\s*["']?)"""
                r"""([^"'\s,;&}]{4,})"""), r"\1\2[redacted]"),
)
_MIN_SECRET_CHARS = 6   # shorter "keys" (EMPTY, x) are placeholders, not secrets


def redact(text: str, secrets=()) -> str:
    """``text`` with every credential replaced by ``[redacted]``: each of ``secrets`` (the API
    key) verbatim, then anything shaped like one (``Bearer ...``/``Basic ...`` tokens,
    ``sk-...`` keys, ``api_key=...``-style values, the ``user:password@`` of URLs). Applied to
    every error text the agent creates, before it is stored or printed."""
    text = str(text)
    for secret in secrets:
        if secret and len(secret) >= _MIN_SECRET_CHARS and secret != "EMPTY" and secret in text:
            text = text.replace(secret, "[redacted]")
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


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
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
# vLLM: "At most 1 image(s) may be provided in one prompt." (older: "... in one request.")
_IMAGE_LIMIT = re.compile(r"(?i)at most (\d+) image")
_MAX_TOKENS_WORDS = ("max_tokens", "max_completion_tokens", "maximum context length",
                     "context length", "context window", "completion tokens")
PREFLIGHT_TEXT = "This is a connection check. How many images do you see? Answer with one word."
PREFLIGHT_ATTEMPTS = 3
PREFLIGHT_MAX_DELAY_S = 2.0


@dataclass
class _Failure:
    """A request that did not give a chat completion: what went wrong, as stored."""

    kind: str                 # Reply.error_kind
    transient: bool           # a retry may cure it
    text: str                 # redacted, one line
    status: int | None = None
    retry_after: float | None = None


class _BadBody(ValueError):
    """A 200 response whose body is not JSON (or not UTF-8 text)."""


def _endpoint_text(url: str) -> str:
    """An endpoint as a user may be shown it: credentials (with or without a scheme) removed."""
    head, slash, rest = url.partition("/") if "://" not in url else ("", "", url)
    if "@" in head:
        head = "[redacted]@" + head.rsplit("@", 1)[1]
    return redact(head + slash + rest)


def _check_endpoint(url: str, what: str) -> None:
    """A clear error for an endpoint that the SDK would misread (no scheme: "localhost:8000/v1"
    parses as scheme "localhost"), instead of a missing-key or connection error later."""
    shown = _endpoint_text(url)
    if "://" not in url:
        raise ValueError(f"{what}: {shown!r} has no scheme; write it as http://{shown} (or "
                         "https:// for TLS)")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"{what}: {shown!r} has the scheme {parts.scheme!r}; the endpoint must "
                         "be an http:// or https:// URL")
    try:
        parts.port
    except ValueError:
        raise ValueError(f"{what}: {shown!r} has an invalid port") from None
    if not parts.hostname:
        raise ValueError(f"{what}: {shown!r} has no host name")


class OpenAIAgent(Agent):
    """Chat completions against any OpenAI-compatible endpoint. ``http_transport``: "lean"
    (``http_transport.LeanTransport``, less client CPU per request), "httpx" (the SDK's own
    stack; needed behind an HTTP proxy) or "auto" (lean unless a proxy variable applies to the
    endpoint). ``max_response_bytes`` bounds each response body, as sent and as decoded, on
    either stack (``http_transport.limit_response_hook``)."""

    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 settings: GenerationSettings | None = None, timeout_s: float = 120.0,
                 max_attempts: int = 6, backoff_s: float = 1.0, max_backoff_s: float = 60.0,
                 client=None, http_transport: str = "auto", max_response_bytes: int | None = None):
        from .http_transport import DEFAULT_MAX_RESPONSE_BYTES

        if not model:
            raise ValueError("--model: a model name is required for the openai agent")
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.settings = settings or GenerationSettings()
        self.timeout_s = timeout_s
        # The whole request, however the server drips its bytes (each read has timeout_s).
        self._deadline_s = timeout_s + min(5.0, timeout_s)
        self.max_attempts = max(1, int(max_attempts))
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_response_bytes = int(max_response_bytes or DEFAULT_MAX_RESPONSE_BYTES)
        if self.max_response_bytes < 1024:
            raise ValueError(f"max_response_bytes: must be at least 1024, got "
                             f"{self.max_response_bytes}")
        self._rng = random.Random()
        if http_transport not in HTTP_TRANSPORTS:
            raise ValueError(f"--http-transport: expected one of {', '.join(HTTP_TRANSPORTS)}; "
                             f"got {http_transport!r}")
        self.http_transport = http_transport if client is None else "custom"
        self._key_from_env = True
        if client is None:
            if base_url is not None:
                _check_endpoint(base_url, "--base-url")
            elif os.environ.get("OPENAI_BASE_URL"):
                _check_endpoint(os.environ["OPENAI_BASE_URL"], "OPENAI_BASE_URL")
            endpoint = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_ENDPOINT
            key = os.environ.get(api_key_env)
            if not key:
                if urlsplit(endpoint).hostname in LOCAL_HOSTS:
                    key = "EMPTY"  # local servers (vLLM, SGLang) accept any key
                    self._key_from_env = False
                else:
                    raise ValueError(
                        f"--api-key-env: environment variable {api_key_env} is not set (it must "
                        f"hold the API key for {_host_port(endpoint)}; for a server that needs "
                        f"no key, set {api_key_env}=EMPTY)")
            self._key = key
            if http_transport == "auto":
                from .http_transport import proxy_applies

                self.http_transport = "httpx" if proxy_applies(endpoint) else "lean"
            self.clients = [self._new_client()
                            for _ in range(CLIENT_SHARDS[self.http_transport])]
        else:
            self._key = getattr(client, "api_key", None)
            self.clients = [client]
        self._secrets = (self._key,) if isinstance(self._key, str) else ()
        self.client = self.clients[0]

    def _new_client(self):
        import openai

        return openai.AsyncOpenAI(api_key=self._key, base_url=self.base_url,
                                  timeout=self.timeout_s, max_retries=0,
                                  http_client=self._http_client())

    def _http_client(self):
        """The httpx client under one SDK client, with the SDK's defaults: over
        ``LeanTransport`` for the lean transport, over httpx's own (which honours proxy
        variables) otherwise; either way with bounded responses and redirects."""
        import openai

        from .http_transport import (ACCEPT_ENCODING, MAX_REDIRECTS, LeanTransport,
                                     limit_response_hook)

        lean = self.http_transport == "lean"
        transport = LeanTransport(max_response_bytes=self.max_response_bytes) if lean else None
        hook = limit_response_hook(self.max_response_bytes, raw_bounded=lean)
        return openai.DefaultAsyncHttpxClient(
            transport=transport, timeout=self.timeout_s, follow_redirects=True,
            max_redirects=MAX_REDIRECTS, headers={"Accept-Encoding": ACCEPT_ENCODING},
            event_hooks={"response": [hook]})

    def describe(self) -> dict:
        return {"agent": self.name, "model": self.model, "endpoint": redact_url(self.base_url)
                or DEFAULT_ENDPOINT, "api_key_env": self.api_key_env,
                "generation": {k: v for k, v in vars(self.settings).items()},
                "timeout_s": self.timeout_s, "max_attempts": self.max_attempts,
                "http_transport": self.http_transport, "client_shards": len(self.clients)}

    async def aclose(self) -> None:
        for client in self.clients:
            await _close(client)

    def _retry_delay(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        delay *= 0.5 + self._rng.random()  # full jitter around the exponential schedule
        if retry_after is not None:
            delay = max(delay, min(retry_after, MAX_RETRY_AFTER_S))
        return delay

    # -- one turn ------------------------------------------------------------------------
    async def act(self, turn: Turn) -> Reply:
        start = time.perf_counter()
        failure = None
        kwargs = self.settings.request_kwargs()
        client = self.clients[hash(turn.episode.key) % len(self.clients)]
        cache = turn.episode.data.setdefault("json_cache", {})
        for attempt in range(1, self.max_attempts + 1):
            try:
                response = await asyncio.wait_for(
                    self._create(client, turn.messages, kwargs, cache), timeout=self._deadline_s)
            except Exception as e:   # everything a server can cause; cancellation passes
                failure = self._failure(e)
                if failure.status in (401, 403):
                    raise AgentFatalError(
                        f"the endpoint rejected the request ({failure.text[:300]}); check the "
                        f"key in ${self.api_key_env} and --base-url") from None
            else:
                result = self._reply_from(response, attempt, time.perf_counter() - start)
                if isinstance(result, Reply):
                    return result
                failure = result
            if not failure.transient:
                placeholder = _is_context_error(failure.text)
                return Reply(placeholder or EXHAUSTED_REPLY.format(n=attempt), flag="error",
                             fatal="context_length" if placeholder else None,
                             attempts=attempt, latency_s=time.perf_counter() - start,
                             error=failure.text, transient=False,
                             error_kind="context_length" if placeholder else failure.kind)
            if attempt < self.max_attempts:
                await asyncio.sleep(self._retry_delay(attempt, failure.retry_after))
        return Reply(EXHAUSTED_REPLY.format(n=self.max_attempts), flag="error",
                     attempts=self.max_attempts, latency_s=time.perf_counter() - start,
                     error=failure.text, transient=True, error_kind=failure.kind)

    async def _create(self, client, messages: list, kwargs: dict, cache: dict | None = None):
        """POST /chat/completions with the messages as they are; the body's JSON value. The
        loop builds plain JSON dicts already; the SDK's typed ``create`` would walk the whole
        (growing) history again on every request, which was most of the client's CPU time at
        high concurrency. With a per-episode ``cache``, each message is JSON-encoded once for the
        whole episode (the history is resent every turn) and the body goes out as bytes."""
        from .http_transport import httpx   # the SDK's HTTP library (httpx2 in openai 3)

        extra = dict(kwargs)
        fields = dict(extra.pop("extra_body", None) or {})
        fields.update(extra)
        if not hasattr(client, "post"):  # a stand-in client without the raw transport
            return await client.chat.completions.create(model=self.model, messages=messages,
                                                        **fields)
        if _post_takes_content(client):
            encoded = cache.setdefault("messages", []) if cache is not None else []
            del encoded[len(messages):]
            for i, message in enumerate(messages):
                if i >= len(encoded) or encoded[i][0] is not message:
                    encoded[i:i + 1] = [(message, _json_bytes(message))]
            head = _json_bytes({"model": self.model, **fields})
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
        return _json_body(response.content)

    def _failure(self, error: BaseException) -> _Failure:
        kind, transient = _classify(error)
        status = getattr(error, "status_code", None)
        return _Failure(kind, transient, self._error_text(error),
                        status if isinstance(status, int) else None,
                        _retry_after(error) if transient else None)

    def _error_text(self, error: BaseException) -> str:
        return _one_line(redact(_error_text(error, self._deadline_s)[:4 * MAX_ERROR_CHARS],
                                self._secrets))

    def _reply_from(self, response, attempt: int, latency: float):
        """The Reply for a chat completion, checked once here: a ``Reply`` for an answer, or
        a ``_Failure`` for a body that holds an error object instead of choices (retried or
        not as its code says). Anything not in the chat-completions shape is a recorded error
        reply naming what was wrong (error_kind "bad_shape", not retried)."""
        data = response
        if not isinstance(data, dict) and callable(getattr(data, "model_dump", None)):
            data = data.model_dump()   # an SDK object, from a stand-in client
        placeholder = EXHAUSTED_REPLY.format(n=self.max_attempts)

        def bad(reason: str, usage=None, kind: str = "bad_shape", transient: bool = False):
            return Reply(placeholder, flag="error", usage=usage, attempts=attempt,
                         latency_s=latency, error=reason, transient=transient, error_kind=kind)

        if not isinstance(data, dict):
            return bad(f"the response is {_kind(data)}, not a chat completion object")
        if data.get("error") is not None and not data.get("choices"):
            return self._error_object(data["error"])
        usage = _usage(data.get("usage"))
        choices = data.get("choices")
        # Null content and no choices are treated as exhaustion, as the reference does (5.3).
        if choices is None or choices == []:
            return bad("response without choices", usage, "no_choices", True)
        if not isinstance(choices, list):
            return bad(f"choices is {_kind(choices)}, not a list", usage)
        choice = choices[0]
        if not isinstance(choice, dict):
            return bad(f"choices[0] is {_kind(choice)}, not an object", usage)
        message = choice.get("message")
        if not isinstance(message, dict):
            return bad(f"choices[0].message is {_kind(message)}, not an object", usage)
        content = message.get("content")
        if isinstance(content, list):   # content parts (valid in the API): their text, joined
            texts = []
            for i, part in enumerate(content):
                if isinstance(part, str):
                    texts.append(part)
                elif isinstance(part, dict):
                    if isinstance(part.get("text"), str) and part.get("type", "text") in (
                            "text", "output_text"):
                        texts.append(part["text"])
                else:
                    return bad(f"choices[0].message.content[{i}] is {_kind(part)}, not a "
                               "content part", usage)
            content = "".join(texts)
        elif content is not None and not isinstance(content, str):
            return bad(f"choices[0].message.content is {_kind(content)}, not a string", usage)
        if content is None:
            refusal = message.get("refusal")
            if refusal:
                refusal = self._scrub(refusal if isinstance(refusal, str) else json.dumps(refusal))
                return Reply(placeholder, flag="refused", usage=usage, attempts=attempt,
                             latency_s=latency, error=f"refusal: {refusal[:MAX_ERROR_CHARS]}")
            return bad("content is null", usage, "null_content", True)
        if content == "":
            return Reply(EMPTY_REPLY, flag="empty", usage=usage, attempts=attempt,
                         latency_s=latency)
        text, truncated = bound_reply(self._scrub(content))
        flag = "too_long" if truncated or choice.get("finish_reason") == "length" else None
        return Reply(text, flag=flag, usage=usage, attempts=attempt, latency_s=latency,
                     truncated=truncated)

    def _error_object(self, error) -> _Failure:
        """A 200 body holding ``{"error": ...}`` (some gateways answer so): transient unless
        its code is a 4xx other than 408/409/429."""
        if isinstance(error, dict):
            message, code = error.get("message"), error.get("code")
        else:
            message, code = error, None
        text = message if isinstance(message, str) else json.dumps(message)[:4 * MAX_ERROR_CHARS]
        if isinstance(code, str) and code.isdigit():
            code = int(code)
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        transient = code is None or code >= 500 or code in (408, 409, 429)
        if _is_context_error(text):
            transient = False
        return _Failure("error_body" if code is None else f"error_body_{code}", transient,
                        _one_line(redact(f"error in the response body: {text}"
                                         [:4 * MAX_ERROR_CHARS], self._secrets)), code)

    def _scrub(self, text: str) -> str:
        """A model's text with the key removed (a server echoing the request)."""
        for secret in self._secrets:
            if len(secret) >= _MIN_SECRET_CHARS and secret != "EMPTY" and secret in text:
                text = text.replace(secret, "[redacted]")
        return text

    # -- pre-flight ----------------------------------------------------------------------
    async def preflight(self, images: int = 2) -> None:
        """Check the endpoint before a run, in a few seconds: the model list (GET /models) and
        one tiny chat with ``images`` small images (2 by default, to catch a server limited to
        one image per request; 0 for text mode) and this run's generation settings (so a
        ``max_tokens`` beyond the model's context shows). Raises ``PreflightError`` with one line
        naming the cause and the fix: nothing listening at host:port, no answer, a rejected
        key, a ``--base-url`` without ``/v1``, a model the server does not serve (listing some it
        does), the one-image limit of older vLLM, ``--max-tokens`` over the context, a server
        error that persists, an answer that is not a chat completion. A rate limit (429) passes:
        the server is there. Uses its own client, so it may run in any event loop."""
        own = self.http_transport != "custom"
        client = self._new_client() if own else self.client
        try:
            served = await self._preflight_models(client)
            await self._preflight_chat(client, max(0, int(images)), served)
        finally:
            if own:
                await _close(client)

    def _where(self) -> str:
        return _host_port(self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_ENDPOINT)

    def _url(self) -> str:
        return redact_url(self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_ENDPOINT)

    async def _preflight_models(self, client) -> list | None:
        """The ids the server lists, or None where it has no usable model list."""
        from .http_transport import httpx

        if not hasattr(client, "get"):
            return None
        try:
            response = await asyncio.wait_for(client.get("/models", cast_to=httpx.Response),
                                              timeout=self._deadline_s)
            data = _json_body(response.content)
        except Exception as e:
            failure = self._failure(e)
            self._refuse_unreachable(failure)
            if failure.status in (401, 403):
                raise PreflightError(self._key_problem(failure)) from None
            return None
        entries = data.get("data") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            return None
        return [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]

    async def _preflight_chat(self, client, images: int, served: list | None) -> None:
        from .imaging import encode_jpeg_b64

        content = []
        for n in range(images):   # distinct, small, but above the 28 px minimum of Qwen-VL
            frame = np.full((32, 32, 3), (40 + 170 * (n % 2), 90, 200 - 150 * (n % 2)), np.uint8)
            content.append({"type": "image_url", "image_url": {
                "url": "data:image/jpeg;base64," + encode_jpeg_b64(frame, None)}})
        content.append({"type": "text", "text": PREFLIGHT_TEXT})
        messages = [{"role": "user", "content": content}]
        kwargs = self.settings.request_kwargs()
        for attempt in range(1, PREFLIGHT_ATTEMPTS + 1):
            try:
                response = await asyncio.wait_for(self._create(client, messages, kwargs),
                                                  timeout=self._deadline_s)
            except Exception as e:
                failure = self._failure(e)
            else:
                result = self._reply_from(response, attempt, 0.0)
                if isinstance(result, Reply):
                    if result.error_kind == "bad_shape":
                        raise PreflightError(
                            f"the answer of {self._where()} to a test chat is not a chat "
                            f"completion ({result.error}): is --base-url an OpenAI-compatible "
                            "endpoint?")
                    return
                failure = result
            self._refuse_unreachable(failure)
            if failure.status == 429:
                return
            if failure.transient and attempt < PREFLIGHT_ATTEMPTS:
                await asyncio.sleep(min(PREFLIGHT_MAX_DELAY_S,
                                        self._retry_delay(attempt, failure.retry_after)))
                continue
            raise PreflightError(self._diagnose(failure, served, images))

    def _refuse_unreachable(self, failure: _Failure) -> None:
        where = self._where()
        if failure.kind == "refused":
            raise PreflightError(f"nothing is listening at {where} (connection refused): start "
                                 "the server, or fix the host and port of --base-url")
        if failure.kind == "unresolved":
            raise PreflightError(f"the host of {where} cannot be resolved ({failure.text}): "
                                 "check --base-url")
        if failure.kind in ("connection", "protocol"):
            raise PreflightError(f"cannot talk to {where} ({failure.text}): is the server "
                                 "running there, and are the scheme (http/https) and port of "
                                 "--base-url right?")
        if failure.kind == "timeout":
            raise PreflightError(f"no answer from {where} within {self.timeout_s:g} s: is it the "
                                 "right port, and is the server up? (--timeout sets the wait)")

    def _key_problem(self, failure: _Failure) -> str:
        env = self.api_key_env
        if not self._key_from_env:
            return (f"{self._where()} wants an API key ({failure.text[:200]}): put it in the "
                    f"environment variable {env} (or name another with --api-key-env)")
        return (f"{self._where()} rejected the API key in ${env} ({failure.text[:200]}): check "
                f"the key, and that --base-url is the endpoint it belongs to")

    def _diagnose(self, failure: _Failure, served: list | None, images: int) -> str:
        """One line: why the test chat failed and what to change."""
        where, text, status = self._where(), failure.text, failure.status
        excerpt = text[:200]
        lowered = text.lower()
        if status in (401, 403):
            return self._key_problem(failure)
        limit = _IMAGE_LIMIT.search(text)
        if limit and images > int(limit.group(1)):
            return (f"{where} accepts at most {limit.group(1)} image(s) per request, and every "
                    "turn of the history carries one: start vLLM with --limit-mm-per-prompt "
                    "'{\"image\": 30}' (at least the step budget; vLLM before 0.9: "
                    "--limit-mm-per-prompt image=30), or run with --history 0")
        unknown = served is not None and self.model not in served
        if unknown and (status in (400, 404, 422) or "model" in lowered):
            shown = ", ".join(served[:5]) + (f" and {len(served) - 5} more" if len(served) > 5
                                             else "") if served else "no models"
            return f"--model {self.model!r} is not served by {where}; it serves {shown}"
        if "model" in lowered and ("does not exist" in lowered or "not found" in lowered
                                   or "unknown model" in lowered):
            return f"--model {self.model!r} is not served by {where} ({excerpt})"
        if status == 404:
            url = self._url()
            if not urlsplit(url).path.rstrip("/").endswith("/v1"):
                return (f"--base-url {url} probably lacks /v1 (POST {url.rstrip('/')}"
                        f"/chat/completions answered 404): try {url.rstrip('/')}/v1")
            return (f"POST {url.rstrip('/')}/chat/completions answered 404 ({excerpt}): check "
                    "--base-url")
        if (_is_context_error(text) or any(w in lowered for w in _MAX_TOKENS_WORDS)) and \
                self.settings.max_tokens is not None:
            return (f"--max-tokens {self.settings.max_tokens} exceeds the model's context: "
                    f"lower it (the server said: {excerpt})")
        if failure.kind == "redirects":
            return f"{self._url()} redirects in a loop ({excerpt}): check --base-url"
        if failure.kind in ("undecodable", "too_large", "bad_shape"):
            return (f"the answer of {where} to a test chat is not a chat completion ({excerpt}):"
                    " is --base-url an OpenAI-compatible endpoint?")
        if failure.transient:
            return (f"{where} failed a test chat {PREFLIGHT_ATTEMPTS} times ({excerpt}): is the "
                    "model loaded? Retry when the server is ready")
        return (f"{where} rejected a test chat ({excerpt}): check --model, --extra-body and the "
                "generation options")


async def _close(client) -> None:
    close = getattr(client, "close", None)
    if close is not None:
        result = close()
        if asyncio.iscoroutine(result):
            await result


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


def _json_bytes(value) -> bytes:
    """UTF-8 JSON of ``value``; where a string holds a lone surrogate (not encodable), the ASCII
    form, whose ``\\ud800`` escapes are valid JSON."""
    try:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value).encode("ascii")


def _json_body(content: bytes):
    """The JSON value of a response body; ``_BadBody`` naming why where there is none."""
    try:
        return json.loads(content)
    except UnicodeDecodeError as e:
        raise _BadBody(f"the response body is not UTF-8 text ({e.reason} at byte "
                       f"{e.start})") from None
    except ValueError as e:   # JSONDecodeError, or a number over the digit limit
        detail = f"{e.msg} at char {e.pos}" if isinstance(e, json.JSONDecodeError) else str(e)
        raise _BadBody(f"the response body is not JSON ({detail[:200]}; {len(content)} "
                       "bytes)") from None
    except RecursionError:
        raise _BadBody(f"the response body is JSON nested too deeply to read ({len(content)} "
                       "bytes)") from None


def _kind(value) -> str:
    """What a JSON value is, in words ("null", "a number", "an object with keys 0, 1")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"[:40]
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        keys = ", ".join(str(k)[:20] for k in list(value)[:4])
        return f"an object (keys: {keys})" if keys else "an empty object"
    return type(value).__name__


def _count(value) -> int | None:
    """A token count as sent, or None for anything that is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def _usage(usage) -> dict | None:
    if not isinstance(usage, dict):
        return None
    return {"prompt_tokens": _count(usage.get("prompt_tokens")),
            "completion_tokens": _count(usage.get("completion_tokens"))}


def _one_line(text: str) -> str:
    return " ".join(text.split())[:MAX_ERROR_CHARS]


def _host_port(url: str) -> str:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    port = port or {"https": 443, "http": 80}.get(parts.scheme.lower(), None)
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port else host


def _causes(error: BaseException):
    """The error and what caused it, outermost first (a few levels)."""
    seen = 0
    while error is not None and seen < 6:
        yield error
        error = error.__cause__ or error.__context__
        seen += 1


def _classify(error: BaseException) -> tuple[str, bool]:
    """(error kind, transient) of a failed request."""
    import openai
    import socket

    from .http_transport import ResponseTooLarge, httpx

    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        if status == 429:
            return "http_429", True
        return f"http_{status}", status >= 500 or status in (408, 409)
    if isinstance(error, _BadBody):
        return "undecodable", True
    for cause in _causes(error):
        if isinstance(cause, ResponseTooLarge):
            return "too_large", True
        if isinstance(cause, httpx.TooManyRedirects):
            return "redirects", False
        if isinstance(cause, httpx.DecodingError):
            return "undecodable", True
        if isinstance(cause, ConnectionRefusedError) or (
                isinstance(cause, httpx.ConnectError) and "refused" in str(cause).lower()):
            return "refused", True
        if isinstance(cause, socket.gaierror) or (
                isinstance(cause, httpx.ConnectError) and ("name or service" in str(cause).lower()
                                                           or "resolve" in str(cause).lower())):
            return "unresolved", True
    if isinstance(error, (asyncio.TimeoutError, openai.APITimeoutError, httpx.TimeoutException)):
        return "timeout", True
    for cause in _causes(error):
        if isinstance(cause, httpx.ProtocolError):
            return "protocol", True
    if isinstance(error, (openai.APIConnectionError, openai.APIResponseValidationError,
                          httpx.HTTPError, OSError)):
        return "connection", True
    return "unexpected", False


def _error_text(error: BaseException, deadline_s: float | None = None) -> str:
    """What went wrong, for the record: the error, the server's message, the underlying cause."""
    if isinstance(error, _BadBody):
        return str(error)
    if isinstance(error, asyncio.TimeoutError) and not str(error):
        return (f"TimeoutError: no complete answer within {deadline_s:g} s" if deadline_s
                else "TimeoutError: no complete answer in time")
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            message = inner["message"]
            text = f"{text} ({message})" if message not in text else text
    cause = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    if cause is not None and str(cause) not in text:
        text = f"{text} ({type(cause).__name__}: {cause})" if str(cause) else \
            f"{text} ({type(cause).__name__})"
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
                           http_transport=options.get("http_transport") or "auto",
                           max_response_bytes=options.get("max_response_bytes"))
    raise ValueError(f"--agent: expected one of openai, solver, random, replay; got {kind!r}")
