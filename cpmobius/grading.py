r"""Answer grading: extraction, equivalence, majority vote (pure, CPU, hard timeouts).

Stage: grading. Every place that judges an answer calls this module: the Player's reward
(`grade` / `majority_vote`), the difficulty filter (`majority_vote`), validation and Δt, and
the benchmark evaluation (`grade_batch`). There is no second grader.

Public API (all pure functions of their arguments; no engine objects):

* `extract_answer(response, mode)`: the final answer of a response, or None.
* `grade(gold, response)` / `grade_batch(golds, responses)`: gold-vs-response verdicts.
* `answers_equivalent(a, b)`: the symmetric response-vs-response rule used by the vote.
* `majority_vote(responses)`: pseudo-label, pass rate and clusters of one group.
* `check_batch(results)`: raises `GradingError` when every score of a batch is an error/timeout.
* `python -m cpmobius.grading verify|vote`: the same, on JSON lines (debugging a verdict).

Extraction (mode "cpmobius", the default)
-----------------------------------------
* The answer is the body of the **last** `\boxed{...}` / `\fbox{...}` of the response, brace
  balanced (`\{`, `\}` are escaped braces, not groups), also `\boxed 5` (a space, then one token).
* A response cut off inside its final box (`... \boxed{7` or `... \boxed` at the end) has **no
  answer**: an earlier, retracted box is never used instead.
* Mentions of `\boxed` in prose are not boxes: `\boxed{}` (empty), `\boxed` followed by neither a
  group nor a math-looking token (`the \boxed command`), and boxes inside a `code span`.
* Several boxes: the last one wins. Boxes separated only by connectors (`,`, `;`, `and`, `or`,
  `&`, `$`, `\quad`, white space) form one explicit multi-answer `a, b` (an unordered list),
  e.g. `\boxed{3} and \boxed{4}` is `3, 4`, while `\boxed{5}. Wait, ... \boxed{7}` is `7`.
* AMC options: `\textbf{(B) }12` is the value `12`; `(B)`, `\text{(B)}`, `\textbf{B}` and a
  bare `B` are the option letter `B`, compared as text (never Euler's e, never a product).
* Placeholders are no answer: empty, `None`, `null`, `NaN`, `N/A`, `answer`, `...`, `?`.
* Only the response text is read; the prompt is never part of the extraction.
* Responses without any box have no answer: the Player prompt asks for `\boxed{}` (this is a
  deliberate format requirement, e.g. `The final answer is pi/2` scores 0).

Equivalence policy (one table for reward, vote, validation and evaluation)
---------------------------------------------------------------------------
Answers are first canonicalised (a cheap, deterministic string rewrite), then compared: equal
canonical strings are equivalent; numbers, fractions, radicals, π, e, tuples, intervals, sets,
words, and expressions in single-letter variables with `\sin`-like functions of bracketed
arguments are compared in-process (fast path: exact rationals, 60-digit reals, variables set to
two fixed rational points, one positive and one negative); everything else (Greek letters,
subscripts, `\log`, `\sin x` without brackets, relations, complex numbers, ...) goes to
math-verify (`math_verify.parse` / `verify`) in an isolated worker process with a hard
wall-clock limit.

==============================  ============================================  =====================
form                            rule                                          examples
==============================  ============================================  =====================
percent `28\%`                  the sign is dropped: the value is the number  28% = 28;
                                as written (transitive, unlike a "/100 or     28% ≠ 0.28;
                                as-is" rule)                                  50% ≠ 1/2
degrees `30^\circ`              the degree sign is dropped; no deg↔rad        30° = 30; 90° ≠ π/2
units `5\text{ cm}`, `5 cm`     a trailing `\text{..}`/`\mathrm{..}` unit or   5 cm = 5
                                a common unit word after a number is dropped
currency `\$10`                 `$`, `\$`, €, £, ¥ are dropped                $10 = 10
thousands `1,000`               `,`, `{,}`, `,\!` join digits only between    1,000 = 1{,}000 =
                                1–3 digits and groups of exactly 3 (plain `,`   1\,000 = 1000;
                                is an element separator inside brackets);      0,1 ≠ 01; 12,34 is
                                thin/explicit spaces between digits vanish      the list (12, 34)
                                as in LaTeX math mode
decimals vs exact values        equal if equal as numbers (0.5 = 1/2). A       0.333 ≠ 1/3;
                                bare decimal approximates a non-terminating    0.333333 = 1/3;
                                exact value only if it has ≥ 6 decimal places  6.283185 = 2π;
                                AND ≥ 6 significant digits and is within half  6.28 ≠ 2π;
                                a unit of its last digit; two decimals are     1.5708 ≠ π/2;
                                equal only if equal                            1.22e-18 ≠ 1.5e-18
intervals `(a,b]`               bracket types and end points must match;       (-∞,3) = (-\infty,3)
                                `\cup` is unordered
tuples `(a, b)`                 ordered; an open interval and a pair are the   (1,2) = 1, 2
                                same object; a bare list is read in order
                                against a tuple
sets `\{a, b\}`, lists `a, b`   unordered; a one-element set equals its        \{1,2\} = 2, 1;
                                element; a set never equals a tuple            \{1,2\} ≠ (1,2)
equations `x = 5`               a leading single-variable assignment is        x = 5 = 5;
                                dropped; other equations go to math-verify     3x-y+13=0 ≠
                                (equivalent equations of a line are equal)     3x+4y+14=0
words, `\text{}`                words (≥ 3 letters or several words) compare   \text{Evelyn} = evelyn;
                                case-insensitively; single letters compare    \text{(E)} ≠ e
                                case-sensitively (options, variables)
expressions `x^2+3x`            equal iff equal at both points (variables     x^2+3x = x(x+3);
                                matter; `e` is Euler's number inside an       \sqrt{x^2} ≠ x;
                                expression, a bare `e` is a letter)           x+1 ≠ y+1
code style                      `pi`→`\pi`, `*`→`\cdot`, `**`→`^`,            -2*pi = -2\pi;
                                `sqrt(x)`→`\sqrt{x}`, `exp(x)`→`e^{x}`,       pi/2 = \frac{\pi}{2}
                                `1e-3`→`1\times10^{-3}`
anything else                   math-verify (strict, its unit stripping off:
                                units are the rule above); numeric constants
                                use the decimal rule above; gold first when
                                grading
==============================  ============================================  =====================

Gold vs response (scoring) is directional, as math-verify intends (the gold fixes the form:
gold `(-\infty,3)` does not accept `x<3`). Response vs response (`answers_equivalent`, the vote)
is symmetric: equivalent if either direction holds. The fast path is symmetric by construction.

Majority vote
-------------
Answers are canonicalised; identical canonical strings form one unique answer; uniques are
visited by (descending count, canonical string) and each joins the first existing cluster whose
representative is equivalent (symmetric rule), else opens a new cluster. The result depends only
on the multiset of answers, so it is invariant to the order of the responses. The cluster with
the most members is the pseudo-label; a tie at the top gives no label; responses without an
answer (and truncated responses, when flagged) never vote but count in the denominator:
`pass_rate = top cluster size / n` (also reported on a tie). Rewards for a voted group are
`VoteResult.agrees` (membership of the label's cluster), i.e. exactly the clustering's rule.

Statuses and timeouts
---------------------
Every verdict has a status: "ok" (a verdict was reached), "no_answer" (nothing to grade),
"timeout" (not judged within the wall-clock or cost budget: the comparison's worker was killed,
or the answer contains a power whose exact value is astronomically large, e.g. `9^{9^{9^{9}}}`),
"error" (the grader itself failed: invalid gold, worker crash). Only "ok" can be correct.
math-verify's own SIGALRM timeouts are disabled (`parsing_timeout=None`, `timeout_seconds=None`):
they raise off the main thread. Instead, slow comparisons run in a small persistent pool of
worker processes; a batch (or a single call) has one deadline, `timeout_s` after the pool is
ready, and any worker still busy at the deadline is killed (SIGKILL) and replaced in the
background. This holds in the main thread, worker threads, subprocesses and Ray actors alike.
The pool's one-off start-up (importing sympy and math-verify, about 1–2 s) does not count
against a call's deadline. Pool size: `CPMOBIUS_GRADING_WORKERS` (default min(8, max(2, cpus)));
each worker's address space is capped at `CPMOBIUS_GRADING_WORKER_MEM_MB` (default 3072), and a
MemoryError/RecursionError there is reported as "timeout" (over budget). Workers die with their
parent (PR_SET_PDEATHSIG from a long-lived spawner thread, plus a watchdog).

`released` mode
---------------
Reproduces the released code (notes/upstream_cpmobius.md §3.4, §5.2) for paper-faithful runs:
the vote is exact string equality of verl's `last_boxed_only_string` (incl. its `\boxed `
special case), a tie or a `None` majority gives no label and pass rate 0; `grade` is the released
evaluation grader: `match_answer` heuristics, the character-set `str.strip` quirk, gold
`lstrip("0")`, and a Qwen/PRIME-style `math_equal` (string, numeric with rel_tol 1e-4 and ×/÷100
variants, bracket-stripped string, element-wise tuples, equations, symbolic via sympy, π also tried
as 3.14). The released `grader.py` itself was not available to us; the symbolic step uses sympy
`parse_expr` and `latex2sympy2_extended` (not sympy's `parse_latex`), so rare symbolic edge cases
may differ. Its slow steps also run in the worker pool, so they cannot hang either.

Departures from the paper / released code (marked `# CPMöbius:` in the code)
----------------------------------------------------------------------------
* The vote clusters by mathematical equivalence, not raw strings (released: `\frac12` ≠ `0.5`).
* "No answer" never votes and never becomes the label (released: a `None` majority drops the
  problem; here the answered responses still vote, denominator n).
* Truncated final boxes give no answer; several nearby boxes are last-wins (math-verify's
  default parse merges them into a set).
* Hard per-batch wall-clock limits through process isolation; a timeout is a status, never a
  silent 0.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "STATUSES",
    "BatchGrades",
    "GradeResult",
    "GradingError",
    "VoteResult",
    "answers_equivalent",
    "check_batch",
    "extract_answer",
    "grade",
    "grade_batch",
    "majority_vote",
    "shutdown_pool",
]

import argparse
import atexit
import collections
import json
import logging
import math
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any, Iterable, Sequence

from mpmath.ctx_mp import MPContext

_LOG = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
"""Default wall-clock budget (seconds) of one grading call or batch, pool start-up excluded."""

STATUSES = ("ok", "no_answer", "timeout", "error")
"""Every `GradeResult.status` value."""

_MODES = ("cpmobius", "released")


# ---------------------------------------------------------------------------------------------
# Result types
# ---------------------------------------------------------------------------------------------


class GradingError(RuntimeError):
    """Raised when a batch cannot be trusted (every score is an error or a timeout)."""


@dataclass(frozen=True)
class GradeResult:
    """Verdict on one response.

    Attributes:
        correct: True only if status is "ok" and the answer matches the gold.
        extracted: the extracted final answer (raw, before canonicalisation), or None.
        status: one of `STATUSES`.
    """

    correct: bool
    extracted: str | None
    status: str

    @property
    def score(self) -> float:
        """1.0 if correct else 0.0 (the binary reward)."""
        return 1.0 if self.correct else 0.0


@dataclass(frozen=True)
class BatchGrades:
    """Verdicts on a batch.

    Attributes:
        results: one `GradeResult` per (gold, response) pair, in input order.
        counts: number of results per status, every key of `STATUSES` present.
    """

    results: list[GradeResult]
    counts: dict[str, int]

    @property
    def scores(self) -> list[float]:
        """Per-pair binary scores, (len(results),) floats in {0.0, 1.0}."""
        return [r.score for r in self.results]


@dataclass(frozen=True)
class VoteResult:
    """Majority vote over one group of responses.

    Attributes:
        pseudo_label: the majority answer (a raw extracted string of the winning cluster), or None
            (no answered response, or a tie at the top).
        pass_rate: size of the largest cluster / number of responses n (reported on a tie too;
            0.0 when nothing was answered). Released mode: 0.0 on a tie or a None majority.
        clusters: response indices per cluster, largest first (ties by representative string);
            responses without an answer are in no cluster.
        agrees: per response, whether it belongs to the label's cluster (all False without a label);
            use this as the Player's binary reward so reward and clustering share one rule.
        answers: per response, the extracted answer or None.
        n_timeouts: comparisons that hit the wall-clock/cost budget (treated as "different").
        n_errors: comparisons the grader failed on (treated as "different").
    """

    pseudo_label: str | None
    pass_rate: float
    clusters: list[list[int]]
    agrees: list[bool] = field(default_factory=list)
    answers: list[str | None] = field(default_factory=list)
    n_timeouts: int = 0
    n_errors: int = 0


# ---------------------------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------------------------

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_BOX_TOKEN_RE = re.compile(r"[^\s$]+")
_MATHY_TOKEN_RE = re.compile(r"\d|^\\|^-|^\(?[A-Za-z]\)?$")
# What may stand between two boxes that form one explicit multi-answer.
_CONNECTOR_RE = re.compile(
    r"(?:\s|\$|,|;|&|\band\b|\bor\b|\\quad|\\qquad|\\text\{\s*(?:and|or|,)?\s*\})*", re.I
)
_PLACEHOLDERS = frozenset(
    {"", "none", "null", "nan", "n/a", "na", "answer", "youranswer", "your answer", "finalanswer",
     "final answer", "...", "\\ldots", "\\dots", "\\cdots", "?", "\\text{}"}
)


def _match_brace(text: str, i: int) -> int:
    """Index just past the group opened by text[i] == "{", or -1 if it never closes."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2  # an escaped character (\{, \}, \\) is never a group delimiter
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _boxes(text: str) -> list[tuple[int, int, str | None]]:
    """All real boxes of `text` in order: (start, end, body), body None when truncated."""
    out: list[tuple[int, int, str | None]] = []
    n = len(text)
    for m in _BOX_RE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if text.count("`", line_start, m.start()) % 2 == 1:
            continue  # inside a `code span`: a mention, not an answer
        j = m.end()
        while j < n and text[j] in " \t\n":
            j += 1
        if j >= n:
            out.append((m.start(), n, None))  # cut off right after "\boxed"
        elif text[j] == "{":
            end = _match_brace(text, j)
            if end < 0:
                out.append((m.start(), n, None))  # cut off inside the box
            elif text[j + 1 : end - 1].strip():
                out.append((m.start(), end, text[j + 1 : end - 1].strip()))
            # an empty \boxed{} is a mention ("put it in \boxed{}")
        elif j > m.end():
            tok = _BOX_TOKEN_RE.match(text, j)
            body = tok.group(0).rstrip(".,;:") if tok else ""
            if body and _MATHY_TOKEN_RE.search(body):
                out.append((m.start(), j + len(body), body))
    return out


