"""Turn a free-form model reply into the one action string the env receives, as the evaluation
harness does before every ``env.step`` (agent_loop.md section 6, api.md section 5.3): optional
``<answer>`` extraction, normalisation (code fences, backticks, box and think markers,
``Action:`` labels, whitespace), then a scan of every balanced ``( ... )`` substring, keeping the
last (or, on request, the first) one that reads as a tuple headed by a string. When nothing
qualifies, the step-1 text is passed through unchanged so the env reports the parse error itself.
``extract_think`` pulls the ``<think>`` text that the step records keep (agent_loop.md 8.2).

Bounds (model text is untrusted; a reply may be huge or built to be slow):

* The scan looks at most at ``MAX_REPLY_CHARS`` (32768) characters of the normalised text: the
  last ones (the last candidate wins, so the tail is what matters), or the first ones when
  ``first=True``. Matching ``)`` are found by scanning forwards only, so cutting the text in front
  of (resp. behind) the window leaves every candidate inside it exactly as in the full text; the
  only difference is that a candidate lying wholly outside the window is not seen. Before
  normalising, the text is cut to ``_NORMALISE_CHARS`` (8 x the window) from the same end, so
  the regex work is bounded too. The fallback (no candidate) is still the full, original step-1
  text.
* Parentheses are matched in one O(n) stack pass over the window.
* Candidates are tried from the selection end (right to left for last-wins) and the scan stops at
  the first valid one. Slices that cannot be a string-headed tuple are skipped unparsed: longer
  than ``visgym.core.literal.MAX_CHARS`` (that parser rejects them, and so would the env), no
  comma inside (every non-empty tuple has one), or a first character after ``(`` that cannot
  begin a string (a digit, ``[``, ``-``, ...). At most ``MAX_PARSE_CHARS`` (200 000) characters
  in total are handed to ``parse_literal`` per reply (it reads about 1 us per character); once
  spent, the scan stops and the reply counts as having no candidate. Measured: 100 000 ``(``,
  1 MB of ``(a,`` or 1.2 MB of ``(x)`` take about 10 ms; a reply built to spend the whole parse
  budget stays near 0.2 s.

``encodable`` and ``bound_reply`` prepare a model's reply for the loop where it enters (the
agent): lone surrogates and NULs (a JSON reply may carry ``"\\ud800"``; no request body or UTF-8
file can hold one) are written as their escapes, as the parser's feedback does, and a reply
longer than ``MAX_REPLY_CHARS`` keeps only its tail (what the scan reads; the last action wins)
behind a marker saying how much was cut, so the history resent every turn stays bounded.

Literal evaluation uses the package's bounded parser (``visgym.core.literal.parse_literal``),
never ``eval``/``ast.literal_eval``. Deviations from the reference, all in pathological inputs
only: the window and parse budget above, and skipping candidates over ``MAX_CHARS`` (the reference
would return such a candidate and the env would then reject it; here an inner candidate may win).
Quirks kept for parity (agent_loop.md section 12, #1): a string-headed tuple nested inside the
real action wins because it starts later; the bare-identifier fix quotes any ASCII identifier,
so ``(True, 1)`` becomes ``('True', 1)``.
"""
from __future__ import annotations

import re
from bisect import bisect_left

from ..core.literal import MAX_CHARS as _LITERAL_MAX_CHARS
from ..core.literal import parse_literal

__all__ = ["MAX_REPLY_CHARS", "MAX_PARSE_CHARS", "bound_reply", "encodable", "extract_action",
           "extract_think"]

MAX_REPLY_CHARS = 32768  # window of normalised text that the candidate scan looks at
MAX_PARSE_CHARS = 200_000  # total characters handed to parse_literal per reply
_NORMALISE_CHARS = 8 * MAX_REPLY_CHARS  # raw text normalised per reply (normalising only shrinks)

