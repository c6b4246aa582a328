"""A small evaluator for arithmetic equations written as rows of symbol codes (Numba), used
instead of Python's ``eval``.

Symbol codes: digits 0-9 are codes 0-9, then + - * / = and a blank for padding (SYM_*). Each side
of the single '=' is read as a Python expression over these symbols (unary and binary + -,
* / // **, Python's precedence and associativity, true division, integer literals with no leading
zeros except all zeros), and the sides are equal when |lhs - rhs| < 1e-6. Anything Python would
reject (syntax, division by zero, 0 ** negative) makes the equation wrong. Integers are exact in
int64 and fall back to float64 beyond it, where Python would stay exact; a negative base raised
to a fractional power (a complex number in Python) counts as an error.

``is_correct`` takes its value and operator stacks from ``scratch()`` so that a loop over many
equations allocates them once; ``equation_correct`` is the one-off form.
"""
import math

import numpy as np
from numba import njit

# Symbol codes.
SYM_PLUS = 10
SYM_MINUS = 11
SYM_TIMES = 12
SYM_DIVIDE = 13
SYM_EQUALS = 14
SYM_BLANK = 15
N_SYMBOLS = 15
MAX_SYMBOLS = 32  # the longest equation the scratch stacks hold

# Evaluator operators and their binding power (unary minus/plus bind tighter than * and /,
# looser than ** on their right: -2**2 == -4, 2**-1 == 0.5).
_OP_ADD, _OP_SUB, _OP_MUL, _OP_DIV, _OP_FLOORDIV, _OP_POW, _OP_NEG, _OP_POS = range(8)
_PREC = np.array([1, 1, 2, 2, 2, 4, 3, 3], dtype=np.int64)
_I64_MAX = np.iinfo(np.int64).max
_I64_MIN = np.iinfo(np.int64).min
_EXACT_PRODUCT = 4.0e18  # |a*b| below this (in float) cannot overflow int64


@njit(cache=True, inline="always")
def _as_float(is_int, ival, fval):
    return float(ival) if is_int else fval


@njit(cache=True, nogil=True)
def _float_pow(x, y):
    """Python's float ** float: (ok, value)."""
    if y == 0.0:
        return True, 1.0
    if math.isnan(x):
        return True, x
    if math.isnan(y):
        return True, (1.0 if x == 1.0 else y)
    if x == 0.0 and y < 0.0:
        return False, 0.0  # ZeroDivisionError
    if x < 0.0 and math.isfinite(y) and y != math.floor(y):
        return False, 0.0  # complex in Python; treated as an error here
    r = math.pow(x, y)
    if math.isinf(r) and math.isfinite(x) and math.isfinite(y):
        return False, 0.0  # OverflowError
    return True, r


@njit(cache=True, nogil=True)
def _float_floordiv(x, y):
    """Python's float // float for y != 0."""
    mod = np.fmod(x, y)
    div = (x - mod) / y
    if mod != 0.0 and ((y < 0.0) != (mod < 0.0)):
        div -= 1.0
    if div != 0.0:
        floordiv = math.floor(div)
        if div - floordiv > 0.5:
            floordiv += 1.0
        return floordiv
    return math.copysign(0.0, x / y)


@njit(cache=True, nogil=True)
def _binary(op, a_int, ai, af, b_int, bi, bf):
    """(ok, is_int, ival, fval) of a <op> b with Python's semantics."""
    if op == _OP_ADD or op == _OP_SUB:
        if a_int and b_int:
            if op == _OP_SUB:
                if bi == _I64_MIN:
                    return True, False, 0, float(ai) - float(bi)
                bi = -bi
            if (bi > 0 and ai > _I64_MAX - bi) or (bi < 0 and ai < _I64_MIN - bi):
                return True, False, 0, float(ai) + float(bi)
            return True, True, ai + bi, 0.0
        x = _as_float(a_int, ai, af)
        y = _as_float(b_int, bi, bf)
        return True, False, 0, (x + y if op == _OP_ADD else x - y)
    if op == _OP_MUL:
        if a_int and b_int:
            p = float(ai) * float(bi)
            if abs(p) < _EXACT_PRODUCT:
                return True, True, ai * bi, 0.0
            return True, False, 0, p
        return True, False, 0, _as_float(a_int, ai, af) * _as_float(b_int, bi, bf)
    if op == _OP_DIV:
        y = _as_float(b_int, bi, bf)
        if y == 0.0:
            return False, False, 0, 0.0
        return True, False, 0, _as_float(a_int, ai, af) / y
    if op == _OP_FLOORDIV:
        if a_int and b_int:
            if bi == 0:
                return False, False, 0, 0.0
            if ai == _I64_MIN and bi == -1:
                return True, False, 0, -float(ai)
            return True, True, ai // bi, 0.0
        y = _as_float(b_int, bi, bf)
        if y == 0.0:
            return False, False, 0, 0.0
        return True, False, 0, _float_floordiv(_as_float(a_int, ai, af), y)
    # power
    if a_int and b_int:
        if bi < 0:
            if ai == 0:
                return False, False, 0, 0.0
            ok, r = _float_pow(float(ai), float(bi))
            return ok, False, 0, r
        if ai == 0 or ai == 1:
            return True, True, (1 if bi == 0 else ai), 0.0
        if ai == -1:
            return True, True, (1 if bi % 2 == 0 else -1), 0.0
        result = np.int64(1)
        base = ai
        e = bi
        exact = True
        while e > 0:
            if e & 1:
                p = float(result) * float(base)
                if abs(p) >= _EXACT_PRODUCT:
                    exact = False
                    break
                result = result * base
            e >>= 1
            if e > 0:
                q = float(base) * float(base)
                if abs(q) >= _EXACT_PRODUCT:
                    exact = False
                    break
                base = base * base
        if exact:
            return True, True, result, 0.0
        # Python stays exact here; float64 approximates (inf when even that overflows).
        return True, False, 0, math.pow(float(ai), float(bi))
    ok, r = _float_pow(_as_float(a_int, ai, af), _as_float(b_int, bi, bf))
    return ok, False, 0, r


