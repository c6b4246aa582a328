"""The rollout collector's policies: replies that keep their token ids and log-probabilities.

A trainer learns from the tokens its policy sampled, so the collector (bridges/rollouts.py)
keeps them with every reply (``TokenReply``: the agent interface's ``Reply`` plus
``token_ids``, ``logprobs`` and, where a server gives token strings but no ids, ``tokens``).
Two policies produce them:

- ``TokenOpenAIAgent``: the evaluation's OpenAI agent (its transports, retries, fault
  classification and pre-flight, bridges/agents/) asking the server for the sampled tokens:
  ``logprobs: true`` and vLLM's ``return_tokens_as_token_ids: true`` in every request body, read
  back from ``choices[0].logprobs.content`` (``"token_id:N"`` strings) or from
  ``choices[0].token_ids`` where a newer vLLM sends them. What a server sends is untrusted: a
  token list of the wrong shape is dropped, never half kept. ``require_logprobs`` makes the
  pre-flight refuse a server whose test reply has none.
- ``BatchedPolicyAgent``: a trainer's own model in the same process, as a batched callable
  ``policy(list of message lists) -> list of replies``. The turns that arrive in one event-loop
  turn go to the policy as one batch (as bridges/stepper.py batches steps), so the episodes in
  flight make one forward pass per step. A reply is a string, a mapping with ``text`` and
  optional ``token_ids`` / ``logprobs``, or a ``TokenReply``.
"""
from __future__ import annotations

import asyncio
import functools
import inspect
import time
from dataclasses import dataclass, fields
from dataclasses import replace as dataclass_replace

from .agents import (EMPTY_REPLY, Agent, GenerationSettings, OpenAIAgent, PreflightError, Reply,
                     Turn)

TOKEN_ID_PREFIX = "token_id:"
# What a rollout request adds to the body so the server returns the sampled tokens.
TOKEN_REQUEST = {"logprobs": True, "return_tokens_as_token_ids": True}
MAX_TOKENS_KEPT = 1 << 20   # a reply's token list beyond this is not a plausible sample


@dataclass
class TokenReply(Reply):
    """A ``Reply`` with the tokens the policy sampled for it (None where it gave none)."""

    token_ids: list | None = None     # int per sampled token
    logprobs: list | None = None      # float per sampled token (the sampling distribution's)
    tokens: list | None = None        # token strings, where a server gives no ids


def with_tokens(reply: Reply, token_ids=None, logprobs=None, tokens=None) -> TokenReply:
    """``reply`` as a ``TokenReply`` carrying these tokens."""
    values = {f.name: getattr(reply, f.name) for f in fields(Reply)}
    return TokenReply(**values, token_ids=token_ids, logprobs=logprobs, tokens=tokens)


def has_logprobs(reply) -> bool:
    return getattr(reply, "logprobs", None) is not None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def tokens_from_choice(choice: dict) -> tuple[list | None, list | None, list | None]:
    """``(token_ids, logprobs, tokens)`` of a chat completion's choice, each None where the
    server sent none or sent it malformed."""
    token_ids = choice.get("token_ids")
    if not (isinstance(token_ids, list) and len(token_ids) <= MAX_TOKENS_KEPT
            and all(_is_int(t) for t in token_ids)):
        token_ids = None
    block = choice.get("logprobs")
    content = block.get("content") if isinstance(block, dict) else None
    if not isinstance(content, list) or len(content) > MAX_TOKENS_KEPT:
        return token_ids, None, None
    logprobs, strings, ids = [], [], []
    for entry in content:
        if not isinstance(entry, dict) or not _is_number(entry.get("logprob")) or \
                not isinstance(entry.get("token"), str):
            return token_ids, None, None
        logprobs.append(float(entry["logprob"]))
        token = entry["token"]
        strings.append(token)
        if ids is not None and token.startswith(TOKEN_ID_PREFIX) and \
                token[len(TOKEN_ID_PREFIX):].isdigit():
            ids.append(int(token[len(TOKEN_ID_PREFIX):]))
        else:
            ids = None
    if ids is not None and token_ids is None:
        token_ids = ids
    if token_ids is not None and len(token_ids) != len(logprobs):
        # Ids and log-probabilities must describe the same tokens, or neither is usable.
        return None, None, None
    return token_ids, logprobs, None if token_ids is not None else strings