# Three backticks plus an optional language word ("```python"); lone backticks go afterwards.
_FENCE = re.compile(r"```\w*")
_MARKERS = ("<|begin_of_box|>", "<|end_of_box|>", "\u25c1think\u25b7", "\u25c1/think\u25b7")
# "Action:" anywhere it starts a word, any case, blanks allowed around the colon.
_ACTION_LABEL = re.compile(r"\baction\s*:\s*", re.IGNORECASE)
_PARENS = re.compile(r"[()]")
_COMMA = re.compile(",")
# "(" + blanks + bare identifier + blanks + ",": the identifier gets quoted. Normalised text holds
# single spaces only, so " *" covers "optional spaces".
_BARE_HEAD = re.compile(r"\( *([A-Za-z_][A-Za-z0-9_]*) *,")
# The first non-blank character after "(" of any string-headed tuple: a quote, a nested "(" (as in
# "(('a'), 1)"), or an ASCII letter/underscore (a bare identifier that gets quoted, or a string
# prefix such as r'...'). Anything else cannot start a str, so parsing it would be wasted work.
_HEAD_START = frozenset("'\"(_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# The common action shapes, "('move', 3)", "(\"rotate\", -90, 'x')", "('stop',)": a tuple of
# quoted printable-ASCII strings (no backslash) and plain integers, the first a string. Every text
# this matches is a literal that parse_literal reads as such a tuple (a test holds it to that), so
# the candidate is taken without the parser's ~30 us.
_SIMPLE_STR = r"""(?:'[ -&(-\[\]-~]*'|"[ !#-\[\]-~]*")"""
_SIMPLE_ITEM = rf"(?:{_SIMPLE_STR}|-?(?:0|[1-9][0-9]{{0,17}}))"
_SIMPLE_TUPLE = re.compile(rf"\( ?{_SIMPLE_STR}(?:(?: ?, ?{_SIMPLE_ITEM})+ ?,?|,) ?\)")


# Characters no UTF-8 request body or file can hold (lone surrogates), and NUL, which C-string
# consumers (servers, terminals, log tools) cut at.
_UNENCODABLE = re.compile("[\x00\ud800-\udfff]")
_CUT_MARKER = "[reply of {total} characters cut: only its end is kept]\n"
_ESCAPE_WIDTH = 6   # len("\\ud800"): the longest escape ``encodable`` writes for one character


def encodable(text: str) -> str:
    """``text`` with lone surrogates and NULs written as their escapes (``\\ud800``, ``\\x00``),
    so that it always encodes as UTF-8; other text is returned as it is (the same object)."""
    if text.isascii():
        return text if "\x00" not in text else text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _UNENCODABLE.sub(lambda m: repr(m.group())[1:-1], text)
    return text if "\x00" not in text else text.replace("\x00", "\\x00")


def bound_reply(text: str, limit: int = MAX_REPLY_CHARS) -> tuple[str, bool]:
    """(the reply as the loop stores and resends it, whether it was cut). The text is made
    ``encodable``; beyond ``limit`` characters only the tail is kept, after a one-line marker
    giving the reply's length, the whole at most ``limit`` characters. The tail is what
    ``extract_action`` scans (the last action wins), so the action of a reply whose end holds it
    is unchanged by the cut."""
    total = len(text)
    if total > limit:
        text = text[-_ESCAPE_WIDTH * limit:]   # enough for the kept tail even if all escaped
    text = encodable(text)
    if len(text) <= limit:
        return text, False
    marker = _CUT_MARKER.format(total=total)
    keep = max(0, limit - len(marker))
    return marker[:limit] + (text[len(text) - keep:] if keep else ""), True


def answer_text(reply: str, elicit_verbalization: bool) -> str:
    """Step 1: the text after the first <answer> up to the next </answer> (or the end)."""
    if not elicit_verbalization:
        return reply
    start = reply.find("<answer>")
    if start < 0:
        return reply
    start += len("<answer>")
    end = reply.find("</answer>", start)
    return reply[start:] if end < 0 else reply[start:end]


def _normalise(text: str) -> str:
    """Step 2, in the spec's order; the result has single spaces and no leading/trailing blanks."""
    text = _FENCE.sub("", text)
    text = text.replace("`", "")
    for marker in _MARKERS:
        text = text.replace(marker, "")
    text = _ACTION_LABEL.sub(" ", text)
    return " ".join(text.split())


def _matching_parens(text: str) -> tuple[list[int], dict[int, int]]:
    """All '(' positions in order and, for the balanced ones, the position of their ')'.

    One stack pass; the ')' that pops an opening is exactly the one a forward depth count from
    that opening would find, so this equals the spec's per-position search in O(n) overall.
    A ')' with nothing open is ignored; an opening still on the stack at the end is unbalanced.
    """
    opens: list[int] = []
    close_of: dict[int, int] = {}
    stack: list[int] = []
    for m in _PARENS.finditer(text):
        pos = m.start()
        if text[pos] == "(":
            opens.append(pos)
            stack.append(pos)
        elif stack:
            close_of[stack.pop()] = pos
    return opens, close_of


def _quote_bare_head(candidate: str) -> str:
    m = _BARE_HEAD.match(candidate)
    if m is None:
        return candidate
    return f"{candidate[:m.start(1)]}'{m.group(1)}'{candidate[m.end(1):]}"


def _scan(text: str, first: bool) -> str | None:
    """Steps 3-4 over ``text`` (already normalised and windowed): the selected candidate or None."""
    opens, close_of = _matching_parens(text)
    # A non-empty tuple is written with a comma, so a slice without one ("(maybe)") is skipped;
    # the sorted comma positions answer "is there a comma inside?" in O(log n).
    commas = [m.start() for m in _COMMA.finditer(text)]
    budget = MAX_PARSE_CHARS
    n = len(text)
    for start in (opens if first else reversed(opens)):
        end = close_of.get(start)
        if end is None:
            continue
        # The quoting fix only adds characters, so an over-long slice stays over-long.
        if end - start + 1 > _LITERAL_MAX_CHARS:
            continue
        k = start + 1
        if k < n and text[k] == " ":
            k += 1
        if text[k] not in _HEAD_START:
            continue
        i = bisect_left(commas, k)
        if i == len(commas) or commas[i] > end:
            continue
        candidate = _quote_bare_head(text[start:end + 1])
        budget -= len(candidate)
        if budget < 0:
            return None
        if _SIMPLE_TUPLE.fullmatch(candidate) is not None:
            return candidate
        ok, value = parse_literal(candidate)
        if ok and type(value) is tuple and value and isinstance(value[0], str):
            return candidate
    return None


def extract_action(reply: str, elicit_verbalization: bool = False, first: bool = False) -> str:
    """The action string the harness passes to ``env.step`` for a model ``reply``.

    ``elicit_verbalization``: the prompt asked for ``<think>``/``<answer>`` tags, so an
    ``<answer>`` section (if present) is used instead of the whole reply. ``first``: select the
    first valid candidate instead of the last. Never raises; a non-str ``reply`` gives ``""``.
    """
    if not isinstance(reply, str):
        return ""
    if type(reply) is not str:
        reply = str.__str__(reply)  # a plain copy, so subclass overrides play no part
    step1 = answer_text(reply, elicit_verbalization)

    raw = step1
    if len(raw) > _NORMALISE_CHARS:
        raw = raw[:_NORMALISE_CHARS] if first else raw[-_NORMALISE_CHARS:]
    normalised = _normalise(raw)
    if not normalised:
        return step1
    if len(normalised) > MAX_REPLY_CHARS:
        normalised = normalised[:MAX_REPLY_CHARS] if first else normalised[-MAX_REPLY_CHARS:]

    found = _scan(normalised, first)
    return step1 if found is None else found


def extract_think(reply: str) -> str | None:
    """The text between the first ``<think>`` and the next ``</think>``; None without ``<think>``.

    An unclosed ``<think>`` yields the rest of the reply: the step record carries ``think``
    whenever the reply contains ``<think>`` (agent_loop.md 8.2), so there must be a value.
    A non-str ``reply`` gives None.
    """
    if not isinstance(reply, str):
        return None
    if type(reply) is not str:
        reply = str.__str__(reply)
    start = reply.find("<think>")
    if start < 0:
        return None
    start += len("<think>")
    end = reply.find("</think>", start)
    return reply[start:] if end < 0 else reply[start:end]
