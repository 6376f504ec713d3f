"""Fast path: in-process equivalence of canonical answers (stage: grading).

Numbers, fractions, radicals, π, e, tuples, intervals, sets, words, and expressions in
single-letter variables with `\\sin`-like functions of bracketed arguments are parsed by a small
recursive-descent evaluator and compared exactly (variables set to two fixed rational points, one
positive, one negative). Anything else is undecided (`None`): the worker pool asks math-verify.

No departures of its own: it implements the equivalence policy of the package docstring.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

from .arithmetic import (
    FUNCS,
    MAX_FUNCTION_ARG,
    MP,
    Inf,
    Irr,
    TooBig,
    Unsupported,
    decimal_info,
    num_add,
    num_div,
    num_eq,
    num_err,
    num_mul,
    num_neg,
    num_pow,
    num_root,
    to_mpf,
    well_conditioned,
)
from .canonical import strip_commands

TOO_BIG = object()  # fast value / verdict marker


def _make_points() -> tuple[dict[str, Fraction], dict[str, Fraction]]:
    """Two fixed "random" rational points for single-letter variables (e, i excluded).

    Point A is positive (in (1, 3)), point B negative, so that e.g. sqrt(x^2) ≠ x is still seen.
    """
    import random

    rng = random.Random(20260207)
    letters = "abcdfghjklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    a = {c: Fraction(rng.randint(1_000_003, 2_999_999), 1_000_003) for c in letters}
    b = {c: -Fraction(rng.randint(1_000_003, 2_999_999), 999_983) for c in letters}
    return a, b


_POINTS = _make_points()
_PI, _E = Irr(+MP.pi), Irr(+MP.e)
_TOKEN_RE = re.compile(r"\d+(?:\.\d+)?|\.\d+|\\[A-Za-z]+|\\[{}]|\S")
_IMPLICIT_STARTS = ("\\frac", "\\sqrt", "\\pi", "(", "{")
_MIXED_RE = re.compile(r"\\frac(?:\{\d+\}|\d)(?:\{\d+\}|\d)")


class _Parser:
    """Recursive-descent evaluator for the fast path (canonical strings, no white space).

    Single-letter variables (not e, i) take the values of `point`: an expression with variables
    is evaluated at two fixed rational points and two answers are equal iff equal at both
    (exact for polynomials and rational functions up to a negligible chance).
    """

    def __init__(self, s: str, point: dict[str, Fraction]) -> None:
        self.toks = _TOKEN_RE.findall(s)
        self.i = 0
        self.point = point
        self.used_vars = False

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        t = self.peek()
        if t is None or (expected is not None and t != expected):
            raise Unsupported
        self.i += 1
        return t

    def answer(self) -> tuple:
        items = [self.item()]
        while self.peek() == ",":
            self.take()
            items.append(self.item())
        if self.peek() is not None:
            raise Unsupported
        return items[0] if len(items) == 1 else ("coll", "list", tuple(items))

    def item(self) -> tuple:
        t = self.peek()
        if t == "\\{":
            self.take()
            elems = [self.item()]
            while self.peek() == ",":
                self.take()
                elems.append(self.item())
            self.take("\\}")
            return ("coll", "set", tuple(elems))
        if t in ("(", "["):
            start = self.i
            coll = self.bracketed()
            if coll is not None and self.peek() in (None, ",", "\\cup", ")", "]", "\\}"):
                parts = [coll]
                while self.peek() == "\\cup":
                    self.take()
                    nxt = self.bracketed()
                    if nxt is None:
                        raise Unsupported
                    parts.append(nxt)
                return coll if len(parts) == 1 else ("coll", "union", tuple(parts))
            self.i = start
        start = self.i
        v = self.expr()
        return ("num", v, decimal_info("".join(self.toks[start : self.i])))

    def bracketed(self) -> tuple | None:
        opening = self.take()
        elems = [self.item()]
        if self.peek() != ",":
            return None
        while self.peek() == ",":
            self.take()
            elems.append(self.item())
        closing = self.take()
        if closing not in (")", "]"):
            raise Unsupported
        return ("coll", opening + closing, tuple(elems))

    def expr(self) -> Any:
        v = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            w = self.term()
            v = num_add(v, w if op == "+" else num_neg(w))
        return v

    def term(self) -> Any:
        v = self.unary()
        while True:
            t = self.peek()
            if t in ("\\cdot", "\\times", "/", "\\div"):
                self.take()
                w = self.unary()
                v = num_mul(v, w) if t in ("\\cdot", "\\times") else num_div(v, w)
            elif t is not None and ((t.startswith(_IMPLICIT_STARTS) and t != "\\{") or t.isalpha() or t in FUNCS):
                v = num_mul(v, self.power())
            else:
                return v

    def unary(self) -> Any:
        t = self.peek()
        if t == "-":
            self.take()
            return num_neg(self.unary())
        if t == "+":
            self.take()
            return self.unary()
        return self.power()

    def power(self) -> Any:
        base = self.atom()
        if self.peek() == "^":
            self.take()
            t = self.peek()
            if t == "{":
                exp = self.group()
            elif t is not None and len(t) == 1 and (t.isdigit() or t.isalpha()):
                exp = self.atom()
            else:
                raise Unsupported  # e.g. 2^10: ambiguous in LaTeX, let math-verify decide
            if self.peek() == "^":
                raise Unsupported
            return num_pow(base, exp)
        return base

    def group(self) -> Any:
        self.take("{")
        v = self.expr()
        self.take("}")
        return v

    def arg(self) -> Any:
        t = self.peek()
        if t == "{":
            return self.group()
        if t is not None and len(t) == 1 and (t.isdigit() or t.isalpha()) or t == "\\pi":
            return self.atom()
        raise Unsupported

    def atom(self) -> Any:
        t = self.take()
        if t[0].isdigit() or t[0] == ".":
            if self.peek() == "\\frac" and "." not in t:
                if not _MIXED_RE.match("".join(self.toks[self.i : self.i + 7])):
                    raise Unsupported
                # "2\frac{1}{2}" is the mixed number 5/2 (as math-verify reads it)
                self.take()
                num, den = self.arg(), self.arg()
                if not den:
                    raise Unsupported
                return Fraction(int(t)) + num / den
            return Fraction(t)
        if t == "\\frac":
            num = self.arg()
            return num_div(num, self.arg())
        if t == "\\sqrt":
            q = 2
            if self.peek() == "[":
                self.take()
                qv = self.expr()
                self.take("]")
                if not (isinstance(qv, Fraction) and qv.denominator == 1):
                    raise Unsupported
                q = int(qv)
            return num_root(self.arg(), q)
        if t == "\\pi":
            return _PI
        if t == "e":
            return _E  # Euler's number, as math-verify reads it (a bare "e" answer is text)
        if t in FUNCS:
            return self.function(t)
        if t == "\\infty":
            return Inf(1)
        if t == "(":
            v = self.expr()
            self.take(")")
            return v
        if t == "{":
            v = self.expr()
            self.take("}")
            return v
        if len(t) == 1 and t in self.point:
            self.used_vars = True
            return self.point[t]
        raise Unsupported

    def function(self, name: str) -> Any:
        """`\\sin(..)`, `\\ln{..}`, `\\cos^2(..)`: only with a bracketed argument (else unsupported)."""
        power = None
        if self.peek() == "^":
            self.take()
            nxt = self.peek() or ""
            power = self.group() if nxt == "{" else Fraction(int(self.take())) if nxt.isdigit() else None
            if not (isinstance(power, Fraction) and power.denominator == 1 and power > 0):
                raise Unsupported  # \sin^{-1} and friends: math-verify decides
        if self.peek() not in ("(", "{"):
            raise Unsupported  # "\sin 2x": precedence is ambiguous, math-verify decides
        closing = ")" if self.take() == "(" else "}"
        arg = self.expr()
        self.take(closing)
        if isinstance(arg, Inf):
            raise Unsupported
        x, ex = to_mpf(arg), num_err(arg)
        if abs(x) > MAX_FUNCTION_ARG:
            raise Unsupported  # an argument too large to evaluate here, in bounded time: the worker decides
        f = FUNCS[name]
        try:
            values = [f(x), f(x + ex)] if ex else [f(x)]
        except (ValueError, ZeroDivisionError) as exc:
            raise Unsupported from exc
        if not all(isinstance(v, MP.mpf) and MP.isfinite(v) for v in values):
            raise Unsupported  # complex or infinite: math-verify decides
        # The argument's error carried through f: |f(x + ex) - f(x)| (first order, doubled).
        out = well_conditioned(values[0], 2 * abs(values[-1] - values[0]))
        return num_pow(out, power) if power is not None else out


_LETTER_RE = re.compile(r"^[A-Za-z]$")
_WORDS_RE = re.compile(r"^(?:[A-Za-z]{3,}|[A-Za-z][A-Za-z'\-]+(?: [A-Za-z][A-Za-z'\-]+)+)$")
_TEXT_RE = re.compile(r"^\\text\{([^{}\\]*)\}$")
_LETTER_RUN_RE = re.compile(r"[A-Za-z]{2,}|\\[^A-Za-z{}]|i")


def _singular(word: str) -> str:
    """A word without its plural `s` (`solutions` → `solution`), so "no solution" equals "no solutions";
    words of three letters or fewer and endings `ss`, `us`, `is` keep theirs (`yes`, `class`, `radius`)."""
    # CPMöbius: a text answer's number is not its meaning (the released grader compares the strings).
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@lru_cache(maxsize=1 << 16)
def fast_value(canon: str) -> Any:
    """Fast-path value of a canonical answer: (value at point A, value at point B), None or TOO_BIG.

    A value is ("num", number, decimal info), ("coll", kind, items) or ("text", string); None means
    unsupported (math-verify decides).
    """
    if _LETTER_RE.match(canon):
        return (("text", canon),) * 2
    m = _TEXT_RE.match(canon)
    text = m.group(1).strip() if m else (canon if _WORDS_RE.match(canon) else None)
    if text is not None:
        if len(text) == 1 and not text.isdigit():  # a letter is a word (an option); `\text{7}` is 7
            return (("text", text),) * 2
        inner = fast_value(text) if m and text and not _WORDS_RE.match(text) else None
        if inner is not None and inner is not TOO_BIG and inner[0][0] != "text":
            return inner
        return (("text", " ".join(_singular(word) for word in text.lower().split())),) * 2
    if len(canon) > 2000 or _LETTER_RUN_RE.search(strip_commands(canon)):
        return None  # words, functions, Greek letters, \text, relations: math-verify decides
    try:
        parser = _Parser(canon, _POINTS[0])
        at_a = parser.answer()
        return (at_a, _Parser(canon, _POINTS[1]).answer() if parser.used_vars else at_a)
    except TooBig:
        return TOO_BIG
    except (Unsupported, ZeroDivisionError, ValueError, OverflowError, RecursionError, TypeError):
        return None


def _val_eq(a: tuple, b: tuple) -> bool:
    """Equality of two fast values (policy table)."""
    ka, kb = a[0], b[0]
    if ka == "num" and kb == "num":
        return num_eq(a[1], b[1], a[2], b[2])
    if ka == "text" or kb == "text":
        return ka == kb and a[1] == b[1]
    if ka == "coll" and kb == "coll":
        sa, sb = a[1], b[1]
        unordered = ("set", "list")
        if sa == sb == "union" or (sa in unordered and sb in unordered):
            return _unordered_eq(a[2], b[2])
        if sa == sb or {sa, sb} == {"()", "list"}:
            return len(a[2]) == len(b[2]) and all(_val_eq(x, y) for x, y in zip(a[2], b[2]))
        return False
    coll, other = (a, b) if ka == "coll" else (b, a)
    return coll[1] in ("set", "list") and len(coll[2]) == 1 and _val_eq(coll[2][0], other)


def _unordered_eq(xs: tuple, ys: tuple) -> bool:
    if len(xs) != len(ys) or len(xs) > 256:
        return False
    used = [False] * len(ys)
    for x in xs:
        for j, y in enumerate(ys):
            if not used[j] and _val_eq(x, y):
                used[j] = True
                break
        else:
            return False
    return True


@lru_cache(maxsize=1 << 17)
def fast_verdict(a: str, b: str) -> Any:
    """True / False / None (undecided: math-verify) / TOO_BIG for two canonical answers."""
    if a == b:
        return True
    va, vb = fast_value(a), fast_value(b)
    if va is TOO_BIG or vb is TOO_BIG:
        return TOO_BIG
    if va is not None and vb is not None:
        return _val_eq(va[0], vb[0]) and _val_eq(va[1], vb[1])
    return None
