"""Bounded parser for the Python-literal subset that model actions are written in, such as
``('move', 2)`` or ``('swap', ((0, 0), (1, 1)))``: it returns the same Python value that
``ast.literal_eval`` (Python 3.11) would for every input it accepts, and a short plain-English
message for everything else. Model text is untrusted and may be huge or deeply nested, so it is
never given to ``eval``, ``ast.literal_eval`` or ``compile``; instead a hand-written tokenizer and
recursive-descent parser read at most ``MAX_CHARS`` characters in linear time, with bracket
nesting capped at ``MAX_DEPTH`` (checked before recursing), and never raise.
"""

from __future__ import annotations

import keyword
import unicodedata

__all__ = ["MAX_CHARS", "MAX_DEPTH", "MAX_INT_DIGITS", "parse_literal"]

MAX_CHARS = 4096  # hard cap on input length
MAX_DEPTH = 32  # nesting cap for brackets
MAX_INT_DIGITS = 4000  # longest accepted integer literal (Python's own limit is 4300)

_SNIP = 30  # at most this many characters of the input are quoted in a message

_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
_OCT = frozenset("01234567")
_BIN = frozenset("01")
_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_ASCII_IDENT = _ASCII_LETTERS | _DIGITS
_STRING_PREFIXES = frozenset(("r", "u", "b", "br", "rb", "f", "fr", "rf"))
_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = frozenset(")]}")
_OPERATOR_CHARS = frozenset("*/%@&|^~<>=!")
_TWO_CHAR_OPS = frozenset(("**", "//", "==", "!=", "<=", ">=", "<<", ">>", "->"))
_SIMPLE_ESCAPES = {
    "\\": "\\", "'": "'", '"': '"', "a": "\x07", "b": "\x08", "f": "\x0c",
    "n": "\n", "r": "\r", "t": "\t", "v": "\x0b",
}
_KEYWORDS = frozenset(keyword.kwlist) - {"True", "False", "None"}
_NAME_HINTS = {
    "true": " (booleans are written True and False)",
    "false": " (booleans are written True and False)",
    "none": " (the empty value is written None)",
    "null": " (the empty value is written None)",
}


class _Fail(Exception):
    """A parse error; ``args[0]`` is the message shown to the model."""


def _snip(text: str) -> str:
    """Quote at most _SNIP characters of ``text`` on one line (repr-style escapes)."""
    if len(text) > _SNIP:
        return repr(text[:_SNIP]) + "..."
    return repr(text)


def _name_snip(name: str) -> str:
    return name if len(name) <= _SNIP else name[:_SNIP] + "..."


# Token kinds (tokens are tuples ``(kind, value, start, end)``).
_NUM, _STR, _NAME, _DOTS, _OP, _NL, _END = "num", "str", "name", "dots", "op", "newline", "end"


