"""Checks for user-given values (constructor keywords, init-state fields), one message style.

Every check takes the field's name first and returns the value coerced to its declared type;
a bad value raises ``ValueError("<field>: expected ..., got <value>")``, where the quoted value
is a short, safe excerpt (a huge or deeply nested value never makes the message itself fail).
Families, render and bridges all use these, so a user reads the same kind of message everywhere.

Inside ``recording()`` the scalar and vector checks (and ``rule``, a family's note of a constraint
it checks by hand) also log what they were asked to check: field, kind, bounds or options. Building
a Params object under it yields the valid ranges of its fields from the checks themselves, which
is what the difficulty table (bridges/difficulty.py) is made of; outside it they log nothing.
"""
from __future__ import annotations

import math
import reprlib
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np


def _big_int(value: int) -> str | None:
    """A huge int in words: its repr would spell out every digit (and raises past Python's
    4,300-digit limit for int-to-str conversion)."""
    if value.bit_length() <= 128:
        return None
    digits = int(value.bit_length() * 0.30103) + 1
    return f"{'-' if value < 0 else ''}an integer of about {digits} digits"


class _ShortRepr(reprlib.Repr):
    def repr_int(self, x, level):
        return _big_int(x) or super().repr_int(x, level)


_REPR = _ShortRepr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxlevel = 3


def describe(value) -> str:
    """A bounded repr of ``value`` for error messages (at most ~120 characters)."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    if type(value) is int and _big_int(value):
        return _big_int(value)
    try:
        text = _REPR.repr(value)
    except Exception:  # a hostile __repr__ must not turn an error message into a crash
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 120 else text[:117] + "..."


def show_path(path) -> str:
    """A path for a one-line message: long ones cut in the middle (the file name at the end is
    kept), control characters escaped."""
    text = str(path)
    if len(text) > 120:
        text = text[:50] + "..." + text[-67:]
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def is_integer(value) -> bool:
    """An int or NumPy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value) -> bool:
    """An int or float (Python or NumPy), not a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))


# ------------------------------------------------------------------------------ recording
@dataclass(frozen=True)
class Check:
    """One check as it was asked for: ``kind`` is the check's name ("integer", "real",
    "integers", "reals", "one_of", "boolean", or "rule" for a constraint a family checks by
    hand, described by ``text``); ``length`` is a vector's; ``optional`` marks
    ``optional_integer`` (None accepted)."""

    field: str
    kind: str
    low: float | None = None
    high: float | None = None
    positive: bool = False
    length: int | None = None
    options: tuple = ()
    optional: bool = False
    text: str = ""


# The log of the innermost ``recording()`` in this thread or task (None: not recording). A
# context variable, so a recording in one thread never sees another thread's checks.
_RECORDING: ContextVar[list | None] = ContextVar("visgym_validate_recording", default=None)


@contextmanager
def recording() -> Iterator[list[Check]]:
    """Log every check made in this thread while the block runs: ``with recording() as log:
    Params()`` leaves one ``Check`` per check call in ``log``, in call order."""
    log: list[Check] = []
    token = _RECORDING.set(log)
    try:
        yield log
    finally:
        _RECORDING.reset(token)


def _note(field: str, kind: str, **what) -> None:
    log = _RECORDING.get()
    if log is not None:
        log.append(Check(field, kind, **what))


def rule(field: str, text: str) -> None:
    """Note a constraint on ``field`` that its owner checks by hand (e.g. "odd", "at most
    max_count"), so a recording shows it beside the field's bounds. Checks nothing."""
    _note(field, "rule", text=text)


def integer(field: str, value, low: int | None = None, high: int | None = None) -> int:
    """An integer in [low, high] (either bound may be None)."""
    if _RECORDING.get() is not None:   # checks run in hot paths: one read when not recording
        _note(field, "integer", low=low, high=high)
    return _integer(field, value, low, high)


def _integer(field: str, value, low: int | None, high: int | None) -> int:
    if not is_integer(value):
        raise ValueError(f"{field}: expected an integer, got {describe(value)}")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{field}: must be >= {low}, got {describe(value)}")
    if high is not None and value > high:
        raise ValueError(f"{field}: must be <= {high}, got {describe(value)}")
    return value


def optional_integer(field: str, value, low: int | None = None, high: int | None = None):
    """None, or an integer in [low, high]."""
    if _RECORDING.get() is not None:
        _note(field, "integer", low=low, high=high, optional=True)
    return None if value is None else _integer(field, value, low, high)


def real(field: str, value, low: float | None = None, high: float | None = None, *,
         positive: bool = False, keep_int: bool = False) -> float:
    """A finite real number in [low, high]; ``positive`` also demands > 0. Returned as a float,
    or with ``keep_int`` as an int when an integer was given (for values that are shown to a
    user as given, e.g. in a prompt: 10 stays "10", not "10.0")."""
    if _RECORDING.get() is not None:
        _note(field, "real", low=low, high=high, positive=positive)
    return _real(field, value, low, high, positive, keep_int)


def _real(field: str, value, low: float | None, high: float | None, positive: bool,
          keep_int: bool) -> float:
    if not is_real(value):
        raise ValueError(f"{field}: expected a number, got {describe(value)}")
    try:
        out = float(value)
    except OverflowError:
        raise ValueError(f"{field}: {describe(value)} is too large") from None
    if not math.isfinite(out):
        raise ValueError(f"{field}: expected a finite number, got {describe(value)}")
    if positive and out <= 0:
        raise ValueError(f"{field}: must be > 0, got {out!r}")
    if low is not None and out < low:
        raise ValueError(f"{field}: must be >= {low}, got {out!r}")
    if high is not None and out > high:
        raise ValueError(f"{field}: must be <= {high}, got {out!r}")
    return int(value) if keep_int and is_integer(value) else out


def _sequence(field: str, value, length: int, what: str):
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, (list, tuple, np.ndarray)):
        raise ValueError(f"{field}: expected {what}, got {describe(value)}")
    # An array's shape, a list's length: checked before any element is looked at.
    if (value.shape if isinstance(value, np.ndarray) else (len(value),)) != (length,):
        raise ValueError(f"{field}: expected {what}, got {describe(value)}")
    return value


