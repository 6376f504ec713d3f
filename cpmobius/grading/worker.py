"""Grading worker process: math-verify and other slow comparisons (stage: grading).

Runs in a child process started by `isolation` (never imported by the parent's callers): reads one
JSON task per stdin line, answers one JSON result per stdout line. Tasks: "eq" (math-verify
`parse`/`verify` of two canonical answers, after exact numeric and two-point checks) and
"released" (the released `math_equal`'s symbolic steps). No signals are used here: the parent
kills an overrunning worker at its deadline. Answers are untrusted text: sympy's parser runs here
with `safe_sympy.install()` in force, so no string reaches Python's `eval` (nor `exec`).

Departures from the paper / released code (marked `# CPMöbius:`): math-verify's unit stripping is
off (units follow the canonicalisation policy); numbers it compares inside tuples, sets, intervals
and complex numbers follow our numeric rule (`arithmetic.num_eq`), not its absolute rounding; a
number sympy evaluates only imprecisely (a numerical integral to 9 bits, `sin(π)/sin(2π)` = 0/0)
or an undefined one (`nan`, `zoo`) equals nothing; an equation that is not a single-variable
assignment never equals a non-equation (math-verify compared `x-5=0` to `0` by its right-hand side).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from fractions import Fraction
from functools import lru_cache
from typing import Any

from . import released, safe_sympy
from .arithmetic import MP, Irr, TooBig, Undetermined, Unsupported, determined, num_add, num_eq, num_mul, num_pow

_MV: dict[str, Any] = {}


@lru_cache(maxsize=4096)
def _mv_parse(s: str) -> list:
    mv = _MV
    if not mv:
        safe_sympy.install()  # math-verify's plain-expression parse and sympify of a string never reach eval
        import math_verify
        from latex2sympy2_extended.latex2sympy2 import NormalizationConfig
        from math_verify.parser import ExprExtractionConfig, LatexExtractionConfig

        # CPMöbius: math-verify's unit stripping is off (it drops trailing letters such as the
        # "t" of "\frac{1}{m}t"); units are handled by canonicalize's policy instead.
        norm = NormalizationConfig(
            basic_latex=True, units=False, malformed_operators=True, nits=True, boxed="all", equations=False
        )
        latex = LatexExtractionConfig(boxed_match_priority=0, normalization_config=norm)
        mv.update(parse=math_verify.parse, verify=math_verify.verify, cfg=[latex, ExprExtractionConfig()])
        import math_verify.grader as mv_grader

        # CPMöbius: numbers inside tuples, sets, intervals and complex numbers follow our numeric rule
        # (math-verify's evalf(chop=True) / round(6) made (1/100!, 1) equal (1/101!, 1)).
        mv.update(
            stock_numeric_eq=mv_grader.sympy_numeric_eq,
            stock_expr_eq=mv_grader.sympy_expr_eq,
            is_equation=mv_grader.is_equation,
            is_assignment=mv_grader.is_assignment_relation,
        )
        mv_grader.sympy_numeric_eq = _numeric_eq
        mv_grader.sympy_expr_eq = _expr_eq
    parsed = mv["parse"]("\\boxed{" + s + "}", extraction_config=mv["cfg"], parsing_timeout=None)
    return [_imaginary_unit(e) for e in parsed]


def _imaginary_unit(e: Any) -> Any:
    """`e` with the symbol i read as the imaginary unit (math-verify leaves it a variable, so
    `i^{5}` ≠ `i` and `(2-i)(2+i)` ≠ 5); strings and other objects unchanged."""
    import sympy

    if not isinstance(e, sympy.Basic):
        return e
    # CPMöbius: i is the imaginary unit, as on the fast path (which never takes i as a variable);
    # latex2sympy gives it non-real assumptions, so it is matched by name.
    units = {s: sympy.I for s in e.free_symbols if isinstance(s, sympy.Symbol) and s.name == "i"}
    return e.xreplace(units) if units else e


_MAX_FACTORIAL = 20_000  # 20000! has ~77k digits, within the fast path's exact-size limit


def _exact_rational(e: Any) -> Fraction | None:
    """The exact value of a sympy expression built from rationals by +, ×, integer powers,
    exact roots, factorials and binomials (math-verify leaves these unevaluated), else None.

    Raises:
        TooBig: the exact value would be astronomically large.
    """
    import math

    import sympy

    if isinstance(e, sympy.Rational):
        return Fraction(int(e.p), int(e.q))
    if isinstance(e, (sympy.Add, sympy.Mul)):
        parts = [_exact_rational(a) for a in e.args]
        if any(p is None for p in parts):
            return None
        out = parts[0]
        for p in parts[1:]:
            out = num_add(out, p) if isinstance(e, sympy.Add) else num_mul(out, p)
        return out
    if isinstance(e, sympy.Pow):
        base, exp = _exact_rational(e.base), _exact_rational(e.exp)
        if base is None or exp is None:
            return None
        try:
            value = num_pow(base, exp)
        except Unsupported:
            return None
        return value if isinstance(value, Fraction) else None
    if isinstance(e, (sympy.factorial, sympy.binomial)):
        args = [_exact_rational(a) for a in e.args]
        if any(a is None or a.denominator != 1 or a < 0 for a in args):
            return None
        n = int(args[0])
        if n > _MAX_FACTORIAL:
            raise TooBig
        return Fraction(math.factorial(n) if len(args) == 1 else math.comb(n, int(args[1])))
    return None


def _sympy_number(e: Any) -> Any:
    """Fraction / Irr for a real numeric constant sympy expression, else None.

    Rational expressions are evaluated exactly (`_exact_rational`); others to 60 digits, the
    error taken from the precision sympy reports (a cancellation to zero comes back as zero to
    within its error).

    Raises:
        OverflowError: a rational expression whose exact value is astronomically large (reported
            as "timeout", like the fast path's cost guard).
        Undetermined: sympy reached too little precision (`arithmetic.determined`), e.g. a
            numerical integral to 9 bits or the 0/0 of `sin(π)/sin(2π)`: the value equals nothing.
    """
    import sympy

    if not isinstance(e, sympy.Expr) or isinstance(e, sympy.UnevaluatedExpr) or not e.is_number:
        return None
    floats = e.atoms(sympy.Float)
    if floats:  # a written decimal is exact: 1.3 is 13/10, not its 53-bit approximation
        e = e.xreplace({f: sympy.Rational(str(f)) for f in floats})
    try:
        # CPMöbius: an exact rational stays exact (an unevaluated 1/100! used to become a 60-digit
        # real and equal 1/101! within an absolute tolerance).
        exact = _exact_rational(e)
    except TooBig as exc:
        raise OverflowError("exact value too large") from exc
    if exact is not None:
        return exact
    v = e.evalf(60)
    if not (v.is_real and v.is_finite) or not isinstance(v, sympy.Float):
        return None
    value = MP.make_mpf(v._mpf_)
    err = abs(value) * MP.mpf(2) ** (4 - v._prec)
    if not determined(value, err):
        # CPMöbius: a 9-bit value ± |v|/2^9 would have matched every number within its tolerance.
        raise Undetermined
    return Irr(value, err)


def _float_decimal_info(e: Any) -> tuple[int, int] | None:
    """(significant digits, decimal places) of a written decimal that math-verify parsed to a Float."""
    from decimal import Decimal

    import sympy

    if isinstance(e, sympy.Mul) and len(e.args) == 2 and -1 in e.args:  # -0.5, unevaluated
        e = e.args[0] if e.args[1] == -1 else e.args[1]
    if not isinstance(e, sympy.Float):
        return None
    _, digits, exponent = Decimal(str(e)).normalize().as_tuple()
    return (len(digits), -exponent) if isinstance(exponent, int) else None


def _numeric_parts(e: Any) -> list | None:
    """[(real part, decimal info), (imaginary part, None)] of a numeric constant, else None."""
    import sympy

    if not isinstance(e, sympy.Expr) or not e.is_number:
        return None
    real = _sympy_number(e)
    if real is not None:
        return [(real, _float_decimal_info(e)), (Fraction(0), None)]
    parts = [_sympy_number(p) for p in e.as_real_imag()]
    return None if any(p is None for p in parts) else [(p, None) for p in parts]


_OVER_BUDGET: list[bool] = []  # set when a number inside math-verify's comparison was too large to decide


def _numeric_eq(a: Any, b: Any, float_rounding: int, numeric_precision: int) -> bool:
    """math-verify's `sympy_numeric_eq` with our rule for numbers (`num_eq`: exact rationals, reals
    within their own error, the decimal rule), also for a difference a - b that is a number;
    anything else (matrices, expressions whose difference keeps a symbol) as stock."""
    import sympy

    if _undefined(a) or _undefined(b):
        return False
    try:
        pa, pb = _numeric_parts(a), _numeric_parts(b)
    except OverflowError:
        _OVER_BUDGET.append(True)
        return False
    except Undetermined:
        return False
    except Exception:
        pa = pb = None
    if pa is not None and pb is not None:
        return all(num_eq(x, y, dx, dy) for (x, dx), (y, dy) in zip(pa, pb))
    try:
        # stock: (a - b).evalf(chop=True) == 0, which chops a tiny difference (α + 10^-30 vs α + 10^-31)
        diff = _numeric_parts(a - b) if isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr) else None
    except OverflowError:
        _OVER_BUDGET.append(True)
        return False
    except Undetermined:
        return False
    except Exception:
        diff = None
    if diff is not None:
        return all(num_eq(x, Fraction(0), None, None) for x, _ in diff)
    return _MV["stock_numeric_eq"](a, b, float_rounding, numeric_precision)


def _undefined(e: Any) -> bool:
    """Whether a sympy object is or contains an undefined number (nan: 0/0, zoo: 1/0)."""
    import sympy

    return isinstance(e, sympy.Basic) and e.has(sympy.nan, sympy.zoo)


def _expr_eq(gold: Any, pred: Any, *args: Any, **kwargs: Any) -> bool:
    """math-verify's `sympy_expr_eq`, except that an equation which is not a single-variable
    assignment never equals a non-equation (stock: `x-5=0`, `2x=5` were compared by their
    right-hand sides, so they equalled `0` and `5`); `x = 5` still equals 5."""
    import sympy

    mv = _MV
    eq_g, eq_p = mv["is_equation"](gold), mv["is_equation"](pred)
    equation = gold if eq_g else pred
    first = equation if isinstance(equation, sympy.Eq) else getattr(equation, "_unsorted_args", [None])[0]
    single_variable = mv["is_assignment"](equation) and isinstance(getattr(first, "lhs", None), sympy.Symbol)
    if eq_g != eq_p and not single_variable:
        # CPMöbius: only a leading single-variable assignment reduces to its right-hand side.
        return False
    return mv["stock_expr_eq"](gold, pred, *args, **kwargs)


def _point_value(name: str, k: int) -> Fraction:
    """Value of sympy symbol `name` at point k (0: positive, 1: negative), fixed per name."""
    import random

    v = Fraction(random.Random(f"{name}/{k}").randint(1_000_003, 2_999_999), 1_000_003)
    return v if k == 0 else -v


def _equal_at_points(ea: Any, eb: Any) -> bool:
    """Sufficient test for two real expressions in the same symbols: equal at two fixed points.

    Used only to say "equal" (the fast path's rule); anything else is left to math-verify.
    """
    import sympy

    if not (isinstance(ea, sympy.Expr) and isinstance(eb, sympy.Expr)):
        return False
    unevaluated = (sympy.Derivative, sympy.Integral, sympy.Sum, sympy.Product, sympy.Limit)
    if ea.has(*unevaluated) or eb.has(*unevaluated):
        # `\frac{d}{dx}(x^3)` at x = 2/3 is no derivative (sympy raises), a sum to n = 2/3 runs for seconds and a
        # series at a point outside its convergence diverges: math-verify evaluates them symbolically
        return False
    symbols = ea.free_symbols | eb.free_symbols
    if not symbols or ea.free_symbols != eb.free_symbols:
        return False
    for k in (0, 1):
        subs = {
            s: sympy.Rational(_point_value(s.name, k).numerator, _point_value(s.name, k).denominator) for s in symbols
        }
        try:
            va, vb = _sympy_number(ea.xreplace(subs)), _sympy_number(eb.xreplace(subs))
        except Undetermined:
            return False
        if va is None or vb is None or not num_eq(va, vb, None, None):
            return False
    return True


def _math_verify_equal(task: dict) -> bool:
    """Task "eq": exact numbers, then two fixed points, then math-verify (both directions if "sym").

    An undefined (nan, zoo) or undetermined number (`arithmetic.determined`) equals nothing.
    """
    a, b = _mv_parse(task["a"]), _mv_parse(task["b"])
    if not a or not b or _undefined(a[0]) or _undefined(b[0]):
        return False  # CPMöbius: 0/0 and 1/0 equal nothing
    try:
        na, nb = _sympy_number(a[0]), _sympy_number(b[0])
    except Undetermined:
        return False  # CPMöbius: a number sympy cannot pin down equals nothing
    if na is not None and nb is not None:
        da, db = task.get("da"), task.get("db")
        return num_eq(na, nb, tuple(da) if da else None, tuple(db) if db else None)
    if _equal_at_points(a[0], b[0]):
        return True  # e.g. \alpha vs \alpha+0, which math-verify's symbol shortcut calls different
    verify = _MV["verify"]
    _OVER_BUDGET.clear()
    if verify(a, b, timeout_seconds=None) or (task.get("sym") and verify(b, a, timeout_seconds=None)):
        return True
    if _OVER_BUDGET:
        raise OverflowError("a number in the comparison is too large to decide")  # status "timeout"
    return False


def handle_task(task: dict) -> bool:
    """The verdict of one task ("eq" or "released"); raises on an unknown op."""
    if task["op"] == "eq":
        return _math_verify_equal(task)
    if task["op"] == "released":
        return released.symbolic_equal(task["pred"], task["ref"], task["pi"])
    raise ValueError(f"unknown op {task['op']!r}")


def main() -> None:  # pragma: no cover - runs in the worker process
    """Worker loop: JSON task per stdin line → JSON result per stdout line."""
    try:  # die with the spawner thread of the parent (Linux); see isolation._Pool._spawn_loop
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except Exception:
        pass
    parent = os.getppid()

    def watchdog() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        import resource

        limit = int(os.environ.get("CPMOBIUS_GRADING_WORKER_MEM_MB", "3072")) << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except Exception:
        pass
    logging.disable(logging.WARNING)  # math-verify warns about disabled timeouts
    safe_sympy.install()  # no answer text reaches eval through sympy's parser in this process
    out = sys.stdout.buffer
    try:
        _mv_parse("1")
        out.write(b'{"ready": true}\n')
    except Exception as exc:
        out.write(json.dumps({"fatal": f"{type(exc).__name__}: {exc}"}).encode() + b"\n")
        out.flush()
        return
    out.flush()
    for line in sys.stdin.buffer:
        try:
            msg: dict[str, Any] = {"r": bool(handle_task(json.loads(line)))}
        except (MemoryError, RecursionError, OverflowError) as exc:
            msg = {"resource": type(exc).__name__}
        except ValueError as exc:
            # Python's cap on int → str conversion (4300 digits) hit inside sympy / math-verify, e.g. by
            # \lfloor1000^{10000}\rfloor: an astronomically large value, over budget like the fast path's
            # TOO_BIG, not a grader failure.
            over = "integer string conversion" in str(exc)
            msg = {"resource": "int_max_str_digits"} if over else {"err": f"ValueError: {exc}"[:500]}
        except Exception as exc:
            msg = {"err": f"{type(exc).__name__}: {exc}"[:500]}
        out.write(json.dumps(msg).encode() + b"\n")
        out.flush()