def _extract_cpmobius(text: str) -> str | None:
    boxes = _boxes(text)
    if not boxes:
        return None
    start, _, body = boxes[-1]
    if body is None:
        # CPMöbius: a truncated final box is no answer; never fall back to an earlier box.
        return None
    parts = [body]
    k = len(boxes) - 2
    while (k >= 0 and boxes[k][2] is not None and boxes[k][1] <= start
           and _CONNECTOR_RE.fullmatch(text, boxes[k][1], start)):
        parts.append(boxes[k][2])  # type: ignore[arg-type]
        start = boxes[k][0]
        k -= 1
    return ", ".join(reversed(parts))


def _released_last_boxed(text: str) -> str | None:
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


def _unwrap_box(boxed: str) -> str:
    """Body of a `\\boxed{..}`/`\\boxed ..`/`\\fbox{..}` string."""
    m = re.match(r"\\(?:boxed|fbox)\s*", boxed)
    rest = boxed[m.end() :] if m else boxed
    if rest.startswith("{") and rest.endswith("}"):
        rest = rest[1:-1]
    return rest


def extract_answer(response: str | None, mode: str = "cpmobius") -> str | None:
    r"""Extract the final answer of one response.

    Args:
        response: the response text only (never prompt + response).
        mode: "cpmobius" (rules in the module docstring) or "released" (the body of verl's
            `last_boxed_only_string`, which the released training vote uses).

    Returns:
        The raw answer string (stripped; several connected boxes joined by ", "), or None when the
        response has no (complete) final box or only a placeholder.

    Raises:
        ValueError: unknown mode.

    Source: CPMöbius released code `main_ppo.py::MajorityVoteRewardManager` (last `\boxed{}`);
    truncation and mention rules are ours (public_cases.md BR-01, BR-02, BR-13, BR-14, BR-40).
    """
    _check_mode(mode)
    if not response:
        return None
    if mode == "released":
        boxed = _released_last_boxed(response)
        return None if boxed is None else _unwrap_box(boxed).strip()
    ans = _extract_cpmobius(response)
    if ans is None or _is_placeholder(_canonical(ans)):
        return None
    return ans


# ---------------------------------------------------------------------------------------------
# Canonicalisation (string → canonical string; cheap, deterministic, cached)
# ---------------------------------------------------------------------------------------------

