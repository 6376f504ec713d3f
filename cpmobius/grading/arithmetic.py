"""Exact arithmetic of the fast path: rationals, 60-digit reals, ±∞ (stage: grading).

Values are `Fraction` (exact), `Irr` (a real known to `MP` precision, with an estimate of its
absolute error) or `Inf`. Operations raise `Unsupported` where math-verify must decide (complex
results, infinities in arithmetic, values that cannot be told from a pole or from zero) and
`TooBig` where an exact value would be astronomically large (reported as status "timeout").
`num_eq` is the numeric equality of the policy table, shared by the fast path and the workers:

* two rationals are equal only if they are the same rational (no tolerance, however tiny they
  are: 1/100! ≠ 1/101!, 2^-200 ≠ 2^-201);
* a real known to `MP` precision equals another value iff they differ by less than `_SAFETY`
  times their propagated rounding errors: the tolerance is relative to the size of the
  computation, never an absolute floor (π·10^-50 ≠ π·10^-51, while sin(π) = 0 and
  √2·√3 = √6);
* a real whose error bound is not small (over `_ILL_CONDITIONED` × max(1, |value|): a
  cancellation such as 10^80·√2 - 10^80·√2, a low-precision numerical integral, 0/0) is
  undetermined and equals nothing; the fast path hands it to the worker (`well_conditioned`
  raises `Unsupported`), whose exact sympy evaluation may still decide it;
* a bare decimal approximates a non-terminating value (a rational whose denominator has a prime
  factor other than 2 and 5, or a real) with ≥ 6 decimal places and ≥ 6 significant digits,
  correctly rounded; a terminating value only equals the decimal that is exactly it.

Departures from the paper / released code (marked `# CPMöbius:`): a bare decimal equals a
non-terminating exact value only with ≥ 6 decimal places and significant digits, correctly rounded;
rationals compare exactly and reals within their own propagated error (the released grader's
relative tolerance of 1e-4, and our former absolute floor of 1e-45, joined distinct tiny values);
an undetermined real (error bound not small) equals nothing (its tolerance would have matched any
number).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from mpmath.ctx_mp import MPContext

MP = MPContext()
MP.dps = 60
_ULP = MP.mpf(2) ** (1 - MP.prec)  # relative rounding error of one correctly rounded operation
# Two reals are equal iff they differ by at most _SAFETY times their estimated errors (~10^-50 of
# an O(1) value; the estimates are first-order, the margin absorbs their slack).
_SAFETY = MP.mpf(10) ** 10
# A real whose estimated error exceeds this share of max(1, |value|) is numerically undetermined
# (a pole, or a quotient of a number that cannot be told from zero): math-verify decides.
_ILL_CONDITIONED = MP.mpf(10) ** -30
_MAX_BITS = 400_000  # largest exact rational we build (~120k digits); beyond: "too big"
_MAX_EXP = 100_000
# Largest |argument| the fast path hands a function (`FUNCS`): sin, exp and the like of a larger value reduce it
# at a precision that grows with its size (sin((π^99999)^99999) ran for minutes in the calling process, where no
# timeout applies); beyond it the worker pool decides, under the grading timeout.
MAX_FUNCTION_ARG = MP.mpf(10) ** 12


class Unsupported(Exception):
    """The fast path cannot evaluate this answer (math-verify decides)."""


class TooBig(Exception):
    """The answer contains a power whose exact value is astronomically large."""


class Undetermined(Exception):
    """A numeric value known too imprecisely to be compared (see `determined`): it equals nothing."""


class Irr:
    """A real number known only to MP precision (irrational or unproven rational).

    Attributes:
        v: the value, an `MP` real.
        err: estimated bound of |v - true value| (absolute), propagated through every operation;
            default one rounding of v.
    """

    __slots__ = ("v", "err")

    def __init__(self, v: Any, err: Any = None) -> None:
        self.v = v  # an MP real (`+MP.pi`, not the lazy constant `MP.pi`)
        self.err = abs(v) * _ULP if err is None else err + abs(v) * _ULP


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


def num_err(x: Fraction | Irr) -> Any:
    """Estimated absolute error of `to_mpf(x)` (0 for rationals an `MP` real holds exactly)."""
    if isinstance(x, Irr):
        return x.err
    d = x.denominator
    nbits = x.numerator.bit_length()
    if d & (d - 1) == 0 and nbits <= MP.prec:
        return MP.zero
    # two roundings of |x| < 2^(nbits - dbits + 1): at most 2^(nbits - dbits + 3 - prec)
    return MP.ldexp(MP.one, nbits - d.bit_length() + 3 - MP.prec)


def determined(v: Any, err: Any) -> bool:
    """Whether a real `v` ± `err` is known well enough to compare: both finite and
    err <= `_ILL_CONDITIONED` × max(1, |v|) (a cancellation to 0 of O(1) terms is still determined)."""
    return bool(MP.isfinite(v) and MP.isfinite(err) and err <= _ILL_CONDITIONED * max(MP.one, abs(v)))


def well_conditioned(v: Any, err: Any) -> Irr:
    """`Irr(v, err)`; raises `Unsupported` when err makes the value meaningless (a pole, a
    cancellation of huge terms): math-verify (exact sympy) decides."""
    if not determined(v, err):
        raise Unsupported
    return Irr(v, err)


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
    # CPMöbius: a cancellation of huge terms (10^80√2 - 10^80√2 = 0 ± 10^20) is not a value.
    return well_conditioned(to_mpf(a) + to_mpf(b), num_err(a) + num_err(b))


def num_neg(a: Any) -> Any:
    if isinstance(a, Inf):
        return Inf(-a.sign)
    return -a if isinstance(a, Fraction) else Irr(-a.v, a.err)


def num_mul(a: Any, b: Any) -> Any:
    if isinstance(a, Inf) or isinstance(b, Inf):
        raise Unsupported
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check_size(a * b)
    x, y, ea, eb = to_mpf(a), to_mpf(b), num_err(a), num_err(b)
    return well_conditioned(x * y, abs(x) * eb + abs(y) * ea + ea * eb)


def num_div(a: Any, b: Any) -> Any:
    if isinstance(a, Inf) or isinstance(b, Inf) or (isinstance(b, Fraction) and b == 0):
        raise Unsupported
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check_size(a / b)
    d, ed = to_mpf(b), num_err(b)
    if abs(d) <= 2 * ed:
        raise Unsupported  # the divisor cannot be told from 0
    v = to_mpf(a) / d
    return well_conditioned(v, (num_err(a) + abs(v) * ed) / (abs(d) - ed))


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
    v, ev = to_mpf(a), num_err(a)
    if v < 0 and q % 2 == 0:
        raise Unsupported
    if abs(v) <= ev:
        if q % 2 == 0 and ev > 0:
            raise Unsupported  # the sign of the radicand is unknown
        r = MP.root(abs(v), q)
        return well_conditioned(r if v >= 0 else -r, MP.root(abs(v) + ev, q))
    r = MP.root(abs(v), q)
    # d/dv v^(1/q) = r / (q v): the radicand's error, scaled
    return Irr(r if v >= 0 else -r, r * ev / (q * (abs(v) - ev)))


def num_pow(a: Any, e: Any) -> Any:
    if isinstance(a, Inf) or isinstance(e, Inf):
        raise Unsupported
    if not isinstance(e, Fraction) or e.denominator > 64:
        v, ev, errv, erre = to_mpf(a), to_mpf(e), num_err(a), num_err(e)
        if v <= errv or abs(ev) > _MAX_EXP:
            raise Unsupported
        r = MP.power(v, ev)
        # first order: d(v^e) = v^e (e dv / v + ln(v) de)
        return well_conditioned(r, 2 * r * (abs(ev) * errv / (v - errv) + abs(MP.ln(v)) * erre))
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
    v, ev = a.v, a.err
    r = MP.power(v, n)
    if abs(v) > ev:
        # |(v ± ev)^n - v^n| <= |v^n| ((1 + ev / (|v| - ev))^|n| - 1)
        return well_conditioned(r, abs(r) * MP.expm1(abs(n) * MP.log1p(ev / (abs(v) - ev))))
    if n < 0:
        raise Unsupported  # a negative power of a number that cannot be told from 0
    return well_conditioned(r, MP.power(abs(v) + ev, n))


def _real_only(f: Any, lo: float | None = None, hi: float | None = None, positive: bool = False) -> Any:
    def g(x: Any) -> Any:
        if (lo is not None and x < lo) or (hi is not None and x > hi) or (positive and x <= 0):
            raise ValueError("outside the real domain")
        return f(x)

    return g


# Functions the fast path evaluates (real arguments only; elsewhere math-verify decides).
FUNCS: dict[str, Any] = {
    "\\sin": MP.sin,
    "\\cos": MP.cos,
    "\\tan": MP.tan,
    "\\cot": MP.cot,
    "\\sec": MP.sec,
    "\\csc": MP.csc,
    "\\sinh": MP.sinh,
    "\\cosh": MP.cosh,
    "\\tanh": MP.tanh,
    "\\exp": MP.exp,
    "\\arcsin": _real_only(MP.asin, -1, 1),
    "\\arccos": _real_only(MP.acos, -1, 1),
    "\\arctan": MP.atan,
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


def _terminates(x: Any) -> bool:
    """Whether x is a rational with a finite decimal expansion (denominator 2^i 5^j)."""
    if not isinstance(x, Fraction):
        return False
    d = x.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def num_eq(a: Any, b: Any, da: tuple[int, int] | None, db: tuple[int, int] | None) -> bool:
    """Numeric equality under the policy (module docstring).

    Args:
        a, b: `Fraction`, `Irr` or `Inf` values.
        da, db: `decimal_info` of a and b when written as bare decimals, else None.

    Returns:
        True iff a and b are the same rational, or reals equal within their propagated error
        (`_SAFETY` × the sum of the estimated errors), or a bare decimal with ≥ 6 places and ≥ 6
        significant digits correctly rounding a non-terminating value. False when either is an
        undetermined real (`determined`), whatever the other value.
    """
    if isinstance(a, Inf) or isinstance(b, Inf):
        return isinstance(a, Inf) and isinstance(b, Inf) and a.sign == b.sign
    if any(isinstance(x, Irr) and not determined(x.v, x.err) for x in (a, b)):
        # CPMöbius: a value whose error bound is not small equals nothing (its tolerance would match
        # every number: a cancelled 0 ± 10^20, a 9-bit numerical integral, 0/0).
        return False
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        if a == b:
            return True  # CPMöbius: rationals compare exactly, however tiny (no absolute tolerance).
    elif abs(to_mpf(a) - to_mpf(b)) <= _SAFETY * (num_err(a) + num_err(b)):
        # CPMöbius: the tolerance is the values' own propagated rounding error, relative to the
        # computation (an absolute 1e-45 floor made π/10^50 equal to π/10^51).
        return True
    for dec, d, v, other_dec in ((da, a, b, db), (db, b, a, da)):
        if dec is not None and other_dec is None and not _terminates(v):
            sig, places = dec
            if sig >= 6 and places >= 6:
                half_unit = MP.mpf(10) ** (-places) / 2
                if abs(to_mpf(d) - to_mpf(v)) <= half_unit * (1 + MP.mpf("1e-30")):
                    # CPMöbius: a decimal with ≥ 6 places and digits, correctly rounded, matches.
                    return True
    return False
