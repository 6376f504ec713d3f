r"""Grader fault kinds found with answers from public bug reports of math graders, each through reward,
vote and CLI: an answer spelled another way was judged different (or two different answers equal)
with status "ok".

1. clock times with AM/PM (the meridiem was dropped like a unit: `7:15\text{ PM}` equalled `7:15\text{ AM}`);
2. the imaginary unit's other spellings (`1i`, `i^{5}`, `(2-i)(2+i)`: math-verify read i as a variable);
3. font, emphasis and colour wrappers (`\boldsymbol{12}`, `\underline{12}`, `\textcolor{blue}{12}`, `\bf 12`);
4. unicode superscripts and subscripts (`3²`, `10⁻²`, `a₁`);
5. the empty set's spellings (`\varnothing`, `\emptyset`, `\{\}`, `∅`);
6. a labelled tuple against a bare one (`(a,b) = (2,5)` vs `(2,5)`);
7. ellipsis spellings (`\dots`, `\ldots`, `\cdots`, `...`, `…`).

Each verdict is worked out by hand (the value or the reason in the comment or the id).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from cpmobius.grading import answers_equivalent, grade, majority_vote


def _kinds_helpers():
    """`boxed` and `_cli` of tests/grading/test_grading_kinds.py (the test folder is not a package)."""
    path = Path(__file__).with_name("test_grading_kinds.py")
    spec = importlib.util.spec_from_file_location("grading_kinds_helpers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_helpers = _kinds_helpers()
boxed, _cli = _helpers.boxed, _helpers._cli


CASES = {
    "times": [
        # (gold, answer, verdict); a time with a meridiem is read on the 24-hour clock, a bare time as written
        ("7:15 PM", "7:15 AM", False),
        (r"7:15\text{ PM}", r"7:15\text{ AM}", False),  # both were "7:15" once the unit was dropped
        (r"7:15 \text{PM}", "7:15 PM", True),
        ("7:15 PM", "7:15 p.m.", True),
        ("7:15 PM", "7:15pm", True),
        (r"7:15\,\mathrm{pm}", "7:15 P.M.", True),
        ("7:15 PM", "19:15", True),  # 7 + 12
        ("7:15 PM", "7:15", False),  # a bare 7:15 is the morning (24-hour reading)
        ("7:15 AM", "7:15", True),
        ("12:00", "1:00", False),
        ("12:00 AM", "12:00 PM", False),  # midnight 0:00, noon 12:00
        ("12:30 AM", "0:30", True),
        ("12:00 PM", "12:00", True),
        ("11:59 PM", "23:59", True),
        ("7 PM", "19:00", True),
        ("7 PM", "7 AM", False),
        (r"7\text{ PM}", r"7\text{ AM}", False),
        ("07:15 PM", "7:15 PM", True),
        ("7:15:30 PM", "19:15:30", True),
        ("2am", "2:00", False),  # lower-case, no minutes: also the product 2·a·m, left as written
    ],
    "imaginary unit": [
        ("i", "1i", True),
        ("i", "i^{5}", True),  # i^4 = 1
        ("i", "i^{4}", False),
        ("5", "(2-i)(2+i)", True),  # 4 - i^2 = 5
        ("-1", "i^2", True),
        ("i", "-i", False),
        ("3+2i", "2i+3", True),
        ("3+2i", "3-2i", False),
        (r"\frac{1}{i}", "-i", True),  # 1/i = -i
        ("2i", "i+i", True),
    ],
    "emphasis": [
        ("12", r"\boldsymbol{12}", True),
        ("12", r"\underline{12}", True),
        ("12", r"\textcolor{blue}{12}", True),
        ("12", r"\bf 12", True),
        ("12", r"{\bf 12}", True),
        ("12", r"\it 12", True),
        ("12", r"\color{red}{12}", True),
        ("12", r"\color{red} 12", True),
        ("12", r"\colorbox{yellow}{12}", True),
        ("12", r"\emph{12}", True),
        ("12", r"\bm{12}", True),
        ("12", r"\pmb{12}", True),
        ("12", r"\mathbf{12}", True),
        ("12", r"\mathit{12}", True),
        ("12", r"\textbf{12}", True),
        ("12", r"\displaystyle 12", True),
        ("12", r"\textcolor{red}{\mathbf{12}}", True),
        ("x^2", r"\boldsymbol{x}^2", True),
        (r"\text{Evelyn}", r"\textbf{\emph{Evelyn}}", True),
        ("13", r"\bf 12", False),
        ("13", r"\underline{12}", False),
        ("13", r"\boldsymbol{12}", False),
        ("13", r"\textcolor{blue}{12}", False),
    ],
    "unicode typography": [
        ("9", "3²", True),
        ("8", "3²", False),
        ("x^3+1", "x³+1", True),
        ("10^{-2}", "10⁻²", True),
        ("10^{-2}", "10⁻³", False),
        ("2^{10}", "2¹⁰", True),
        ("(x+1)^2", "(x+1)²", True),
        ("x^{n+1}", "xⁿ⁺¹", True),
        ("a_1", "a₁", True),
        ("x_{12}", "x₁₂", True),
        ("-3", "−3", True),  # unicode minus
        ("6", "2×3", True),
        ("2", "6÷3", True),
        (r"2\sqrt{3}", "2√3", True),
        (r"2\pi", "2π", True),
        (r"x \leq 3", "x ≤ 3", True),
        (r"x \geq 3", "x ≥ 3", True),
    ],
    "empty set": [
        (r"\varnothing", r"\emptyset", True),
        (r"\varnothing", r"\{\}", True),
        (r"\varnothing", "∅", True),
        (r"\emptyset", r"\{ \}", True),
        (r"\emptyset", r"\left\{\right\}", True),
        (r"\emptyset", r"\{0\}", False),
        (r"\varnothing", r"\{1\}", False),
        (r"\emptyset", r"\{\emptyset\}", False),
        (r"\emptyset", "0", False),
    ],
    "labelled tuple": [
        ("(a,b) = (2,5)", "(2,5)", True),
        ("(2,5)", "(a,b) = (2,5)", True),
        ("(a,b)=(2,5)", "(5,2)", False),
        ("(x, y) = (1, -2)", "(1,-2)", True),
        ("(x, y) = (1, -2)", "(-2, 1)", False),
        ("(a,b,c)=(1,2,3)", "(1,2,3)", True),
        ("a=2, b=5", "b=5, a=2", True),
        ("a=2, b=5", "b=2, a=5", False),
        ("P = (1, 2)", "P = (1, 3)", False),
        ("P = (1, 2)", "(1, 2)", True),
    ],
    "ellipsis": [
        (r"1, 2, 3, \dots", r"1, 2, 3, \ldots", True),
        (r"1, 2, 3, \dots", r"1, 2, 3, \cdots", True),
        (r"1, 2, 3, \dots", "1, 2, 3, ...", True),
        (r"1, 3, 5, \ldots", "1, 3, 5, …", True),
        (r"1+2+\cdots+n", r"1+2+\dots+n", True),
        (r"1, 2, \dots, n", "1, 2, ..., n", True),
        (r"1, 2, 3, \dots", r"1, 2, 4, \dots", False),
        (r"\frac{1}{3}", "0.333...", False),  # a truncated decimal stays a decimal (3 places)
    ],
}
ALL = [(kind, *case) for kind, cases in CASES.items() for case in cases]


@pytest.mark.parametrize(("kind", "gold", "answer", "verdict"), ALL, ids=[f"{c[0]}:{c[1]}|{c[2]}" for c in ALL])
def test_spellings_grade_and_compare_by_value(kind, gold, answer, verdict):
    result = grade(gold, boxed(answer))
    assert (result.correct, result.status) == (verdict, "ok"), kind
    assert answers_equivalent(gold, answer) is verdict
    assert answers_equivalent(answer, gold) is verdict


VOTES = [
    # (responses' answers, clusters, pass rate)
    # Three spellings of 7:15 PM against two of 7:15 AM: the evening wins 3/5 (the unit rule merged
    # the \text{..} ones into a cluster of 4).
    ([r"7:15\text{ PM}", "7:15 p.m.", "19:15", r"7:15\text{ AM}", "7:15 a.m."], [[0, 1, 2], [3, 4]], 3 / 5),
    # i, 1i, i^5 are one answer (3/5); split, the two -i won.
    (["i", "1i", "i^{5}", "-i", "-i"], [[0, 1, 2], [3, 4]], 3 / 5),
    # 12 in three wrappers beats the two 13s.
    ([r"\boldsymbol{12}", r"\underline{12}", r"\textcolor{blue}{12}", "13", "13"], [[0, 1, 2], [3, 4]], 3 / 5),
    # the empty set three ways beats {0} twice
    ([r"\varnothing", "∅", r"\{\}", r"\{0\}", r"\{0\}"], [[0, 1, 2], [3, 4]], 3 / 5),
]


@pytest.mark.parametrize(("answers", "clusters", "pass_rate"), VOTES)
def test_equal_spellings_form_one_cluster(answers, clusters, pass_rate):
    vote = majority_vote([boxed(a) for a in answers])
    assert sorted(sorted(c) for c in vote.clusters) == sorted(clusters)
    assert vote.pass_rate == pytest.approx(pass_rate)
    assert vote.agrees == [i in clusters[0] for i in range(len(answers))]


# One CLI call per verb, several kinds per call.
CLI_CASES = [case for kind in CASES for case in CASES[kind][:3]]


def test_cli_verify_spellings():
    lines = [{"gold": gold, "response": boxed(answer)} for gold, answer, _ in CLI_CASES]
    assert [(r["correct"], r["status"]) for r in _cli("verify", lines)] == [(v, "ok") for _, _, v in CLI_CASES]


def test_cli_vote_spellings():
    out = _cli("vote", [{"responses": [boxed(a) for a in answers]} for answers, _, _ in VOTES])
    assert [sorted(sorted(c) for c in o["clusters"]) for o in out] == [sorted(c) for _, c, _ in VOTES]
    assert [o["pass_rate"] for o in out] == pytest.approx([p for _, _, p in VOTES])