_UNICODE = str.maketrans({
    "\u2212": "-", "\u2013": "-", "\u2014": "-", "\u00d7": "\\times ", "\u22c5": "\\cdot ",
    "\u00b7": "\\cdot ", "\u03c0": "\\pi ", "\u221e": "\\infty ", "\u221a": "\\sqrt",
    "\u00b0": "^\\circ", "\u2264": "\\leq ", "\u2265": "\\geq ", "\u2260": "\\neq ",
    "\u00a0": " ", "\u2009": " ", "\u202f": " ", "\u20ac": "", "\u00a3": "", "\u00a5": "",
    "\n": " ", "\t": " ", "\r": " ",
})
_WHOLE_BOX_RE = re.compile(r"^\\(?:boxed|fbox)\s*\{(.*)\}$", re.S)
_LEFTRIGHT_RE = re.compile(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|big|Big|bigg|Bigg)(?![A-Za-z])")
_STYLE_RE = re.compile(r"\\(?:displaystyle|textstyle|scriptstyle|limits|mathrm\{\s*\})(?![A-Za-z])")
_FRAC_RE = re.compile(r"\\[dtc]frac(?![A-Za-z])")
_TEXTCMD_RE = re.compile(r"\\(?:textbf|textrm|textit|textnormal|textsf|texttt|mbox|hbox)(?![A-Za-z])")
_OPTION_RE = re.compile(r"^(?:\\text\s*\{\s*)?\(\s*([A-E])\s*\)\s*\}?\s*(?:~|\\ |\\quad|\\,|:)*\s*(.*)$", re.S)
_OPTION_ONLY_RE = re.compile(r"^(?:\\text\s*\{\s*|\\mathbf\s*\{\s*|\\mathrm\s*\{\s*)?\(?\s*([A-E])\s*\)?\s*\}?$")
_DEGREE_RE = re.compile(
    r"(?:\^\s*\{?\s*\\circ\s*\}?|\\circ\s*$|\\degree(?![A-Za-z]))(?:\s*(?:\\mathrm\{[CF]\}|[CF])(?![A-Za-z]))?"
    r"|(?<=[\d}])\s*(?:\^\s*\{?\s*(?:\\prime\s*)+\}?|'+)\s*$"
)
_PERCENT_RE = re.compile(r"\\?%|\\text\{\s*percent\s*\}")
_EMPTY_TEXT_RE = re.compile(r"\\text\s*\{\s*\}")
_SPACING_RE = re.compile(r"\\!|(?<!\\)\\[,;: ]|\\q?quad(?![A-Za-z])|\\(?:enspace|thinspace)(?![A-Za-z])|~")
_UNIT_TEXT_RE = re.compile(
    r"^(.*?[0-9A-Za-z})\]])\s*\\(?:text|mathrm)\s*\{\s*[A-Za-z][A-Za-z .\-/]*\}(?:\s*\^\s*\{?\s*-?\d+\s*\}?)?\s*$", re.S
)
_UNIT_WORD_RE = re.compile(
    r"(?<=[0-9}])\s+(?:cm|mm|km|m|in|inch|inches|ft|feet|foot|yd|yards?|miles?|meters?|metres?|"
    r"units?|dollars?|cents?|degrees?|seconds?|minutes?|hours?|days?|years?|sq\.?\s*units|square\s+units|"
    r"percent|s|ms|Hz|kHz|MHz|GHz|J|kJ|eV|keV|MeV|GeV|K|kg|g|mg|N|W|kW|V|A|Pa|kPa|atm|mol|L|mL|nm|pc|kpc|"
    r"Mpc|AU|erg|ergs|cal|kcal|ohms?)\.?\s*$"
)
_SCI_RE = re.compile(r"(?<![\w.\\])(\d+(?:\.\d+)?)[eE]([+-]?\d+)(?![\w.])")
_PI_WORD_RE = re.compile(r"(?<![\\A-Za-z])pi(?![A-Za-z])")
_INF_WORD_RE = re.compile(r"(?<![\\A-Za-z])(?:infinity|inf)(?![A-Za-z])", re.I)
_BARE_POINT_RE = re.compile(r"(\d)\.(?![\d])")
_SPACE_RE = re.compile(r"(?<![A-Za-z]) | (?![A-Za-z])")
_FRAC_DIGITS_RE = re.compile(r"\\frac(\d)(\d)")
_FRAC_DIGIT_BRACE_RE = re.compile(r"\\frac(\d)\{")
_FRAC_BRACE_DIGIT_RE = re.compile(r"\\frac(\{[^{}]*\})(\d)")
_SQRT_DIGIT_RE = re.compile(r"\\sqrt(\d)")
_SINGLE_SUP_RE = re.compile(r"([_^])\{([0-9A-Za-z])\}")
_ASSIGN_RE = re.compile(r"^(?:[A-Za-z]|\\[A-Za-z]+)(?:_\{?[A-Za-z0-9]+\}?)?(?:=(?!=)|\\in(?![A-Za-z]))")
_REL_OPS = {"\\le": "\\leq", "\\ge": "\\geq", "\\ne": "\\neq", ">=": "\\geq", "<=": "\\leq", "!=": "\\neq"}


_THOUSANDS_RE = {
    inside: re.compile(r"(?<![\d.])(\d{1,3})((?:" + sep + r"\d{3})+)(?!\d)")
    for inside, sep in ((True, r"(?:\{,\}|,\\!)\s*"), (False, r"(?:\{,\}\s*|,\\!\s*|,)"))
}


def _join_thousands(s: str) -> str:
    # Inside brackets a plain comma separates elements; {,} and ,\! still group digits.
    pat = _THOUSANDS_RE[s[:1] in "([" or s.startswith("\\{")]
    return pat.sub(lambda m: m.group(1) + re.sub(r"\D", "", m.group(2)), s)


def _replace_call(s: str, name: str, fmt: str) -> str:
    """Rewrite code-style `name(arg)` (not `\\name`) as fmt.format(arg), parentheses matched."""
    out = s
    while name + "(" in out:
        m = re.search(r"(?<![\\A-Za-z])" + name + r"\(", out)
        if not m:
            return out
        depth, i = 0, m.end() - 1
        while i < len(out):
            depth += {"(": 1, ")": -1}.get(out[i], 0)
            if depth == 0:
                break
            i += 1
        if depth:
            return out
        out = out[: m.start()] + fmt.format(out[m.end() : i]) + out[i + 1 :]
    return out


def _strip_outer_braces(s: str) -> str:
    while s.startswith("{") and _match_brace(s, 0) == len(s):
        s = s[1:-1].strip()
    return s


@lru_cache(maxsize=1 << 16)
def _canonical(ans: str) -> str:
    """Canonical string of an extracted answer (policy table in the module docstring)."""
    s = ans.translate(_UNICODE).strip()
    while (m := _WHOLE_BOX_RE.match(s)) and _match_brace(s, s.index("{")) == len(s):
        s = m.group(1).strip()
    s = s.replace("\\$", "").replace("$", "")
    if s[:2] in ("\\(", "\\[") and s[-2:] in ("\\)", "\\]"):
        s = s[2:-2]
    s = _LEFTRIGHT_RE.sub("", s)
    s = _STYLE_RE.sub("", s)
    s = _FRAC_RE.sub(r"\\frac", s)
    s = _TEXTCMD_RE.sub(r"\\text", s).strip()
    if m := _OPTION_ONLY_RE.match(s):
        return m.group(1)
    if (m := _OPTION_RE.match(s)) and m.group(2)[:1] and (m.group(2)[0].isdigit() or m.group(2)[0] in "-\\"):
        return _canonical(m.group(2))  # "(B) 12": the value after an option label
    s = _DEGREE_RE.sub("", s)
    s = _PERCENT_RE.sub("", s)
    s = _EMPTY_TEXT_RE.sub("", s)
    s = _join_thousands(s)
    s = _SPACING_RE.sub(lambda m: "" if m.group(0) == "\\!" else " ", s)
    while m := _UNIT_TEXT_RE.match(s):
        s = m.group(1)
    s = _UNIT_WORD_RE.sub("", s).strip()
    s = s.replace("**", "^")
    s = _replace_call(s, "sqrt", "\\sqrt{{{}}}")
    s = _replace_call(s, "exp", "e^{{{}}}")
    s = _PI_WORD_RE.sub(r"\\pi ", s)
    s = _INF_WORD_RE.sub(r"\\infty ", s)
    for a, b in _REL_OPS.items():
        s = re.sub(re.escape(a) + r"(?![A-Za-z])", lambda _m, b=b: b, s)
    s = s.replace("*", "\\cdot ")
    s = _SCI_RE.sub(r"\1\\times10^{\2}", s)
    s = _SPACE_RE.sub("", " ".join(s.split()))
    s = s.replace("+-", "-").replace("-+", "-")
    s = _BARE_POINT_RE.sub(r"\1", s)
    s = _FRAC_DIGITS_RE.sub(r"\\frac{\1}{\2}", s)
    s = _FRAC_DIGIT_BRACE_RE.sub(r"\\frac{\1}{", s)
    s = _FRAC_BRACE_DIGIT_RE.sub(r"\\frac\1{\2}", s)
    s = _SQRT_DIGIT_RE.sub(r"\\sqrt{\1}", s)
    s = _SINGLE_SUP_RE.sub(r"\1\2", s)
    if (m := _ASSIGN_RE.match(s)) and not re.search(r"[=<>A-Za-z]", _strip_commands(s[m.end() :])):
        # CPMöbius: "x = 5" is the answer 5, "x \in [2, 5)" is [2, 5) (a leading assignment of a
        # constant is dropped; "y = 2x + 3" stays an equation for math-verify).
        s = s[m.end() :]
    s = _strip_outer_braces(s.lstrip("="))
    return s.rstrip(".,;").strip()


