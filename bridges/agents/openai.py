"""The OpenAI agent: any OpenAI-compatible chat-completions endpoint (OpenAI, OpenRouter, vLLM,
SGLang) through the official ``openai`` client, with our own timeout, retries (exponential
backoff with jitter on 429, 5xx and connection errors, honouring Retry-After up to the request
timeout), the detection of an endpoint that stopped answering (timeouts in a row across all
requests end them at once: ``error_kind`` "endpoint_hung") and the reply bookkeeping of
spec/agent_loop.md 5.3: empty, refused and over-long replies are recorded as such and still
count as a step; a context-length error ends the episode. The API key is read from the
environment variable the user names and is never logged or written anywhere. The agent
boundary: the response must be a JSON object in the chat-completions shape, checked once in
``_reply_from``; anything else (``"choices": 5``, a null message, a body that is not UTF-8 or
not JSON, one over the size limit) becomes a recorded error ``Reply`` with its reason, never an
exception out of ``act``. Content given as a list of parts (valid in the API) is joined from
its text parts; usage counts that are not counts are dropped; replies over ``MAX_REPLY_CHARS``
keep their end and are marked ``truncated``. Failures are classified and redacted in
``errors``; ``preflight()`` (checks in ``preflight``) tests the endpoint before a run.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import time
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

import orjson

from ..conversation import MessageMemo
from ..replies import bound_reply
from .base import (EMPTY_REPLY, EXHAUSTED_REPLY, MAX_ERROR_CHARS, Agent, AgentFatalError, Reply,
                   Turn)
from .errors import (_MIN_SECRET_CHARS, DEFAULT_ENDPOINT, LOCAL_HOSTS, _check_endpoint, _classify,
                     _error_text, _Failure, _host_port, _is_context_error, _json_body, _one_line,
                     _retry_after, _UNANSWERED, redact, redact_url)
from .preflight import PreflightChecks

HTTP_TRANSPORTS = ("auto", "lean", "httpx")
# Connection pools (clients) per agent, by transport. httpcore checks every pooled connection
# on each request, so one pool of 64 connections costs ~64 checks per request: episodes are
# spread over 8 clients by key. The lean transport takes an idle connection in O(1): one client.
CLIENT_SHARDS = {"httpx": 8, "lean": 1}


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


class OpenAIAgent(PreflightChecks, Agent):
    """Chat completions against any OpenAI-compatible endpoint. ``http_transport``: "lean"
    (``http_transport.LeanTransport``, less client CPU per request), "httpx" (the SDK's own
    stack; needed behind an HTTP proxy) or "auto" (lean unless a proxy variable applies to the
    endpoint). ``max_response_bytes`` bounds each response body, as sent and as decoded, on
    either stack (``http_transport.limit_response_hook``).

    Retries: up to ``max_attempts`` per request, after an exponential backoff with jitter
    (``backoff_s`` doubling up to ``max_backoff_s``) or the server's Retry-After, which is
    honoured up to ``timeout_s`` (the request timeout; a cut wait is said in the step's error
    text). ``hung_after`` (default 3; 0: never) detects an endpoint that stopped answering:
    attempts that end in a timeout are counted in a row across all of this agent's requests,
    concurrent ones included (any answer resets the count; a failure without an answer, such as
    a refused connection, leaves it); once the count reaches ``hung_after``, the request in
    progress, and every other whose attempt times out while the count is there, returns at once
    a failed ``Reply`` (``error_kind`` "endpoint_hung", transient) instead of retrying."""

    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 settings: GenerationSettings | None = None, timeout_s: float = 120.0,
                 max_attempts: int = 6, backoff_s: float = 1.0, max_backoff_s: float = 60.0,
                 client=None, http_transport: str = "auto", max_response_bytes: int | None = None,
                 hung_after: int = 3):
        from ..http_transport import DEFAULT_MAX_RESPONSE_BYTES

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
        self.hung_after = max(0, int(hung_after))
        self._timeouts_in_row = 0   # attempts that timed out, across requests, since an answer
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
                from ..http_transport import proxy_applies

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

        http = self._http_client()
        client = openai.AsyncOpenAI(api_key=self._key, base_url=self.base_url,
                                    timeout=self.timeout_s, max_retries=0, http_client=http)
        parts = getattr(http, "_visgym_lean", None)
        if parts is not None and isinstance(client.api_key, str) and \
                callable(getattr(client, "_make_status_error_from_response", None)):
            client._visgym_direct = _DirectPost(client, http, *parts, self.timeout_s)
        return client

    def _http_client(self):
        """The httpx client under one SDK client, with the SDK's defaults: over
        ``LeanTransport`` for the lean transport, over httpx's own (which honours proxy
        variables) otherwise; either way with bounded responses and redirects."""
        import openai

        from ..http_transport import (ACCEPT_ENCODING, MAX_REDIRECTS, LeanTransport,
                                     limit_response_hook)

        lean = self.http_transport == "lean"
        transport = LeanTransport(max_response_bytes=self.max_response_bytes) if lean else None
        hook = limit_response_hook(self.max_response_bytes, raw_bounded=lean)
        http = openai.DefaultAsyncHttpxClient(
            transport=transport, timeout=self.timeout_s, follow_redirects=True,
            max_redirects=MAX_REDIRECTS, headers={"Accept-Encoding": ACCEPT_ENCODING},
            event_hooks={"response": [hook]})
        if lean:
            http._visgym_lean = (transport, hook)
        return http

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
            delay = max(delay, min(retry_after, self.timeout_s))
        return delay

    def _cut_wait_note(self, retry_after: float | None, delay: float) -> str:
        """What the step's error text says of a Retry-After over ``timeout_s`` (whose wait is
        cut to it); "" for any other wait."""
        if retry_after is None or retry_after <= self.timeout_s:
            return ""
        why = "the --timeout" if delay <= self.timeout_s else "the backoff"
        return f" (Retry-After {_seconds(retry_after)} s; waited {_seconds(delay)} s, {why})"

    def _endpoint_hung(self, failure: _Failure | None) -> bool:
        """Count one attempt (``None``: answered) in the timeouts in a row; whether the endpoint
        is now taken as hung (``hung_after``)."""
        if failure is not None and failure.kind == "timeout":
            self._timeouts_in_row += 1
            return 0 < self.hung_after <= self._timeouts_in_row
        if failure is None or failure.kind not in _UNANSWERED:
            self._timeouts_in_row = 0
        return False

    def _hung_reply(self, attempt: int, start: float) -> Reply:
        return Reply(EXHAUSTED_REPLY.format(n=attempt), flag="error", attempts=attempt,
                     latency_s=time.perf_counter() - start,
                     error=f"the endpoint stopped answering ({self._timeouts_in_row} requests in "
                           f"a row timed out after {self.timeout_s:g} s each)",
                     transient=True, error_kind="endpoint_hung")

    # -- one turn ------------------------------------------------------------------------
    async def act(self, turn: Turn) -> Reply:
        start = time.perf_counter()
        failure = None
        note, noted = "", None   # a Retry-After cut to the timeout, and the failure it came with
        kwargs = self.settings.request_kwargs()
        client = self.clients[hash(turn.episode.key) % len(self.clients)]
        cache = turn.episode.data.setdefault("json_cache", {})
        for attempt in range(1, self.max_attempts + 1):
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the result
                # and drops a cancellation that lands as the response completes (a Ctrl-C that
                # the run then ignored); timeout() passes it on.
                async with asyncio.timeout(self._deadline_s):
                    response = await self._create(client, turn.messages, kwargs, cache)
            except Exception as e:   # everything a server can cause; cancellation passes
                failure = self._failure(e)
                if failure.status in (401, 403):
                    raise AgentFatalError(
                        f"the endpoint rejected the request ({failure.text[:300]}); check the "
                        f"key in ${self.api_key_env} and --base-url") from None
            else:
                result = self._reply_from(response, attempt, time.perf_counter() - start)
                if isinstance(result, Reply):
                    self._endpoint_hung(None)
                    if noted is not None and result.error is None:   # why the wait was short
                        result = replace(result, error=_noted(noted.text, note),
                                         error_kind=noted.kind)
                    return result
                failure = result
            if self._endpoint_hung(failure):
                return self._hung_reply(attempt, start)
            if not failure.transient:
                placeholder = _is_context_error(failure.text)
                return Reply(placeholder or EXHAUSTED_REPLY.format(n=attempt), flag="error",
                             fatal="context_length" if placeholder else None,
                             attempts=attempt, latency_s=time.perf_counter() - start,
                             error=_noted(failure.text, note), transient=False,
                             error_kind="context_length" if placeholder else failure.kind)
            if attempt < self.max_attempts:
                delay = self._retry_delay(attempt, failure.retry_after)
                cut = self._cut_wait_note(failure.retry_after, delay)
                if cut:
                    note, noted = cut, failure
                await asyncio.sleep(delay)
        return Reply(EXHAUSTED_REPLY.format(n=self.max_attempts), flag="error",
                     attempts=self.max_attempts, latency_s=time.perf_counter() - start,
                     error=_noted(failure.text, note), transient=True, error_kind=failure.kind)

    async def _create(self, client, messages: list, kwargs: dict, cache: dict | None = None):
        """POST /chat/completions with the messages as they are; the body's JSON value. The
        loop builds plain JSON dicts already; the SDK's typed ``create`` would walk the whole
        (growing) history again on every request, which was most of the client's CPU time at
        high concurrency. With a per-episode ``cache``, each message is JSON-encoded once for the
        whole episode (the history is resent every turn) and the body goes out as bytes."""
        from ..http_transport import httpx   # the SDK's HTTP library (httpx2 in openai 3)

        extra = dict(kwargs)
        fields = dict(extra.pop("extra_body", None) or {})
        fields.update(extra)
        if not hasattr(client, "post"):  # a stand-in client without the raw transport
            return await client.chat.completions.create(model=self.model, messages=messages,
                                                        **fields)
        if _post_takes_content(client):
            memo = None if cache is None else cache.get("messages")
            if memo is None:
                memo = MessageMemo(_json_bytes)
                if cache is not None:
                    cache["messages"] = memo
            head = _json_bytes({"model": self.model, **fields})
            # One copy of the (growing) history per request: every piece joined at once.
            parts = [head[:-1], b", " if len(head) > 2 else b"", b'"messages": [']
            for k, text in enumerate(memo(messages)):
                if k:
                    parts.append(b", ")
                parts.append(text)
            parts.append(b"]}")
            body = b"".join(parts)
            direct = getattr(client, "_visgym_direct", None)
            if direct is not None:
                return _json_body(await direct.post(body))
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


def _seconds(value: float) -> str:
    return f"{round(value, 2):g}"


def _noted(text: str, note: str) -> str:
    """An error text with ``note`` appended, the whole within ``MAX_ERROR_CHARS``."""
    return text[:MAX_ERROR_CHARS - len(note)] + note if note else text


async def _close(client) -> None:
    close = getattr(client, "close", None)
    if close is not None:
        result = close()
        if asyncio.iscoroutine(result):
            await result


class _DirectPost:
    """POST /chat/completions of an SDK client that this agent built over ``LeanTransport``,
    handed to that transport directly. The SDK's own request path (options models, URL and
    header merging, httpx's client layers) was a third of the rollout collector's CPU per
    step; what it does that matters is done here the same way: the SDK client's headers and
    key, the httpx client's headers (Accept-Encoding), the timeouts as extensions, the response
    hook that bounds and decodes the body, the SDK's status errors
    (``_make_status_error_from_response``) and its mapping of transport failures to
    APITimeoutError / APIConnectionError, and redirects followed with the httpx client's own
    redirect requests and limit."""

    def __init__(self, client, http, transport, hook, timeout_s: float):
        from ..http_transport import httpx

        self._httpx = httpx
        self.client = client
        self.http = http
        self.transport = transport
        self.hook = hook
        self.url = httpx.URL(str(client.base_url).rstrip("/") + "/chat/completions")
        # Merged as httpx's client merges a request's headers into its own: by name, any case.
        self.headers = httpx.Headers(http.headers)
        self.headers.update({name: value for name, value in
                             {**client.default_headers, **client.auth_headers}.items()
                             if isinstance(value, str)})   # the SDK leaves unset ones as Omit
        self.timeout = httpx.Timeout(timeout_s).as_dict()
        # The head as httpx's Request(content=...) makes it (Host first, Content-Length last),
        # made once: httpx re-normalised and searched the headers on every request (18 us of
        # 23 per request object). A stand-in with its own length headers keeps httpx's way.
        self.raw = None
        if "Content-Length" not in self.headers and "Transfer-Encoding" not in self.headers:
            host = [] if "Host" in self.headers or not self.url.host \
                else [(b"Host", self.url.netloc)]
            self.raw = host + list(self.headers.raw)

    def _request(self, body: bytes):
        httpx = self._httpx
        if self.raw is None:
            return httpx.Request("POST", self.url, headers=self.headers, content=body,
                                 extensions={"timeout": self.timeout})
        request = httpx.Request(
            "POST", self.url, headers=httpx.Headers(
                self.raw + [(b"Content-Length", b"%d" % len(body))]),
            stream=httpx.ByteStream(body), extensions={"timeout": self.timeout})
        request.read()    # the body as .content, as Request(content=...) has it
        return request

    async def post(self, body: bytes) -> bytes:
        """The response body of a 2xx answer; raises what the SDK raises."""
        import openai

        httpx = self._httpx
        request = self._request(body)
        hops = 0
        try:
            while True:    # redirects followed as httpx's client follows them
                if hops > self.http.max_redirects:
                    raise httpx.TooManyRedirects("Exceeded maximum allowed redirects.",
                                                 request=request)
                response = await self.transport.handle_async_request(request)
                response.request = request
                stream = response.stream
                if isinstance(stream, httpx.ByteStream) and \
                        "content-encoding" not in response.headers:
                    # Not encoded: the transport has bounded what it read (a Content-Length
                    # over the limit is refused unread), which is all the hook would check.
                    body = b"".join(stream)
                else:
                    await self.hook(response)
                    body = await response.aread()   # decoded through the hook's bounds
                if not response.has_redirect_location:
                    break
                request = self.http._build_redirect_request(request, response)
                hops += 1
        except httpx.TimeoutException as error:
            raise openai.APITimeoutError(request=request) from error
        except Exception as error:   # what the SDK reports as a connection error
            raise openai.APIConnectionError(request=request) from error
        if response.status_code >= 400:
            await response.aread()
            raise self.client._make_status_error_from_response(response)
        return body


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
    """UTF-8 JSON of ``value`` (orjson: the stdlib's encoder took ~60 us for a message holding
    a 10 KB image data URL, orjson ~2 us); integer keys become strings, as with ``json``.
    Where orjson refuses a value (a string with a lone surrogate, which is not UTF-8; an integer
    over 64 bits), the stdlib's ASCII form, whose ``\\ud800`` escapes are valid JSON."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(value).encode("ascii")


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

