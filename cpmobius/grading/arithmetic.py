"""Exact arithmetic of the fast path: rationals, 60-digit reals, ±∞ (stage: grading).

Values are `Fraction` (exact), `Irr` (a real known to `MP` precision) or `Inf`. Operations raise
`Unsupported` where math-verify must decide (complex results, infinities in arithmetic) and
`TooBig` where an exact value would be astronomically large (reported as status "timeout").
`num_eq` is the numeric equality of the policy table, shared by the fast path and the workers.

Departures from the paper / released code (marked `# CPMöbius:`): a bare decimal equals a
non-terminating exact value only with ≥ 6 decimal places and significant digits, correctly rounded.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from mpmath.ctx_mp import MPContext


MP = MPContext()
MP.dps = 60
_EXACT_TOL = MP.mpf("1e-45")
_MAX_BITS = 400_000  # largest exact rational we build (~120k digits); beyond: "too big"
_MAX_EXP = 100_000


class Unsupported(Exception):
    """The fast path cannot evaluate this answer (math-verify decides)."""


class TooBig(Exception):
    """The answer contains a power whose exact value is astronomically large."""


class Irr:
    """A real number known only to MP precision (irrational or unproven rational)."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v


class Inf:
    """+∞ (sign 1) or -∞ (sign -1): compares equal only to itself; no arithmetic."""

    __slots__ = ("sign",)

    def __init__(self, sign: int) -> None:
        self.sign = sign


def to_mpf(x: Fraction | Irr) -> Any:
    """The value as an `MP` real."""
    if isinstance(x, Fraction):
        return MP.mpf(x.numerator) / x.denominator
    return x.v


def _check_size(x: Fraction) -> Fraction:
    if x.numerator.bit_length() > _MAX_BITS or x.denominator.bit_length() > _MAX_BITS:
        raise TooBig
    return x


def num_add(a: Any, b: Any) -> Any:
    """a + b (exact while both are rationals; likewise `num_mul`, `num_div`, `num_root`, `num_pow`)."""
    if isinstance(a, Inf) or isinstance(b, Inf):
        raise Unsupported
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check_size(a + b)
    return Irr(to_mpf(a) + to_mpf(b))


def num_neg(a: Any) -> Any:
    if isinstance(a, Inf):
        return Inf(-a.sign)
    return -a if isinstance(a, Fraction) else Irr(-a.v)


def num_mul(a: Any, b: Any) -> Any:
    if isinstance(a, Inf) or isinstance(b, Inf):
        raise Unsupported
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check_size(a * b)
    return Irr(to_mpf(a) * to_mpf(b))


def num_div(a: Any, b: Any) -> Any:
    if isinstance(a, Inf) or isinstance(b, Inf) or (isinstance(b, Fraction) and b == 0):
        raise Unsupported
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check_size(a / b)
    d = to_mpf(b)
    if d == 0:
        raise Unsupported
    return Irr(to_mpf(a) / d)


def _int_root(n: int, q: int) -> int | None:
    r = round(n ** (1.0 / q)) if n < 1 << 1000 else None
    if r is None:
        return None
    for c in (r - 1, r, r + 1):
        if c >= 0 and c**q == n:
            return c
    return None


def num_root(a: Any, q: int) -> Any:
    if isinstance(a, Inf) or q < 1 or q > 64:
        raise Unsupported
    if isinstance(a, Fraction):
        if a < 0:
            if q % 2 == 0:
                raise Unsupported  # complex: math-verify decides
            return num_neg(num_root(-a, q))
        rn, rd = _int_root(a.numerator, q), _int_root(a.denominator, q)
        if rn is not None and rd is not None:
            return Fraction(rn, rd)
    v = to_mpf(a)
    if v < 0:
        if q % 2 == 0:
            raise Unsupported
        return Irr(-MP.root(-v, q))
    return Irr(MP.root(v, q))


def num_pow(a: Any, e: Any) -> Any:
    if isinstance(a, Inf) or isinstance(e, Inf):
        raise Unsupported
    if not isinstance(e, Fraction) or e.denominator > 64:
        v, ev = to_mpf(a), to_mpf(e)
        if v <= 0 or abs(ev) > _MAX_EXP:
            raise Unsupported
        return Irr(MP.power(v, ev))
    if abs(e.numerator) > _MAX_EXP:
        raise TooBig
    if e.denominator != 1:
        return num_pow(num_root(a, e.denominator), Fraction(e.numerator))
    n = e.numerator
    if isinstance(a, Fraction):
        if a == 0 and n < 0:
            raise Unsupported
        if max(a.numerator.bit_length(), a.denominator.bit_length()) * abs(n) > _MAX_BITS:
            raise TooBig
        return a**n
    return Irr(MP.power(a.v, n))


def _real_only(f: Any, lo: float | None = None, hi: float | None = None, positive: bool = False) -> Any:
    def g(x: Any) -> Any:
        if (lo is not None and x < lo) or (hi is not None and x > hi) or (positive and x <= 0):
            raise ValueError("outside the real domain")
        return f(x)
    return g


# Functions the fast path evaluates (real arguments only; elsewhere math-verify decides).
FUNCS: dict[str, Any] = {
    "\\sin": MP.sin, "\\cos": MP.cos, "\\tan": MP.tan, "\\cot": MP.cot, "\\sec": MP.sec,
    "\\csc": MP.csc, "\\sinh": MP.sinh, "\\cosh": MP.cosh, "\\tanh": MP.tanh, "\\exp": MP.exp,
    "\\arcsin": _real_only(MP.asin, -1, 1), "\\arccos": _real_only(MP.acos, -1, 1), "\\arctan": MP.atan,
    "\\ln": _real_only(MP.ln, positive=True),
}


_DECIMAL_RE = re.compile(r"^-?(\d*)\.(\d+)(?:\\(?:times|cdot)10\^\{?([+-]?\d+)\}?)?$")


def decimal_info(src: str) -> tuple[int, int] | None:
    """(significant digits, decimal places) of a bare decimal literal, else None."""
    m = _DECIMAL_RE.match(src)
    if not m:
        return None
    ip, fp, ex = m.group(1), m.group(2), int(m.group(3) or 0)
    digits = (ip + fp).lstrip("0")
    return len(digits), len(fp) - ex


def num_eq(a: Any, b: Any, da: tuple[int, int] | None, db: tuple[int, int] | None) -> bool:
    """Numeric equality under the policy (exact; bare decimals with ≥ 6 places/significant digits)."""
    if isinstance(a, Inf) or isinstance(b, Inf):
        return isinstance(a, Inf) and isinstance(b, Inf) and a.sign == b.sign
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        if a == b:
            return True
    else:
        x, y = to_mpf(a), to_mpf(b)
        scale = max(MP.mpf(1), abs(x), abs(y))
        if abs(x - y) <= _EXACT_TOL * scale:
            return True
    for dec, d, v, other_dec in ((da, a, b, db), (db, b, a, da)):
        if dec is not None and other_dec is None:
            sig, places = dec
            if sig >= 6 and places >= 6:
                half_unit = MP.mpf(10) ** (-places) / 2
                if abs(to_mpf(d) - to_mpf(v)) <= half_unit * (1 + MP.mpf("1e-30")):
                    # CPMöbius: a decimal with ≥ 6 places and digits, correctly rounded, matches.
                    return True
    return False
