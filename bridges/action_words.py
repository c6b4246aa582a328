"""Actions from a model's reply for trainer-facing envs (the SkyRL-Gym environment and the
OpenEnv server): a reply may hold a tuple action anywhere, read as the evaluation reads it
(bridges/replies.py: the last string-headed tuple, ``('move', 2)`` or ``(move, 2)``), or a
keyword action, as RL recipes often ask for: the content of the last ``<action>...</action>``
tag (or the whole reply) being an action word (``stop``; the directions a family's prompt
names, such as maze_2d's ``left``) or a call ``move(2)``. Keyword forms are rewritten into the
tuple text, which the env's own parser then reads; nothing here parses literals beyond asking
``core.literal`` how many arguments a call has. Never raises: what is not an action reaches the
env unchanged and comes back as its feedback.
"""
from __future__ import annotations

import re
from typing import Mapping

import numpy as np

from ..core.grammar import StopToken
from ..core.literal import MAX_CHARS as _LITERAL_MAX_CHARS
from ..core.literal import parse_literal
from .replies import answer_text, extract_action

__all__ = ["NAMED_ACTIONS", "action_words", "read_action", "keyword_hint"]

# Words a family's prompt gives to payloads, for keyword actions. The "stop"-like actions (a
# stop-token payload) get their word from the grammar; these are the directions the maze
# prompts spell out next to the numbers ("0=right, 1=up, 2=left, 3=down"; "1 (left), 2 (right),
# or 3 (around)").
NAMED_ACTIONS = {
    "maze_2d": {"right": "('move', 0)", "up": "('move', 1)", "left": "('move', 2)",
                "down": "('move', 3)"},
    "maze_3d": {"forward": "('move', 0)", "left": "('turn', 1)", "right": "('turn', 2)",
                "around": "('turn', 3)"},
}
_WORD_MAX = 64          # a reply longer than this (stripped) is not a bare action word
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)", re.DOTALL)
_TAG_OPEN, _TAG_CLOSE = "<action>", "</action>"


def action_words(family) -> dict:
    """The keyword actions of ``family``: the family's direction words (NAMED_ACTIONS) and each
    stop-token action's name (``stop`` -> ``('stop', 'stop')``)."""
    words = dict(NAMED_ACTIONS.get(family.name, {}))
    words.update({a.name: f"('{a.name}', '{a.name}')" for a in family.grammar.actions
                  if isinstance(a.payload, StopToken)})
    return words


def _action_tag(reply: str) -> str | None:
    """The content of the last ``<action>`` tag (to its ``</action>``, or the end when the reply
    was cut off inside it); None without a tag."""
    start = reply.rfind(_TAG_OPEN)
    if start < 0:
        return None
    start += len(_TAG_OPEN)
    end = reply.find(_TAG_CLOSE, start)
    return reply[start:] if end < 0 else reply[start:end]


def _call_action(text: str, names) -> str | None:
    """``name(payload)`` as the tuple text ``('name', payload)`` (several arguments become one
    tuple payload: ``mark(0.5, 0.3)`` -> ``('mark', (0.5, 0.3))``); None if ``text`` is not a
    call of one of ``names`` whose arguments read as literals."""
    if len(text) > _LITERAL_MAX_CHARS:
        return None
    match = _CALL.fullmatch(text)
    if match is None or match.group(1) not in names:
        return None
    name, inner = match.group(1), match.group(2).strip()
    ok, args = parse_literal(f"({inner},)") if inner else (False, None)
    if not ok or type(args) is not tuple:
        return None
    return f"('{name}', {inner})" if len(args) == 1 else f"('{name}', ({inner}))"


def read_action(reply, words: Mapping[str, str], names, elicit_verbalization: bool = False) -> str:
    """The action text the env is stepped with for a model ``reply`` (see this module's docstring):
    an ``<action>`` tag's content, or else the reply (its ``<answer>`` with
    ``elicit_verbalization``), is tried as an action word (``words``, case-insensitive), then as
    a call of one of the grammar's ``names``, then read as the evaluation reads tuples
    (``extract_action``). Never raises; what is not an action reaches the env unchanged and
    comes back as its feedback."""
    if not isinstance(reply, str):
        return extract_action(reply)
    tag = _action_tag(reply)
    body = answer_text(reply, elicit_verbalization) if tag is None else tag
    bare = body.strip()
    if len(bare) <= _WORD_MAX:
        word = bare.strip("`'\".").strip().lower()
        if word in words:
            return words[word]
        call = _CALL.fullmatch(bare)
        if call is not None and not call.group(2).strip() and call.group(1).lower() in words:
            return words[call.group(1).lower()]          # "stop()"
    call = _call_action(bare, names)
    if call is not None:
        return call
    if tag is None:
        return extract_action(reply, elicit_verbalization)
    return extract_action(tag)


def keyword_hint(family, words: Mapping[str, str]) -> str:
    """The sentence that asks for a keyword action: the family's words and, for the actions no
    word covers, the call form with an example of a valid payload."""
    rng = np.random.default_rng(0)
    covered = {text.split("'")[1] for text in words.values()}
    calls = [f"{a.name}({a.payload.sample(rng)!r})" for a in family.grammar.actions
             if a.name not in covered]
    forms = ", ".join(words)
    if calls:
        forms += "; or an action written as a call, for example " + ", ".join(calls)
    return ("\n\nEnd your reply with your action in this format: <action>ACTION</action>, "
            f"where ACTION is one of: {forms}.")
