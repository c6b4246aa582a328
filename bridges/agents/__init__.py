"""Agents: what answers each turn of the evaluation loop.

One small interface, ``await agent.act(turn) -> Reply`` (``base``: ``Agent``, ``Episode``,
``Turn``, ``Reply``), and four agents: ``OpenAIAgent`` (``openai``: any OpenAI-compatible
chat-completions endpoint, with retries, reply bookkeeping, its pre-flight in ``preflight`` and
its error classification and credential redaction in ``errors``) and the offline
``SolverAgent``, ``RandomAgent`` and ``ReplayAgent`` (``offline``). ``make_agent`` builds one by
kind and options, and records how to rebuild it in another runner process.
"""
from __future__ import annotations

from ..replies import MAX_REPLY_CHARS   # re-exported
from .base import (CONTEXT_REPLY, EMPTY_REPLY, EXHAUSTED_REPLY, IMAGES_REPLY, MAX_ERROR_CHARS,
                   Agent, AgentFatalError, Episode, PreflightError, Reply, Turn)
from .errors import DEFAULT_ENDPOINT, LOCAL_HOSTS, redact, redact_url
from .offline import RandomAgent, ReplayAgent, SolverAgent
from .openai import CLIENT_SHARDS, HTTP_TRANSPORTS, GenerationSettings, OpenAIAgent
from .preflight import PREFLIGHT_ATTEMPTS, PREFLIGHT_TEXT

__all__ = ["Agent", "AgentFatalError", "CLIENT_SHARDS", "CONTEXT_REPLY", "DEFAULT_ENDPOINT",
           "EMPTY_REPLY", "EXHAUSTED_REPLY", "Episode", "GenerationSettings", "HTTP_TRANSPORTS",
           "IMAGES_REPLY", "LOCAL_HOSTS", "MAX_ERROR_CHARS", "MAX_REPLY_CHARS", "OpenAIAgent",
           "PREFLIGHT_ATTEMPTS", "PREFLIGHT_TEXT", "PreflightError", "RandomAgent", "ReplayAgent",
           "Reply", "SolverAgent", "Turn", "make_agent", "redact", "redact_url"]


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
                           max_response_bytes=options.get("max_response_bytes"),
                           hung_after=options.get("hung_after", 3))
    raise ValueError(f"--agent: expected one of openai, solver, random, replay; got {kind!r}")