def reals(field: str, value, length: int, low: float | None = None,
          high: float | None = None, *, positive: bool = False) -> tuple[float, ...]:
    """A list/tuple of ``length`` finite reals, each checked as ``real``."""
    if _RECORDING.get() is not None:
        _note(field, "reals", low=low, high=high, positive=positive, length=length)
    seq = _sequence(field, value, length, f"a list of {length} numbers")
    return tuple(_real(f"{field}[{k}]", v, low, high, positive, False)
                 for k, v in enumerate(seq))


def integers(field: str, value, length: int, low: int | None = None,
             high: int | None = None) -> tuple[int, ...]:
    """A list/tuple of ``length`` integers, each checked as ``integer``."""
    if _RECORDING.get() is not None:
        _note(field, "integers", low=low, high=high, length=length)
    seq = _sequence(field, value, length, f"a list of {length} integers")
    return tuple(_integer(f"{field}[{k}]", v, low, high) for k, v in enumerate(seq))


def one_of(field: str, value, options: Iterable):
    """``value`` if it is one of ``options`` (compared by equality, strings exactly)."""
    options = tuple(options)
    if _RECORDING.get() is not None:
        _note(field, "one_of", options=options)
    if not isinstance(value, (str, int, float, type(None))) or value not in options:
        raise ValueError(f"{field}: expected one of {options}, got {describe(value)}")
    return value


def boolean(field: str, value) -> bool:
    """True or False (a Python or NumPy bool; 0 and 1 are not accepted)."""
    if _RECORDING.get() is not None:
        _note(field, "boolean")
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{field}: expected True or False, got {describe(value)}")
    return bool(value)


