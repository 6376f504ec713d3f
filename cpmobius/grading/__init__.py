r"""Answer grading: extraction, equivalence, majority vote (pure, CPU, hard timeouts).

Stage: grading. Every place that judges an answer calls this package: the Player's reward
(`grade` / `majority_vote`), the difficulty filter (`majority_vote`), validation and Δt, and
the benchmark evaluation (`grade_batch`). There is no second grader.

Public API (all pure functions of their arguments; no engine objects):

* `extract_answer(response, mode)`: the final answer of a response, or None.
* `grade(gold, response)` / `grade_batch(golds, responses)`: gold-vs-response verdicts.
* `answers_equivalent(a, b)`: the symmetric response-vs-response rule used by the vote.
* `majority_vote(responses)`: pseudo-label, pass rate and clusters of one group.
* `check_batch(results)`: raises `GradingError` when every score of a batch is an error/timeout.
* `python -m cpmobius.grading verify|vote`: the same, on JSON lines (debugging a verdict).

What it may import of cpmobius: itself and `cpmobius.jsonl` (the CLI's JSON-lines reader), nothing
else, so every stage, the evaluation and the warm-up can use it without an import cycle.

Extraction (mode "cpmobius", the default)
-----------------------------------------
* The answer is the body of the **last** `\boxed{...}` / `\fbox{...}` of the response, brace
  balanced (`\{`, `\}` are escaped braces, not groups), also `\boxed 5` (a space, then one token).
* A response cut off inside its final box (`... \boxed{7`, `... \boxed \frac{7` or `... \boxed`
  at the end) has **no answer**: an earlier, retracted box is never used instead.
* Extraction is linear in the response's length (no response can stall the caller).
* Mentions of `\boxed` in prose are not boxes: `\boxed{}` (empty), `\boxed` followed by neither a
  group nor a math-looking token (`the \boxed command`), and boxes inside a `code span`.
* Several boxes: the last one wins. Boxes separated only by connectors (`,`, `;`, `and`, `or`,
  `&`, `$`, `\quad`, white space) form one explicit multi-answer `a, b` (an unordered list),
  e.g. `\boxed{3} and \boxed{4}` is `3, 4`, while `\boxed{5}. Wait, ... \boxed{7}` is `7`.
  A run of connected boxes that all hold the same answer (the same canonical string, or equal on
  the fast path) is that answer, written as in the last box: `\boxed{12} \boxed{12}` and
  `\boxed{12} \quad \boxed{12}` are `12`, `\boxed{\frac12} \boxed{0.5}` is `0.5`; a run with
  any two different answers stays a list (`\boxed{3}, \boxed{3}, \boxed{4}` is `3, 3, 4`).
* AMC options: `\textbf{(B) }12`, `\mathbf{(B)}\ 12`, `(B) x^2` are the value after the label (in
  any font; not when a connector or another label follows: `(B), (C)`); `(B)`, `\text{(B)}`,
  `\textbf{B}` and a bare `B` are the option letter `B`, compared as text (never Euler's e, never a
  product). Against a gold that is an option letter, a labelled value is its label:
  `\text{(B) } 12` answers gold `(B)`.
* Placeholders are no answer: empty, `None`, `null`, `NaN`, `N/A`, `N.A.`, `answer`, `your answer
  here`, `...`, `?`, also inside font commands or brackets (`\mathrm{None}`, `\text{None.}`,
  `\emph{N/A}`, `[answer]`) and an answer of only spaces (`\ `).
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
degrees `30^\circ`              the degree sign is dropped; no deg↔rad        30° = 30; 90° ≠ π/2;
                                except as the argument of a trigonometric     \sin 30° = 1/2 ≠
                                function, where it is an angle in degrees     \sin 30
units `5\text{ cm}`, `5 cm`     a trailing `\text{..}`/`\mathrm{..}` unit or   5 cm = 5;
                                a common unit word after a number is dropped, 9.8 m/s² = 9.8;
                                compound units too (`\mathrm{J\cdot s}`,      12 Ω = 12
                                `\mathrm{m/s^2}`, `\Omega`)
annotations                     a leading `\approx` and a trailing             ≈ 3.14 = 3.14 ≠ π;
                                `\text{(remark)}` are dropped                  12 (rounded) = 12
labelled / chained values       against a value, an equation whose left side   m+n=17 = 17;
                                names the quantity (`m+n`, `f^{-1}(x)`, a      f^{-1}(x)=x+1 = x+1;
                                value at a point `f(3)`, a derivative `f'(x)`, f'(x)=2x = 2x;
                                `y''`, `\frac{dy}{dx}`, `dy/dx`) is its right  2+3=5 = 5; 2+3=6 ≠ 6;
                                side (or a true chain's last member after it), 2x+1=7 ≠ 3;
                                and a true numeric chain its last member       f(3)=6 ≠ f(3)=7
                                (released: accepts labelled sides); two
                                equations with one label compare by value,
                                other pairs of equations as equations
derivatives `\frac{d}{dx}`       an unevaluated derivative, integral, sum,     \frac{d}{dx}(x^3) =
                                product or limit is judged by math-verify      3x^2 ≠ \frac{d}{dx}x^2
                                alone, which evaluates it (released: the same)
number words `fifty-one`        a whole answer that is a cardinal number in   fifty-one = 51;
                                English words is its numeral (released: not    \text{one solution}
                                read, fifty-one ≠ 51), also with a unit,       ≠ 1; five cm = 5
                                degree or percent sign; words in a phrase or
                                out of a number's order are left as text
currency `\$10`                 `$`, `\$`, €, £, ¥ are dropped                $10 = 10
thousands `1,000`               `,`, `{,}`, `,\!` join digits only between    1,000 = 1{,}000 =
                                1–3 digits and groups of exactly 3 (plain `,`   1\,000 = 1000;
                                is an element separator inside brackets);      0,1 ≠ 01; 12,34 is
                                thin/explicit spaces between digits vanish      the list (12, 34)
                                as in LaTeX math mode
mixed numbers `3 1/2`           an integer, spacing (` `, `\ `, `\,`, `~`,    3 1/2 = 7/2 ≠ 31/2;
                                `\quad`) and a proper fraction is their sum;  2\ 3/4 = 11/4;
                                `3\frac{1}{2}`, `3½` are 7/2 (LaTeX           -1 1/2 = -3/2;
                                convention); if the spaces may also be digit  1 000/3 = 1000/3;
                                groups (a 3-digit numerator after 1–3         12 345/678, 3 5/2:
                                digits) or the fraction is improper: no       no answer
                                answer
repeating `0.\overline{3}`      the exact rational: bar over the repetend,    0.\overline{1} = 1/9;
                                `\dot` over its first and last digit, or      0.1\overline{6} = 1/6;
                                `0.(3)` (parentheses right after the point;   0.\dot{1}4\dot{2} =
                                `0.1(6)` also reads as a product or an        142/999; 0.(3) = 1/3;
                                uncertainty: no answer)                       0.1(6): no answer
exact values                    rationals (fractions, powers, factorials,     1/100! ≠ 1/101!;
                                binomials) compare exactly, however tiny;     2^{-200} ≠ 2^{-201};
                                reals (π, roots, functions) are equal iff     100! ≠ 100!+1;
                                within 10^10 × their propagated 60-digit      π/10^50 ≠ π/10^51;
                                rounding error (no absolute floor)            sin(π) = 0
decimals vs exact values        equal if equal as numbers (0.5 = 1/2). A      0.333 ≠ 1/3;
                                bare decimal approximates a non-terminating   0.333333 = 1/3;
                                exact value (a real, or a rational whose      6.283185 = 2π;
                                denominator has a prime other than 2 and 5)   6.28 ≠ 2π;
                                only if it has ≥ 6 decimal places AND ≥ 6     1.5708 ≠ π/2;
                                significant digits and is within half a unit  1.22e-18 ≠ 1.5e-18;
                                of its last digit; a terminating value and    1.000000 ≠ 1+10^{-7}
                                two decimals are equal only if equal
intervals `(a,b]`               bracket types and end points must match;       (-∞,3) = (-\infty,3)
                                `\cup` is unordered
tuples `(a, b)`                 ordered; an open interval and a pair are the   (1,2) = 1, 2
                                same object; a bare list is read in order
                                against a tuple
sets `\{a, b\}`, lists `a, b`   unordered; a one-element set equals its        \{1,2\} = 2, 1;
                                element; a set never equals a tuple            \{1,2\} ≠ (1,2)
equations `x = 5`               a leading single-variable assignment is        x = 5 = 5;
                                dropped; other equations go to math-verify     3x-y+13=0 ≠
                                (equivalent equations of a line are equal)     3x+4y+14=0;
                                and never equal a bare value                   x-5=0 ≠ 0; 2x=5 ≠ 5
words, `\text{}`                words (≥ 3 letters or several words) compare   \text{Evelyn} = evelyn;
                                case-insensitively; single letters compare    \text{(E)} ≠ e;
                                case-sensitively (options, variables); a      \text{7} = 7;
                                single digit in `\text{}` is the number; a    no solutions =
                                word's plural `s` is dropped (not after 3      no solution
                                letters or fewer, nor in -ss, -us, -is;
                                released: exact strings)
base numerals `52_8`            two answers that are each one numeral with a  52_8 = 42_{10};
                                base subscript compare by value in their      52_8 ≠ 52_{10};
                                bases (math-verify drops subscripts); a digit 10110_2 ≠ 10110_3;
                                the base lacks: digits and base as written;   52_8 ≠ 42
                                a numeral without a base is read as written
expressions `x^2+3x`            equal iff equal at both points (variables     x^2+3x = x(x+3);
                                matter; `e` is Euler's number inside an       \sqrt{x^2} ≠ x;
                                expression, a bare `e` is a letter)           x+1 ≠ y+1
clock times `7:15 PM`           a meridiem (`PM`, `p.m.`, `pm`, `\text{PM}`)  7:15 PM = 19:15 =
                                reads the time on the 24-hour clock; a bare   7:15 p.m.;
                                time is read as written (24-hour)             7:15 PM ≠ 7:15 AM;
                                                                              12:30 AM = 0:30
imaginary unit `i`              i is the imaginary unit, never a variable     i^{5} = 1i = i;
                                                                              (2-i)(2+i) = 5
spaces in math `e^{i t}`        a space between two one-letter words is       e^{i t} = e^{it};
                                dropped (not inside `\text{}`); next to a     x + i y = x+iy;
                                longer word or after a command it stays       x and y stays
primes `f'`, `x^{\prime}`       `^{\prime}` is `'`; answers whose primed      x^{\prime} = x';
                                letters differ are different (math-verify     f'(x)=2x ≠ f(x)=2x;
                                drops the marks)                              y'' ≠ y'
emphasis `\underline{12}`       font, emphasis and colour wrappers and        \boldsymbol{12} =
                                old-style declarations (`\bf`, `\it`) are     \textcolor{blue}{12}
                                dropped, as is Markdown bold around the       = \bf 12 = **12** = 12
                                whole answer (`2**3` stays a power)           ≠ 13
typography `3²`, `a₁`           unicode super-/subscripts: `^{..}`, `_{..}`;  10⁻² = 10^{-2};
                                −, ×, ÷, √, π, ≤, ≥, ∅, …, ∈, ± as LaTeX      6÷3 = 2
empty set                       `\varnothing`, `\{\}`, `∅` are `\emptyset`    ∅ = \{\} ≠ \{0\}
labelled tuple `(a,b)=(2,5)`    a leading assignment to a tuple of names is   (a,b)=(2,5) = (2,5)
                                dropped (as `x = 5` is 5)
ellipsis                        `\dots`, `\cdots`, `...`, `…` are `\ldots`    1,2,\dots = 1,2,...
                                (`...` right after a digit: left as written)
code style                      `pi`→`\pi`, `*`→`\cdot`, `**`→`^`,            -2*pi = -2\pi;
                                `sqrt(x)`→`\sqrt{x}`, `exp(x)`→`e^{x}`,       pi/2 = \frac{\pi}{2};
                                `ln(x)`, `sin(x)`, `log_2(x)`, ... →          sin(pi/6) = 1/2;
                                `\ln(x)`, ...; `1e-3`→`1\times10^{-3}`;        √12 = 2√3 ≠ 2;
                                `√12`, `√(..)`→`\sqrt{12}`, `\sqrt{..}`       √(9) = 3
undetermined values             a real whose error bound is not small          0/0, 10^80√2-10^80√2
                                (> 10^-30 × max(1, |v|), after sympy's exact   (numerically),
                                evaluation where the fast path cannot): equal  ∫_0^{100}x^{50}dx
                                to nothing; 0/0 and 1/0 equal nothing          (9 bits): ≠ any number
anything else                   math-verify (strict, its unit stripping off:
                                units are the rule above); numeric constants,
                                and the numbers it compares inside tuples,
                                sets, intervals, complex numbers and
                                differences, use the exact-value and decimal
                                rules above; gold first when grading
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
or the answer contains a power whose exact value is astronomically large, e.g. `9^{9^{9^{9}}}`, or
one past Python's 4300-digit int → str cap inside sympy, e.g. `\lfloor1000^{10000}\rfloor`),
"error" (the grader itself failed: invalid gold, worker crash). Only "ok" can be correct.
An answer (or canonical answer) longer than `canonical.MAX_ANSWER_CHARS` (3000 characters) is over
the cost budget: it is not canonicalised, equals only the identical string, and compared with
anything else is a "timeout" decided in the calling process at once (never sent to a worker).
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
Reproduces the released vote and evaluation for paper-faithful runs:
the vote is exact string equality of verl's `last_boxed_only_string` (incl. its `\boxed `
special case), a tie or a `None` majority gives no label and pass rate 0; `grade` is the released
evaluation grader: `match_answer` heuristics, the character-set `str.strip` quirk, gold
`lstrip("0")`, and a Qwen/PRIME-style `math_equal` (string, numeric with rel_tol 1e-4 and ×/÷100
variants, bracket-stripped string, element-wise tuples, equations, symbolic via sympy, π also tried
as 3.14). The released `grader.py` itself was not available to us; the symbolic step parses with
sympy's `parse_expr` grammar and `latex2sympy2_extended` (not sympy's `parse_latex`), so rare
symbolic edge cases may differ. Its slow steps also run in the worker pool, so they cannot hang either.

No answer is run as code
------------------------
Responses, completions files and benchmark golds are untrusted text. sympy's `parse_expr` (and
`sympify` on a string) run their text with Python's `eval`, so the released grader's parse uses
`safe_sympy.parse_math_expression` instead: sympy's own tokenizer and transformations, then a whitelist
interpreter of the expression tree (sympy objects and classes, `sqrt`-like functions, arithmetic,
tuples; any other name is an inert placeholder that cannot be called; no attribute access, subscript,
lambda or string), which builds the same sympy objects. The worker processes also put that
interpreter in place of `eval` inside sympy's parser (`safe_sympy.install()`), so no string reaches
`eval` by another road (math-verify's plain-expression parse, `sympify` or `Number` of a string,
`Expr.equals(str)`). Text off the whitelist, e.g. `\boxed{__import__('os').system(..)}`, is simply not
an expression: it gets a verdict (not equal) like any other unparsable answer. The one place the
released grader's verdicts can differ: a code-style call of a sympy function off the whitelist
(`N(..)`, `simplify(..)`, `solve(..)`) or a string literal is not evaluated, so that answer is read as
LaTeX instead. Measured on the six benchmarks and amc23 (every row's answer, alternative answers and
released key against each other and itself, plus each answer against the previous row's: 5185 pairs,
2057 of them through the symbolic step), the released grader's verdicts and statuses are unchanged
(0 changes), and so are the cpmobius grader's; every benchmark answer text parses to the object sympy's
`parse_expr` builds, or fails in both (tests/test_no_code_execution.py).

Departures from the paper / released code (marked `# CPMöbius:` in the code)
----------------------------------------------------------------------------
* The vote clusters by mathematical equivalence, not raw strings (released: `\frac12` ≠ `0.5`).
* "No answer" never votes and never becomes the label (released: a `None` majority drops the
  problem; here the answered responses still vote, denominator n).
* Truncated final boxes give no answer; several nearby boxes are last-wins (math-verify's
  default parse merges them into a set); the same answer boxed twice in a row is one answer.
* Exact values compare exactly (math-verify's parse leaves `1/100!` unevaluated and a 60-digit
  comparison with an absolute tolerance made it equal `1/101!`; math-verify's own numeric
  comparison, `evalf(chop=True)` / `round(6)`, is replaced by ours inside the worker);
  repeating decimals and mixed numbers written with a space are read as the rationals they denote.
* Hard per-batch wall-clock limits through process isolation; a timeout is a status, never a
  silent 0.

Modules (one responsibility each; this file is only the public API)
-------------------------------------------------------------------
* `results`: statuses, `GradeResult` / `BatchGrades` / `VoteResult`, `check_batch`.
* `extraction`: `extract_answer` (boxes, truncation, mentions, multi-answers).
* `canonical`: the canonicalisation rewrite (the policy table's string rules).
* `arithmetic`, `fast_path`: exact in-process evaluation and equivalence (the fast path).
* `isolation`, `worker`: the worker-process pool with deadlines; math-verify runs in `worker`.
* `safe_sympy`: sympy's string parser without `eval` (the whitelist interpreter, `install`).
* `equivalence`: pairs → verdicts (fast path, cache, pool); `answers_equivalent`.
* `scoring`: `grade`, `grade_batch`.  `vote`: `majority_vote`.  `released`: `released` mode.
* `__main__`: the command-line interface.
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

from .equivalence import answers_equivalent
from .extraction import extract_answer
from .isolation import shutdown_pool
from .results import (
    DEFAULT_TIMEOUT_S,
    STATUSES,
    BatchGrades,
    GradeResult,
    GradingError,
    VoteResult,
    check_batch,
)
from .scoring import grade, grade_batch
from .vote import majority_vote