def _is_placeholder(canon: str) -> bool:
    c = canon
    if c.startswith("\\text{") and c.endswith("}"):
        c = c[6:-1]
    return c.strip().lower() in _PLACEHOLDERS


# ---------------------------------------------------------------------------------------------
# Fast path: exact evaluation of numbers, radicals, π, tuples, intervals, sets, words
# ---------------------------------------------------------------------------------------------

_MP = MPContext()
_MP.dps = 60
_EXACT_TOL = _MP.mpf("1e-45")
_MAX_BITS = 400_000  # largest exact rational we build (~120k digits); beyond: "too big"
_MAX_EXP = 100_000


class _Unsupported(Exception):
    """The fast path cannot evaluate this answer (math-verify decides)."""


class _TooBig(Exception):
    """The answer contains a power whose exact value is astronomically large."""


class _Irr:
    """A real number known only to _MP precision (irrational or unproven rational)."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v


class _Inf:
    __slots__ = ("sign",)

    def __init__(self, sign: int) -> None:
        self.sign = sign


_TOO_BIG = object()  # fast value / verdict marker


def _mp(x: Fraction | _Irr) -> Any:
    if isinstance(x, Fraction):
        return _MP.mpf(x.numerator) / x.denominator
    return x.v


def _check_size(x: Fraction) -> Fraction:
    if x.numerator.bit_length() > _MAX_BITS or x.denominator.bit_length() > _MAX_BITS:
        raise _TooBig
    return x


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, _Inf) or isinstance(b, _Inf):
        raise _Unsupported
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check_size(a + b)
    return _Irr(_mp(a) + _mp(b))


def _neg(a: Any) -> Any:
    if isinstance(a, _Inf):
        return _Inf(-a.sign)
    return -a if isinstance(a, Fraction) else _Irr(-a.v)


def _mul(a: Any, b: Any) -> Any:
    if isinstance(a, _Inf) or isinstance(b, _Inf):
        raise _Unsupported
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check_size(a * b)
    return _Irr(_mp(a) * _mp(b))


def _div(a: Any, b: Any) -> Any:
    if isinstance(a, _Inf) or isinstance(b, _Inf) or (isinstance(b, Fraction) and b == 0):
        raise _Unsupported
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check_size(a / b)
    d = _mp(b)
    if d == 0:
        raise _Unsupported
    return _Irr(_mp(a) / d)


def _int_root(n: int, q: int) -> int | None:
    r = round(n ** (1.0 / q)) if n < 1 << 1000 else None
    if r is None:
        return None
    for c in (r - 1, r, r + 1):
        if c >= 0 and c**q == n:
            return c
    return None


def _root(a: Any, q: int) -> Any:
    if isinstance(a, _Inf) or q < 1 or q > 64:
        raise _Unsupported
    if isinstance(a, Fraction):
        if a < 0:
            if q % 2 == 0:
                raise _Unsupported  # complex: math-verify decides
            return _neg(_root(-a, q))
        rn, rd = _int_root(a.numerator, q), _int_root(a.denominator, q)
        if rn is not None and rd is not None:
            return Fraction(rn, rd)
    v = _mp(a)
    if v < 0:
        if q % 2 == 0:
            raise _Unsupported
        return _Irr(-_MP.root(-v, q))
    return _Irr(_MP.root(v, q))


def _pow(a: Any, e: Any) -> Any:
    if isinstance(a, _Inf) or isinstance(e, _Inf):
        raise _Unsupported
    if not isinstance(e, Fraction) or e.denominator > 64:
        v, ev = _mp(a), _mp(e)
        if v <= 0 or abs(ev) > _MAX_EXP:
            raise _Unsupported
        return _Irr(_MP.power(v, ev))
    if abs(e.numerator) > _MAX_EXP:
        raise _TooBig
    if e.denominator != 1:
        return _pow(_root(a, e.denominator), Fraction(e.numerator))
    n = e.numerator
    if isinstance(a, Fraction):
        if a == 0 and n < 0:
            raise _Unsupported
        if max(a.numerator.bit_length(), a.denominator.bit_length()) * abs(n) > _MAX_BITS:
            raise _TooBig
        return a**n
    return _Irr(_MP.power(a.v, n))


def _real_only(f: Any, lo: float | None = None, hi: float | None = None, positive: bool = False) -> Any:
    def g(x: Any) -> Any:
        if (lo is not None and x < lo) or (hi is not None and x > hi) or (positive and x <= 0):
            raise ValueError("outside the real domain")
        return f(x)
    return g


# Functions the fast path evaluates (real arguments only; elsewhere math-verify decides).
_FUNCS: dict[str, Any] = {
    "\\sin": _MP.sin, "\\cos": _MP.cos, "\\tan": _MP.tan, "\\cot": _MP.cot, "\\sec": _MP.sec,
    "\\csc": _MP.csc, "\\sinh": _MP.sinh, "\\cosh": _MP.cosh, "\\tanh": _MP.tanh, "\\exp": _MP.exp,
    "\\arcsin": _real_only(_MP.asin, -1, 1), "\\arccos": _real_only(_MP.acos, -1, 1), "\\arctan": _MP.atan,
    "\\ln": _real_only(_MP.ln, positive=True),
}


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
_TOKEN_RE = re.compile(r"\d+(?:\.\d+)?|\.\d+|\\[A-Za-z]+|\\[{}]|\S")
_IMPLICIT_STARTS = ("\\frac", "\\sqrt", "\\pi", "(", "{")
_MIXED_RE = re.compile(r"\\frac(?:\{\d+\}|\d)(?:\{\d+\}|\d)")
_DECIMAL_RE = re.compile(r"^-?(\d*)\.(\d+)(?:\\(?:times|cdot)10\^\{?([+-]?\d+)\}?)?$")


def _decimal_info(src: str) -> tuple[int, int] | None:
    """(significant digits, decimal places) of a bare decimal literal, else None."""
    m = _DECIMAL_RE.match(src)
    if not m:
        return None
    ip, fp, ex = m.group(1), m.group(2), int(m.group(3) or 0)
    digits = (ip + fp).lstrip("0")
    return len(digits), len(fp) - ex


class _Parser:
    """Recursive-descent evaluator for the fast path (canonical strings, no white space).

    Single-letter variables (not e, i) take the values of `point`: an expression with variables
    is evaluated at two fixed rational points and two answers are equal iff equal at both
    (exact for polynomials and rational functions up to a negligible chance).
    """

    def __init__(self, s: str, point: dict[str, Fraction]) -> None:
        self.src = s
        self.toks = _TOKEN_RE.findall(s)
        self.i = 0
        self.point = point
        self.used_vars = False

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        t = self.peek()
        if t is None or (expected is not None and t != expected):
            raise _Unsupported
        self.i += 1
        return t

    def answer(self) -> tuple:
        items = [self.item()]
        while self.peek() == ",":
            self.take()
            items.append(self.item())
        if self.peek() is not None:
            raise _Unsupported
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
                        raise _Unsupported
                    parts.append(nxt)
                return coll if len(parts) == 1 else ("coll", "union", tuple(parts))
            self.i = start
        start = self.i
        v = self.expr()
        return ("num", v, _decimal_info("".join(self.toks[start : self.i])))

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
            raise _Unsupported
        return ("coll", opening + closing, tuple(elems))

    def expr(self) -> Any:
        v = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            w = self.term()
            v = _add(v, w if op == "+" else _neg(w))
        return v

    def term(self) -> Any:
        v = self.unary()
        while True:
            t = self.peek()
            if t in ("\\cdot", "\\times", "/", "\\div"):
                self.take()
                w = self.unary()
                v = _mul(v, w) if t in ("\\cdot", "\\times") else _div(v, w)
            elif t is not None and ((t.startswith(_IMPLICIT_STARTS) and t != "\\{") or t.isalpha() or t in _FUNCS):
                v = _mul(v, self.power())
            else:
                return v

    def unary(self) -> Any:
        t = self.peek()
        if t == "-":
            self.take()
            return _neg(self.unary())
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
                raise _Unsupported  # e.g. 2^10: ambiguous in LaTeX, let math-verify decide
            if self.peek() == "^":
                raise _Unsupported
            return _pow(base, exp)
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
        raise _Unsupported

    def atom(self) -> Any:
        t = self.take()
        if t[0].isdigit() or t[0] == ".":
            if self.peek() == "\\frac" and "." not in t:
                if not _MIXED_RE.match("".join(self.toks[self.i : self.i + 7])):
                    raise _Unsupported
                # "2\frac{1}{2}" is the mixed number 5/2 (as math-verify reads it)
                self.take()
                num, den = self.arg(), self.arg()
                if not den:
                    raise _Unsupported
                return Fraction(int(t)) + num / den
            return Fraction(t)
        if t == "\\frac":
            num = self.arg()
            return _div(num, self.arg())
        if t == "\\sqrt":
            q = 2
            if self.peek() == "[":
                self.take()
                qv = self.expr()
                self.take("]")
                if not (isinstance(qv, Fraction) and qv.denominator == 1):
                    raise _Unsupported
                q = int(qv)
            return _root(self.arg(), q)
        if t == "\\pi":
            return _Irr(_MP.pi)
        if t == "e":
            return _Irr(_MP.e)  # Euler's number, as math-verify reads it (a bare "e" answer is text)
        if t in _FUNCS:
            return self.function(t)
        if t == "\\infty":
            return _Inf(1)
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
        raise _Unsupported

    def function(self, name: str) -> Any:
        """`\\sin(..)`, `\\ln{..}`, `\\cos^2(..)`: only with a bracketed argument (else unsupported)."""
        power = None
        if self.peek() == "^":
            self.take()
            nxt = self.peek() or ""
            power = self.group() if nxt == "{" else Fraction(int(self.take())) if nxt.isdigit() else None
            if not (isinstance(power, Fraction) and power.denominator == 1 and power > 0):
                raise _Unsupported  # \sin^{-1} and friends: math-verify decides
        if self.peek() not in ("(", "{"):
            raise _Unsupported  # "\sin 2x": precedence is ambiguous, math-verify decides
        closing = ")" if self.take() == "(" else "}"
        arg = self.expr()
        self.take(closing)
        if isinstance(arg, _Inf):
            raise _Unsupported
        x = _mp(arg)
        try:
            v = _FUNCS[name](x)
        except (ValueError, ZeroDivisionError) as exc:
            raise _Unsupported from exc
        if not isinstance(v, type(x)) or not _MP.isfinite(v):
            raise _Unsupported  # complex or infinite: math-verify decides
        out = _Irr(v)
        return _pow(out, power) if power is not None else out


_LETTER_RE = re.compile(r"^[A-Za-z]$")
_WORDS_RE = re.compile(r"^(?:[A-Za-z]{3,}|[A-Za-z][A-Za-z'\-]+(?: [A-Za-z][A-Za-z'\-]+)+)$")
_TEXT_RE = re.compile(r"^\\text\{([^{}\\]*)\}$")


@lru_cache(maxsize=1 << 16)
def _fast_value(canon: str) -> Any:
    """Fast-path value of a canonical answer: (value at point A, value at point B), None or _TOO_BIG.

    A value is ("num", number, decimal info), ("coll", kind, items) or ("text", string); None means
    unsupported (math-verify decides).
    """
    if _LETTER_RE.match(canon):
        return (("text", canon),) * 2
    m = _TEXT_RE.match(canon)
    text = m.group(1).strip() if m else (canon if _WORDS_RE.match(canon) else None)
    if text is not None:
        if len(text) == 1:
            return (("text", text),) * 2
        inner = _fast_value(text) if m and text and not _WORDS_RE.match(text) else None
        if inner is not None and inner is not _TOO_BIG and inner[0][0] != "text":
            return inner
        return (("text", " ".join(text.lower().split())),) * 2
    if len(canon) > 2000 or _LETTER_RUN_RE.search(_strip_commands(canon)):
        return None  # words, functions, Greek letters, \text, relations: math-verify decides
    try:
        parser = _Parser(canon, _POINTS[0])
        at_a = parser.answer()
        return (at_a, _Parser(canon, _POINTS[1]).answer() if parser.used_vars else at_a)
    except _TooBig:
        return _TOO_BIG
    except (_Unsupported, ZeroDivisionError, ValueError, OverflowError, RecursionError, TypeError):
        return None


_LETTER_RUN_RE = re.compile(r"[A-Za-z]{2,}|\\[^A-Za-z{}]|i")


_KNOWN_CMDS_RE = re.compile(
    r"\\(?:frac|sqrt|pi|infty|cdot|times|div|cup|sin|cos|tan|cot|sec|csc|arcsin|arccos|arctan|sinh|cosh|tanh|ln|exp)"
    r"(?![A-Za-z])"
)


def _strip_commands(s: str) -> str:
    return _KNOWN_CMDS_RE.sub("", s)


def _num_eq(a: Any, b: Any, da: tuple[int, int] | None, db: tuple[int, int] | None) -> bool:
    """Numeric equality under the policy (exact; bare decimals with ≥ 6 places/significant digits)."""
    if isinstance(a, _Inf) or isinstance(b, _Inf):
        return isinstance(a, _Inf) and isinstance(b, _Inf) and a.sign == b.sign
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        if a == b:
            return True
    else:
        x, y = _mp(a), _mp(b)
        scale = max(_MP.mpf(1), abs(x), abs(y))
        if abs(x - y) <= _EXACT_TOL * scale:
            return True
    for dec, d, v, other_dec in ((da, a, b, db), (db, b, a, da)):
        if dec is not None and other_dec is None:
            sig, places = dec
            if sig >= 6 and places >= 6:
                half_unit = _MP.mpf(10) ** (-places) / 2
                if abs(_mp(d) - _mp(v)) <= half_unit * (1 + _MP.mpf("1e-30")):
                    # CPMöbius: a decimal with ≥ 6 places and digits, correctly rounded, matches.
                    return True
    return False


def _val_eq(a: tuple, b: tuple) -> bool:
    """Equality of two fast values (policy table)."""
    ka, kb = a[0], b[0]
    if ka == "num" and kb == "num":
        return _num_eq(a[1], b[1], a[2], b[2])
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
def _fast_verdict(a: str, b: str) -> Any:
    """True / False / None (undecided: math-verify) / _TOO_BIG for two canonical answers."""
    if a == b:
        return True
    va, vb = _fast_value(a), _fast_value(b)
    if va is _TOO_BIG or vb is _TOO_BIG:
        return _TOO_BIG
    if va is not None and vb is not None:
        return _val_eq(va[0], vb[0]) and _val_eq(va[1], vb[1])
    return None


# ---------------------------------------------------------------------------------------------
# Worker process side (math-verify, no signals; killed by the parent at the deadline)
# ---------------------------------------------------------------------------------------------

_MV: dict[str, Any] = {}


@lru_cache(maxsize=4096)
def _mv_parse(s: str) -> list:
    mv = _MV
    if not mv:
        import math_verify
        from latex2sympy2_extended.latex2sympy2 import NormalizationConfig
        from math_verify.parser import ExprExtractionConfig, LatexExtractionConfig

        # CPMöbius: math-verify's unit stripping is off (it drops trailing letters such as the
        # "t" of "\frac{1}{m}t"); units are handled by _canonical's policy instead.
        norm = NormalizationConfig(basic_latex=True, units=False, malformed_operators=True, nits=True,
                                   boxed="all", equations=False)
        latex = LatexExtractionConfig(boxed_match_priority=0, normalization_config=norm)
        mv.update(parse=math_verify.parse, verify=math_verify.verify, cfg=[latex, ExprExtractionConfig()])
    return mv["parse"]("\\boxed{" + s + "}", extraction_config=mv["cfg"], parsing_timeout=None)


def _sympy_number(e: Any) -> Any:
    """Fraction / _Irr for a real numeric constant sympy expression, else None."""
    import sympy

    if not isinstance(e, sympy.Expr) or isinstance(e, sympy.UnevaluatedExpr) or not e.is_number:
        return None
    if isinstance(e, sympy.Rational):
        return Fraction(int(e.p), int(e.q))
    floats = e.atoms(sympy.Float)
    if floats:  # a written decimal is exact: 1.3 is 13/10, not its 53-bit approximation
        e = e.xreplace({f: sympy.Rational(str(f)) for f in floats})
    v = e.evalf(60)
    if not (v.is_real and v.is_finite) or not isinstance(v, sympy.Float):
        return None
    return _Irr(_MP.mpf(str(v)))


def _point_value(name: str, k: int) -> Fraction:
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
    symbols = ea.free_symbols | eb.free_symbols
    if not symbols or ea.free_symbols != eb.free_symbols:
        return False
    for k in (0, 1):
        subs = {s: sympy.Rational(_point_value(s.name, k).numerator, _point_value(s.name, k).denominator)
                for s in symbols}
        va, vb = _sympy_number(ea.xreplace(subs)), _sympy_number(eb.xreplace(subs))
        if va is None or vb is None or not _num_eq(va, vb, None, None):
            return False
    return True


def _worker_eq(task: dict) -> bool:
    a, b = _mv_parse(task["a"]), _mv_parse(task["b"])
    if not a or not b:
        return False
    na, nb = _sympy_number(a[0]), _sympy_number(b[0])
    if na is not None and nb is not None:
        da, db = task.get("da"), task.get("db")
        return _num_eq(na, nb, tuple(da) if da else None, tuple(db) if db else None)
    if _equal_at_points(a[0], b[0]):
        return True  # e.g. \alpha vs \alpha+0, which math-verify's symbol shortcut calls different
    verify = _MV["verify"]
    if verify(a, b, timeout_seconds=None):
        return True
    return bool(task.get("sym")) and verify(b, a, timeout_seconds=None)


def _worker_handle(task: dict) -> bool:
    if task["op"] == "eq":
        return _worker_eq(task)
    if task["op"] == "released":
        return _released_symbolic_equal(task["pred"], task["ref"], task["pi"])
    raise ValueError(f"unknown op {task['op']!r}")


def _worker_main() -> None:  # pragma: no cover - runs in the worker process
    """Worker loop: JSON task per stdin line → JSON result per stdout line."""
    try:  # die with the spawner thread of the parent (Linux); see _Pool._spawn_loop
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
            msg: dict[str, Any] = {"r": bool(_worker_handle(json.loads(line)))}
        except (MemoryError, RecursionError, OverflowError) as exc:
            msg = {"resource": type(exc).__name__}
        except Exception as exc:
            msg = {"err": f"{type(exc).__name__}: {exc}"[:500]}
        out.write(json.dumps(msg).encode() + b"\n")
        out.flush()


_WORKER_BOOT = (
    "import importlib.util,sys\n"
    "if sys.path and sys.path[0] in ('', '.'): del sys.path[0]\n"
    "s=importlib.util.spec_from_file_location('_cpmobius_grading_worker', sys.argv[1])\n"
    "m=importlib.util.module_from_spec(s); sys.modules[s.name]=m; s.loader.exec_module(m)\n"
    "m._worker_main()\n"
)


# ---------------------------------------------------------------------------------------------
# Worker pool (parent side)
# ---------------------------------------------------------------------------------------------


def _readable(fds: list[int], timeout_s: float) -> list[int]:
    """File descriptors among `fds` that are readable (or closed) within timeout_s (poll, no FD_SETSIZE limit)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return [fd for fd, _ in poller.poll(max(0.0, timeout_s) * 1000.0)]