class _Lexer:
    """Python's tokenizer, reduced to what literals need; produces one token per call."""

    def __init__(self, s: str, start: int) -> None:
        self.s = s
        self.n = len(s)
        self.i = start
        self.stack: list[tuple[str, int]] = []  # open brackets: (char, position)
        self.bol = True  # at the beginning of a physical line
        self.blank = False  # the current line holds only blanks and/or a comment
        self.after_value = False  # the previous token ends a value (so '*' would be an operator)

    # -- helpers -----------------------------------------------------------------------
    def _continuation(self, i: int) -> int:
        """Skip a backslash-newline at ``i``; return the index after the newline."""
        s, n = self.s, self.n
        j = i + 1
        if j >= n or s[j] not in "\r\n":
            raise _Fail(
                f"a backslash outside a string (position {i}) must end the line; "
                "it may not be followed by other text")
        j += 2 if (s[j] == "\r" and j + 1 < n and s[j + 1] == "\n") else 1
        if j >= n:
            raise _Fail(f"the text ends right after a line-continuation backslash at position {i}")
        return j

    def _indentation(self) -> None:
        """Indentation handling at the start of a line (only matters outside brackets)."""
        s, n = self.s, self.n
        i = self.i
        col = 0
        cont_col = 0
        line_start = i
        while i < n:
            c = s[i]
            if c == " ":
                col += 1
            elif c == "\t":
                col = (col // 8 + 1) * 8
            elif c == "\x0c":
                col = 0
            elif c == "\\":
                cont_col = cont_col or col
                i = self._continuation(i)
                continue
            else:
                break
            i += 1
        self.i = i
        self.blank = i < n and s[i] in "#\r\n"
        if not self.blank and not self.stack and (cont_col or col):
            raise _Fail(
                f"unexpected indentation at position {line_start}: outside brackets, a line "
                "after a line break must not start with blanks")

    def _bad_number(self, start: int, why: str) -> _Fail:
        s, n = self.s, self.n
        j = start
        while j < n and j - start < _SNIP and (s[j] in _ASCII_IDENT or s[j] == "."):
            j += 1
        return _Fail(f"invalid number {_snip(s[start:j])} at position {start} ({why})")

    def _digits(self, j: int, start: int) -> int:
        """Consume ``digit (['_'] digit)*`` starting at a digit; return the end index."""
        s, n = self.s, self.n
        while True:
            while j < n and s[j] in _DIGITS:
                j += 1
            if j < n and s[j] == "_":
                if j + 1 < n and s[j + 1] in _DIGITS:
                    j += 1
                    continue
                raise self._bad_number(start, "an underscore must sit between two digits")
            return j

    def _end_of_number(self, start: int, j: int) -> None:
        s = self.s
        if j < self.n and (s[j] in _ASCII_IDENT or ord(s[j]) >= 128):
            raise self._bad_number(start, f"a number may not be directly followed by {s[j]!r}")

    def _check_int_digits(self, start: int, digits: str) -> None:
        if len(digits) > MAX_INT_DIGITS:
            raise _Fail(
                f"the integer at position {start} has {len(digits)} digits; "
                f"at most {MAX_INT_DIGITS} are accepted")

    def _number(self, i: int) -> tuple:
        s, n = self.s, self.n
        start = i
        if s[i] == "0" and i + 1 < n and s[i + 1] in "xXoObB":
            kind = s[i + 1].lower()
            base, allowed, name = {"x": (16, _HEX, "hexadecimal"), "o": (8, _OCT, "octal"),
                                   "b": (2, _BIN, "binary")}[kind]
            j = i + 2
            while True:
                if j < n and s[j] == "_":
                    j += 1
                if not (j < n and s[j] in allowed):
                    if j < n and s[j] in _DIGITS:
                        raise self._bad_number(start, f"digit {s[j]!r} is not allowed in a {name} number")
                    raise self._bad_number(start, f"not a valid {name} number")
                while j < n and s[j] in allowed:
                    j += 1
                if not (j < n and s[j] == "_"):
                    break
            if j < n and s[j] in _DIGITS:
                raise self._bad_number(start, f"digit {s[j]!r} is not allowed in a {name} number")
            self._end_of_number(start, j)
            digits = s[i + 2:j].replace("_", "")
            self._check_int_digits(start, digits)
            return (_NUM, int(digits, base), start, j)

        j = i
        is_float = False
        leading_zeros = False
        if s[j] != ".":
            j = self._digits(j, start)
            int_part = s[i:j]
            leading_zeros = int_part[0] == "0" and int_part.strip("0_") != ""
        if j < n and s[j] == ".":
            is_float = True
            j += 1
            if j < n and s[j] in _DIGITS:
                j = self._digits(j, start)
        if j < n and s[j] in "eE":
            k = j + 1
            if k < n and s[k] in "+-":
                k += 1
            if not (k < n and s[k] in _DIGITS):
                raise self._bad_number(start, "the exponent after 'e' has no digits")
            j = self._digits(k, start)
            is_float = True
        text = s[i:j].replace("_", "")
        if j < n and s[j] in "jJ":
            j += 1
            self._end_of_number(start, j)
            return (_NUM, complex(0.0, float(text)), start, j)
        if not is_float and leading_zeros:
            raise self._bad_number(
                start, "leading zeros are not allowed in a non-zero integer; write 0o... for octal")
        self._end_of_number(start, j)
        if is_float:
            return (_NUM, float(text), start, j)
        self._check_int_digits(start, text)
        return (_NUM, int(text), start, j)

    def _string(self, start: int, prefix: str) -> tuple:
        s, n = self.s, self.n
        p = prefix.lower()
        q_pos = start + len(prefix)
        q = s[q_pos]
        triple = s.startswith(q * 3, q_pos)
        body = q_pos + (3 if triple else 1)
        j = body
        while True:
            if j >= n:
                what = "triple-quoted string" if triple else "string"
                raise _Fail(f"unterminated {what} starting at position {start}")
            c = s[j]
            if c == "\\":
                j += 3 if s.startswith("\r\n", j + 1) else 2
                continue
            if c == q and (not triple or s.startswith(q * 3, j)):
                break
            if not triple and c in "\r\n":
                raise _Fail(f"unterminated string starting at position {start}")
            j += 1
        end = j + (3 if triple else 1)
        content = s[body:j]
        if "f" in p:
            raise _Fail(f"f-strings such as f'...' are not allowed (position {start})")
        is_bytes = "b" in p
        if is_bytes and not content.isascii():
            raise _Fail(f"the bytes literal at position {start} contains a non-ASCII character")
        if "\r" in content:  # Python reads \r\n and \r as \n
            content = content.replace("\r\n", "\n").replace("\r", "\n")
        if "r" in p:
            value = content
        else:
            value = _decode_escapes(content, is_bytes, start)
        if is_bytes:
            return (_STR, value.encode("latin-1"), start, end)
        return (_STR, value, start, end)

    # -- main entry --------------------------------------------------------------------
    def next(self) -> tuple:
        s, n = self.s, self.n
        while True:
            if self.bol:
                self.bol = False
                self._indentation()
            i = self.i
            while i < n and s[i] in " \t\x0c":
                i += 1
            self.i = i
            if i >= n:
                if self.stack:
                    ch, pos = self.stack[-1]
                    raise _Fail(f"'{ch}' at position {pos} was never closed")
                return (_END, None, n, n)
            c = s[i]
            if c == "#":
                j = i
                while j < n and s[j] not in "\r\n":
                    j += 1
                self.i = j
                continue
            if c == "\n" or c == "\r":
                j = i + 2 if s.startswith("\r\n", i) else i + 1
                self.i = j
                self.bol = True
                if not self.stack and not self.blank:
                    return (_NL, None, i, j)
                continue
            if c == "\\":
                self.i = self._continuation(i)
                continue
            break

        if c in _DIGITS or (c == "." and i + 1 < n and s[i + 1] in _DIGITS):
            tok = self._number(i)
        elif c == ".":
            if s.startswith("...", i):
                tok = (_DOTS, Ellipsis, i, i + 3)
            else:
                raise _Fail(f"unexpected '.' at position {i}; only literal values are allowed")
        elif c == "'" or c == '"':
            tok = self._string(i, "")
        elif c in _ASCII_LETTERS or ord(c) >= 128:
            j = i
            while j < n and (s[j] in _ASCII_IDENT or ord(s[j]) >= 128):
                j += 1
            raw = s[i:j]
            if j < n and s[j] in "'\"" and raw.lower() in _STRING_PREFIXES:
                tok = self._string(i, raw)
            else:
                if not raw.isascii() and not raw.isidentifier():
                    for k, ch in enumerate(raw):
                        if not (ch.isidentifier() if k == 0 else ("a" + ch).isidentifier()):
                            raise _Fail(f"unexpected character {ch!r} at position {i + k}")
                    raise _Fail(f"{_snip(raw)} at position {i} is not a valid name or literal")
                tok = (_NAME, raw, i, j)
        elif c in _OPEN:
            if len(self.stack) >= MAX_DEPTH:
                raise _Fail(f"nesting is deeper than {MAX_DEPTH} levels (position {i})")
            self.stack.append((c, i))
            tok = (_OP, c, i, i + 1)
        elif c in _CLOSE:
            if not self.stack:
                raise _Fail(f"unmatched '{c}' at position {i}")
            ch, pos = self.stack.pop()
            if _OPEN[ch] != c:
                raise _Fail(f"'{c}' at position {i} does not match '{ch}' at position {pos}")
            tok = (_OP, c, i, i + 1)
        elif c in ",:+-":
            tok = (_OP, c, i, i + 1)
        elif c in _OPERATOR_CHARS and self.after_value:
            op = s[i:i + 2] if s[i:i + 2] in _TWO_CHAR_OPS else c
            raise _Fail(f"operators such as '{op}' are not allowed (position {i}); "
                        "only literal values are")
        else:
            raise _Fail(f"unexpected character {c!r} at position {i}")
        self.i = tok[3]
        self.after_value = tok[0] in (_NUM, _STR, _NAME, _DOTS) or tok[1] in _CLOSE
        return tok


def _decode_escapes(content: str, is_bytes: bool, start: int) -> str:
    """Backslash escapes of a non-raw literal (for bytes the result holds chars < 256)."""
    kind = "bytes literal" if is_bytes else "string"
    out: list[str] = []
    j = 0
    n = len(content)
    while True:
        k = content.find("\\", j)
        if k < 0:
            out.append(content[j:])
            break
        out.append(content[j:k])
        if k + 1 >= n:  # cannot happen: the tokenizer makes a backslash escape something
            out.append("\\")
            break
        c = content[k + 1]
        j = k + 2
        if c == "\n":  # backslash-newline inside a string: both are dropped
            continue
        simple = _SIMPLE_ESCAPES.get(c)
        if simple is not None:
            out.append(simple)
        elif c in _OCT:
            value = ord(c) - 48
            for _ in range(2):
                if j < n and content[j] in _OCT:
                    value = value * 8 + ord(content[j]) - 48
                    j += 1
            out.append(chr(value & 0xFF if is_bytes else value))
        elif c == "x" or (not is_bytes and c in "uU"):
            width = {"x": 2, "u": 4, "U": 8}[c]
            digits = content[j:j + width]
            if len(digits) != width or not all(d in _HEX for d in digits):
                raise _Fail(f"the {kind} at position {start} has a bad escape "
                            f"{_snip(content[k:k + 2 + width])}: '\\{c}' needs {width} hex digits")
            value = int(digits, 16)
            if value > 0x10FFFF:
                raise _Fail(f"the string at position {start} has an escape "
                            f"{_snip(content[k:k + 10])} beyond the last Unicode character")
            out.append(chr(value))
            j += width
        elif c == "N" and not is_bytes:
            close = content.find("}", j) if content.startswith("{", j) else -1
            if close <= j + 1:
                raise _Fail(f"the string at position {start} has a malformed '\\N{{...}}' escape")
            name = content[j + 1:close]
            try:
                char = unicodedata.lookup(name)
            except (KeyError, ValueError):
                char = ""
            if len(char) != 1:  # unknown name, or a named sequence (Python rejects those)
                raise _Fail(f"the string at position {start} has an unknown character name "
                            f"in {_snip(content[k:close + 1])}")
            out.append(char)
            j = close + 1
        else:  # unknown escape: Python keeps the backslash
            out.append("\\")
            j = k + 1
    return "".join(out)


class _Parser:
    """Recursive descent over _Lexer tokens.

    Nodes are ``(kind, value, position)``; kind is "const" (a single literal token or string
    concatenation), "signed" (+/- applied to a numeric constant), "binop" (real +/- imaginary),
    "value" (a container or set()) or "name" (a bare name, valid only as ``set`` in ``set()``).
    Parentheses around a single expression are transparent, exactly as in Python's AST.
    """

    def __init__(self, lexer: _Lexer) -> None:
        self.lx = lexer
        self._tok: tuple | None = None

    def peek(self) -> tuple:
        if self._tok is None:
            self._tok = self.lx.next()
        return self._tok

    def take(self) -> tuple:
        tok = self.peek()
        self._tok = None
        return tok

    def is_op(self, tok: tuple, chars: str) -> bool:
        return tok[0] == _OP and tok[1] in chars

    def starts_value(self, tok: tuple) -> bool:
        return tok[0] in (_NUM, _STR, _NAME, _DOTS) or self.is_op(tok, "([{+-")

    def text_of(self, tok: tuple) -> str:
        return self.lx.s[tok[2]:tok[3]]

    def unexpected(self, tok: tuple, expected: str) -> _Fail:
        if tok[0] == _END:
            return _Fail(f"the text ends where {expected} was expected")
        if tok[0] == _NL:
            return _Fail(f"line break at position {tok[2]} cuts the value off; "
                         "outside brackets the value must be on one line")
        hint = " (is a comma missing?)" if self.starts_value(tok) and "','" in expected else ""
        return _Fail(f"expected {expected} at position {tok[2]}, "
                     f"found {_snip(self.text_of(tok))}{hint}")

    def unexpected_after(self, node: tuple, tok: tuple, expected: str) -> _Fail:
        """Error for ``tok`` following ``node``; a bare name is the more useful thing to report."""
        if node[0] == "name":
            return self.name_error(node)
        return self.unexpected(tok, expected)

    def value(self, node: tuple) -> object:
        if node[0] == "name":
            raise self.name_error(node)
        return node[1]

    def name_error(self, node: tuple) -> _Fail:
        raw, pos = node[1], node[2]
        shown = _name_snip(raw)
        if raw in _KEYWORDS:
            return _Fail(f"'{shown}' at position {pos} is a Python keyword, not a literal value")
        hint = _NAME_HINTS.get(raw.lower(), "")
        return _Fail(f"'{shown}' at position {pos} is a bare name, not a literal; "
                     f"names must be quoted, as in '{shown}'{hint}")

    # -- grammar -----------------------------------------------------------------------
    def parse(self) -> object:
        first = self.peek()
        if first[0] == _END:
            raise _Fail("the action text contains no value, only blanks or comments")
        node = self.expr(0)
        tok = self.peek()
        if self.is_op(tok, ","):  # a bare top-level tuple: 'a', 1
            items = [self.value(node)]
            while self.is_op(tok, ","):
                self.take()
                tok = self.peek()
                if not self.starts_value(tok):
                    break
                items.append(self.value(self.expr(0)))
                tok = self.peek()
            result: object = tuple(items)
        else:
            result = self.value(node)
        while tok[0] == _NL:
            self.take()
            tok = self.peek()
        if tok[0] != _END:
            rest = self.lx.s[tok[2]:tok[2] + _SNIP + 1]
            raise _Fail(f"unexpected text after the value at position {tok[2]}: {_snip(rest)}")
        return result

    def expr(self, depth: int) -> tuple:
        left = self.unary(depth)
        tok = self.peek()
        if not self.is_op(tok, "+-"):
            return left
        op = self.take()
        right = self.unary(depth)
        after = self.peek()
        if self.is_op(after, "+-"):
            raise _Fail(f"operators such as '{after[1]}' are not allowed (position {after[2]}); "
                        "only literal values are (a complex number has one '+' or '-', as in 1+2j)")
        for node in (left, right):
            if node[0] == "name":
                raise self.name_error(node)
        lv, rv = left[1], right[1]
        if (left[0] in ("const", "signed") and type(lv) in (int, float)
                and right[0] == "const" and type(rv) is complex):
            return ("binop", lv + rv if op[1] == "+" else lv - rv, left[2])
        raise _Fail(f"operators such as '{op[1]}' are not allowed (position {op[2]}); only literal "
                    "values are (the one exception is a complex number such as 1+2j)")

    def unary(self, depth: int) -> tuple:
        tok = self.peek()
        if not self.is_op(tok, "+-"):
            return self.primary(depth)
        sign = self.take()
        nxt = self.peek()
        if self.is_op(nxt, "+-"):
            raise _Fail(f"'{sign[1]}' at position {sign[2]} is followed by another sign; "
                        "at most one sign may stand before a number")
        operand = self.primary(depth)
        if operand[0] == "const" and type(operand[1]) in (int, float, complex):
            value = operand[1]
            return ("signed", -value if sign[1] == "-" else +value, sign[2])
        if operand[0] == "name":
            raise self.name_error(operand)
        raise _Fail(f"the sign '{sign[1]}' at position {sign[2]} may only stand directly "
                    "before a number")

    def primary(self, depth: int) -> tuple:
        node = self.atom(depth)
        tok = self.peek()
        if self.is_op(tok, "("):
            if node[0] == "name" and unicodedata.normalize("NFKC", node[1]) == "set":
                self.take()
                if not self.is_op(self.peek(), ")"):
                    raise _Fail(f"set(...) with arguments is not allowed (position {node[2]}); "
                                "only the empty set() is")
                self.take()
                node = ("value", set(), node[2])
                tok = self.peek()
            elif node[0] == "name":
                raise _Fail(f"function calls such as {_name_snip(node[1])}(...) are not allowed "
                            f"(position {node[2]}); only literal values are")
        if self.is_op(tok, "("):
            raise _Fail(f"function calls are not allowed: '(' at position {tok[2]} follows a value")
        if self.is_op(tok, "["):
            if node[0] == "name":
                raise self.name_error(node)
            raise _Fail(f"indexing such as x[...] is not allowed: '[' at position {tok[2]} "
                        "follows a value")
        return node

    def atom(self, depth: int) -> tuple:
        if depth > MAX_DEPTH:  # the lexer already enforces this; kept as a guard
            raise _Fail(f"nesting is deeper than {MAX_DEPTH} levels")
        tok = self.take()
        kind, pos = tok[0], tok[2]
        if kind == _NUM:
            return ("const", tok[1], pos)
        if kind == _DOTS:
            return ("const", Ellipsis, pos)
        if kind == _STR:
            value = tok[1]
            while self.peek()[0] == _STR:  # implicit concatenation: 'a' 'b'
                nxt = self.take()
                if type(nxt[1]) is not type(value):
                    raise _Fail(f"bytes and str literals cannot be joined (position {nxt[2]})")
                value = value + nxt[1]
            return ("const", value, pos)
        if kind == _NAME:
            raw = tok[1]
            if raw == "True":
                return ("const", True, pos)
            if raw == "False":
                return ("const", False, pos)
            if raw == "None":
                return ("const", None, pos)
            return ("name", raw, pos)
        if kind == _OP and tok[1] == "(":
            return self.parens(tok, depth + 1)
        if kind == _OP and tok[1] == "[":
            return ("value", self.sequence("]", depth + 1)[0], pos)
        if kind == _OP and tok[1] == "{":
            return self.braces(tok, depth + 1)
        raise self.unexpected(tok, "a value")

    def sequence(self, close: str, depth: int) -> tuple[list, bool]:
        """Comma-separated values up to ``close``; returns (values-or-nodes, had_comma)."""
        nodes: list = []
        had_comma = False
        if self.is_op(self.peek(), close):
            self.take()
            return nodes, had_comma
        while True:
            nodes.append(self.expr(depth))
            tok = self.peek()
            if self.is_op(tok, ","):
                self.take()
                had_comma = True
                if self.is_op(self.peek(), close):
                    self.take()
                    break
                continue
            if self.is_op(tok, close):
                self.take()
                break
            raise self.unexpected_after(nodes[-1], tok, f"',' or '{close}'")
        if close == ")" and len(nodes) == 1 and not had_comma:
            return nodes, had_comma
        return [self.value(node) for node in nodes], had_comma

    def parens(self, open_tok: tuple, depth: int) -> tuple:
        items, had_comma = self.sequence(")", depth)
        if len(items) == 1 and not had_comma:
            return items[0]  # (x) is x
        return ("value", tuple(items), open_tok[2])

    def braces(self, open_tok: tuple, depth: int) -> tuple:
        pos = open_tok[2]
        if self.is_op(self.peek(), "}"):
            self.take()
            return ("value", {}, pos)
        first = self.expr(depth)
        if self.is_op(self.peek(), ":"):
            result: dict = {}
            key = first
            while True:
                self.take()  # the ':'
                val = self.value(self.expr(depth))
                self.insert_key(result, key)
                result[key[1]] = val
                tok = self.peek()
                if self.is_op(tok, ","):
                    self.take()
                    tok = self.peek()
                    if self.is_op(tok, "}"):
                        self.take()
                        break
                    key = self.expr(depth)
                    tok = self.peek()
                    if not self.is_op(tok, ":"):
                        raise self.unexpected_after(key, tok, "':' after a dict key")
                    continue
                if self.is_op(tok, "}"):
                    self.take()
                    break
                raise self.unexpected(tok, "',' or '}'")
            return ("value", result, pos)
        elements: set = set()
        node = first
        while True:
            value = self.value(node)
            try:
                elements.add(value)
            except TypeError as exc:
                raise _Fail(f"the set element at position {node[2]} is not hashable ({exc})") from None
            tok = self.peek()
            if self.is_op(tok, ","):
                self.take()
                if self.is_op(self.peek(), "}"):
                    self.take()
                    break
                node = self.expr(depth)
                continue
            if self.is_op(tok, "}"):
                self.take()
                break
            raise self.unexpected(tok, "',' or '}'")
        return ("value", elements, pos)

    def insert_key(self, result: dict, key: tuple) -> None:
        value = self.value(key)
        try:
            hash(value)
        except TypeError as exc:
            raise _Fail(f"the dict key at position {key[2]} is not hashable ({exc})") from None


def parse_literal(text: str) -> tuple[bool, object]:
    """(True, value) or (False, message). Never raises for ANY str input (and for a non-str input returns (False, message) too)."""
    try:
        if not isinstance(text, str):
            return False, f"the action must be text (str), not {type(text).__name__}"
        if type(text) is not str:
            text = str.__str__(text)  # a plain copy of a str subclass
        if len(text) > MAX_CHARS:
            return False, f"the text is {len(text)} characters long; at most {MAX_CHARS} are accepted"
        if not text.strip(" \t\r\n\x0c"):
            return False, "the action text is empty"
        null = text.find("\x00")
        if null >= 0:
            return False, f"null characters are not allowed (position {null})"
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return False, (f"the text contains an invalid character {text[exc.start]!r} "
                           f"(a lone surrogate) at position {exc.start}")
        start = len(text) - len(text.lstrip(" \t"))  # as ast.literal_eval does
        return True, _Parser(_Lexer(text, start)).parse()
    except _Fail as exc:
        return False, str(exc.args[0])
    except Exception as exc:  # safety net; the tests check it is never reached
        return False, f"internal error while reading the action ({type(exc).__name__})"
