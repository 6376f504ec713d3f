r"""`released` mode: the released code's vote and evaluation grader (stage: grading).

Reproduces the released vote and evaluation for paper-faithful runs:
the vote is exact string equality of verl's `last_boxed_only_string`; `grade_batch` is the released
evaluation grader (`match_answer` heuristics, the character-set `str.strip` quirk, gold
`lstrip("0")`, a Qwen/PRIME-style `math_equal`). Its symbolic steps (`symbolic_equal`) run in the
worker pool, so they cannot hang either. Details and known differences: the package docstring.
"""

from __future__ import annotations

import collections
import math
import re
from typing import Any, Sequence

from . import isolation
from .results import GradeResult, VoteResult


def last_boxed(text: str) -> str | None:
    """verl's `last_boxed_only_string` as used by the released vote (wrapper included)."""
    idx = text.rfind("\\boxed")
    if "\\boxed " in text:
        return "\\boxed " + text.split("\\boxed ")[-1].split("$")[0]
    if idx < 0:
        idx = text.rfind("\\fbox")
        if idx < 0:
            return None
    depth = 0
    for i in range(idx, len(text)):
        if text[i] == "{":
            depth += 1
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[idx : i + 1]
    return None


def unwrap_box(boxed: str) -> str:
    """Body of a `\\boxed{..}`/`\\boxed ..`/`\\fbox{..}` string."""
    m = re.match(r"\\(?:boxed|fbox)\s*", boxed)
    rest = boxed[m.end() :] if m else boxed
    if rest.startswith("{") and rest.endswith("}"):
        rest = rest[1:-1]
    return rest


def vote(items: list, are_answers: bool, truncated: Sequence[bool] | None) -> VoteResult:
    """The released vote: exact strings of `last_boxed` (or of boxed `answers` if `are_answers`)."""
    n = len(items)
    keys: list[str | None] = []
    for i, item in enumerate(items):
        if truncated is not None and truncated[i]:
            keys.append(None)
        elif are_answers:
            keys.append(None if item is None else "\\boxed{" + item + "}")
        else:
            keys.append(last_boxed(item) if item else None)
    counts = collections.Counter(keys)
    answers = [None if k is None else unwrap_box(k) for k in keys]
    clusters_by_key: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        if k is not None:
            clusters_by_key.setdefault(k, []).append(i)
    clusters = [clusters_by_key[k] for k in sorted(clusters_by_key, key=lambda k: (-counts[k], k))]
    ranked = counts.most_common()
    top_key, top = ranked[0] if ranked else (None, 0)
    tie = len(ranked) > 1 and ranked[1][1] == top
    if top_key is None or tie:
        # Released code: a tie or a None majority gives every response -1 (filter statistic 0).
        return VoteResult(None, 0.0, clusters, [False] * n, answers)
    agrees = [k == top_key for k in keys]
    return VoteResult(unwrap_box(top_key), top / n, clusters, agrees, answers)


def _match_answer(response: str) -> str:
    """The released evaluation's `match_answer` heuristics (behaviour reproduced)."""
    for marker in ("answer:", "answer is", "answers are"):
        idx = response.lower().rfind(marker)
        if idx != -1:
            response = response[idx + len(marker) :].strip()
            if response.endswith("\n"):
                response = response[:-2]
    for marker in ("is answer", "is the answer", "are answers", "are the answers"):
        idx = response.lower().rfind(marker)
        if idx != -1:
            response = response[:idx].strip()
            if response.endswith("\n"):
                response = response[:-2]
    boxed = _eval_last_boxed(response)
    if boxed:
        response = boxed
    if ". " in response:
        response = response[: response.lower().rfind(". ")].strip()
    for marker in ("be ", "is ", "are ", "=", ": ", "get ", "be\n", "is\n", "are\n", ":\n", "get\n"):
        idx = response.lower().rfind(marker)
        if idx != -1:
            response = response[idx + len(marker) :].strip()
            if response.endswith("\n"):
                response = response[:-2]
    return response


def _eval_last_boxed(text: str) -> str | None:
    """The released evaluation's own last-box helper: body of the last \\boxed/\\fbox, stripped."""
    idx = text.rfind("\\boxed")
    if idx < 0:
        idx = text.rfind("\\fbox")
        if idx < 0:
            return None
    left = None
    depth = 0
    for i in range(idx, len(text)):
        if text[i] == "{":
            depth += 1
            left = i if left is None else left
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[left + 1 : i].strip() if left is not None else None
    return None


def normalize_gold(gold: Any) -> str:
    """Released evaluation's gold: `str(answer).lstrip("0") or "0"` ("033" → "33", "0,1" → ",1")."""
    return str(gold).lstrip("0") or "0"


def _extract_answer(response: str | None) -> str:
    """The released evaluation's answer of a response (empty: no answer)."""
    # Released quirk: str.strip with a phrase strips a *character set*.
    return _match_answer(response or "").strip("The final answer is ").strip(". I hope it is correct.")


def _parse_number(s: str) -> float | None:
    """A float, `1,000` and `28\\%` (→ 0.28) included, else None."""
    s = s.replace(",", "")
    try:
        return float(s)
    except ValueError:
        if s.endswith("%"):
            s = s[:-1].rstrip("\\")
            try:
                return float(s) / 100
            except ValueError:
                return None
    return None