class _Worker:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER_BOOT, os.path.abspath(__file__)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            bufsize=0, close_fds=True, start_new_session=True,
        )
        self.fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        self.buf = b""

    def send(self, task: dict) -> None:
        self.proc.stdin.write(json.dumps(task).encode() + b"\n")  # type: ignore[union-attr]

    def read_line(self) -> bytes | None:
        """After poll() said readable: a full line, b"" on EOF, or None (partial)."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return b""
        self.buf += chunk
        if b"\n" not in self.buf:
            return None
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass


class _Pool:
    """Persistent worker processes; per-call deadlines; overrunning workers are killed and replaced."""

    STARTUP_TIMEOUT_S = 60.0

    def __init__(self, size: int) -> None:
        self.size = size
        self.pid = os.getpid()
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._alive = 0  # started or starting
        self._ready = 0  # started and ready (idle or busy)
        self._fatal: str | None = None
        self.kills = 0
        self._requests: collections.deque = collections.deque()
        self._wake = threading.Event()
        # Workers are started from this long-lived thread: their PR_SET_PDEATHSIG is tied to the
        # thread that forked them, so a short-lived caller thread must not be their parent.
        self._spawner = threading.Thread(target=self._spawn_loop, daemon=True, name="cpmobius-grading-pool")
        self._spawner.start()
        for _ in range(size):
            self._request(("spawn", None))

    def _request(self, req: tuple) -> None:
        if req[0] == "spawn":
            with self._cond:
                self._alive += 1
        self._requests.append(req)
        self._wake.set()

    def _spawn_loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            starting: list[tuple[_Worker, float]] = []
            while self._requests:
                kind, w = self._requests.popleft()
                if kind == "reap":
                    w.proc.wait()
                    continue
                try:
                    starting.append((_Worker(), time.monotonic() + self.STARTUP_TIMEOUT_S))
                except OSError as exc:
                    self._fail(f"cannot start a grading worker: {exc}")
            for w, deadline in starting:
                self._await_ready(w, deadline)

    def _await_ready(self, w: _Worker, deadline: float) -> None:
        line: bytes | None = None
        while line is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not _readable([w.fd], remaining):
                break
            line = w.read_line()
        msg = json.loads(line) if line else {}
        if msg.get("ready"):
            with self._cond:
                self._ready += 1
            self.release(w)
            return
        w.kill()
        w.proc.wait()
        self._fail(msg.get("fatal") or "grading worker did not start (is math-verify installed?)")

    def _fail(self, reason: str) -> None:
        _LOG.error("grading pool: %s", reason)
        with self._cond:
            self._alive -= 1
            self._fatal = reason
            self._cond.notify_all()

    def release(self, w: _Worker) -> None:
        with self._cond:
            self._idle.append(w)
            self._cond.notify_all()

    def discard(self, w: _Worker, *, replace: bool = True) -> None:
        w.kill()
        with self._cond:
            self._alive -= 1
            self._ready -= 1
        self._request(("reap", w))
        if replace:
            self._request(("spawn", None))

    def _acquire(self, until: float) -> _Worker | None:
        with self._cond:
            while not self._idle:
                remaining = until - time.monotonic()
                if remaining <= 0 or (self._fatal is not None and self._alive <= 0):
                    return None
                self._cond.wait(remaining)
            return self._idle.pop()

    def wait_ready(self) -> str | None:
        """Block while no worker is ready (start-up); returns the pool's failure reason or None.

        Waiting for workers that are still starting does not count against a call's deadline;
        waiting for workers busy with other callers does.
        """
        until = time.monotonic() + self.STARTUP_TIMEOUT_S
        with self._cond:
            while self._ready <= 0:
                if self._fatal is not None and self._alive <= 0:
                    return self._fatal
                remaining = until - time.monotonic()
                if remaining <= 0:
                    return "no grading worker became ready"
                self._cond.wait(remaining)
        return None

    def run(self, tasks: list[dict], timeout_s: float) -> list[tuple[str, Any]]:
        """Run tasks; returns (status, value) per task: ("ok", bool) / ("timeout"|"error", reason)."""
        out: list[tuple[str, Any]] = [("timeout", "deadline")] * len(tasks)
        if timeout_s <= 0:
            return out
        failure = self.wait_ready()
        if failure is not None:
            return [("error", failure)] * len(tasks)
        deadline = time.monotonic() + timeout_s
        pending = collections.deque(range(len(tasks)))
        inflight: dict[int, tuple[_Worker, int]] = {}
        while pending or inflight:
            while pending and time.monotonic() < deadline:
                w = self._acquire(deadline if not inflight else 0.0)
                if w is None:
                    break
                i = pending.popleft()
                try:
                    w.send(tasks[i])
                except OSError:
                    self.discard(w)
                    pending.appendleft(i)
                    continue
                inflight[w.fd] = (w, i)
            remaining = deadline - time.monotonic()
            if not inflight or remaining <= 0:
                if pending and not inflight and self._fatal is not None and self._alive <= 0:
                    for i in pending:
                        out[i] = ("error", self._fatal)
                break
            ready = _readable(list(inflight), min(remaining, 0.05) if pending else remaining)
            for fd in ready:
                w, i = inflight[fd]
                line = w.read_line()
                if line is None:
                    continue
                del inflight[fd]
                if not line:
                    out[i] = ("error", f"grading worker died (exit code {w.proc.poll()})")
                    self.discard(w)
                    continue
                self.release(w)
                msg = json.loads(line)
                if "r" in msg:
                    out[i] = ("ok", msg["r"])
                elif "resource" in msg:
                    out[i] = ("timeout", msg["resource"])
                else:
                    out[i] = ("error", msg.get("err", "unknown worker error"))
        for w, _ in inflight.values():  # still busy at the deadline: kill and replace
            self.kills += 1
            self.discard(w)
        return out

    def close(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
        for w in idle:
            w.kill()
            w.proc.wait()


_POOL: _Pool | None = None
_POOL_LOCK = threading.Lock()


def _get_pool() -> _Pool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.pid != os.getpid():  # a forked child builds its own pool
            size = int(os.environ.get("CPMOBIUS_GRADING_WORKERS", "0") or 0)
            _POOL = _Pool(size if size > 0 else min(8, max(2, os.cpu_count() or 2)))
        return _POOL


def shutdown_pool() -> None:
    """Stop the grading worker processes (they are restarted on demand). Safe to call twice."""
    global _POOL
    with _POOL_LOCK:
        pool, _POOL = _POOL, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()


atexit.register(shutdown_pool)


# ---------------------------------------------------------------------------------------------
# Judging core: canonical pairs → verdicts (fast path, caches, pool)
# ---------------------------------------------------------------------------------------------


class _LRU:
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


_VERDICTS = _LRU(1 << 17)


def _judge(pairs: list[tuple[str, str]], *, symmetric: bool, timeout_s: float) -> list[tuple[str, bool]]:
    """(status, equal) for canonical (gold, answer) pairs; all slow pairs share one deadline."""
    out: list[tuple[str, bool] | None] = [None] * len(pairs)
    todo: dict[tuple, list[int]] = {}
    for i, (a, b) in enumerate(pairs):
        v = _fast_verdict(a, b)
        if v is _TOO_BIG:
            out[i] = ("timeout", False)
        elif v is not None:
            out[i] = ("ok", bool(v))
        else:
            key = (min(a, b), max(a, b), True) if symmetric else (a, b, False)
            cached = _VERDICTS.get(key)
            if cached is not None:
                out[i] = ("ok", cached)
            else:
                todo.setdefault(key, []).append(i)
    if todo:
        keys = sorted(todo, key=lambda k: (len(k[0]) + len(k[1]), k))  # cheap-looking first
        tasks = [{"op": "eq", "a": a, "b": b, "da": _decimal_info(a), "db": _decimal_info(b), "sym": s}
                 for a, b, s in keys]
        failed = 0
        for key, (status, value) in zip(keys, _get_pool().run(tasks, timeout_s)):
            if status == "ok":
                _VERDICTS.put(key, bool(value))
            else:
                failed += 1
                if failed <= 3:
                    _LOG.warning("grading %s (%s): %.120r vs %.120r", status, value, key[0], key[1])
            for i in todo[key]:
                out[i] = (status, bool(value) if status == "ok" else False)
        if failed > 3:
            _LOG.warning("grading: %d more comparisons timed out or failed in this call", failed - 3)
    return out  # type: ignore[return-value]


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"unknown grading mode {mode!r}; expected one of {_MODES}")


def _counts(results: Iterable[GradeResult]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for r in results:
        counts[r.status] += 1
    return counts


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def grade(gold: str, response: str | None, *, mode: str = "cpmobius",
          timeout_s: float = DEFAULT_TIMEOUT_S) -> GradeResult:
    r"""Grade one response against a gold answer.

    Args:
        gold: the reference answer (LaTeX or plain, not boxed; a boxed gold is unwrapped).
        response: the full response text (only its final `\boxed{}` is read), or None.
        mode: "cpmobius" (default policy) or "released" (the released evaluation grader).
        timeout_s: wall-clock budget in seconds for the slow path (pool start-up excluded).

    Returns:
        `GradeResult(correct, extracted, status)`.

    Raises:
        ValueError: unknown mode.
    """
    return grade_batch([gold], [response], mode=mode, timeout_s=timeout_s).results[0]


def grade_batch(golds: Sequence[str], responses: Sequence[str | None], *, mode: str = "cpmobius",
                timeout_s: float = DEFAULT_TIMEOUT_S) -> BatchGrades:
    """Grade responses against golds; one shared deadline for every slow comparison.

    Fast-path pairs are decided in-process; identical (gold, answer) pairs are judged once; the
    remaining comparisons run in parallel in the worker pool, cheapest-looking first, and any not
    decided `timeout_s` seconds after the pool is ready get status "timeout" (their workers are
    killed and replaced). Timeouts and errors are logged at WARNING.

    Args:
        golds: (n,) reference answers.
        responses: (n,) response texts (None counts as no answer).
        mode: "cpmobius" or "released".
        timeout_s: wall-clock budget in seconds of the whole batch's slow path.

    Returns:
        `BatchGrades` with (n,) results and per-status counts.

    Raises:
        ValueError: unknown mode or len(golds) != len(responses).
    """
    _check_mode(mode)
    if len(golds) != len(responses):
        raise ValueError(f"{len(golds)} golds but {len(responses)} responses")
    if mode == "released":
        results = _released_grade_batch(golds, responses, timeout_s)
    else:
        results = [GradeResult(False, None, "error")] * len(golds)
        pairs, where = [], []
        for i, (gold, resp) in enumerate(zip(golds, responses)):
            extracted = extract_answer(resp) if resp else None
            gold_c = _canonical(str(gold)) if gold is not None else ""
            if _is_placeholder(gold_c):
                _LOG.warning("grading error: invalid gold answer %.80r", gold)
                results[i] = GradeResult(False, extracted, "error")
            elif extracted is None:
                results[i] = GradeResult(False, None, "no_answer")
            else:
                pairs.append((gold_c, _canonical(extracted)))
                where.append((i, extracted))
        for (i, extracted), (status, ok) in zip(where, _judge(pairs, symmetric=False, timeout_s=timeout_s)):
            results[i] = GradeResult(ok and status == "ok", extracted, status)
    counts = _counts(results)
    if counts["timeout"] or counts["error"]:
        _LOG.warning("grade_batch: %s", counts)
    return BatchGrades(results, counts)


def answers_equivalent(a: str | None, b: str | None, *, mode: str = "cpmobius",
                       timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Symmetric equivalence of two extracted answers (the vote's rule).

    Args:
        a, b: extracted answers (not full responses); None or placeholders are never equivalent
            to anything.
        mode: "cpmobius" (either-direction math-verify after the policy) or "released" (exact
            string equality).
        timeout_s: wall-clock budget in seconds; a timeout counts as "not equivalent" (logged).

    Returns:
        Whether the two answers are one cluster.
    """
    _check_mode(mode)
    if a is None or b is None:
        return False
    if mode == "released":
        return a == b
    ca, cb = _canonical(a), _canonical(b)
    if _is_placeholder(ca) or _is_placeholder(cb):
        return False
    status, equal = _judge([(ca, cb)], symmetric=True, timeout_s=timeout_s)[0]
    return status == "ok" and equal


