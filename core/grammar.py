"""Action grammars and the one shared action parser.

Every family declares its actions as an ordered list of ``ActionSpec(name, payload)``; the
payload kinds below describe what a valid argument is (an int in a range, a fixed-length vector,
an integer array of any shape, a permutation, a number cast to int32, the stop token). A payload kind has ``width`` (ints/floats slots it fills),
``convert(payload, ints, floats) -> bool`` (validate a parsed Python value and write it into the
row) and ``sample(rng) -> value`` (a uniformly random valid payload, for random agents and
gymnasium action spaces). A ``Parser`` of the grammar turns a batch of model strings such as
``"('move', 2)"`` into an ``ActionBatch`` of fixed-shape arrays plus an error code and a
feedback message per episode. It implements the reference's env-side pipeline (spec/api.md 5.2):
literal parse -> 2-tuple check -> name lookup -> payload check, with the reference's feedback
templates, but through the bounded literal parser in ``core.literal`` (no ``eval``), and it never
raises for any ``str``.

A ``Grammar`` is immutable and shared (a family's class attribute); the mutable parse cache is a
``Parser``, one per BatchEnv (DESIGN.md "The contract": envs never share mutable parse state, so
they can be stepped from different threads). Parsing is the only per-string Python work in a
step, so a parser parses each distinct string once and stores it in a vocabulary table (id ->
kind, ints, floats, error); a batch then costs one dict lookup per string and a few ``np.take``
gathers into preallocated buffers.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Sequence

import numpy as np

from .literal import parse_literal

# Error codes of a parsed action (ActionBatch.error).
OK = 0
PARSE_ERROR = 1      # not a literal at all
FORMAT_ERROR = 2     # a literal, but not a 2-tuple
UNKNOWN_NAME = 3     # a 2-tuple whose name is not an action of the family
BAD_PAYLOAD = 4      # known name, payload outside its space
IGNORED = 5          # set by BatchEnv for rows not stepped this call (families: any error is a no-op)
# The invalid actions: the model's text was not an action of the family (parse, format, name or
# payload error). Everything downstream counts invalid actions by these codes, never by text.
INVALID_CODES = (PARSE_ERROR, FORMAT_ERROR, UNKNOWN_NAME, BAD_PAYLOAD)

FORMAT_MESSAGE = (
    "The action format is invalid. The action should be a tuple of two elements with the first "
    "element being the action name and the second element being the action payload."
)

# Strings longer than this are parsed every time instead of being remembered.
_CACHE_MAX_TEXT = 512
_CACHE_MAX_ENTRIES = 1 << 16
# Batches up to this size are copied row by row instead of gathered.
_SMALL_BATCH = 4
# Feedback quotes at most this many characters of the model's text (it is sent back to the model
# on every later turn, so it costs prompt tokens), escaped so that it is always printable.
_QUOTE_MAX = 200


def _printable(text: str) -> str:
    """``text`` with every character that is not printable (NULs, controls, lone surrogates,
    which no request or file could encode) written as its escape, as repr would."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _excerpt(text: str) -> str:
    """A bounded, printable excerpt of ``text``: at most _QUOTE_MAX characters after escaping."""
    shown = _printable(text[:_QUOTE_MAX])
    if len(shown) > _QUOTE_MAX or len(text) > _QUOTE_MAX:
        shown = shown[:_QUOTE_MAX] + f"... ({len(text)} characters)"
    return shown


def parse_error_message(text: str, why: str) -> str:
    """The reference's parse-error feedback: prefix and suffix fixed, the middle says why."""
    if len(text) <= _QUOTE_MAX and len(repr(text)) <= _QUOTE_MAX + 2:
        quoted = repr(text)
    else:
        quoted = repr(text[:_QUOTE_MAX])[:_QUOTE_MAX + 1] + "'"
        quoted += f" (first {_QUOTE_MAX} of {len(text)} characters)"
    return f"Cannot parse action string {quoted}: {_excerpt(why)} so the action is invalid."


def _payload_text(payload) -> str:
    """str() of a payload as the reference prints it, bounded in length and printable."""
    try:
        text = str(payload)
    except Exception:  # pragma: no cover - str of parsed literals does not fail
        text = "<unprintable>"
    return _excerpt(text)