@njit(cache=True, nogil=True)
def _reduce(op, v_int, v_i, v_f, top):
    """Apply operator ``op`` to the value stack; return (ok, new top)."""
    if op == _OP_NEG or op == _OP_POS:
        k = top - 1
        if op == _OP_NEG:
            if v_int[k]:
                if v_i[k] == _I64_MIN:
                    v_int[k] = False
                    v_f[k] = -float(v_i[k])
                else:
                    v_i[k] = -v_i[k]
            else:
                v_f[k] = -v_f[k]
        return True, top
    a = top - 2
    b = top - 1
    ok, is_int, ival, fval = _binary(op, v_int[a], v_i[a], v_f[a], v_int[b], v_i[b], v_f[b])
    v_int[a] = is_int
    v_i[a] = ival
    v_f[a] = fval
    return ok, top - 1


@njit(cache=True, nogil=True)
def _eval_side(sym, lo, hi, v_int, v_i, v_f, ops):
    """Evaluate sym[lo:hi] as a Python expression: (ok, is_int, ival, fval)."""
    top = 0
    nops = 0
    expect_operand = True
    p = lo
    while p < hi:
        c = sym[p]
        if c <= 9:
            if not expect_operand:
                return False, False, 0, 0.0
            q = p
            nonzero = False
            while q < hi and sym[q] <= 9:
                if sym[q] != 0:
                    nonzero = True
                q += 1
            if sym[p] == 0 and nonzero:
                return False, False, 0, 0.0  # leading zeros in a decimal literal
            ival = np.int64(0)
            fval = 0.0
            is_int = True
            for r in range(p, q):
                d = np.int64(sym[r])
                if is_int and ival > (_I64_MAX - d) // 10:
                    is_int = False
                    fval = float(ival)
                if is_int:
                    ival = ival * 10 + d
                else:
                    fval = fval * 10.0 + float(d)
            v_int[top] = is_int
            v_i[top] = ival
            v_f[top] = fval
            top += 1
            expect_operand = False
            p = q
            continue
        if c == SYM_PLUS or c == SYM_MINUS:
            if expect_operand:
                ops[nops] = _OP_POS if c == SYM_PLUS else _OP_NEG
                nops += 1
                p += 1
                continue
            op = _OP_ADD if c == SYM_PLUS else _OP_SUB
            p += 1
        elif c == SYM_TIMES or c == SYM_DIVIDE:
            if expect_operand:
                return False, False, 0, 0.0
            # Python's tokenizer reads '**' and '//' greedily.
            if p + 1 < hi and sym[p + 1] == c:
                op = _OP_POW if c == SYM_TIMES else _OP_FLOORDIV
                p += 2
            else:
                op = _OP_MUL if c == SYM_TIMES else _OP_DIV
                p += 1
        else:
            return False, False, 0, 0.0
        prec = _PREC[op]
        right_assoc = op == _OP_POW
        while nops > 0:
            top_prec = _PREC[ops[nops - 1]]
            if top_prec > prec or (top_prec == prec and not right_assoc):
                nops -= 1
                ok, top = _reduce(ops[nops], v_int, v_i, v_f, top)
                if not ok:
                    return False, False, 0, 0.0
            else:
                break
        ops[nops] = op
        nops += 1
        expect_operand = True
    if expect_operand:
        return False, False, 0, 0.0  # empty side or trailing operator
    while nops > 0:
        nops -= 1
        ok, top = _reduce(ops[nops], v_int, v_i, v_f, top)
        if not ok:
            return False, False, 0, 0.0
    return True, v_int[0], v_i[0], v_f[0]


@njit(cache=True, nogil=True)
def is_correct(sym, n, v_int, v_i, v_f, ops):
    """True if the equation sym[:n] is correct; the stacks come from ``scratch()``."""
    eq = -1
    for p in range(n):
        if sym[p] == SYM_EQUALS:
            if eq >= 0:
                return False
            eq = p
    if eq < 0:
        return False
    ok, l_int, li, lf = _eval_side(sym, 0, eq, v_int, v_i, v_f, ops)
    if not ok:
        return False
    ok, r_int, ri, rf = _eval_side(sym, eq + 1, n, v_int, v_i, v_f, ops)
    if not ok:
        return False
    if l_int and r_int:
        return li == ri
    d = abs(_as_float(l_int, li, lf) - _as_float(r_int, ri, rf))
    return d < 1e-6


@njit(cache=True, inline="always")
def scratch():
    return (np.zeros(MAX_SYMBOLS, np.bool_), np.zeros(MAX_SYMBOLS, np.int64),
            np.zeros(MAX_SYMBOLS, np.float64), np.zeros(MAX_SYMBOLS, np.int64))


@njit(cache=True, nogil=True)
def equation_correct(sym, n):
    """True if the equation sym[:n] is correct (two sides, equal within 1e-6)."""
    v_int, v_i, v_f, ops = scratch()
    return is_correct(sym, n, v_int, v_i, v_f, ops)