def int_grid(field: str, value, shape: tuple[int, int], low: int, high: int) -> np.ndarray:
    """An int64 array of ``shape`` (rows, cols) with entries in [low, high], from a list of
    lists of integers or an integer-typed array. Structure, types and shape are checked before
    anything is converted, so a huge or deeply nested value is refused at once without being
    copied, and a float such as 0.5 or a string "1" is never cast into a valid entry."""
    rows, cols = shape
    want = f"a grid of shape ({rows}, {cols}) ({rows} lists of {cols} integers {low}..{high})"
    if isinstance(value, np.ndarray):
        if value.shape != (rows, cols):
            raise ValueError(f"{field}: expected {want}, got shape {value.shape}")
        if value.dtype.kind not in "iu":
            raise ValueError(f"{field}: expected {want}, got {describe(value)}")
        grid = value  # range-checked below in its own dtype, then converted
    else:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{field}: expected {want}, got {describe(value)}")
        if len(value) != rows:
            raise ValueError(f"{field}: expected {want}, got {len(value)} rows")
        for r, row in enumerate(value):
            if not isinstance(row, (list, tuple)) or len(row) != cols:
                what = f"{len(row)} entries" if isinstance(row, (list, tuple)) else describe(row)
                raise ValueError(f"{field}[{r}]: expected a list of {cols} integers, got {what}")
            if not all(type(v) is int for v in row):  # the common case, checked fast
                for c, v in enumerate(row):
                    if not is_integer(v):
                        raise ValueError(f"{field}[{r}][{c}]: expected an integer {low}..{high}, "
                                         f"got {describe(v)}")
        try:
            grid = np.array(value, dtype=np.int64)
        except OverflowError:  # an entry beyond int64: find and name it
            for r, row in enumerate(value):
                for c, v in enumerate(row):
                    if not low <= v <= high:
                        raise ValueError(f"{field}[{r}][{c}]: must be in {low}..{high}, "
                                         f"got {describe(v)}") from None
            raise
    outside = (grid < low) | (grid > high)
    if outside.any():
        r, c = (int(i) for i in np.argwhere(outside)[0])
        raise ValueError(f"{field}[{r}][{c}]: must be in {low}..{high}, got {int(grid[r, c])}")
    return grid.astype(np.int64, copy=False)


def mapping(field: str, value, required: Iterable[str] = ()) -> dict:
    """A dict that has every key of ``required``."""
    if not isinstance(value, dict):
        raise ValueError(f"{field}: expected a dict, got {type(value).__name__}")
    for key in required:
        if key not in value:
            raise ValueError(f"{field}.{key}: missing")
    return value


MAX_NDIM = 64   # NumPy's own limit: a list nested deeper is no array


def _outer_shape(value) -> tuple:
    """The shape ``np.asarray(value)`` has if ``value`` is regular, found without converting:
    an array's (or array-like's) ``shape``, else the lengths of a nested list/tuple along its
    first elements (at most MAX_NDIM + 1 levels: cost independent of the value's size)."""
    shape = []
    while len(shape) <= MAX_NDIM:
        if isinstance(value, (list, tuple)):
            shape.append(len(value))
            if not value:
                break
            value = value[0]
            continue
        if not isinstance(value, (str, bytes)):
            try:
                inner = getattr(value, "shape", None)
            except Exception:  # a hostile shape property: np.asarray decides below
                inner = None
            if isinstance(inner, tuple) and all(type(d) is int for d in inner):
                shape.extend(inner)
        break
    return tuple(shape)


def _regular(value, shape: tuple) -> bool:
    """Whether a nested list/tuple (or array) has exactly ``shape`` at every level, walked level
    by level: the cost is bounded by the size of ``shape``, not by the value's."""
    if isinstance(value, (list, tuple)):
        return bool(shape) and len(value) == shape[0] and all(_regular(v, shape[1:])
                                                              for v in value)
    return _outer_shape(value) == tuple(shape)


def _shape_text(shape) -> str:
    """A shape as NumPy prints it (at most 8 axes shown)."""
    shape = tuple(shape)
    if len(shape) > 8:
        return "(" + ", ".join(str(d) for d in shape[:8]) + f", ... {len(shape)} axes)"
    return str(shape)


def _check_shape(field: str, shape: tuple, trailing: tuple, shapes) -> None:
    n = len(trailing)
    if shapes is not None:
        if shape not in shapes:
            want = " or ".join(_shape_text(s) for s in shapes)
            raise ValueError(f"{field}: expected shape {want}, got shape {_shape_text(shape)}")
    elif len(shape) < n or shape[len(shape) - n:] != tuple(trailing):
        want = "(" + ", ".join(["..."] + [str(d) for d in trailing]) + ")"
        raise ValueError(f"{field}: expected shape {want}, got shape {_shape_text(shape)}")