def _is_int(x) -> bool:
    # Python ints and bools pass, as with gymnasium's Discrete.contains; floats do not.
    return type(x) is int or type(x) is bool or isinstance(x, np.integer)


def _as_number(x):
    """A real number from an int/bool/float or a numeric string (what np.asarray(x, float) takes)."""
    if type(x) in (int, bool, float):
        try:
            return float(x)
        except OverflowError:  # an int beyond the float range is not a usable number
            return None
    if type(x) is str:
        try:
            return float(x.strip())
        except ValueError:
            return None
    return None


def _to_float32(value: float) -> float:
    """``value`` rounded to the nearest float32 (±inf where float32 overflows)."""
    try:
        return _F32.unpack(_F32.pack(value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


_F32 = struct.Struct("<f")
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


# --------------------------------------------------------------------------- payload kinds
@dataclass(frozen=True)
class IntChoice:
    """One integer in [start, start + n) (gymnasium Discrete(n, start)); bools count as ints."""

    n: int
    start: int = 0
    width = 1

    def convert(self, payload, ints, floats) -> bool:
        if not _is_int(payload):
            return False
        value = int(payload)
        if not self.start <= value < self.start + self.n:
            return False
        ints[0] = value
        return True

    def sample(self, rng) -> int:
        return int(self.start + rng.integers(self.n))


@dataclass(frozen=True)
class StopToken:
    """The universal stop argument: a str of 1..max_length ASCII letters/digits (gymnasium Text(4))."""

    max_length: int = 4
    width = 0

    def convert(self, payload, ints, floats) -> bool:
        return (
            type(payload) is str
            and 1 <= len(payload) <= self.max_length
            and payload.isascii()
            and payload.isalnum()
        )

    def sample(self, rng) -> str:
        return "stop"


@dataclass(frozen=True)
class FloatVector:
    """A list/tuple of ``length`` reals in [low, high] (gymnasium Box); numeric strings and bools
    are accepted as NumPy's conversion accepts them; NaN is rejected."""

    length: int
    low: float
    high: float
    # Compare (and write) each entry rounded to float32, as a Box of dtype float32 does: then
    # 1.00000001 is 1.0 and lies in [0, 1] (counting's and pointing's `mark`).
    float32: bool = False
    decimals: int = 3   # digits of the random payloads ``sample`` writes

    @property
    def width(self) -> int:
        return self.length

    def convert(self, payload, ints, floats) -> bool:
        if type(payload) not in (list, tuple) or len(payload) != self.length:
            return False
        for k, item in enumerate(payload):
            value = _as_number(item)
            if value is None or math.isnan(value):
                return False
            if self.float32:
                value = _to_float32(value)
            if not self.low <= value <= self.high:
                return False
            floats[k] = value
        return True

    def sample(self, rng) -> list:
        return [round(float(v), self.decimals)
                for v in rng.uniform(self.low, self.high, self.length)]


@dataclass(frozen=True)
class IntVector:
    """A list/tuple of ``length`` ints, entry k in [low, high] (gymnasium MultiDiscrete-like)."""

    length: int
    low: int
    high: int

    @property
    def width(self) -> int:
        return self.length

    def convert(self, payload, ints, floats) -> bool:
        if type(payload) not in (list, tuple) or len(payload) != self.length:
            return False
        for k, item in enumerate(payload):
            if not _is_int(item) or not self.low <= int(item) <= self.high:
                return False
            ints[k] = int(item)
        return True

    def sample(self, rng) -> list:
        return [int(v) for v in rng.integers(self.low, self.high + 1, self.length)]


@dataclass(frozen=True)
class Permutation:
    """A list (or tuple, unless ``list_only``) of the integers start..start+n-1 in some order
    (the reference's Permutation space); entries must be ints (bools count), floats such as 1.0
    do not pass."""

    n: int
    start: int = 0
    # Only a Python list passes (jigsaw's, zoom_in_puzzle's and video_unshuffle's `reorder`: the
    # reference crashed on a tuple, here a tuple is an invalid payload).
    list_only: bool = False

    @property
    def width(self) -> int:
        return self.n

    def convert(self, payload, ints, floats) -> bool:
        if type(payload) is not list and (self.list_only or type(payload) is not tuple):
            return False
        if len(payload) != self.n:
            return False
        if not all(_is_int(v) for v in payload):
            return False
        values = [int(v) for v in payload]
        if sorted(values) != list(range(self.start, self.start + self.n)):
            return False
        ints[: self.n] = values
        return True

    def sample(self, rng) -> list:
        return [int(v) + self.start for v in rng.permutation(self.n)]


@dataclass(frozen=True)
class IntArray:
    """A nested list/tuple of ints of exactly ``shape`` (lists and tuples mix freely at any
    level), entry e in [start, start + bound_e), written to ``ints`` flattened in row-major order
    as given (not shifted by ``start``).

    ``bounds`` is an int (every entry) or a nested tuple that broadcasts to ``shape`` the NumPy
    way, e.g. jigsaw's ``swap ((r1, c1), (r2, c2))`` is ``IntArray((2, 2), (R, C))``,
    zoom_in_puzzle's 1-based ``swap (i, j)`` is ``IntArray((2,), N, start=1)`` and
    patch_reassembly's ``place (id, r, c)`` is ``IntArray((3,), (P, R, C))``. The reference
    converted these payloads to a NumPy array and checked only the range, then crashed indexing
    with a float, so every float is invalid here, even a whole one (2.0); bools count as ints
    (True is 1), as NumPy's conversion makes them; strings, None and ragged nesting are invalid.
    """

    shape: tuple
    bounds: object
    start: int = 0

    def __post_init__(self):
        shape = self.shape if type(self.shape) is tuple else (self.shape,)
        if not shape or not all(type(d) is int and d >= 1 for d in shape):
            raise ValueError(f"shape: expected a tuple of positive ints, got {self.shape!r}")
        if type(self.start) is not int:
            raise ValueError(f"start: expected an int, got {self.start!r}")
        try:
            bounds = np.broadcast_to(np.asarray(self.bounds), shape)
        except ValueError:
            raise ValueError(
                f"bounds: {self.bounds!r} does not broadcast to shape {shape}") from None
        if bounds.dtype.kind not in "iu" or (bounds < 1).any():
            raise ValueError(f"bounds: expected positive ints, got {self.bounds!r}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "_flat", tuple(int(b) for b in bounds.ravel()))

    @property
    def width(self) -> int:
        return len(self._flat)

    def _flatten(self, payload, depth: int, out: list) -> bool:
        if type(payload) not in (list, tuple) or len(payload) != self.shape[depth]:
            return False
        if depth + 1 == len(self.shape):
            for item in payload:
                if not _is_int(item):
                    return False
                out.append(int(item))
            return True
        return all(self._flatten(item, depth + 1, out) for item in payload)

    def convert(self, payload, ints, floats) -> bool:
        values: list = []
        if not self._flatten(payload, 0, values):
            return False
        start = self.start
        for value, bound in zip(values, self._flat):
            if not start <= value < start + bound:
                return False
        ints[: len(values)] = values
        return True

    def sample(self, rng):
        flat = [self.start + int(rng.integers(bound)) for bound in self._flat]
        out = np.asarray(flat, dtype=object).reshape(self.shape)

        def nest(a):
            return tuple(nest(x) for x in a) if isinstance(a, np.ndarray) else int(a)

        return nest(out)


@dataclass(frozen=True)
class Int32Cast:
    """A number as the reference checks it by casting to a 32-bit int (colorization's `rotate`
    and `saturate`): ints and bools, finite floats (truncated toward zero: 30.5 -> 30, -0.9 -> 0)
    and int-literal strings/bytes ('30', ' -7 ', b'12'; not '1e3' or '30.5') pass when the cast
    value lies in [low, high]. ints[0] gets the cast value, floats[0] the uncast value as a float
    (what the reference applies to a hue). NaN, ±inf, values outside int32 (the reference's
    overflow crash), complex numbers, lists and None are invalid."""

    low: int
    high: int
    width = 1

    def convert(self, payload, ints, floats) -> bool:
        kind = type(payload)
        try:
            if kind is bool or kind is int or isinstance(payload, np.integer):
                cast, value = int(payload), float(payload)
            elif kind is float:
                if not math.isfinite(payload):
                    return False
                cast, value = int(payload), payload
            elif kind is str or kind is bytes:
                cast, value = int(payload), float(payload)
            else:
                return False
        except (ValueError, OverflowError):
            return False
        if not _INT32_MIN <= cast <= _INT32_MAX or not self.low <= cast <= self.high:
            return False
        ints[0] = cast
        floats[0] = value
        return True

    def sample(self, rng) -> int:
        return int(rng.integers(self.low, self.high + 1))


@dataclass(frozen=True)
class TruncatedIntVector:
    """A list/tuple of len(bounds) numbers, entry k in [0, bounds[k]), written to ``ints``
    truncated toward zero (Python's int()).

    This is gymnasium's MultiDiscrete check as the reference applies it to a literal list: NumPy
    converts the list to one array, so ints, bools and floats pass (0.9 -> 0, 12.5 -> 12), NaN,
    None, nested lists and out-of-range values do not. Complex numbers pass when they are in range
    in NumPy's lexicographic complex order, but int() cannot convert them, so they are written as
    -1 and the family decides what a non-integer entry means. Strings are rejected here (the
    reference raised on them).
    """

    bounds: tuple

    @property
    def width(self) -> int:
        return len(self.bounds)

    @staticmethod
    def _in_range(value, bound) -> bool:
        if type(value) is complex:
            # NumPy orders complex numbers by real part, then imaginary part.
            low_ok = value.real > 0 or (value.real == 0 and value.imag >= 0)
            high_ok = value.real < bound or (value.real == bound and value.imag < 0)
            return low_ok and high_ok
        return 0 <= value < bound

    def convert(self, payload, ints, floats) -> bool:
        if type(payload) not in (list, tuple) or len(payload) != len(self.bounds):
            return False
        if not all(type(v) in (int, bool, float, complex) for v in payload):
            return False
        if any(type(v) is float and math.isnan(v) for v in payload):
            return False
        for k, (value, bound) in enumerate(zip(payload, self.bounds)):
            if not self._in_range(value, bound):
                return False
            ints[k] = -1 if type(value) is complex else int(value)
        return True

    def sample(self, rng) -> list:
        return [int(rng.integers(bound)) for bound in self.bounds]


@dataclass(frozen=True)
class ActionSpec:
    """One action of a family: its name and payload kind.

    ``invalid``: the feedback for a payload outside the kind's space, a format string with
    ``{payload}`` (str() of the payload, bounded) and ``{name}``; None gives the reference's
    common wording ("The action <payload> is not in the valid action space of <name> so nothing
    is executed."). A family whose reference words it otherwise for one action (video_unshuffle's
    "Swap payload ... is invalid. ...") names its text here.
    """

    name: str
    payload: object
    invalid: str | None = None


# The universal stop action: every family's grammar includes STOP, and every plan ends with
# STOP_ACTION (the step template in core.family terminates on it).
STOP = ActionSpec("stop", StopToken())
STOP_ACTION = "('stop', 'stop')"


# --------------------------------------------------------------------------- parsed batches
@dataclass
class ActionBatch:
    """Fixed-shape parsed actions for B episodes.

    kind[b] is the index of the action in the grammar (-1 on error); ints/floats hold the payload
    (width K = the widest payload of the grammar, at least 1); error[b] is one of the codes above
    and message[b] the feedback text for an error ('' when error is OK). ``move`` and ``stop``
    are the step template's masks: rows with a valid non-stop action, rows with a valid stop
    (whoever sets ``error`` afterwards, as BatchEnv does for rows it does not step, clears them);
    ``invalid``: rows whose text is not an action of the grammar (``INVALID_CODES``; BatchEnv
    clears it for rows it does not step, and reports it as ``info["invalid"]``).
    A family whose feedback echoes a payload as the model spelled it (sliding_block's
    ``the block True ...``, patch_reassembly's ``the patch False ...``) records the spelling in
    its own payload kind's ints; the batch holds no Python objects.
    """

    kind: np.ndarray
    ints: np.ndarray
    floats: np.ndarray
    error: np.ndarray
    message: list = field(default_factory=list)
    move: np.ndarray = None
    stop: np.ndarray = None
    invalid: np.ndarray = None

    def __post_init__(self):
        batch = self.kind.shape[0]
        if self.move is None:
            self.move = np.zeros(batch, np.bool_)
        if self.stop is None:
            self.stop = np.zeros(batch, np.bool_)
        if self.invalid is None:
            self.invalid = np.isin(self.error, INVALID_CODES)

    @classmethod
    def from_arrays(cls, kind, ints, floats, error, stop_kind: int) -> "ActionBatch":
        """A batch built from arrays (as a solver builds its actions), masks computed."""
        valid = np.asarray(error) == OK
        stop = valid & (np.asarray(kind) == stop_kind)
        return cls(kind, ints, floats, error, [""] * len(kind), move=valid & ~stop, stop=stop)

    @classmethod
    def empty(cls, batch: int, width: int) -> "ActionBatch":
        return cls(
            kind=np.full(batch, -1, np.int32),
            ints=np.zeros((batch, width), np.int32),
            floats=np.zeros((batch, width), np.float64),
            error=np.zeros(batch, np.int32),
            message=[""] * batch,
        )


class Grammar:
    """The actions of one family: names, payload kinds, the payload width and the one-string
    parse. Immutable once built, so one grammar is safely shared by every env of a family and
    every thread; the per-env parse cache lives in a ``Parser`` (``new_parser``)."""

    __slots__ = ("actions", "names", "width", "stop_kind", "_index")

    def __init__(self, actions: Sequence[ActionSpec]):
        if not actions:
            raise ValueError("actions: a grammar needs at least one action")
        names = [a.name for a in actions]
        if len(set(names)) != len(names):
            raise ValueError(f"actions: duplicate action names in {names}")
        init = object.__setattr__
        init(self, "actions", tuple(actions))
        init(self, "names", tuple(names))
        init(self, "_index", MappingProxyType({name: k for k, name in enumerate(names)}))
        init(self, "width", max([1] + [int(a.payload.width) for a in actions]))
        # The step template's stop action (-2: the grammar has none).
        init(self, "stop_kind", self._index.get(STOP.name, -2))

    def __setattr__(self, name, value):
        raise AttributeError(f"Grammar is immutable (cannot set {name!r}); each BatchEnv keeps "
                             "its parse cache in its own Parser")

    def index(self, name: str) -> int:
        return self._index[name]

    def __reduce__(self):
        return Grammar, (self.actions,)   # pickled (process pools, copies) by its actions

    def __repr__(self) -> str:
        return f"Grammar({', '.join(self.names)})"

    # -- single strings -------------------------------------------------------------------
    def parse_one(self, text) -> tuple[int, np.ndarray, np.ndarray, int, str]:
        """(kind, ints[K], floats[K], error, message) for one action; never raises."""
        ints = np.zeros(self.width, np.int32)
        floats = np.zeros(self.width, np.float64)
        if not isinstance(text, str):
            why = f"expected a str but got {type(text).__name__}"
            return -1, ints, floats, PARSE_ERROR, parse_error_message(_safe_repr_source(text), why)
        ok, value = parse_literal(text)
        if not ok:
            return -1, ints, floats, PARSE_ERROR, parse_error_message(text, value)
        if type(value) is not tuple or len(value) != 2:
            return -1, ints, floats, FORMAT_ERROR, FORMAT_MESSAGE
        name, payload = value
        kind = self._index.get(name) if type(name) is str else None
        if kind is None:
            return -1, ints, floats, UNKNOWN_NAME, (
                f"The action name '{_payload_text(name)}' is not recognized in the available "
                "action space."
            )
        spec = self.actions[kind]
        if not spec.payload.convert(payload, ints, floats):
            if spec.invalid is not None:
                return -1, ints, floats, BAD_PAYLOAD, spec.invalid.format(
                    payload=_payload_text(payload), name=spec.name)
            return -1, ints, floats, BAD_PAYLOAD, (
                f"The action {_payload_text(payload)} is not in the valid action space of "
                f"{spec.name} so nothing is executed."
            )
        return kind, ints, floats, OK, ""

    # -- batches --------------------------------------------------------------------------
    def new_parser(self) -> "Parser":
        """A parser of this grammar with its own cache (one per BatchEnv)."""
        return Parser(self)

    def parse_list(self, texts: Sequence[str]) -> ActionBatch:
        """Convenience: parse into a freshly allocated batch with a fresh parser (a hot loop
        keeps one ``Parser`` and one ``ActionBatch`` instead)."""
        return Parser(self).parse(texts, ActionBatch.empty(len(texts), self.width))

    def format_action(self, name: str, payload) -> str:
        """The canonical action string, as the reference's solvers write it."""
        return f"({name!r}, {payload!r})"


class Parser:
    """Parses batches of model strings for one grammar, remembering each distinct string.

    It holds the mutable part of parsing: the vocabulary (text -> row of the tables), the
    tables of parsed rows (kind, payload, error, the step template's masks, the message) and a
    gather scratch. Each BatchEnv owns one, so envs never share parse state and may be stepped
    from different threads; one parser must not be used by two threads at once (nor is the
    BatchEnv that owns it)."""

    def __init__(self, grammar: Grammar):
        self.grammar = grammar
        width = grammar.width
        self._vocab: dict[str | None, int] = {}
        self._messages: list[str] = []
        self._kind = np.zeros(64, np.int32)
        self._ints = np.zeros((64, width), np.int32)
        self._floats = np.zeros((64, width), np.float64)
        self._error = np.zeros(64, np.int32)
        # The step template's masks per vocabulary row: a valid non-stop action, a valid stop.
        self._move = np.zeros(64, np.bool_)
        self._stop = np.zeros(64, np.bool_)
        self._invalid = np.zeros(64, np.bool_)
        self._ids = np.zeros(0, np.int64)

    def _intern(self, text: str) -> int:
        grammar = self.grammar
        kind, ints, floats, error, message = grammar.parse_one(text)
        row = len(self._messages)
        if row >= self._kind.shape[0]:
            grow = self._kind.shape[0] * 2
            self._kind = np.resize(self._kind, grow)
            self._error = np.resize(self._error, grow)
            self._move = np.resize(self._move, grow)
            self._stop = np.resize(self._stop, grow)
            self._invalid = np.resize(self._invalid, grow)
            self._ints = np.resize(self._ints, (grow, grammar.width))
            self._floats = np.resize(self._floats, (grow, grammar.width))
        self._kind[row] = kind
        self._ints[row] = ints
        self._floats[row] = floats
        self._error[row] = error
        self._stop[row] = error == OK and kind == grammar.stop_kind
        self._move[row] = error == OK and kind != grammar.stop_kind
        self._invalid[row] = error in INVALID_CODES
        self._messages.append(message)
        if text is None or (isinstance(text, str) and len(text) <= _CACHE_MAX_TEXT):
            self._vocab[text] = row   # None: the filler of rows that are not stepped
        return row

    def __len__(self) -> int:
        """Rows in the vocabulary table (bounded: the table starts over past a limit)."""
        return len(self._messages)

    def parse(self, texts: Sequence[str], out: ActionBatch) -> ActionBatch:
        """Parse B strings into ``out`` (preallocated, see ActionBatch.empty); never raises."""
        batch = out.kind.shape[0]
        if len(texts) != batch:
            raise ValueError(f"actions: expected {batch} action strings, got {len(texts)}")
        if len(self._messages) > _CACHE_MAX_ENTRIES:
            self._vocab.clear()
            self._messages.clear()
        vocab = self._vocab
        ids = [vocab.get(t) if type(t) is str or t is None else None for t in texts]
        if None in ids:
            ids = [self._intern(t) if i is None else i for t, i in zip(texts, ids)]
        messages = self._messages
        out.message = [messages[i] for i in ids]
        if batch <= _SMALL_BATCH:
            # A few rows: element copies cost less than the gathers' fixed overhead.
            for b, i in enumerate(ids):
                out.kind[b] = self._kind[i]
                out.error[b] = self._error[i]
                out.move[b] = self._move[i]
                out.stop[b] = self._stop[i]
                out.invalid[b] = self._invalid[i]
                out.ints[b] = self._ints[i]
                out.floats[b] = self._floats[i]
            return out
        if self._ids.shape[0] != batch:
            self._ids = np.zeros(batch, np.int64)
        self._ids[:] = ids
        np.take(self._kind, self._ids, out=out.kind)
        np.take(self._error, self._ids, out=out.error)
        np.take(self._move, self._ids, out=out.move)
        np.take(self._stop, self._ids, out=out.stop)
        np.take(self._invalid, self._ids, out=out.invalid)
        np.take(self._ints, self._ids, axis=0, out=out.ints)
        np.take(self._floats, self._ids, axis=0, out=out.floats)
        # Strings too long to remember still take a table row; the table is bounded by the
        # reset above, so a stream of long replies cannot grow it without limit.
        return out


def _safe_repr_source(value) -> str:
    try:
        return repr(value)[:_QUOTE_MAX]
    except Exception:
        return "<unprintable>"
