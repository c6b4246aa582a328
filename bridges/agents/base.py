"""The agent interface and its data: what answers each turn of the evaluation loop.

One small interface: ``await agent.act(turn) -> Reply``. A ``Turn`` carries the chat messages to
send (OpenAI format, full history or the configured window), the current observation and prompt
text, and the episode it belongs to (``Episode``). A ``Reply`` is one answer, or one failed
request recorded as a step: its text and error text are always encodable (lone surrogates and
NULs escaped, ``replies.encodable``), the error text at most ``MAX_ERROR_CHARS`` long; the
placeholders of the reference (spec 5.3) stand in for the text of replies that did not come.
``AgentFatalError`` stops a run (a rejected key), ``PreflightError`` refuses one before it
starts. The agents themselves are in ``offline`` and ``openai``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..replies import encodable

# Placeholders of the reference (spec 5.3): stored as the assistant turn and parsed like a reply.
EXHAUSTED_REPLY = "Error in receiving a response after {n} trials"
EMPTY_REPLY = "Empty response"
CONTEXT_REPLY = "Error: Maximum context length is exceeded."
IMAGES_REPLY = "Error: Total number of images exceeds the maximum context length"
MAX_ERROR_CHARS = 500       # an error text as stored with the step


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
