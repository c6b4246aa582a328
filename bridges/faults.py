"""The fault policy of a run: when failed requests stop it, and how failures are summarised.

Agents retry what a retry may cure (the OpenAI agent: 429, 5xx, connection errors and timeouts,
with backoff and a ``Retry-After`` capped at the request timeout) and classify every failed
request (``Reply.transient``, ``Reply.error_kind``). What a run does about the failures it is
handed is decided here, once, for every workflow that talks to an endpoint (the evaluation
runner and the rollout collector):

- ``FailureBreaker`` stops a run whose endpoint fails (``RunAborted``; the episodes in flight
  are not recorded, so ``--resume`` plays them again): when N requests in a row failed, at any
  point of the run, each after its retries (a 4xx answer, a 5xx or a timeout that every retry
  met again), or at once when the agent reports that the endpoint stopped answering
  (``error_kind == "endpoint_hung"``: several attempts in a row timed out, which the agent counts
  across concurrent requests). Any answered request resets the count.
- ``server_failures``: the steps of a transcript whose request failed (not the model's reply: an
  empty or refused reply, or a context-length end, is the model's outcome). An episode that did
  not succeed and lost a step to the server is spoiled: it is recorded as such (end reason
  ``server_error``), left out of the success rates, and played again by ``--resume``
  (bridges/records.py).
- ``error_summary`` / ``error_lines``: per task, the failed requests and the most common reason,
  for run.json and the end of the run's output.
"""
from __future__ import annotations

import re
from collections import Counter

HUNG = "endpoint_hung"


class RunAborted(RuntimeError):
    """The run stopped before its end for a reason the user must fix (the endpoint fails every
    request the same way, or stopped answering); finished episodes are recorded and
    ``--resume`` continues."""


def shorten(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (whitespace collapsed, "..." where cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def failure_reason(reply) -> str | None:
    """The server's reason for a request that failed (a reply flagged "error" that is not a
    context-length end, which is the episode's own outcome), or None for an answer."""
    if reply.flag != "error" or reply.fatal is not None:
        return None
    return shorten(reply.error or reply.text or "unknown error", 300)


def _reason_key(reason: str) -> str:
    """Failures are "the same" when their texts differ only in numbers (request ids, token
    counts, times)."""
    return re.sub(r"[0-9a-fA-F]*[0-9][0-9a-fA-F]*", "#", reason)


class FailureBreaker:
    """See the module docstring. ``limit`` 0 never stops a run."""

    def __init__(self, limit: int):
        self.limit = limit
        self.answered = False      # some request of this run got an answer
        self.keys: set = set()     # the reasons of the failures in a row, told apart by text
        self.count = 0

    def observe(self, reply) -> str | None:
        """Count one finished request; return the reason the run must stop, or None."""
        if not self.limit:
            return None
        reason = failure_reason(reply)
        if reason is None:
            self.answered = True
            self.keys, self.count = set(), 0
            return None
        if getattr(reply, "error_kind", None) == HUNG:
            return shorten(reason, 200)   # the agent's text: "the endpoint stopped answering"
        self.count += 1
        self.keys.add(_reason_key(reason))
        if self.count < self.limit:
            return None
        which = (f"the first {self.limit} requests" if not self.answered
                 else f"{self.limit} requests in a row")
        alike = " the same way" if len(self.keys) == 1 else ""
        return f"{which} failed{alike}: {shorten(reason, 200)}"

    def check(self, reply) -> None:
        """``observe``, raising ``RunAborted`` when the run must stop."""
        stop = self.observe(reply)
        if stop is not None:
            raise RunAborted(stop)


def server_failures(transcript) -> int:
    """The steps of a transcript whose request failed (the server's fault, not the model's)."""
    return sum(failure_reason(turn.reply) is not None for turn in transcript.turns)


def error_summary(records) -> dict:
    """Per ``task/split``: the failed requests of its episodes (replies flagged "error") and the
    most common server error among them, ``{"errors": n, "most_common": text, "count": k}``;
    tasks without errors are left out."""
    by_task: dict = {}
    for record in records:
        name = f"{record.get('task')}/{record.get('split')}"
        for entry in record.get("steps_log") or ():
            if entry.get("reply_flag") != "error":
                continue
            by_task.setdefault(name, Counter())[shorten(entry.get("error") or entry.get("reply")
                                                        or "unknown error", 300)] += 1
    out = {}
    for name in sorted(by_task):
        counts = by_task[name]
        text, count = counts.most_common(1)[0]
        out[name] = {"errors": sum(counts.values()), "most_common": text, "count": count}
    return out


def error_lines(errors: dict) -> list[str]:
    """The summary's lines for ``error_summary``: one per task with failed requests."""
    return [f"{name}: {e['errors']} failed request(s); most common ({e['count']}x): "
            f"{shorten(e['most_common'], 160)}" for name, e in errors.items()]