class TokenOpenAIAgent(OpenAIAgent):
    """The OpenAI agent of bridges/agents/ asking for, and keeping, the sampled tokens (see the
    module docstring). ``request_tokens`` False sends the requests unchanged (a server that
    rejects the fields); ``require_logprobs`` refuses, at the pre-flight, a server whose test
    reply carries no log-probabilities."""

    name = "openai"

    def __init__(self, model: str, *, request_tokens: bool = True,
                 require_logprobs: bool = False, **kwargs):
        # What builds this agent again in another collector process (--processes): the
        # arguments as given, before the token fields are merged into the settings.
        self.rebuild = functools.partial(TokenOpenAIAgent, model, request_tokens=request_tokens,
                                         require_logprobs=require_logprobs, **kwargs)
        settings = kwargs.get("settings") or GenerationSettings()
        if request_tokens:
            # The user's --extra-body wins over ours, so it can turn a field off.
            settings = dataclass_replace(settings, extra_body={**TOKEN_REQUEST,
                                                               **(settings.extra_body or {})})
        kwargs["settings"] = settings
        super().__init__(model, **kwargs)
        self.require_logprobs = require_logprobs
        self._probe: list | None = None

    def _reply_from(self, response, attempt: int, latency: float):
        result = super()._reply_from(response, attempt, latency)
        if not isinstance(result, Reply):
            return result
        data = response
        if not isinstance(data, dict) and callable(getattr(data, "model_dump", None)):
            data = data.model_dump()
        choice = data["choices"][0] if isinstance(data, dict) and \
            isinstance(data.get("choices"), list) and data["choices"] and \
            isinstance(data["choices"][0], dict) else {}
        reply = with_tokens(result, *tokens_from_choice(choice))
        if self._probe is not None:
            self._probe.append(reply)
        return reply

    async def preflight(self, images: int = 2) -> None:
        self._probe = []
        try:
            await super().preflight(images)
        finally:
            probe, self._probe = self._probe, None
        answered = [r for r in probe if r.flag is None]
        if self.require_logprobs and answered and not has_logprobs(answered[-1]):
            raise PreflightError(
                f"{self._where()} answered a test chat without log-probabilities, and "
                "--require-logprobs needs them: serve the policy with vLLM or SGLang (which "
                "honour \"logprobs\": true), check that --extra-body does not turn \"logprobs\" "
                "off, or drop --require-logprobs")


class BatchedPolicyAgent(Agent):
    """A trainer's in-process policy as an agent (see the module docstring). ``policy`` is a
    function or coroutine function of a list of message lists; ``max_batch`` caps one call's
    batch (None: every turn waiting)."""

    name = "in_process"

    def __init__(self, policy, max_batch: int | None = None, model: str = "in-process"):
        if not callable(policy):
            raise ValueError(f"policy: must be callable, got {type(policy).__name__}")
        if max_batch is not None and max_batch < 1:
            raise ValueError(f"max_batch: must be at least 1, got {max_batch}")
        self.policy = policy
        self.max_batch = max_batch
        self.model = model
        self.calls = 0
        self._pending: list = []
        self._scheduled = False

    def describe(self) -> dict:
        return {"agent": self.name, "model": self.model}

    async def act(self, turn: Turn) -> Reply:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((turn.messages, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._scheduled = False
        while self._pending:
            cut = self.max_batch or len(self._pending)
            batch, self._pending = self._pending[:cut], self._pending[cut:]
            asyncio.ensure_future(self._answer(batch))

    async def _answer(self, batch: list) -> None:
        start = time.perf_counter()
        self.calls += 1
        try:
            if inspect.iscoroutinefunction(self.policy):
                replies = await self.policy([messages for messages, _ in batch])
            else:
                replies = await asyncio.to_thread(self.policy, [m for m, _ in batch])
            replies = list(replies)
            if len(replies) != len(batch):
                raise ValueError(f"policy: returned {len(replies)} replies for a batch of "
                                 f"{len(batch)} conversations")
            latency = time.perf_counter() - start
            out = [_as_reply(r, latency) for r in replies]
        except BaseException as error:   # the collector's episodes see the policy's error
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            if not isinstance(error, Exception):
                raise
            return
        for (_, future), reply in zip(batch, out):
            if not future.done():
                future.set_result(reply)


def _as_reply(value, latency: float) -> TokenReply:
    """A policy's reply (a string, a mapping, or a Reply) as a ``TokenReply``."""
    if isinstance(value, TokenReply):
        return value
    if isinstance(value, Reply):
        return with_tokens(value)
    if isinstance(value, str):
        return TokenReply(value or EMPTY_REPLY, flag=None if value else "empty",
                          latency_s=latency)
    if isinstance(value, dict):
        text = value.get("text")
        if not isinstance(text, str):
            raise ValueError("policy: a reply mapping needs a string 'text'")
        token_ids, logprobs = value.get("token_ids"), value.get("logprobs")
        if token_ids is not None:
            token_ids = [int(t) for t in token_ids]
        if logprobs is not None:
            logprobs = [float(v) for v in logprobs]
        if token_ids is not None and logprobs is not None and len(token_ids) != len(logprobs):
            raise ValueError(f"policy: a reply has {len(token_ids)} token ids but "
                             f"{len(logprobs)} log-probabilities")
        return TokenReply(text or EMPTY_REPLY, flag=None if text else "empty", latency_s=latency,
                          token_ids=token_ids, logprobs=logprobs)
    raise ValueError(f"policy: a reply must be a string, a mapping with 'text', or a Reply; "
                     f"got {type(value).__name__}")
