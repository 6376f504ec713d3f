"""Equivalence: canonical answer pairs → verdicts (stage: grading).

`judge` decides pairs on the fast path in-process, then from a verdict cache, and sends the rest
to the worker pool under one shared deadline; `answers_equivalent` is the symmetric
response-vs-response rule of the vote. Gold vs response (scoring) is directional; response vs
response is equivalent if either direction holds.

Departures from the paper / released code: answers are compared by mathematical equivalence
(released: exact strings); a comparison over its budget is a "timeout", never a silent verdict.
"""

from __future__ import annotations

import collections
import logging
import re
import threading
from typing import Any

from . import isolation
from .arithmetic import decimal_info
from .canonical import MAX_ANSWER_CHARS, canonicalize, prime_marks, strip_commands
from .fast_path import TOO_BIG, fast_verdict
from .numerals import base_numeral
from .placeholders import is_placeholder
from .results import DEFAULT_TIMEOUT_S, check_mode

_LOG = logging.getLogger(__name__)


class _LRU:
    """A thread-safe least-recently-used cache of slow-path verdicts."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.data: collections.OrderedDict = collections.OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self.lock:
            v = self.data.get(key)
            if v is not None:
                self.data.move_to_end(key)
            return v

    def put(self, key: Any, value: Any) -> None:
        with self.lock:
            self.data[key] = value
            if len(self.data) > self.maxsize:
                self.data.popitem(last=False)


VERDICT_CACHE = _LRU(1 << 17)

# A left side that names the quantity asked for: `m+n`, `a+b+c`, `f^{-1}(x)`, `p(x)`, `a_1+a_2`, a value at a point
# (`f(3)`, `p(-1)`) and a derivative (`f'(x)`, `y''`, `f'(3)`, `\frac{dy}{dx}`, `\frac{d^2y}{dx^2}`).
_NAME = r"[A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?'*"
_LEIBNIZ = (
    r"(?:\\frac\{d(?:\^\{?\d\}?)?[A-Za-z]\}\{d[A-Za-z](?:\^\{?\d\}?)?\}|d[A-Za-z]/d[A-Za-z]"
    r"|\\frac\{d\}\{d[A-Za-z]\}[A-Za-z](?:\([A-Za-z]\))?)"
)
# The point a value is taken at: a letter, or a number (`3`, `-1`, `2.5`, `\frac{1}{2}`, `1/2`, `\pi`).
_POINT = r"(?:[A-Za-z]|-?\d+(?:\.\d+)?(?:/\d+)?|-?\\frac\{\d+\}\{\d+\}|-?\\pi)"
_LABEL_RE = re.compile(rf"^(?:{_LEIBNIZ}|{_NAME}(?:\^\{{-1\}})?(?:\({_POINT}\))?(?:[+\-]{_NAME})*)$")


def _is_true_chain(members: list[str]) -> bool:
    """Whether every member of a numeric chain equals the last (`2+3=5`; letters make it no chain)."""
    return not re.search(r"[A-Za-z]", strip_commands("=".join(members))) and all(
        fast_verdict(m, members[-1]) is True for m in members[:-1]
    )


def reduce_equation(a: str, b: str) -> tuple[str, str]:
    """Compare an equation with a value by its right-hand side, when the equation only labels or chains it.

    When exactly one of two canonical answers is an equation: `m+n=17` (a left side that names the
    quantity, `_LABEL_RE`, then perhaps a true numeric chain: `f'(2)=3\\cdot2^2=12`) is 17, and a numeric chain
    that holds (`\\frac{6}{12}=\\frac12`, `2+3=5`) is its last member; `2+3=6` and `2x+1=5` stay as they are. Two
    equations with the same labelled left side (`f(3)=6`, `f(3)=7`) compare by their values; other pairs of
    equations compare as equations.

    Returns:
        (a, b) with that equation replaced by its value, else unchanged.
    """
    if "<" in a + b or ">" in a + b:
        return a, b
    if "=" in a and "=" in b:
        la, _, va = a.partition("=")
        lb, _, vb = b.partition("=")
        if la == lb and "=" not in va + vb and _LABEL_RE.match(la) and va and vb:
            # CPMöbius: `f(3)=6` against `f(3)=7` is 6 against 7 (math-verify solved the two for a symbol neither
            # has and called them equal, so four different values made one cluster of the vote)
            return va, vb
        return a, b
    if "=" not in a and "=" not in b:
        return a, b
    equation = a if "=" in a else b
    members = equation.split("=")
    if any(not m for m in members):
        return a, b
    value = None
    if _LABEL_RE.match(members[0]) and (len(members) == 2 or _is_true_chain(members[1:])):
        value = members[-1]  # CPMöbius: the question asked for that quantity (the released grader accepts these)
    elif _is_true_chain(members):
        value = members[-1]  # CPMöbius: a true chain ends with the answer
    if value is None:
        return a, b
    return (value, b) if equation is a else (a, value)


def judge(pairs: list[tuple[str, str]], *, symmetric: bool, timeout_s: float) -> list[tuple[str, bool]]:
    """(status, equal) for canonical (gold, answer) pairs; all slow pairs share one deadline.

    Status is "ok", "timeout" (over the wall-clock or cost budget; a pair of different answers
    either of which is longer than `MAX_ANSWER_CHARS` is over the cost budget, decided in no time)
    or "error" (worker failure); equal is False unless the status is "ok". `symmetric`: equal if
    either direction holds.
    """
    out: list[tuple[str, bool] | None] = [None] * len(pairs)
    todo: dict[tuple, list[int]] = {}
    for i, (a, b) in enumerate(pairs):
        if a != b and max(len(a), len(b)) > MAX_ANSWER_CHARS:
            out[i] = ("timeout", False)  # CPMöbius: over-long answers are never parsed (bounded time)
            continue
        a, b = reduce_equation(a, b)
        if a != b and prime_marks(a) != prime_marks(b):
            out[i] = ("ok", False)  # CPMöbius: `f'(x)=2x` is not `f(x)=2x` (math-verify drops the marks)
            continue
        if a != b and (na := base_numeral(a)) is not None and (nb := base_numeral(b)) is not None:
            out[i] = ("ok", na == nb)  # CPMöbius: `52_{10}` is not `52_8` (math-verify drops subscripts)
            continue
        v = fast_verdict(a, b)
        if v is TOO_BIG:
            out[i] = ("timeout", False)
        elif v is not None:
            out[i] = ("ok", bool(v))
        else:
            key = (min(a, b), max(a, b), True) if symmetric else (a, b, False)
            cached = VERDICT_CACHE.get(key)
            if cached is not None:
                out[i] = ("ok", cached)
            else:
                todo.setdefault(key, []).append(i)
    if todo:
        keys = sorted(todo, key=lambda k: (len(k[0]) + len(k[1]), k))  # cheap-looking first
        tasks = [
            {"op": "eq", "a": a, "b": b, "da": decimal_info(a), "db": decimal_info(b), "sym": s} for a, b, s in keys
        ]
        failed = 0
        for key, (status, value) in zip(keys, isolation.get_pool().run(tasks, timeout_s)):
            if status == "ok":
                VERDICT_CACHE.put(key, bool(value))
            else:
                failed += 1
                if failed <= 3:
                    _LOG.warning("grading %s (%s): %.120r vs %.120r", status, value, key[0], key[1])
            for i in todo[key]:
                out[i] = (status, bool(value) if status == "ok" else False)
        if failed > 3:
            _LOG.warning("grading: %d more comparisons timed out or failed in this call", failed - 3)
    return out  # type: ignore[return-value]


def answers_equivalent(
    a: str | None, b: str | None, *, mode: str = "cpmobius", timeout_s: float = DEFAULT_TIMEOUT_S
) -> bool:
    """Symmetric equivalence of two extracted answers (the vote's rule).

    Args:
        a, b: extracted answers (not full responses); None or placeholders are never equivalent
            to anything.
        mode: "cpmobius" (either-direction math-verify after the policy) or "released" (exact
            string equality).
        timeout_s: wall-clock budget in seconds; a timeout counts as "not equivalent" (logged).
            An answer longer than `canonical.MAX_ANSWER_CHARS` is equivalent only to the identical
            string.

    Returns:
        Whether the two answers are one cluster.
    """
    check_mode(mode)
    if a is None or b is None:
        return False
    if mode == "released":
        return a == b
    ca, cb = canonicalize(a), canonicalize(b)
    if is_placeholder(ca) or is_placeholder(cb):
        return False
    status, equal = judge([(ca, cb)], symmetric=True, timeout_s=timeout_s)[0]
    return status == "ok" and equal
