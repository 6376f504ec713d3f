r"""Grader fault kinds 6–11 (cpmobius.grading), each through reward, vote and CLI.

6. two different exact values that are both tiny were equal (an absolute tolerance);
7. the same answer boxed twice (`\boxed{12} \boxed{12}`) was the list `12, 12`;
8. a mixed number with a space lost it (`3 1/2` read as 31/2);
9. a repeating decimal lost its point (`0.\overline{1}` read as 0);
10. a space between two letters made equal answers unequal (`e^{i t}` against `e^{it}`);
11. prime marks were dropped (`f'(x)=2x` equal to `f(x)=2x`; `x^{\prime}` unequal to `x'`).

Several members of each kind, with the value worked out by hand in the comment or the id. Pairs
the fast path cannot parse (factorials, `\log`) go to math-verify in the worker pool.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

from cpmobius.grading import answers_equivalent, extract_answer, grade, majority_vote
from cpmobius.grading.arithmetic import MP, Irr, num_eq
from cpmobius.grading.canonical import MAX_ANSWER_CHARS, canonicalize

REPO = Path(__file__).resolve().parents[2]


def boxed(answer: str) -> str:
    return f"Reasoning first. So the answer is $\\boxed{{{answer}}}$."


def _cli(command: str, lines: list[dict]) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "cpmobius.grading", command],
        capture_output=True,
        text=True,
        input="".join(json.dumps(x) + "\n" for x in lines),
        timeout=120,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(x) for x in out.stdout.splitlines()]


# ---------------------------------------------------------------------------------------------
# 6. Exact values compare exactly; a tolerance is relative and never joins two distinct rationals
# ---------------------------------------------------------------------------------------------

TINY = [
    # (gold, answer, verdict)
    (r"\frac{1}{100!}", r"\frac{1}{101!}", False),  # 1/100! ≈ 1.07e-158, 1/101! = that / 101
    (r"\frac{1}{30!}", r"\frac{1}{31!}", False),
    (r"\frac{1}{100!}", r"\frac{1}{100\cdot 99!}", True),  # 100·99! = 100!
    (r"10^{-30}", r"10^{-31}", False),
    (r"10^{-30}", r"\frac{1}{10^{30}}", True),
    (r"10^{-30}", "0.000000000000000000000000000001", True),  # 30 places, the exact value
    (r"2^{-200}", r"2^{-201}", False),
    (r"2^{-200}", r"\frac{1}{2^{200}}", True),
    ("100!", "100!+1", False),  # 9.33e157 and one more: exact integers
    ("100!", r"100\cdot 99!", True),
    (r"\binom{100}{50}", r"\frac{100!}{50!\,50!}", True),
    (r"(10^{-30}, 1)", r"(10^{-31}, 1)", False),
    # inside containers and complex numbers math-verify compares (its own rounding used to decide)
    (r"(\frac{1}{100!}, 1)", r"(\frac{1}{101!}, 1)", False),
    (r"(\frac{1}{100!}, 1)", r"(\frac{1}{100\cdot 99!}, 1)", True),
    (r"\{\frac{1}{100!}, 1\}", r"\{\frac{1}{101!}, 1\}", False),
    (r"[0, \frac{1}{100!}]", r"[0, \frac{1}{101!}]", False),
    (r"x \in (0, \frac{1}{100!})", r"x \in (0, \frac{1}{101!})", False),
    (r"\frac{1}{100!}+i", r"\frac{1}{101!}+i", False),
    (r"\alpha+10^{-30}", r"\alpha+10^{-31}", False),
    (r"\alpha\sqrt{2}\sqrt{3}", r"\alpha\sqrt{6}", True),
    (r"(\frac13, \alpha)", r"(0.333333, \alpha)", True),  # the decimal rule inside a tuple
    (r"(\frac13, \alpha)", r"(0.333, \alpha)", False),
    (r"(1+10^{-7}, \alpha)", r"(1.000000, \alpha)", False),
    # reals: the tolerance is their own propagated error, not an absolute 1e-45
    (r"\frac{\pi}{10^{50}}", r"\frac{\pi}{10^{51}}", False),
    (r"\sqrt{2}\cdot 10^{-60}", r"\sqrt{2}\cdot 10^{-61}", False),
    (r"\sqrt{2}\cdot 10^{-60}", r"\frac{\sqrt{8}}{2}\cdot 10^{-60}", True),  # √8/2 = √2
    (r"\pi^{-100}", r"\pi^{-101}", False),
    (r"\pi^{-100}", r"\frac{1}{\pi^{100}}", True),
    (r"e^{-100}", r"e^{-101}", False),
    (r"3\cdot 10^{-50}", r"\log_2(8)\cdot 10^{-50}", True),  # log2 8 = 3 (math-verify parses \log)
    (r"3\cdot 10^{-51}", r"\log_2(8)\cdot 10^{-50}", False),
    # cancellation to zero is still zero: the error of the terms, not of the (tiny) result
    ("0", r"\sin(\pi)", True),
    ("0", r"\sqrt{2}\sqrt{3}-\sqrt{6}", True),
    ("0", r"\log_2 8 - 3", True),
    (r"\frac12", r"\cos(\frac{\pi}{7})+\cos(\frac{3\pi}{7})+\cos(\frac{5\pi}{7})", True),  # classic identity
    # decimals vs exact values (policy table): ≥ 6 places and ≥ 6 significant digits, correctly
    # rounded, and only for a non-terminating value
    (r"\frac13", "0.333", False),
    (r"\frac13", "0.333333", True),
    (r"\frac17", "0.142857", True),  # 1/7 = 0.1428571...
    (r"\frac17", "0.142858", False),
    (r"\frac18", "0.125", True),  # terminating: equal because exactly equal
    ("1+10^{-7}", "1.000000", False),  # terminating 1.0000001: a rounding of it is not it
    ("1+10^{-7}", "1.0000001", True),
    (r"\pi", "3.141593", True),
    (r"\pi", "3.14159", False),  # 5 places
    (r"\frac{1}{100!}", r"1.071510\times10^{-158}", True),  # 6 significant digits of 1.0715102881e-158
    (r"\frac{1}{100!}", r"1.071511\times10^{-158}", False),
]


@pytest.mark.parametrize("gold, answer, verdict", TINY, ids=[f"{g} vs {a}" for g, a, _ in TINY])
def test_exact_values_compare_exactly(gold, answer, verdict):
    result = grade(gold, boxed(answer))
    assert result.status == "ok" and result.correct is verdict
    assert answers_equivalent(gold, answer) is verdict


def test_huge_exact_values_are_over_budget_not_equal():
    # 1000000! has 5.5 million digits: the exact comparison is over the cost budget ("timeout"),
    # never a 60-digit "equal".
    for gold, answer in (("1000000!", "1000000!+1"), (r"(1000000!, \alpha)", r"(1000000!+1, \alpha)")):
        result = grade(gold, boxed(answer), timeout_s=20)
        assert not result.correct and result.status == "timeout"


@pytest.mark.regression(
    "a real Player's \\lfloor1000^{10000}\\rfloor: Python's 4300-digit int → str cap raised inside "
    "the worker and the verdict was reported as a grader 'error'"
)
def test_values_past_the_int_to_str_cap_are_over_budget_not_errors():
    result = grade(r"\lfloor y\rfloor", boxed(r"\lfloor1000^{10000}\rfloor"), timeout_s=20)
    assert not result.correct and result.status == "timeout"


def test_num_eq_tolerance_is_relative_to_the_error():
    third = Fraction(1, 3)
    assert not num_eq(Fraction(1, 10**60), Fraction(1, 10**61), None, None)  # rationals: exact
    assert not num_eq(Irr(MP.pi * MP.mpf(10) ** -80), Irr(MP.pi * MP.mpf(10) ** -81), None, None)
    assert num_eq(Irr(MP.mpf(1) / 3), third, None, None)  # one rounding of 1/3
    assert not num_eq(Irr(MP.mpf(1) / 3 + MP.mpf(10) ** -40), third, None, None)  # 1e-40 off: 20 digits above the error
    assert num_eq(Irr(MP.mpf(10) ** -70, MP.mpf(10) ** -61), Fraction(0), None, None)  # zero within its error


def test_tiny_values_form_separate_vote_clusters():
    vote = majority_vote([boxed(r"\frac{1}{100!}")] * 3 + [boxed(r"\frac{1}{101!}")] * 2 + [boxed("10^{-200}")] * 2)
    assert vote.pseudo_label == r"\frac{1}{100!}" and vote.pass_rate == 3 / 7
    assert vote.clusters == [[0, 1, 2], [5, 6], [3, 4]]  # equal sizes: by canonical string, "10^{-200}" < "\\frac.."


# ---------------------------------------------------------------------------------------------
# 7. The same answer boxed twice is that answer; different answers keep the close-boxes rule
# ---------------------------------------------------------------------------------------------

REPEATS = [
    (r"\boxed{12} \boxed{12}", "12"),
    (r"\boxed{12}\boxed{12}", "12"),
    (r"\boxed{12} \quad \boxed{12}", "12"),
    (r"$\boxed{12}$ $\boxed{12}$", "12"),
    (r"\boxed{12}, \boxed{12} and \boxed{12}", "12"),
    (r"\boxed{12}.\boxed{12}", "12"),  # not connected: the last box wins anyway
    (r"\boxed{x = 12} \boxed{12}", "12"),  # same canonical answer: the last box as written
    (r"\boxed{\frac12} \boxed{0.5}", "0.5"),  # equal on the fast path
    # different answers: the close-boxes rule as documented (connected: a list; not connected: the last box)
    (r"\boxed{3} \boxed{4}", "3, 4"),
    (r"The answer is \boxed{3} and \boxed{4}.", "3, 4"),
    (r"\boxed{5}.\boxed{7}", "7"),
    (r"First try gives \boxed{5}. Wait, that's wrong, the answer is \boxed{7}.", "7"),
    (r"\boxed{3}, \boxed{3}, \boxed{4}", "3, 3, 4"),  # any two different answers: the list as written
]


@pytest.mark.parametrize("response, extracted", REPEATS, ids=[r for r, _ in REPEATS])
def test_repeated_box_is_one_answer(response, extracted):
    assert extract_answer(response) == extracted


def test_repeated_box_gets_the_reward_and_joins_its_cluster():
    assert grade("12", r"So \boxed{12} \boxed{12}").correct
    assert grade("12", r"So \boxed{12} \quad \boxed{12}").correct
    assert not grade("12", r"\boxed{12} \boxed{13}").correct  # the list 12, 13
    vote = majority_vote([r"\boxed{12} \boxed{12}", r"\boxed{12}", r"\boxed{12}\boxed{12}", r"\boxed{5}", r"\boxed{5}"])
    assert vote.pseudo_label == "12" and vote.pass_rate == 3 / 5 and vote.clusters == [[0, 1, 2], [3, 4]]
    assert vote.agrees == [True, True, True, False, False]


# ---------------------------------------------------------------------------------------------
# 8. A mixed number keeps its space: 7/2 or no answer, never 31/2
# ---------------------------------------------------------------------------------------------

MIXED = [
    # (answer, canonical string; "" = no answer)
    ("3 1/2", r"\frac{7}{2}"),  # 3 + 1/2
    (r"2\ 3/4", r"\frac{11}{4}"),  # 2 + 3/4
    ("3~1/2", r"\frac{7}{2}"),
    (r"3\quad 1/2", r"\frac{7}{2}"),
    ("-1 1/2", r"-\frac{3}{2}"),  # -(1 + 1/2)
    ("10 1/2", r"\frac{21}{2}"),
    ("(1 1/2, 2)", r"(\frac{3}{2},2)"),
    ("(1,2 1/2)", r"(1,\frac{5}{2})"),  # inside brackets a plain comma separates elements
    (r"1{,}000 1/2", r"\frac{2001}{2}"),  # 1000 + 1/2
    ("3 1/2 cm", r"\frac{7}{2}"),  # the unit word is dropped afterwards
    # not mixed numbers
    (r"2 \cdot 1/2", r"2\cdot1/2"),  # an explicit product
    ("x 1/2", "x1/2"),  # a variable
    ("1 000", "1000"),  # digit grouping
    ("1 000/3", "1000/3"),  # 000 is no numerator: grouping
    ("1 200/3", "1200/3"),  # 200/3 is improper: grouping
    (r"1\,500/7", "1500/7"),
    # both or neither reading: no answer
    ("12 345/678", ""),  # 12 + 345/678 or 12345/678
    ("3 5/2", ""),  # improper, and 5 is no digit group
]


@pytest.mark.parametrize("answer, canonical", MIXED, ids=[a for a, _ in MIXED])
def test_mixed_number_canonical_form(answer, canonical):
    assert canonicalize(answer) == canonical


@pytest.mark.parametrize(
    "gold, answer, verdict",
    [
        (r"\frac72", "3 1/2", True),
        (r"\frac{31}{2}", "3 1/2", False),
        ("3.5", "3 1/2", True),
        (r"\frac{11}{4}", r"2\ 3/4", True),
        (r"\frac72", r"3\frac{1}{2}", True),  # LaTeX mixed-number convention: 3 + 1/2
        (r"\frac72", r"3 \frac{1}{2}", True),
        (r"\frac32", r"3\cdot\frac{1}{2}", True),  # an explicit product is a product
        (r"-\frac32", "-1 1/2", True),
        (r"\frac72", "3½", True),  # a vulgar fraction after an integer: the same mixed number
        (r"-\frac74", "-1¾", True),
        (r"\frac12", "½", True),
        ("1", r"2 \cdot 1/2", True),
        ("1000", r"1\,000", True),
        ("1500", r"1 500", True),
    ],
)
def test_mixed_number_grades(gold, answer, verdict):
    result = grade(gold, boxed(answer))
    assert result.status == "ok" and result.correct is verdict


def test_ambiguous_mixed_number_is_no_answer():
    for answer in ("12 345/678", "3 5/2"):
        assert extract_answer(boxed(answer)) is None
        assert grade("12345/678", boxed(answer)).status == "no_answer"


def test_mixed_number_votes_with_its_value():
    vote = majority_vote(
        [boxed("3 1/2"), boxed(r"\frac72"), boxed("3.5"), boxed(r"\frac{31}{2}"), boxed(r"\frac{31}{2}")]
    )
    assert vote.clusters == [[0, 1, 2], [3, 4]] and vote.pass_rate == 3 / 5


# ---------------------------------------------------------------------------------------------
# 9. A repeating decimal keeps its point
# ---------------------------------------------------------------------------------------------

REPEATING = [
    # (answer, canonical); x = 0.(r) with k digits: x = r / (10^k - 1)
    (r"0.\overline{1}", r"\frac{1}{9}"),
    (r"0.\overline{3}", r"\frac{1}{3}"),
    (r"0.1\overline{6}", r"\frac{1}{6}"),  # 0.1 + 6/90 = 15/90
    (r"0.\overline{142857}", r"\frac{1}{7}"),  # 142857/999999
    (r"1.\overline{3}", r"\frac{4}{3}"),
    (r"-0.\overline{3}", r"-\frac{1}{3}"),
    (r"0.\overline{9}", "1"),  # 9/9
    (r"0.\bar{3}", r"\frac{1}{3}"),
    (r"0.\overline 3", r"\frac{1}{3}"),
    (r".\overline{3}", r"\frac{1}{3}"),
    (r"2.58\overline{3}", r"\frac{31}{12}"),  # 2.58 + 3/900 = 2325/900
    (r"0.\dot{3}", r"\frac{1}{3}"),
    (r"0.1\dot{6}", r"\frac{1}{6}"),
    (r"0.\dot{1}4\dot{2}", r"\frac{142}{999}"),  # dots over the repetend's first and last digit
    ("0.(3)", r"\frac{1}{3}"),  # the repetend in parentheses right after the point
    ("0.(142857)", r"\frac{1}{7}"),
    ("0.1(6)", ""),  # also 0.1·6 or 0.1 ± 0.6: no answer
    ("1.5(2)", ""),
    ("2.5(3+x)", "2.5(3+x)"),  # a product, untouched
]


@pytest.mark.parametrize("answer, canonical", REPEATING, ids=[a for a, _ in REPEATING])
def test_repeating_decimal_canonical_form(answer, canonical):
    assert canonicalize(answer) == canonical


@pytest.mark.parametrize(
    "gold, answer, verdict",
    [
        (r"\frac19", r"0.\overline{1}", True),
        ("0", r"0.\overline{1}", False),
        (r"\frac16", r"0.1\overline{6}", True),
        (r"\frac17", r"0.\overline{142857}", True),
        (r"\frac43", r"1.\overline{3}", True),
        (r"\frac13", r"0.\dot{3}", True),
        (r"\frac13", "0.(3)", True),
        ("0.333333", r"0.\overline{3}", True),  # the decimal rule: 6 places, correctly rounded
        ("0.333", r"0.\overline{3}", False),
        ("1", r"0.\overline{9}", True),
    ],
)
def test_repeating_decimal_grades(gold, answer, verdict):
    result = grade(gold, boxed(answer))
    assert result.status == "ok" and result.correct is verdict


def test_repeating_decimal_votes_with_its_value():
    vote = majority_vote([boxed(r"0.\overline{3}"), boxed(r"\frac13"), boxed("0.(3)"), boxed("0"), boxed("0")])
    assert vote.clusters == [[0, 1, 2], [3, 4]] and vote.pseudo_label == "0.(3)"  # min of the cluster's strings


# ---------------------------------------------------------------------------------------------
# The same kinds through `python -m cpmobius.grading verify|vote`
# ---------------------------------------------------------------------------------------------


def test_cli_verify_all_kinds():
    lines = [
        {"gold": r"\frac{1}{100!}", "response": boxed(r"\frac{1}{101!}")},
        {"gold": "10^{-30}", "response": boxed("10^{-31}")},
        {"gold": "12", "response": r"\boxed{12} \boxed{12}"},
        {"gold": r"\frac72", "response": boxed("3 1/2")},
        {"gold": r"\frac{31}{2}", "response": boxed("3 1/2")},
        {"gold": r"\frac19", "response": boxed(r"0.\overline{1}")},
        {"gold": "0", "response": boxed(r"0.\overline{1}")},
    ]
    assert [(r["correct"], r["status"]) for r in _cli("verify", lines)] == [
        (False, "ok"),
        (False, "ok"),
        (True, "ok"),
        (True, "ok"),
        (False, "ok"),
        (True, "ok"),
        (False, "ok"),
    ]


def test_cli_vote_all_kinds():
    lines = [
        {"responses": [boxed(r"\frac{1}{100!}"), boxed(r"\frac{1}{101!}"), boxed(r"\frac{1}{101!}")]},
        {"responses": [r"\boxed{12} \boxed{12}", r"\boxed{12}", r"\boxed{5}"]},
        {"responses": [boxed("3 1/2"), boxed(r"\frac72"), boxed(r"\frac{31}{2}")]},
        {"responses": [boxed(r"0.\overline{1}"), boxed(r"\frac19"), boxed("0")]},
    ]
    out = _cli("vote", lines)
    assert [o["clusters"] for o in out] == [[[1, 2], [0]], [[0, 1], [2]], [[0, 1], [2]], [[0, 1], [2]]]
    assert [o["pseudo_label"] for o in out] == [r"\frac{1}{101!}", "12", "3 1/2", r"0.\overline{1}"]
    assert all(o["pass_rate"] == 2 / 3 for o in out)


# ---------------------------------------------------------------------------------------------
# QA pass: faults found after the kinds above
# ---------------------------------------------------------------------------------------------

EVERY_NUMBER = [  # answers whose value is undetermined: each matched every number before
    r"\int_0^{100} x^{50}\,dx",  # sympy evalf gives 2.0e100 to 9 bits: ± |v|/2^9
    r"10^{80}\sqrt{2}-10^{80}\sqrt{2}",  # 0 ± 10^20 (60-digit rounding of 10^80·√2)
    r"\frac{\sin(\pi)}{\sin(2\pi)}",  # 0/0
    r"\frac{0}{0}",
    r"\frac{1}{0}",
    r"\sqrt{2}\cdot10^{90}-10^{90}\sqrt{2}+1",  # the cancellation inside a larger sum
]


@pytest.mark.parametrize("answer", EVERY_NUMBER)
@pytest.mark.parametrize("gold", ["5", "-3", r"\frac27", "0.001", r"\pi"])
def test_an_undetermined_value_equals_no_number(gold, answer):
    result = grade(gold, boxed(answer))
    assert result.status in ("ok", "timeout") and result.correct is False


@pytest.mark.parametrize(
    "value, err, verdict",
    [
        (MP.mpf(0), MP.mpf(10) ** 20, False),  # the cancelled 10^80√2 - 10^80√2 vs 7
        (MP.mpf(7), MP.mpf(7) / 512, False),  # 9 bits of 7: ± 7/2^9
        (MP.mpf(7), MP.mpf(10) ** -55, True),  # a well-determined 7
    ],
)
def test_num_eq_refuses_undetermined_reals(value, err, verdict):
    assert num_eq(Irr(value, err), Fraction(7), None, None) is verdict


@pytest.mark.parametrize(
    "gold, answer, verdict",
    [
        ("0", r"\sin(\pi)", True),  # 0 to within 10^-59: determined, still equal
        ("0", r"\sqrt{2}\cdot\sqrt{3}-\sqrt{6}", True),
        (r"\sqrt{2}", r"10^{80}\sqrt{2}-10^{80}\sqrt{2}+\sqrt{2}", True),  # exact in sympy: √2
        ("0", r"10^{80}\sqrt{2}-10^{80}\sqrt{2}", True),  # sympy cancels it exactly
        (r"\frac{100^{51}}{51}", r"\frac{100^{51}}{51}", True),
    ],
)
def test_determined_values_still_compare(gold, answer, verdict):
    result = grade(gold, boxed(answer))
    assert result.status == "ok" and result.correct is verdict


@pytest.mark.parametrize(
    "gold, answer, verdict",
    [
        ("0", "x-5=0", False),  # math-verify compared the right-hand side
        ("5", "2x=5", False),
        ("7", "x^2=7", False),
        ("3", "x+y=3", True),  # a left side of names alone labels the quantity asked for (a value gold)
        ("0", "x^2-4x+4=0", False),
        ("5", "x=5", True),  # a single-variable assignment is its value
        ("5", r"\alpha=5", True),
        ("2x+3", "y=2x+3", True),
    ],
)
def test_only_an_assignment_reduces_to_its_right_hand_side(gold, answer, verdict):
    result = grade(gold, boxed(answer))
    assert result.status == "ok" and result.correct is verdict
    if answer != "x=5" and gold != "x-5=0":
        assert answers_equivalent(gold, answer) is verdict  # symmetric: either direction


def test_a_bare_zero_does_not_link_equations():
    vote = majority_vote(answers=["0", "0", "0", "x-5=0", "x-5=0", "2x-3=0", "x^2=0"])
    # "0" is visited first; no equation joins it, and the two different equations stay apart
    assert sorted(map(sorted, vote.clusters)) == [[0, 1, 2], [3, 4], [5], [6]]
    assert vote.pseudo_label == "0" and vote.pass_rate == 3 / 7


@pytest.mark.parametrize(
    "gold, answer, verdict",
    [
        ("2", "√12", False),  # √12 ≈ 3.46, not √1·2
        (r"2\sqrt{3}", "√12", True),
        ("5", "√25", True),
        ("3", "√(9)", True),
        ("3", "√ 9", True),
        ("4", "√(4^2)", True),
        (r"\sqrt{2}", "√(√(4))", True),  # nested groups
        ("2", "∛8", True),
        ("3", "∜81", True),
        (r"\sqrt{2.25}", "√2.25", True),
        (r"2\sqrt{2}", "2√2", True),
        (r"\sqrt{x}", "√x", True),  # not digits: LaTeX \sqrt reads one token
    ],
)
def test_unicode_radicals_take_the_whole_number(gold, answer, verdict):
    result = grade(gold, boxed(answer))
    assert result.status == "ok" and result.correct is verdict


PLACEHOLDERS = [
    r"\mathrm{None}",
    r"\text{None.}",
    r"\mathrm{N/A}",
    r"\ ",
    r"\,\ ",
    r"\emph{None}",
    r"\mathbf{None}",
    r"\mathtt{None}",
    r"\operatorname{None}",
    r"\mathrm{NaN}",
    r"\mathrm{null}",
    "N.A.",
    "n.a.",
    "[answer]",
    r"\text{your answer here}",
    r"\textbf{\mathrm{None}}",
    "???",
    r"\text{ \ldots }",
    "<answer>",
]


@pytest.mark.parametrize("answer", PLACEHOLDERS)
def test_placeholders_in_any_font_are_no_answer(answer):
    assert extract_answer(boxed(answer)) is None
    assert grade("5", boxed(answer)).status == "no_answer"
    vote = majority_vote([boxed(answer)] * 3 + [boxed("4")])
    assert vote.pseudo_label == "4" and vote.clusters == [[3]] and vote.pass_rate == 1 / 4


@pytest.mark.parametrize("answer", ["Nancy", r"\text{Nan Yang}", "answers", r"\mathrm{Na}^+", "none of them"])
def test_words_near_placeholders_are_answers(answer):
    assert extract_answer(boxed(answer)) == answer


def test_extraction_is_linear():
    start = time.monotonic()
    assert extract_answer("\\boxed{" * 20000) is None  # every box truncated
    assert extract_answer("x " + "\\boxed{1}, " * 20000) == "1"  # the same answer boxed again and again
    assert extract_answer("`\\boxed{2}` " * 20000 + " \\boxed{3}") == "3"  # boxes in code spans, one line
    assert extract_answer("`" + " \\boxed{2}" * 20000) == "2"  # one lone backtick, then boxes: text, not code
    assert time.monotonic() - start < 5.0  # quadratic extraction took minutes on these


@pytest.mark.parametrize(
    "answer",
    [
        "sqrt(" * 3000 + "2" + ")" * 3000,
        "(" * 5000 + "2" + ")" * 5000,
        "{" * 5000 + "2" + "}" * 5000,
        "\\frac{1}{" * 800 + "2" + "}" * 800,
        "1+" * 3000 + "1",
        "√(" * 3000 + "2" + ")" * 3000,
    ],
)
def test_over_long_answers_are_a_timeout_in_bounded_time(answer):
    assert len(answer) > MAX_ANSWER_CHARS
    start = time.monotonic()
    result = grade("5", boxed(answer))
    assert (result.status, result.correct, result.extracted) == ("timeout", False, answer)
    assert answers_equivalent(answer, answer) and not answers_equivalent(answer, "5")
    vote = majority_vote([boxed(answer)] * 2 + [boxed("5")])
    assert vote.clusters == [[0, 1], [2]] and vote.n_timeouts == 1
    assert time.monotonic() - start < 2.0  # nothing reaches the worker pool


@pytest.mark.parametrize(
    "answer",
    [
        "sqrt(" * 499 + "2" + ")" * 499,
        "{" * 1400 + "2" + "}" * 1400,
        "\\boxed{" * 300 + "2" + "}" * 300,
        "sin(" * 500 + "x" + ")" * 500,
        "√(" * 999 + "2" + ")" * 999,
        r"\mathrm{" * 300 + "x" + "}" * 300,
    ],
)
def test_canonicalisation_is_fast_below_the_bound(answer):
    assert len(answer) <= MAX_ANSWER_CHARS
    start = time.monotonic()
    canonicalize(answer + " ")  # uncached
    assert time.monotonic() - start < 0.5


@pytest.mark.parametrize(
    "gold, answer, verdict",
    [
        ("12", r"\mathbf{(B)}\ 12", True),
        ("12", r"\mathrm{(B)}\ 12", True),
        ("12", r"\textbf{(B) }12", True),
        ("(1,2)", r"\textbf{(B)}\ (1,2)", True),
        ("x^2", r"\textbf{(B)}\ x^2", True),
        ("x^2", r"(B) x^2", True),
        (r"\frac12", r"\mathbf{(C)}~\frac{1}{2}", True),
        ("B", r"\mathbf{(B)}", True),  # the letter alone is the option
        ("13", r"\mathbf{(B)}\ 12", False),
        ("B", r"(B), (C)", False),  # a list of options, not option B's value
    ],
)
def test_option_labels_in_any_font_are_stripped(gold, answer, verdict):
    result = grade(gold, boxed(answer))
    assert result.status == "ok" and result.correct is verdict


@pytest.mark.parametrize(
    "plain, latex",
    [
        ("ln(2)", r"\ln(2)"),
        ("sin(pi/6)", r"\sin(\pi/6)"),
        ("cos(0)", r"\cos(0)"),
        ("tan(pi/4)", r"\tan(\pi/4)"),
        ("log(8)", r"\log(8)"),
        ("arctan(1)", r"\arctan(1)"),
        ("sinh(1)", r"\sinh(1)"),
        ("cos^2(x)", r"\cos^2(x)"),
        ("log_2(8)", r"\log_2(8)"),
        ("2sin(x)+ln(3)", r"2\sin(x)+\ln(3)"),
    ],
)
def test_plain_text_functions_read_as_latex(plain, latex):
    assert answers_equivalent(plain, latex)
    assert canonicalize(plain) == canonicalize(latex)


@pytest.mark.parametrize(
    "gold, answer",
    [
        (r"\frac12", "sin(pi/6)"),
        ("1", "cos(0)"),
        ("1", "tan(pi/4)"),
        ("3", "log_2(8)"),
        (r"\ln 2", "ln(2)"),
        ("0", "ln(1)"),
    ],
)
def test_plain_text_functions_grade_by_value(gold, answer):
    result = grade(gold, boxed(answer))
    assert result.status == "ok" and result.correct


@pytest.mark.parametrize(
    "response, answer",
    [
        (r"\boxed{5}. So the answer is \boxed \frac{7", None),
        (r"\boxed{5}. So the answer is \boxed \sqrt{2", None),
        (r"\boxed{5}. So the answer is \boxed x^{2", None),
        (r"So the answer is \boxed \frac{7}{2}.", r"\frac{7}{2}"),
        (r"So the answer is \boxed \frac{7 + 1}{2} here", r"\frac{7 + 1}{2}"),  # the group closes later
        (r"So the answer is \boxed \frac{7 + 1}{2}.", r"\frac{7 + 1}{2}"),
        (r"So the answer is \boxed 5.", "5"),
    ],
)
def test_an_unbraced_box_cut_off_mid_answer_is_no_answer(response, answer):
    assert extract_answer(response) == answer


# Spaces and prime marks: math-verify read `e^{i t}` apart from `e^{it}` (a space between two letters), and
# drops prime marks (`f'(x)=2x` read as `f(x)=2x`).
SAME_UP_TO_SPACES = [
    (r"e^{it}", r"e^{i t}"),
    ("x+iy", "x + i y"),
    (r"e^{-it}", r"e^{-i t}"),
    (r"\frac{4A}{3+3i}e^{it}", r"\frac{4 A}{3+3 i} e^{i t}"),  # a benchmark's gold against its solution's form
    ("x'", r"x^{\prime}"),
    ("y''+y=0", r"y^{\prime\prime} + y = 0"),
]
DIFFERENT_MARKS = [("f'(x)=2x", "f(x)=2x"), ("y''+y=0", "y+y=0"), ("x'", "x"), ("y''", "y'")]


@pytest.mark.parametrize("gold, answer", SAME_UP_TO_SPACES)
def test_spaces_in_math_and_prime_spellings_change_nothing(gold, answer):
    assert grade(gold, boxed(answer)).correct and grade(answer, boxed(gold)).correct
    assert answers_equivalent(gold, answer)
    assert majority_vote([boxed(gold), boxed(answer), boxed("7")]).pass_rate == pytest.approx(2 / 3)


@pytest.mark.parametrize("gold, answer", DIFFERENT_MARKS)
def test_prime_marks_are_part_of_the_answer(gold, answer):
    assert grade(gold, boxed(answer)).status == "ok" and not grade(gold, boxed(answer)).correct
    assert not answers_equivalent(gold, answer)


@pytest.mark.parametrize(
    "answer, kept",
    [
        (r"\cdot x", r"\cdot x"),
        (r"\text{Nan Yang}", r"\text{Nan Yang}"),
        ("Nan Yang", "Nan Yang"),
        ("x and y", "x and y"),
        ("A or B", "A or B"),
    ],
)
def test_spaces_that_carry_meaning_stay(answer, kept):
    assert canonicalize(answer) == kept


@pytest.mark.parametrize(
    "gold, answer, correct", [("12", "**12**", True), ("2^3", "2**3", True), ("13", "**12**", False)]
)
def test_markdown_bold_around_an_answer_is_emphasis(gold, answer, correct):
    assert grade(gold, boxed(answer)).correct is correct


@pytest.mark.parametrize(
    ("gold", "answer", "verdict"),
    [
        ("52_8", "52_{10}", False),  # the same digits in base 10 are 52, not 5·8 + 2 = 42
        ("10110_2", "10110_3", False),  # 22 against 1·81 + 1·9 + 1·3 = 93
        ("52_8", "52_{8}", True),
        ("52_8", "42_{10}", True),  # both the number 42
        ("1A_{16}", "26_{10}", True),  # 16 + 10
        ("59_8", "59_{10}", False),  # 9 is no base-8 digit: compared as written
        ("52_8", "42", False),  # a base-less numeral is read as written (unchanged)
    ],
)
def test_numerals_with_a_base_compare_in_their_base(gold, answer, verdict):
    """math-verify drops subscripts, so `52_{10}` equalled `52_8`: two based numerals compare by value."""
    assert grade(gold, boxed(answer)).correct is verdict


def test_numerals_in_two_bases_are_two_clusters():
    vote = majority_vote([boxed("52_8"), boxed("52_8"), boxed("52_{10}"), boxed("52_{10}"), boxed("52_8")])
    assert vote.pseudo_label == "52_8" and vote.pass_rate == pytest.approx(3 / 5)


@pytest.mark.parametrize(
    ("gold", "answer", "verdict"),
    [("7", "\\text{7}", True), ("7", "\\textbf{7}", True), ("B", "\\text{B}", True), ("7", "\\text{B}", False)],
)
def test_a_single_digit_in_text_is_a_number(gold, answer, verdict):
    """`\\text{13}` was 13 but `\\text{7}` a word; a single letter stays a word (an option letter)."""
    assert grade(gold, boxed(answer)).correct is verdict


@pytest.mark.parametrize(
    ("gold", "answer", "verdict"),
    [
        ("\\frac12", "\\sin 30^\\circ", True),  # sin(π/6)
        ("\\frac{\\sqrt2}{2}", "\\cos(45^{\\circ})", True),
        ("\\sqrt3", "\\tan 60°", True),
        ("1", "2\\sin 30^\\circ", True),
        ("\\sin 30", "\\sin 30^\\circ", False),  # sin of 30 radians ≈ -0.988 is not 1/2
        ("\\frac12", "\\sin 30", False),
        ("30", "30^\\circ", True),  # a bare angle keeps the policy: the degree sign is dropped
    ],
)
def test_degrees_inside_a_trigonometric_function_are_degrees(gold, answer, verdict):
    """The degree sign was dropped everywhere, so `\\sin 30^\\circ` was sin(30 radians)."""
    assert grade(gold, boxed(answer)).correct is verdict


@pytest.mark.parametrize(
    ("gold", "answer", "verdict"),
    [
        ("\\text{(B)}", "\\textbf{(B) } 3(1+r)^x = 7", True),  # the option named with its value
        ("\\text{(B)}", "\\text{(B) } 12", True),
        ("\\text{(B)}", "\\text{(C) } 12", False),  # another option
        ("12", "\\text{(B) } 12", True),  # a value gold still reads the value after the label
        ("13", "\\text{(B) } 12", False),
    ],
)
def test_a_letter_gold_is_answered_by_the_option_label(gold, answer, verdict):
    """Against a letter gold, `\\text{(B) } 12` was read as 12 and graded wrong."""
    assert grade(gold, boxed(answer)).correct is verdict


@pytest.mark.parametrize(
    ("gold", "answer", "verdict"),
    [
        ("6.6\\times10^{-34}", "6.6\\times10^{-34}\\,\\mathrm{J\\cdot s}", True),  # compound units
        ("9.8", "9.8 \\mathrm{m/s^2}", True),
        ("2", "2\\mathrm{kg\\cdot m^2}", True),
        ("12", "12 \\,\\Omega", True),
        ("5", "5\\mathrm{~m}", True),  # OlympiadBench's spelling of one unit
        ("9.7", "9.8 \\mathrm{m/s^2}", False),  # the unit goes, the value stays
        ("3.14", "\\approx 3.14", True),  # an approximation sign
        ("\\pi", "\\approx 3.14", False),  # then the decimals policy: 3.14 is not π
        ("12", "12 \\text{ (since x>0)}", True),  # a parenthetical remark
        ("13", "12 \\text{ (rounded)}", False),
    ],
)
def test_units_approximation_signs_and_remarks_carry_no_value(gold, answer, verdict):
    assert grade(gold, boxed(answer)).correct is verdict


@pytest.mark.parametrize(
    ("gold", "answer", "verdict"),
    [
        ("17", "m+n=17", True),  # a left side that names the quantity asked for
        ("15", "a+b+c = 15", True),
        ("x^2+1", "f^{-1}(x) = x^2+1", True),
        ("18", "m+n=17", False),
        ("\\frac12", "\\frac{6}{12} = \\frac12", True),  # a true chain ends with the answer
        ("5", "2+3=5", True),
        ("6", "2+3=6", False),  # a false chain is no value
        ("3", "2x+1=7", False),  # an equation to solve is not its solution
        ("x+y=5", "x-y=5", False),  # two equations compare as equations
    ],
)
def test_labelled_left_sides_and_true_chains_give_their_value(gold, answer, verdict):
    assert grade(gold, boxed(answer)).correct is verdict


@pytest.mark.parametrize(
    ("gold", "answer", "verdict"),
    [
        ("2x", "f'(x) = 2x", True),  # a derivative names the quantity asked for
        ("2x", "f^{\\prime}(x) = 2x", True),
        ("2x", "y' = 2x", True),
        ("2", "f''(x) = 2", True),
        ("6", "f'(3) = 6", True),  # and so does a value at a point
        ("6", "f(3) = 6", True),
        ("3x^2", "\\frac{dy}{dx} = 3x^2", True),
        ("6x", "\\frac{d^2y}{dx^2} = 6x", True),
        ("2x+1", "f'(x) = 2x", False),
        ("f(x) = 2x", "f'(x) = 2x", False),  # two equations: the prime marks tell them apart
        ("3x^2", "\\frac{d}{dx}(x^3)", True),  # an unevaluated derivative is its value (math-verify evaluates it)
        ("\\cos x", "\\frac{d}{dx}\\sin x", True),
        ("3x^2", "\\frac{d}{dx}(x^2)", False),
        ("12", "f'(2) = 3\\cdot 2^2 = 12", True),  # a label, then a true chain
        ("3", "f(\\frac{1}{2}) = 3", True),
        ("3x^2", "dy/dx = 3x^2", True),
        ("2x", "\\frac{d}{dx}f(x) = 2x", True),
        ("f(3)=6", "f(3)=7", False),  # one label, two values: the values compare
        ("f'(2)=12", "f'(2)=13", False),
        ("\\frac{dy}{dx}=2x", "\\frac{dy}{dx}=3x", False),
        ("f(3)=6", "f(3) = 6.0", True),
    ],
)
def test_derivative_answers_get_a_verdict_not_an_error(gold, answer, verdict):
    """A derivative evaluated at two points raised inside the worker ("can't calculate derivative wrt 2/3"): the
    pair came back with status error, a wrong verdict either way."""
    result = grade(gold, boxed(answer))
    assert (result.status, result.correct) == ("ok", verdict)


@pytest.mark.parametrize(
    ("gold", "answer", "verdict"),
    [
        ("51", "fifty-one", True),
        ("51", "\\text{fifty-one}", True),
        ("21", "\\text{Twenty One}", True),
        ("105", "\\text{one hundred and five}", True),
        ("2026", "\\text{two thousand and twenty-six}", True),
        ("-3", "\\text{minus three}", True),
        ("0", "\\text{zero}", True),
        ("50", "\\text{fifty-one}", False),
        ("1", "\\text{one solution}", False),  # a number inside a phrase is not read
        ("120", "\\text{one twenty}", False),  # words out of a number's order
        ("2000", "\\text{one thousand one thousand}", False),
        ("2001000", "\\text{one thousand two million}", False),  # scales must fall
        ("100", "\\text{two a hundred}", False),
        ("105", "\\text{one hundred and and five}", False),
        ("1000002", "\\text{one million two}", True),
        ("5", "five \\text{ cm}", True),  # with a unit, a degree or percent sign, a closing full stop
        ("5", "\\text{five} \\text{ cm}", True),
        ("50", "\\text{fifty}\\%", True),
        ("5", "\\text{five}.", True),
        ("6", "five \\text{ cm}", False),
    ],
)
def test_a_number_in_words_is_its_numeral(gold, answer, verdict):
    assert grade(gold, boxed(answer)).correct is verdict


def test_a_labelled_answer_joins_its_values_cluster_and_two_equations_do_not_merge():
    assert answers_equivalent("m+n=17", "17") and not answers_equivalent("x+y=5", "x-y=5")


@pytest.mark.parametrize(
    ("gold", "answer", "verdict"),
    [
        ("\\text{no solution}", "\\text{no solutions}", True),
        ("\\text{infinitely many solutions}", "\\text{infinitely many solution}", True),
        ("\\text{no solution}", "\\text{one solution}", False),
        ("\\text{yes}", "\\text{ye}", False),  # three letters keep their s
        ("\\text{class}", "\\text{clas}", False),  # and so do -ss, -us, -is
    ],
)
def test_a_text_answer_in_the_singular_or_plural_is_one_answer(gold, answer, verdict):
    assert grade(gold, boxed(answer)).correct is verdict


@pytest.mark.parametrize(
    "group",
    [
        ["m+n=17", "17", "17", "m+n=17"],
        ["9.8 \\mathrm{m/s^2}", "9.8", "9.8", "9.8\\,\\mathrm{m/s^2}"],
        ["\\text{no solution}", "\\text{no solutions}", "\\text{no solution}", "\\text{no solutions}"],
        ["\\sin 30^\\circ", "\\frac12", "0.5", "\\sin(30^{\\circ})"],
        ["51", "fifty-one", "51", "\\text{fifty-one}"],
        ["2x", "f'(x) = 2x", "2x", "y' = 2x"],
    ],
)
def test_two_spellings_of_one_answer_are_one_cluster_not_a_tie(group):
    """Each kind above used to split a group into a 2-2 tie, which has no pseudo-label."""
    vote = majority_vote([boxed(a) for a in group])
    assert vote.pseudo_label is not None and vote.pass_rate == 1.0


def test_four_values_of_one_label_are_four_clusters():
    """math-verify solved `f(3)=6` and `f(3)=7` for a symbol neither has and called them equal: one cluster with
    pass rate 1.0 and a label from four different answers."""
    vote = majority_vote([boxed(f"f(3)={v}") for v in (6, 7, 8, 9)])
    assert vote.pass_rate == 0.25 and len(vote.clusters) == 4


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ("n!", "\\prod_{k=1}^{n} k"),
        ("2^n", "\\sum_{k=0}^{n}\\binom{n}{k}"),
        ("\\frac{1}{1-x}", "\\sum_{k=0}^{\\infty} x^k"),
    ],
)
def test_sums_and_products_get_a_verdict_in_time(gold, answer):
    """Evaluated at a fractional point, a sum to n ran past the deadline (timeout) and a series outside its
    convergence raised (error); now math-verify alone judges them (status ok)."""
    assert grade(gold, boxed(answer)).status == "ok"


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1", "soon"])
def test_cli_refuses_a_timeout_that_is_not_a_finite_positive_number(value, capsys):
    """inf overflowed the worker pool's poll (a traceback); nan, 0 and negatives timed every comparison out."""
    from cpmobius.grading.__main__ import build_parser

    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["verify", "--timeout-s", value])
    assert stop.value.code == 2 and "must be a finite number of seconds > 0" in capsys.readouterr().err
    assert build_parser().parse_args(["verify", "--timeout-s", "2.5"]).timeout_s == 2.5