def majority_vote(responses: Sequence[str | None] | None = None, *,
                  answers: Sequence[str | None] | None = None,
                  truncated: Sequence[bool] | None = None, mode: str = "cpmobius",
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> VoteResult:
    r"""Majority vote of one group (the pseudo-label of a Coach problem).

    Args:
        responses: (n,) response texts; their final answers are extracted. Give this or `answers`.
        answers: (n,) already extracted answers (None = no answer).
        truncated: optional (n,) flags; truncated responses (stopped by length) never vote and
            count as unanswered (denominator stays n). CPMöbius rule for public case BR-28.
        mode: "cpmobius" (equivalence clusters) or "released" (exact-string vote of the released
            code on verl's `last_boxed_only_string`).
        timeout_s: wall-clock budget in seconds for all slow comparisons of this vote.

    Returns:
        `VoteResult`; invariant (label, pass rate, partition) to any permutation of the responses.

    Raises:
        ValueError: unknown mode, both or neither of responses/answers, or a length mismatch.

    Source: paper §3 (majority vote → pseudo-label y*); released `MajorityVoteRewardManager`.
    """
    _check_mode(mode)
    if (responses is None) == (answers is None):
        raise ValueError("give exactly one of responses= or answers=")
    items = list(responses if responses is not None else answers)  # type: ignore[arg-type]
    n = len(items)
    if truncated is not None and len(truncated) != n:
        raise ValueError(f"{n} responses but {len(truncated)} truncated flags")
    if mode == "released":
        return _released_vote(items, answers is not None, truncated)
    extracted = list(items) if answers is not None else [extract_answer(r) for r in items]
    # CPMöbius: cluster by equivalence (released: raw strings); "no answer" never votes.
    groups: dict[str, list[int]] = {}
    for i, ans in enumerate(extracted):
        if ans is None or (truncated is not None and truncated[i]):
            extracted[i] = None
            continue
        c = _canonical(ans)
        if _is_placeholder(c):
            extracted[i] = None
            continue
        groups.setdefault(c, []).append(i)
    uniques = sorted(groups, key=lambda c: (-len(groups[c]), c))
    reps: list[str] = []
    members: list[list[str]] = []
    n_timeouts = n_errors = 0
    deadline = time.monotonic() + timeout_s
    for u in uniques:
        fast = [_fast_verdict(r, u) for r in reps]
        first_true = next((j for j, v in enumerate(fast) if v is True), len(reps))
        slow = [j for j in range(first_true) if fast[j] is None]
        n_timeouts += sum(1 for v in fast[:first_true] if v is _TOO_BIG)
        joined = first_true if first_true < len(reps) else None
        if slow and time.monotonic() >= deadline:
            n_timeouts += len(slow)  # budget spent: remaining comparisons count as "different"
        elif slow:
            verdicts = _judge([(reps[j], u) for j in slow], symmetric=True,
                              timeout_s=max(0.0, deadline - time.monotonic()))
            n_timeouts += sum(1 for s, _ in verdicts if s == "timeout")
            n_errors += sum(1 for s, _ in verdicts if s == "error")
            hit = next((j for j, (s, eq) in zip(slow, verdicts) if s == "ok" and eq), None)
            if hit is not None:
                joined = hit
        if joined is None:
            reps.append(u)
            members.append([u])
        else:
            members[joined].append(u)
    clusters = [sorted(i for c in ms for i in groups[c]) for ms in members]
    order = sorted(range(len(clusters)), key=lambda k: (-len(clusters[k]), reps[k]))
    clusters = [clusters[k] for k in order]
    reps = [reps[k] for k in order]
    top = len(clusters[0]) if clusters else 0
    label = None
    agrees = [False] * n
    if clusters and (len(clusters) == 1 or len(clusters[1]) < top):
        label = min(extracted[i] for i in groups[reps[0]])  # type: ignore[type-var]
        for i in clusters[0]:
            agrees[i] = True
    return VoteResult(label, top / n if n else 0.0, clusters, agrees, extracted, n_timeouts, n_errors)


def check_batch(results: BatchGrades | Sequence[GradeResult], *, context: str = "") -> dict[str, int]:
    """Refuse to train on zeros: raise when every result of a non-empty batch is an error/timeout.

    Args:
        results: a `BatchGrades` or a sequence of `GradeResult`.
        context: a short name for the message (e.g. "player reward, step 12").

    Returns:
        Per-status counts (every key of `STATUSES`).

    Raises:
        GradingError: the batch is non-empty and has no "ok"/"no_answer" result.
    """
    items = results.results if isinstance(results, BatchGrades) else list(results)
    counts = _counts(items)
    if items and counts["timeout"] + counts["error"] == len(items):
        raise GradingError(
            f"refusing to train on zeros{f' ({context})' if context else ''}: all {len(items)} "
            f"grades failed ({counts['timeout']} timeouts, {counts['error']} errors); check the "
            "grader workers (math-verify installed?) and the timeout budget"
        )
    return counts


# ---------------------------------------------------------------------------------------------
# Released mode (paper-faithful reproduction of the released vote and evaluation grader)
# ---------------------------------------------------------------------------------------------


def _released_vote(items: list, are_answers: bool, truncated: Sequence[bool] | None) -> VoteResult:
    n = len(items)
    keys: list[str | None] = []
    for i, item in enumerate(items):
        if truncated is not None and truncated[i]:
            keys.append(None)
        elif are_answers:
            keys.append(None if item is None else "\\boxed{" + item + "}")
        else:
            keys.append(_released_last_boxed(item) if item else None)
    counts = collections.Counter(keys)
    answers = [None if k is None else _unwrap_box(k) for k in keys]
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
    return VoteResult(_unwrap_box(top_key), top / n, clusters, agrees, answers)


def _released_match_answer(response: str) -> str:
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
    boxed = _released_eval_last_boxed(response)
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


def _released_eval_last_boxed(text: str) -> str | None:
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


def _released_gold(gold: Any) -> str:
    """Released evaluation's gold: `str(answer).lstrip("0") or "0"` ("033" → "33", "0,1" → ",1")."""
    return str(gold).lstrip("0") or "0"


def _released_extract(response: str | None) -> str:
    # Released quirk (public case BR-36): str.strip with a phrase strips a *character set*.
    return _released_match_answer(response or "").strip("The final answer is ").strip(". I hope it is correct.")


def _released_parse_number(s: str) -> float | None:
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


def _released_fast(pred: str, ref: str) -> bool | None:
    """The cheap steps of the released `math_equal`: string, then numeric; None = go symbolic."""
    if pred.strip().lower() == ref.strip().lower():
        return True
    p, r = _released_parse_number(pred), _released_parse_number(ref)
    if p is not None and r is not None:
        return any(math.isclose(p, x, rel_tol=1e-4) for x in (r / 100, r, r * 100))
    if not pred:
        return False
    return None


def _released_symbolic_equal(pred: str, ref: str, pi: float) -> bool:
    """The slow steps of the released `math_equal` (runs in a worker; may be killed)."""
    import sympy
    from sympy.parsing.sympy_parser import parse_expr

    fast = _released_fast(pred, ref)
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
        if len(pp) == len(rp) and all(_released_symbolic_equal(x, y, pi) for x, y in zip(pp, rp)):
            return True
    if ps.count("=") == 1 and rs.count("=") == 1:
        pl, pr = ps.split("=")
        rl, rr = rs.split("=")
        p_expr, r_expr = f"{pl.strip()} - ({pr.strip()})", f"{rl.strip()} - ({rr.strip()})"
        if any(_released_sym(p, r_expr, pi, sympy, parse_expr) for p in (p_expr, f"-({p_expr})")):
            return True
    elif ps.count("=") == 1 and len(ps.split("=")[0].strip()) <= 2 and "=" not in rs:
        if _released_symbolic_equal(ps.split("=")[1], rs, pi):
            return True
    elif rs.count("=") == 1 and len(rs.split("=")[0].strip()) <= 2 and "=" not in ps:
        if _released_symbolic_equal(ps, rs.split("=")[1], pi):
            return True
    return _released_sym(ps, rs, pi, sympy, parse_expr)


def _released_sym(a_s: str, b_s: str, pi: float, sympy: Any, parse_expr: Any) -> bool:
    from latex2sympy2_extended import latex2sympy

    def parse(s: str) -> Any:
        for f in (parse_expr, latex2sympy):
            for t in (s.replace("\\\\", "\\"), s):
                try:
                    return f(t)
                except Exception:
                    pass
        return s

    a, b = parse(a_s), parse(b_s)
    try:
        if str(a) == str(b) or a == b:
            return True
    except Exception:
        pass
    try:
        if a.equals(b) or sympy.simplify(a - b) == 0:
            return True
    except Exception:
        pass
    try:
        av = float(sympy.N(a.subs(sympy.pi, pi)))
        bv = float(sympy.N(b.subs(sympy.pi, pi)))
        return math.isclose(av, bv, rel_tol=1e-4)
    except Exception:
        return False


def _released_grade_batch(golds: Sequence[str], responses: Sequence[str | None],
                          timeout_s: float) -> list[GradeResult]:
    results: list[GradeResult] = [GradeResult(False, None, "error")] * len(golds)
    tasks, where = [], []
    for i, (gold, resp) in enumerate(zip(golds, responses)):
        ref = _released_gold(gold)
        pred = _released_extract(resp)
        if not pred:
            results[i] = GradeResult(False, pred, "no_answer")
            continue
        pis = (math.pi, 3.14) if ("\\pi" in pred or "\\pi" in ref) else (math.pi,)
        if _released_fast(pred, ref) is not None and len(pis) == 1:
            results[i] = GradeResult(bool(_released_fast(pred, ref)), pred, "ok")
            continue
        for pi in pis:
            tasks.append({"op": "released", "pred": pred, "ref": ref, "pi": pi})
            where.append((i, pred))
    if tasks:
        verdicts = _get_pool().run(tasks, timeout_s)
        merged: dict[int, list[tuple[str, Any]]] = {}
        for (i, _), v in zip(where, verdicts):
            merged.setdefault(i, []).append(v)
        for (i, pred) in dict(where).items():
            vs = merged[i]
            if any(s == "ok" and val for s, val in vs):
                results[i] = GradeResult(True, pred, "ok")
            elif all(s == "ok" for s, _ in vs):
                results[i] = GradeResult(False, pred, "ok")
            else:
                results[i] = GradeResult(False, pred, next(s for s, _ in vs if s != "ok"))
    return results


# ---------------------------------------------------------------------------------------------
# Command-line interface
# ---------------------------------------------------------------------------------------------


def _cli_lines(stream: Iterable[str], required: dict[str, type]) -> Iterable[tuple[int, dict]]:
    for lineno, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"error: line {lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise SystemExit(f"error: line {lineno}: expected a JSON object, got {type(obj).__name__}")
        for key, typ in required.items():
            if key not in obj:
                raise SystemExit(f"error: line {lineno}: missing key {key!r}")
            value = obj[key]
            if typ is list and not (isinstance(value, list) and all(x is None or isinstance(x, str) for x in value)):
                raise SystemExit(f"error: line {lineno}: {key!r} must be a list of strings")
            if typ is str and (not isinstance(obj[key], (str, int, float)) or isinstance(obj[key], bool)):
                raise SystemExit(f"error: line {lineno}: {key!r} must be a string")
        yield lineno, obj


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m cpmobius.grading verify|vote` on JSON lines from stdin (see module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m cpmobius.grading", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("verify", "vote"))
    parser.add_argument("--mode", choices=_MODES, default="cpmobius")
    parser.add_argument("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s")
    try:
        if args.command == "verify":
            for _, obj in _cli_lines(sys.stdin, {"gold": str, "response": str}):
                r = grade(str(obj["gold"]), str(obj["response"]), mode=args.mode, timeout_s=args.timeout_s)
                print(json.dumps({"correct": r.correct, "extracted": r.extracted, "status": r.status}), flush=True)
        else:
            for _, obj in _cli_lines(sys.stdin, {"responses": list}):
                v = majority_vote(obj["responses"], mode=args.mode, timeout_s=args.timeout_s)
                print(json.dumps({"pseudo_label": v.pseudo_label, "pass_rate": v.pass_rate,
                                  "clusters": v.clusters}), flush=True)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
