"""What a failed request was, and how it may be shown: the error classification and texts of the
OpenAI agent, and the redaction of credentials. What a server sends is untrusted: every failed
request is classified (``_classify``: ``Reply.error_kind``, and ``Reply.transient``: True for
429, 5xx, connection errors, timeouts and bodies that do not decode, which are retried; False for
400/401/403/404/422, context length, redirect loops and malformed chat completions, which are
not); a body that is not UTF-8 or not JSON is ``_BadBody``; error texts are one line and pass
through ``redact`` (the key, ``Bearer``/``sk-`` tokens, URL credentials) before they are stored
or printed, and endpoints are recorded without credentials (``redact_url``) and checked before
use (``_check_endpoint``).
"""
from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import orjson

from .base import CONTEXT_REPLY, IMAGES_REPLY, MAX_ERROR_CHARS

DEFAULT_ENDPOINT = "https://api.openai.com/v1"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


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

def _is_context_error(text: str) -> str | None:
    lowered = text.lower()
    if "total number of images exceeds" in lowered:
        return IMAGES_REPLY
    if ("maximum context length" in lowered or "context_length_exceeded" in lowered
            or "context length" in lowered and "exceed" in lowered):
        return CONTEXT_REPLY
    return None


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

def _json_body(content: bytes):
    """The JSON value of a response body; ``_BadBody`` naming why where there is none.

    orjson reads it (a vLLM answer with log-probabilities in ~1/6 of the stdlib's time); what
    orjson refuses (not UTF-8, a lone surrogate escape, NaN, deep nesting) is read by the
    stdlib, as before, whose value or message then stands. One difference: orjson reads an
    integer over 64 bits as a float (no chat-completions field holds one)."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return _stdlib_json_body(content)


def _stdlib_json_body(content: bytes):
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


# Kinds of failure in which no answer came, other than a timeout (``OpenAIAgent`` counts
# timeouts in a row; these neither count nor break the row).
_UNANSWERED = ("refused", "unresolved", "connection", "protocol", "unexpected")


def _classify(error: BaseException) -> tuple[str, bool]:
    """(error kind, transient) of a failed request."""
    import openai
    import socket

    from ..http_transport import ResponseTooLarge, httpx

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
