"""The pre-flight of the OpenAI agent (``OpenAIAgent.preflight``): before a run, in a few
seconds, the model list (GET /models) and one tiny chat with small images and the run's
generation settings. What fails becomes one ``PreflightError`` line naming the cause and the fix:
nothing listening at host:port, no answer, a rejected key, a ``--base-url`` without ``/v1``, a
model the server does not serve (listing some it does), the one-image limit of older vLLM,
``--max-tokens`` over the context, a server error that persists, an answer that is not a chat
completion. ``PreflightChecks`` holds these checks for ``OpenAIAgent``.
"""
from __future__ import annotations

import asyncio
import os
import re
from urllib.parse import urlsplit

import numpy as np

from .base import PreflightError, Reply
from .errors import (DEFAULT_ENDPOINT, _Failure, _host_port, _is_context_error, _json_body,
                     redact_url)

# vLLM: "At most 1 image(s) may be provided in one prompt." (older: "... in one request.")
_IMAGE_LIMIT = re.compile(r"(?i)at most (\d+) image")
_MAX_TOKENS_WORDS = ("max_tokens", "max_completion_tokens", "maximum context length",
                     "context length", "context window", "completion tokens")
PREFLIGHT_TEXT = "This is a connection check. How many images do you see? Answer with one word."
PREFLIGHT_ATTEMPTS = 3
PREFLIGHT_MAX_DELAY_S = 2.0


class PreflightChecks:
    """The pre-flight checks of ``OpenAIAgent`` (see the module docstring)."""

    def _where(self) -> str:
        return _host_port(self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_ENDPOINT)

    def _url(self) -> str:
        return redact_url(self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_ENDPOINT)

    async def _preflight_models(self, client) -> list | None:
        """The ids the server lists, or None where it has no usable model list."""
        from ..http_transport import httpx

        if not hasattr(client, "get"):
            return None
        try:
            async with asyncio.timeout(self._deadline_s):   # not wait_for: see openai.act
                response = await client.get("/models", cast_to=httpx.Response)
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
        from ..imaging import encode_jpeg_b64

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
                async with asyncio.timeout(self._deadline_s):
                    response = await self._create(client, messages, kwargs)
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