def _fast_equal(pred: str, ref: str) -> bool | None:
    """The cheap steps of the released `math_equal`: string, then numeric; None = go symbolic."""
    if pred.strip().lower() == ref.strip().lower():
        return True
    p, r = _parse_number(pred), _parse_number(ref)
    if p is not None and r is not None:
        return any(math.isclose(p, x, rel_tol=1e-4) for x in (r / 100, r, r * 100))
    if not pred:
        return False
    return None


def symbolic_equal(pred: str, ref: str, pi: float) -> bool:
    """The slow steps of the released `math_equal` (runs in a worker; may be killed)."""
    fast = _fast_equal(pred, ref)
    if fast is not None:
        return fast
    ps, rs = pred.strip(), ref.strip()
    a, b = ps, rs
    if (ps.startswith("[") and ps.endswith("]") and not rs.startswith("(")) or (
        ps.startswith("(") and ps.endswith(")") and not rs.startswith("[")
    ):
        a, b = a.strip("[]()"), b.strip("[]()")
    for ch in "{}()":
        a, b = a.replace(ch, ""), b.replace(ch, "")
    if a.lower() == b.lower():
        return True
    if re.match(r"(\(|\[).+(\)|\])", ps) and re.match(r"(\(|\[).+(\)|\])", rs):
        pp, rp = ps[1:-1].split(","), rs[1:-1].split(",")
        if len(pp) == len(rp) and all(symbolic_equal(x, y, pi) for x, y in zip(pp, rp)):
            return True
    if ps.count("=") == 1 and rs.count("=") == 1:
        pl, pr = ps.split("=")
        rl, rr = rs.split("=")
        p_expr, r_expr = f"{pl.strip()} - ({pr.strip()})", f"{rl.strip()} - ({rr.strip()})"
        if any(_sympy_equal(p, r_expr, pi) for p in (p_expr, f"-({p_expr})")):
            return True
    elif ps.count("=") == 1 and len(ps.split("=")[0].strip()) <= 2 and "=" not in rs:
        if symbolic_equal(ps.split("=")[1], rs, pi):
            return True
    elif rs.count("=") == 1 and len(rs.split("=")[0].strip()) <= 2 and "=" not in ps:
        if symbolic_equal(ps, rs.split("=")[1], pi):
            return True
    return _sympy_equal(ps, rs, pi)


def _sympy_equal(a_s: str, b_s: str, pi: float) -> bool:
    """The released symbolic comparison: parse (sympy, then LaTeX), equal, simplify, numeric.

    The released code parsed with sympy's `parse_expr`, which runs the text as Python: here
    `safe_sympy.parse_math_expression` builds the same sympy objects from a whitelist instead, and a text neither
    parser reads stays a string that is never handed to sympy (the released `a.equals(text)` would
    `sympify` it: `safe_sympy.to_sympy` reads it as sympify does, without `eval`).
    """
    import sympy
    from latex2sympy2_extended import latex2sympy

    from . import safe_sympy

    safe_sympy.install()  # nothing latex2sympy or sympy parses below reaches eval either

    def parse(s: str) -> Any:
        for f in (safe_sympy.parse_math_expression, latex2sympy):
            for t in (s.replace("\\\\", "\\"), s):
                try:
                    return f(t)
                except Exception:
                    pass
        return s

    def equals(x: Any, y: Any) -> Any:
        # `Expr.equals` sympifies its argument, a string included (released: parse_expr's eval).
        return x.equals(safe_sympy.to_sympy(y) if isinstance(y, str) and hasattr(x, "equals") else y)

    a, b = parse(a_s), parse(b_s)
    try:
        if str(a) == str(b) or a == b:
            return True
    except Exception:
        pass
    try:
        if equals(a, b) or sympy.simplify(a - b) == 0:
            return True
    except Exception:
        pass
    try:
        av = float(sympy.N(a.subs(sympy.pi, pi)))
        bv = float(sympy.N(b.subs(sympy.pi, pi)))
        return math.isclose(av, bv, rel_tol=1e-4)
    except Exception:
        return False


def grade_batch(golds: Sequence[str], responses: Sequence[str | None], timeout_s: float) -> list[GradeResult]:
    """The released evaluation grader on (n,) pairs; symbolic steps in the pool, one deadline.

    A pair whose gold or answer mentions `\\pi` is also tried with π = 3.14 (correct if either is).
    """
    results: list[GradeResult] = [GradeResult(False, None, "error")] * len(golds)
    tasks, where = [], []
    for i, (gold, resp) in enumerate(zip(golds, responses)):
        ref = normalize_gold(gold)
        pred = _extract_answer(resp)
        if not pred:
            results[i] = GradeResult(False, pred, "no_answer")
            continue
        pis = (math.pi, 3.14) if ("\\pi" in pred or "\\pi" in ref) else (math.pi,)
        fast = _fast_equal(pred, ref)
        if fast is not None and len(pis) == 1:
            results[i] = GradeResult(fast, pred, "ok")
            continue
        for pi in pis:
            tasks.append({"op": "released", "pred": pred, "ref": ref, "pi": pi})
            where.append((i, pred))
    if tasks:
        verdicts = isolation.get_pool().run(tasks, timeout_s)
        merged: dict[int, list[tuple[str, Any]]] = {}
        for (i, _), v in zip(where, verdicts):
            merged.setdefault(i, []).append(v)
        for i, pred in dict(where).items():
            vs = merged[i]
            if any(s == "ok" and val for s, val in vs):
                results[i] = GradeResult(True, pred, "ok")
            elif all(s == "ok" for s, _ in vs):
                results[i] = GradeResult(False, pred, "ok")
            else:
                results[i] = GradeResult(False, pred, next(s for s, _ in vs if s != "ok"))
    return results