def real_array(field: str, value, trailing: tuple = (), *, shapes=None, positive: bool = False,
               finite: bool = True, bound=None) -> np.ndarray:
    """A float64 array of real numbers (ints or floats, not bools) from an array, a nested list
    or a scalar, whose shape ends in ``trailing`` (e.g. (3,) for 3-vectors, (4, 4) for
    matrices; any leading axes) or, with ``shapes`` (a sequence of shapes), is one of
    ``shapes``; finite unless ``finite`` is False; ``positive`` demands > 0; ``bound`` (a
    number, or an array broadcasting against the value's shape) demands |x| <= bound
    elementwise, and the message names the first element outside it.

    The shape is checked before anything is converted (an array's ``shape``; a nested list's
    lengths, level by level), so a huge value is refused at once: with ``shapes`` the work is
    bounded by the largest shape named, with ``trailing`` alone by the list's depth (leading
    axes of any length are then converted)."""
    if shapes is not None:
        shapes = tuple(tuple(int(d) for d in shape) for shape in shapes)
    outer = _outer_shape(value)
    if outer or isinstance(value, (list, tuple)):   # anything with axes: its shape first
        _check_shape(field, outer, trailing, shapes)
        if shapes is not None and isinstance(value, (list, tuple)) and \
                not _regular(value, outer):          # ragged, within the shape's bounds
            raise ValueError(f"{field}: expected real numbers, got {describe(value)}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, OverflowError):  # ragged lists, hostile __array__
        arr = None
    if arr is None or arr.dtype.kind not in "iuf":
        raise ValueError(f"{field}: expected real numbers, got {describe(value)}")
    _check_shape(field, arr.shape, trailing, shapes)
    arr = arr.astype(np.float64, copy=False)
    if finite and not np.isfinite(arr).all():
        raise ValueError(f"{field}: expected finite numbers, got {describe(value)}")
    if positive and (arr <= 0).any():
        raise ValueError(f"{field}: must be > 0, got {describe(value)}")
    if bound is not None:
        limit = np.broadcast_to(np.asarray(bound, np.float64), arr.shape)
        outside = ~(np.abs(arr) <= limit)
        if outside.any():
            at = tuple(int(i) for i in np.argwhere(outside)[0])
            where = field + "".join(f"[{i}]" for i in at)
            raise ValueError(f"{where}: must be within [-{limit[at]:g}, {limit[at]:g}], "
                             f"got {float(arr[at])!r}")
    return arr


# ------------------------------------------------------------------------------ init states
REQUIRED = object()


def check_with(check, *args, **kwargs):
    """A field check made from one of the checks above: ``check(field, value, *args,
    **kwargs)`` (``InitSchema`` calls it with the field's full name and the value)."""
    return lambda field, value: check(field, value, *args, **kwargs)


class InitSchema:
    """The fields of a family's reference init-state dicts and how each is checked, so a family
    states its init-state format once and never re-validates fields by hand.

    ``fields`` maps each field name to a check ``check(field, value) -> parsed`` (``check_with``
    builds one from the checks above; the field name it gets is the full path, e.g.
    ``init_states[3].current_rot``), to a nested ``InitSchema`` (a dict-valued field), or to
    ``(check, default)`` for an optional field (absent: ``default``, unchecked). ``finish(parsed,
    where)`` may check fields against each other and return the parsed dict (or a new one).
    Unknown keys are ignored, as the reference ignores them."""

    def __init__(self, fields: dict, finish=None):
        self.fields = dict(fields)
        self.finish = finish
        self.required = tuple(name for name, spec in self.fields.items()
                              if not isinstance(spec, tuple))

    def parse(self, value, where: str) -> dict:
        """The checked fields of one dict (ValueError naming the first bad field)."""
        mapping(where, value, self.required)
        parsed = {}
        for name, spec in self.fields.items():
            field = f"{where}.{name}"
            if isinstance(spec, tuple):
                check, default = spec
                if name not in value:
                    parsed[name] = default
                    continue
            else:
                check = spec
            if isinstance(check, InitSchema):
                parsed[name] = check.parse(value[name], field)
            else:
                parsed[name] = check(field, value[name])
        if self.finish is not None:
            parsed = self.finish(parsed, where)
        return parsed

    def parse_all(self, init_states) -> list[dict]:
        """Every init state checked (``init_states[k]`` in messages) before any is used, so a
        refused batch changes nothing."""
        return [self.parse(init, f"init_states[{k}]") for k, init in enumerate(init_states)]
