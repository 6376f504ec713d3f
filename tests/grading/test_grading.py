r"""Tests of cpmobius.grading: every public grader / vote / filter case.

Each case is named by what it is in the test or parameter id that pins it. Slow-path cases
run math-verify in the grading worker pool (started once, about 1 s).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpmobius import grading
from cpmobius.eval.data import default_data_dir
from cpmobius.grading import (
    GradeResult,
    GradingError,
    answers_equivalent,
    check_batch,
    extract_answer,
    grade,
    grade_batch,
    isolation,
    majority_vote,
)
from cpmobius.grading.released import normalize_gold

REPO = Path(__file__).resolve().parents[2]
SHARED_EVAL = default_data_dir()
SLOW_TOWER = r"\boxed{10^{(5^{5^{5^{5^{5}}}} \cdot \log_{10} 5) - 4}}"  # math-verify hangs on it
# Pairs with Greek letters or bare-argument functions (\sin x) are never decided by the fast path:
# the tests below use them to exercise math-verify in the worker pool.


def boxed(answer: str) -> str:
    return f"Some reasoning first. So the answer is $\\boxed{{{answer}}}$."


@pytest.fixture(scope="module", autouse=True)
def warm_pool():
    """Start the worker pool once so timing assertions measure judging, not start-up."""
    assert grade(r"\sin(x)+1", boxed(r"1+\sin x")).correct  # a slow-path pair (math-verify)
    yield


# ---------------------------------------------------------------------------------------------
# A. Extraction and equivalence (grader)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "label, response, extracted, correct",
    [
        ("1/2", r"... so \boxed{\frac{1}{2}}.", r"\frac{1}{2}", True),
        (r"\sqrt{3}/2", r"\boxed{\frac{\sqrt{3}}{2}}", r"\frac{\sqrt{3}}{2}", True),
        (r"\{1,2\}", r"\boxed{\{1,2\}}", r"\{1,2\}", True),
        ("1024", r"\boxed{2^{10}}", "2^{10}", True),
        ("1/2", r"text \boxed{\frac{1}{2}", None, False),  # unbalanced at the end → no answer
    ],
    ids=["nested-frac", "nested-sqrt", "nested-set", "nested-power", "nested-unbalanced"],
)
def test_nested_braces(label, response, extracted, correct):
    assert extract_answer(response) == extracted
    r = grade(label, response)
    assert (r.correct, r.extracted) == (correct, extracted)
    assert r.status == ("ok" if extracted else "no_answer")


def test_every_extractor_shares_the_rule():
    # the vote reads the same body as the grader (no regex fallback that stops at the first "}")
    v = majority_vote([r"\boxed{\frac{1}{2}}", r"\boxed{\frac{1}{2}}", r"\boxed{\frac{1}{3}}"])
    assert v.pseudo_label == r"\frac{1}{2}" and v.answers[2] == r"\frac{1}{3}"


def test_last_box_wins_in_reward_vote_and_eval():
    resp = "First try gives \\boxed{5}. Wait, that's wrong, the answer is \\boxed{7}."
    assert extract_answer(resp) == "7"
    assert grade("7", resp).correct and not grade("5", resp).correct
    assert grade_batch(["7"], [resp]).results[0].correct  # evaluation path
    vote = majority_vote([resp, resp, boxed("5")])
    assert vote.pseudo_label == "7" and vote.pass_rate == pytest.approx(2 / 3)


def test_connected_boxes_are_one_explicit_multi_answer():
    resp = "The answer is \\boxed{3} and \\boxed{4}."
    assert extract_answer(resp) == "3, 4"  # documented rule: an unordered list
    assert not grade("3", resp).correct
    assert grade(r"\{3, 4\}", resp).correct and grade("4, 3", resp).correct
    assert majority_vote([resp, "so \\boxed{4}, \\boxed{3}", boxed("3")]).pass_rate == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "response, expected",
    [
        (r"I will put the final answer in \boxed{}. It is $\boxed{12}$.", "12"),
        (r"The answer is \boxed{12}. (I used the \boxed command.)", "12"),
        ("Use `\\boxed{answer}` for answers; mine is \\boxed{12}. Done, as `\\boxed{x}` says.", "12"),
        (r"so \boxed 5$.", "5"),
        (r"so \fbox{6}", "6"),
        (r"first \boxed{5} then \boxed", None),  # cut off right after \boxed
        (r"\boxed{\boxed{8}}", "8"),
        ("It`s easy: the answer is \\boxed{5}.", "5"),  # a lone backtick is text, not a code span
        ("`\\boxed{x}` names it; then ` and \\boxed{9}", "9"),  # the third backtick has no partner
        ("", None),
        (None, None),
    ],
    ids=[
        "empty-box-mention",
        "command-mention",
        "code-span",
        "boxed-space",
        "fbox",
        "cut-after-boxed",
        "nested",
        "lone-backtick",
        "unpaired-backtick",
        "empty",
        "none",
    ],
)
def test_extraction_rules(response, expected):
    assert extract_answer(response) == expected


def test_nested_box_grades_as_inner_value():
    assert grade("8", r"\boxed{\boxed{8}}").correct


@pytest.mark.parametrize("where", ["main", "thread"])
def test_off_main_thread_scores_are_real(where):
    pairs = [(r"\frac13", r"\boxed{\frac{1}{3}}"), (r"2\sin(x)", r"\boxed{\sin x+\sin x}")]  # fast and slow path
    out: list = []

    def run():
        out.extend(grade(g, r) for g, r in pairs)

    if where == "main":
        run()
    else:
        t = threading.Thread(target=run)
        t.start()
        t.join(30)
    assert [(r.correct, r.status) for r in out] == [(True, "ok"), (True, "ok")]


def test_concurrent_callers_share_the_pool():
    # 6 threads, distinct slow-path pairs at the same time, one pathological: all get their verdict
    pairs = [(rf"{k}\alpha", rf"\boxed{{\alpha+{k - 1}\alpha}}", True) for k in range(3, 8)]
    pairs.append(("3", SLOW_TOWER, False))
    out: dict[int, GradeResult] = {}

    def run(i, gold, resp):
        out[i] = grade(gold, resp, timeout_s=3.0)

    threads = [threading.Thread(target=run, args=(i, g, r)) for i, (g, r, _) in enumerate(pairs)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert time.monotonic() - t0 < 3.0 + 2.5
    assert [(out[i].correct, out[i].status) for i in range(len(pairs))] == [(True, "ok")] * 5 + [(False, "timeout")]


def test_ray_actor_with_concurrency():
    ray = pytest.importorskip("ray")
    started_here = not ray.is_initialized()  # another test of the session may own the Ray instance
    if started_here:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    actor = None
    try:

        @ray.remote(max_concurrency=4)
        class Grader:
            def grade(self, gold, response, timeout_s):
                from cpmobius.grading import grade as g

                t0 = time.monotonic()
                r = g(gold, response, timeout_s=timeout_s)
                return r.correct, r.status, time.monotonic() - t0

        actor = Grader.options(runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}}).remote()
        assert ray.get(actor.grade.remote(r"\alpha", boxed(r"\alpha+0"), 30.0))[:2] == (True, "ok")  # pool up
        refs = [
            actor.grade.remote(r"\frac13", r"\boxed{\frac{1}{3}}", 5.0),
            actor.grade.remote(r"\sin(x)+1", boxed(r"1+\sin x"), 5.0),
            actor.grade.remote("3", SLOW_TOWER, 1.0),
        ]
        res = ray.get(refs, timeout=60)
        assert [r[:2] for r in res] == [(True, "ok"), (True, "ok"), (False, "timeout")]
        assert res[2][2] < 1.0 + 2.5  # its bound (pool start-up inside the actor excluded)
    finally:
        if actor is not None:
            ray.kill(actor)
        if started_here:
            ray.shutdown()


def test_all_errors_fail_loudly(monkeypatch):
    class BrokenPool:
        def run(self, tasks, timeout_s):
            return [("error", "worker died")] * len(tasks)

    monkeypatch.setattr(isolation, "get_pool", lambda: BrokenPool())
    batch = grade_batch([r"\alpha+17"] * 3, [boxed(r"17+\alpha"), boxed(r"\alpha"), boxed(r"2\alpha")])  # slow path
    assert [r.status for r in batch.results] == ["error"] * 3
    assert batch.scores == [0.0, 0.0, 0.0] and batch.counts["error"] == 3
    with pytest.raises(GradingError, match="refusing to train on zeros"):
        check_batch(batch, context="player reward")
    mixed = grade_batch([r"\alpha+19", "2"], [boxed(r"19+\alpha"), boxed("2")])
    assert check_batch(mixed)["error"] == 1  # one real score left: no raise


def test_check_batch_counts_timeouts_and_accepts_no_answers():
    timeouts = [GradeResult(False, "9^{9^{9^{9}}}", "timeout")] * 2
    with pytest.raises(GradingError):
        check_batch(timeouts)
    assert check_batch([GradeResult(False, None, "no_answer")] * 4)["no_answer"] == 4
    assert check_batch([]) == dict.fromkeys(grading.STATUSES, 0)


@pytest.mark.parametrize(
    "label, response, status",
    [
        ("3", SLOW_TOWER, "timeout"),
        ("5", r"\boxed{9^{9^{9^{9}}}}", "timeout"),
        ("5", "1+1=2. " * 4300, "no_answer"),  # 30,100 characters without a box
    ],
    ids=["hang-log-tower", "hang-tower", "hang-30k-no-box"],
)
@pytest.mark.parametrize("where", ["main", "thread"])
def test_hard_wall_clock_bound(label, response, status, where):
    out: list = []

    def run():
        t0 = time.monotonic()
        out.append((grade(label, response, timeout_s=1.0), time.monotonic() - t0))

    if where == "main":
        run()
    else:
        t = threading.Thread(target=run)
        t.start()
        t.join(30)
    r, elapsed = out[0]
    assert (r.correct, r.status) == (False, status)
    assert elapsed < 1.0 + 5.0  # bounded (slack for a replacement worker on a loaded 2-core CI machine)


def test_bound_holds_in_a_subprocess():
    code = (
        "import time; from cpmobius.grading import grade\n"
        "grade('x', r'\\boxed{x+0}')\n"
        "t=time.monotonic(); r=grade('3', r'" + SLOW_TOWER + "', timeout_s=1.0)\n"
        "print(r.status, round(time.monotonic()-t, 2))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    status, elapsed = out.stdout.split()
    assert status == "timeout" and float(elapsed) < 1.0 + 5.0  # unbounded, the tower takes minutes


def test_batch_of_pathological_answers_does_not_block_the_rest():
    towers = [rf"\boxed{{10^{{(5^{{5^{{5^{{5^{{5}}}}}}}} \cdot \log_{{10}} {k}) - 4}}}}" for k in range(2, 10)]
    golds = ["3"] * len(towers) + [r"\alpha^2+1", "7", r"\frac12"]  # Greek letters: math-verify
    resps = towers + [boxed(r"1+\alpha\cdot\alpha"), boxed("7"), boxed("0.5")]
    t0 = time.monotonic()
    batch = grade_batch(golds, resps, timeout_s=1.5)
    assert time.monotonic() - t0 < 1.5 + 5.0
    assert [r.status for r in batch.results] == ["timeout"] * len(towers) + ["ok"] * 3
    assert all(r.correct for r in batch.results[-3:])
    assert batch.counts == {"ok": 3, "no_answer": 0, "timeout": len(towers), "error": 0}


def test_vote_clustering_is_bounded():
    # 16 samples, all different slow-path answers: up to 120 comparisons, one shared budget
    answers = [rf"10^{{(5^{{5^{{5^{{5^{{5}}}}}}}} \cdot \log_{{10}} {k})}}" for k in range(2, 18)]
    t0 = time.monotonic()
    v = majority_vote(answers=answers, timeout_s=1.5)
    assert time.monotonic() - t0 < 1.5 + 5.0
    assert v.n_timeouts > 0 and v.pseudo_label is None  # all singletons: a 16-way tie


@pytest.mark.parametrize(
    "label, response, equal",
    [
        ("1000", "1,000", True),
        ("1000", "1{,}000", True),
        ("1000", r"1\,000", True),
        ("0", r"1\,000", False),
        (r"1\,500", r"2\,000", False),
        ("0,1", "01", False),
        ("1234", "12,34", False),
        ("12,34", "12, 34", True),
        ("10080", r"10,\!080", True),
        ("11111111100", r"11,\! 111,\! 111,\! 100", True),
        ("32348", r"\$32,\!348", True),
    ],
    ids=[
        "sep-comma",
        "sep-brace-comma",
        "sep-thin-space",
        "sep-thin-space-not-0",
        "sep-1500-vs-2000",
        "sep-list-not-fused",
        "sep-bad-grouping",
        "list-spacing",
        "MATH-comma-bang",
        "MATH-comma-bang-space",
        "MATH-dollar",
    ],
)
def test_thousands_separators(label, response, equal):
    assert grade(label, boxed(response)).correct is equal
    assert answers_equivalent(label, response) is equal


def test_separator_policy_in_vote():
    v = majority_vote([boxed(r"1\,500"), boxed(r"2\,000"), boxed("1500")])
    assert v.pseudo_label is not None and grade("1500", boxed(v.pseudo_label)).correct
    assert sorted(map(len, v.clusters)) == [1, 2]


@pytest.mark.parametrize(
    "gold, response, equal",
    [
        ("x^2+3x", "x(x+3)", True),
        ("x^2+3x", "x(x+4)", False),
        (r"\frac{x^2-1}{x-1}", "x+1", True),
        (r"\sqrt{x^2}", "x", False),  # |x|: variables are also tried at a negative point
        ("x+1", "y+1", False),  # strict: variables matter
        (r"\pi r^2", r"r^2\pi", True),
        (r"\frac{1}{m}t", r"\frac{t}{m}", True),  # math-verify's unit stripping would read "t" as a unit
        ("(x, 2x)", "(x, x+x)", True),
        (r"\sin(2x)", r"2\sin(x)\cos(x)", True),
        (r"\sin^2(x)+\cos^2(x)", "1", True),
        (r"e^{x}", r"\exp(x)", True),
        (r"\ln(x^2)", r"2\ln(x)", False),  # not for x < 0 (math-verify decides: real symbols)
        (r"\sin(x)+1", r"1+\sin x", True),  # bare argument: math-verify decides
    ],
    ids=[
        "poly",
        "poly-wrong",
        "rational-function",
        "abs-value",
        "other-variable",
        "pi-r-squared",
        "t-over-m",
        "tuple-of-expressions",
        "double-angle",
        "pythagoras",
        "exp",
        "log-domain",
        "bare-argument",
    ],
)
def test_expressions_with_variables(gold, response, equal):
    assert grade(gold, boxed(response)).correct is equal
    assert answers_equivalent(gold, response) is equal


@pytest.mark.parametrize(
    "gold, response, equal",
    [
        ("3x - y + 13 = 0", "3x + 4y + 14 = 0", False),
        ("2x+4y-3=0", r"y = -\frac{1}{2}x + \frac{3}{4}", True),  # the same line
        ("x = 5", "5", True),
        ("5", "x = 5", True),
        ("5", r"x = 5 \text{ or } x = -5", False),
        ("y = 2x+3", "2x+3", True),
    ],
    ids=[
        "eq-different-lines",
        "eq-same-line",
        "eq-assignment-gold",
        "eq-assignment-pred",
        "eq-two-solutions",
        "eq-equation-rhs",
    ],
)
def test_equations_keep_both_sides(gold, response, equal):
    assert grade(gold, boxed(response)).correct is equal


@pytest.mark.parametrize(
    "samples",
    [
        ["x<3", r"(-\infty, 3)", r"(-\infty,3)", "5"],
        ["(0,12.5)", "0<x<12.5"],
        ["28", r"28\%", "0.28"],
        [r"\sqrt{2}", "1.414214", "1.4142136", "1.41"],
    ],
    ids=["sym-interval-inequality", "sym-interval-pair", "sym-percent", "decimals-near-sqrt2"],
)
def test_vote_is_order_invariant(samples):
    base = majority_vote([boxed(s) for s in samples])
    rng = random.Random(9)
    for _ in range(10):
        perm = list(range(len(samples)))
        rng.shuffle(perm)
        v = majority_vote([boxed(samples[i]) for i in perm])
        assert (v.pseudo_label, v.pass_rate) == (base.pseudo_label, base.pass_rate)
        assert sorted(sorted(perm[i] for i in c) for c in v.clusters) == sorted(base.clusters)


def test_symmetric_rule_either_direction():
    # math-verify: x<3 vs (-inf,3) is True only with the inequality as gold; the vote uses "either"
    assert answers_equivalent("x<3", r"(-\infty,3)") and answers_equivalent(r"(-\infty,3)", "x<3")
    assert majority_vote([boxed("x<3"), boxed(r"(-\infty, 3)"), boxed(r"(-\infty,3)"), boxed("5")]).pass_rate == 0.75
    # scoring stays directional (the gold fixes the form)
    assert grade("x<3", boxed(r"(-\infty,3)")).correct and not grade(r"(-\infty,3)", boxed("x<3")).correct
    # percent policy is transitive: 28% joins 28, never 0.28
    v = majority_vote([boxed("28"), boxed(r"28\%"), boxed("0.28")])
    assert (v.pseudo_label, v.pass_rate, v.clusters) == ("28", 2 / 3, [[0, 1], [2]])


_VOTE_POOL = [
    "7",
    "7.0",
    r"\frac{14}{2}",
    "5",
    r"\frac12",
    "0.5",
    "1/2",
    "x<3",
    r"(-\infty,3)",
    "28",
    r"28\%",
    "0.28",
    r"\sqrt{2}",
    "1.414214",
    "1.4142136",
    r"\text{(E)}",
    "e",
    "E",
    r"\text{Evelyn}",
    "evelyn",
    r"1\,500",
    "1500",
    None,
    "None",
    r"\boxed{7",
    "(1,2)",
    r"\{1,2\}",
    "2, 1",
]


@settings(max_examples=40, deadline=None, database=None)  # no .hypothesis/ folder in the repository
@given(st.lists(st.sampled_from(_VOTE_POOL), min_size=1, max_size=10), st.randoms(use_true_random=False))
def test_vote_permutation_invariance_property(samples, rnd):
    responses = [
        "I don't know" if s is None else ("I think " + s) if s.startswith("\\boxed{7") else boxed(s) for s in samples
    ]
    base = majority_vote(responses)
    perm = list(range(len(responses)))
    rnd.shuffle(perm)
    v = majority_vote([responses[i] for i in perm])
    assert (v.pseudo_label, v.pass_rate) == (base.pseudo_label, base.pass_rate)
    assert sorted(sorted(perm[i] for i in c) for c in v.clusters) == sorted(base.clusters)
    assert [v.agrees[perm.index(i)] for i in range(len(perm))] == base.agrees


@pytest.mark.parametrize(
    "gold, response, correct",
    [
        ("12", r"\boxed{\textbf{(B) }12}", True),
        ("12", r"\boxed{B}", False),
        ("e", r"\boxed{\text{(E)}}", False),
        (r"\text{(C)}", r"\boxed{C}", True),
        (r"\text{(C)}", r"\boxed{\textbf{(C)}}", True),
        ("E", r"\boxed{\text{(E)}}", True),
        ("e", r"\boxed{2.718282}", False),
    ],
    ids=[
        "amc-label-and-value",
        "amc-bare-letter",
        "amc-text-E-vs-e",
        "option-letter",
        "option-bold",
        "option-vs-letter",
        "letter-never-euler",
    ],
)
def test_amc_letters(gold, response, correct):
    assert grade(gold, response).correct is correct


@pytest.mark.parametrize(
    "gold, response, correct",
    [
        ("28", r"28\%", True),
        ("0.28", r"28\%", False),
        (r"\frac12", r"50\%", False),
        ("30", r"30^\circ", True),
        (r"\frac{\pi}{2}", r"90^\circ", False),
        ("5", r"5\text{ cm}", True),
        ("10", r"\$10", True),
        (r"\frac13", "0.333", False),
        (r"\frac{\pi}{2}", "1.5708", False),
        (r"2\pi", "6.283185", True),
        (r"2\pi", "6.28", False),
        (r"\frac13", "0.333333", True),
        (r"\frac{\sqrt{3}}{2}", "0.866025", True),
        (r"1.22 \times 10^{-18}", r"1.5 \times 10^{-18}", False),
        ("9.6", "9.60", True),
        (r"\frac12", "0.5", True),
        (r"\frac{270}7\text{ degrees}", r"\frac{270}{7}", True),
        ("5.4 \\text{ cents}", "5.4", True),
        (r"\arcsin{\frac{1}{1.3}}", r"\arcsin{\frac{10}{13}}", True),
    ],
    ids=[
        "pct-28",
        "pct-0.28",
        "pct-half",
        "deg-30",
        "deg-rad",
        "unit-cm",
        "unit-dollar",
        "prec-0.333",
        "prec-1.5708",
        "prec-6.283185",
        "prec-6.28",
        "six-places",
        "six-places-radical",
        "tiny-values-differ",
        "trailing-zero",
        "exact-decimal",
        "MATH-degrees",
        "MATH-cents",
        "written-decimal-is-exact",
    ],
)
def test_units_percent_precision_policy_table(gold, response, correct):
    assert grade(gold, boxed(response)).correct is correct


def test_truncated_final_box_never_falls_back():
    resp = "My first guess is \\boxed{5}. Let me recheck ... so the answer is \\boxed{7"
    r = grade("5", resp)
    assert (r.correct, r.extracted, r.status) == (False, None, "no_answer")
    v = majority_vote([resp] * 3 + [boxed("5")])
    assert v.pseudo_label == "5" and v.pass_rate == 0.25 and v.answers[:3] == [None] * 3


def test_no_answer_is_never_equal_nor_a_label():
    assert grade("42", "I could not solve it.") == GradeResult(False, None, "no_answer")
    v = majority_vote(["no box here"] * 5 + [boxed("6")] * 3)
    assert (v.pseudo_label, v.pass_rate, v.clusters) == ("6", 3 / 8, [[5, 6, 7]])  # denominator n = 8
    v = majority_vote(["nothing"] * 8)
    assert (v.pseudo_label, v.pass_rate, v.clusters) == (None, 0.0, [])
    assert grade("None", boxed("None")).status == "error"  # a placeholder gold is a grader error
    assert grade("42", boxed("None")) == GradeResult(False, None, "no_answer")
    assert not answers_equivalent("None", "None") and not answers_equivalent(None, None)
    assert majority_vote(answers=["None", "null", "", "N/A"]).pseudo_label is None


@pytest.mark.parametrize(
    "gold, response, correct",
    [
        (r"\dfrac{\pi}{2}", "The final answer is pi/2", False),  # no box: required format not met
        (r"\dfrac{\pi}{2}", r"\boxed{pi/2}", True),
        (r"-2\pi", r"\boxed{-2*pi}", True),
        (r"e^{16} - 1", r"\boxed{-1 + exp(16)}", True),
        ("5", r"\boxed{sqrt(25)}", True),
    ],
    ids=["code-unboxed", "code-pi-over-2", "code-times-pi", "code-exp", "code-sqrt"],
)
def test_plain_text_code_style(gold, response, correct):
    assert grade(gold, response).correct is correct


def test_code_style_votes_one_cluster():
    v = majority_vote([boxed(r"\frac{\pi}{2}"), boxed("pi/2"), boxed(r"\pi/2")])
    assert v.pass_rate == 1.0 and len(v.clusters) == 1


# ---------------------------------------------------------------------------------------------
# B. Majority voting
# ---------------------------------------------------------------------------------------------


def test_equivalent_answers_form_one_cluster():
    answers = [r"\frac{1}{2}", "0.5", "1/2", r"\dfrac12", "3", "3", None, None]
    v = majority_vote([boxed(a) if a else "no answer" for a in answers])
    assert grade("1/2", boxed(v.pseudo_label)).correct
    assert v.pass_rate == 0.5 and 0.2 <= v.pass_rate <= 0.8  # kept by the [0.2, 0.8] filter
    assert v.clusters == [[0, 1, 2, 3], [4, 5]]
    assert v.agrees == [True] * 4 + [False] * 4  # "0.5" gets reward 1, as the clustering says
    released = majority_vote([boxed(a) for a in answers[:6]], mode="released")
    assert (released.pseudo_label, released.pass_rate) == ("3", 2 / 6)  # naive string counting elects 3
    released = majority_vote([boxed(a) if a else "no answer" for a in answers], mode="released")
    assert released.pseudo_label is None  # and with the two None it is a 2-2 tie: problem dropped


def test_tie_at_the_top_gives_no_label():
    responses = [boxed("7")] * 3 + [boxed("5")] * 3 + ["?", "no idea"]
    v = majority_vote(responses)
    assert (v.pseudo_label, v.pass_rate) == (None, 3 / 8)
    assert v.agrees == [False] * 8 and sorted(map(len, v.clusters)) == [3, 3]
    for seed in range(5):
        perm = random.Random(seed).sample(range(8), 8)
        w = majority_vote([responses[i] for i in perm])
        assert (w.pseudo_label, w.pass_rate) == (None, 3 / 8)


# ---------------------------------------------------------------------------------------------
# C./D. Filter band and truncation (the vote's side of the filter band and truncated responses)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "agree, kept",
    [(2, True), (8, True), (1, False), (9, False), (0, False), (10, False)],
    ids=["band-2of10", "band-8of10", "band-1of10", "band-9of10", "0of10", "10of10"],
)
def test_band_boundaries_without_float_drift(agree, kept):
    # n = 10: `agree` samples say 4, the others say distinct wrong answers (a unique majority if agree >= 2)
    responses = [boxed("4")] * agree + [boxed(str(100 + i)) for i in range(10 - agree)]
    v = majority_vote(responses)
    top = max(map(len, v.clusters))
    assert top == max(agree, 1) and v.pass_rate == top / 10
    in_band = 2 * 10 <= 10 * top <= 8 * 10  # integer band test: 0.2·n ≤ top ≤ 0.8·n
    assert (in_band and v.pseudo_label is not None) is kept
    assert (0.2 <= v.pass_rate <= 0.8 and v.pseudo_label is not None) is kept  # same with the float


def test_truncated_responses_never_vote():
    responses = [boxed("12")] * 5 + [r"so far \boxed{9} and then", r"we get \boxed{9} but", "cut mid sente"]
    truncated = [False] * 5 + [True] * 3
    v = majority_vote(responses, truncated=truncated)
    assert (v.pseudo_label, v.pass_rate, v.clusters) == ("12", 5 / 8, [[0, 1, 2, 3, 4]])
    assert v.answers[5:] == [None] * 3 and v.agrees[5:] == [False] * 3
    w = majority_vote(responses)  # without the flags the early boxes would vote
    assert w.clusters == [[0, 1, 2, 3, 4], [5, 6]]


# ---------------------------------------------------------------------------------------------
# E. Evaluation harness: released quirks (str.strip with a phrase) and our prefix-only extraction
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer, quirk",
    [(r"2\pi", "2\\"), ("1/e", "1/"), ("Evelyn", "Evely"), ("Tuesday", "uesday"), ("e", "")],
    ids=["strip-2pi", "strip-1/e", "strip-Evelyn", "strip-Tuesday", "strip-e"],
)
def test_strip_quirk_only_in_released_mode(answer, quirk):
    resp = f"The final answer is $\\boxed{{{answer}}}$. I hope it is correct."
    ours = grade(answer, resp)
    assert (ours.extracted, ours.correct) == (answer, True)
    released = grade(answer, resp, mode="released")
    assert released.extracted == quirk and released.correct is (quirk == answer)


@pytest.mark.parametrize(
    "gold, released_gold",
    [("0,1", ",1"), ("033", "33"), ("0.022", ".022"), ("0", "0")],
    ids=["strip-0,1", "strip-033", "decimal", "zero"],
)
def test_strip_quirk_gold_leading_zeros(gold, released_gold):
    assert normalize_gold(gold) == released_gold
    assert grade("033", boxed("33")).correct and not grade("0,1", boxed("1")).correct


def test_released_evaluation_grader_behaviour():
    assert grade("142", "Thus the answer is 142.0", mode="released").correct  # no box needed, float gold
    assert grade("25", boxed("25\\%"), mode="released").correct  # percentage variants
    assert grade("1000", boxed("1000.05"), mode="released").correct  # rel_tol 1e-4
    assert not grade("1000", boxed("1000.05")).correct  # ours: decimals are not tolerance-matched
    assert grade(r"\frac{1}{2}", boxed("0.5"), mode="released", timeout_s=5).correct  # symbolic step
    assert grade("x+1", boxed("1+x"), mode="released", timeout_s=5).correct
    assert not grade("7", boxed("8"), mode="released").correct


def test_released_vote_is_exact_string():
    # \boxed{1/2} and \boxed{\frac{1}{2}} are different answers in the released code
    v = majority_vote([r"\boxed{1/2}", r"\boxed{\frac{1}{2}}", r"\boxed{\frac{1}{2}}"], mode="released")
    assert (v.pseudo_label, v.pass_rate, v.agrees) == (r"\frac{1}{2}", 2 / 3, [False, True, True])
    # a None majority or a tie: no label, filter statistic 0
    v = majority_vote(["no box"] * 5 + [boxed("6")] * 3, mode="released")
    assert (v.pseudo_label, v.pass_rate) == (None, 0.0)
    v = majority_vote([boxed("7")] * 3 + [boxed("5")] * 3, mode="released")
    assert (v.pseudo_label, v.pass_rate) == (None, 0.0)
    # verl's "\boxed " special case: text after "\boxed " up to the next "$", anywhere in the text
    assert extract_answer(r"we get $\boxed 5$ and later \boxed{6}", mode="released") == "5"
    assert extract_answer(r"we get $\boxed 5$ and later \boxed{6}") == "6"
    assert extract_answer(r"x \boxed{7", mode="released") is None


# ---------------------------------------------------------------------------------------------
# F. Self-play: the problem text must not leak into extraction
# ---------------------------------------------------------------------------------------------


def test_only_response_tokens_are_read():
    problem = r"Compute 17 × 3. (Hint: the result is \boxed{51}.)"
    responses = ["17 times 3 is fifty-one, I think.", "The product is 51."] * 4
    assert extract_answer(problem) == "51"  # the leak is real if prompt and response were joined
    assert all(extract_answer(r) is None for r in responses)
    v = majority_vote(responses)
    assert (v.pseudo_label, v.pass_rate) == (None, 0.0)  # unparseable group → dropped


# ---------------------------------------------------------------------------------------------
# Benchmark gold answers (shared/data/eval)
# ---------------------------------------------------------------------------------------------


def _eval_rows() -> list[dict]:
    eval_dir = SHARED_EVAL
    files = sorted(eval_dir.glob("*/*.jsonl")) if eval_dir.is_dir() else []
    if not files:
        pytest.skip(f"benchmark data not found under {eval_dir} (set CPMOBIUS_SHARED_DATA)")
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def test_every_gold_matches_itself_when_boxed():
    rows = _eval_rows()
    golds = [str(r["answer"]) for r in rows]
    batch = grade_batch(golds, [f"Reasoning. Final: \\boxed{{{g}}}" for g in golds], timeout_s=30)
    failures = [(r["id"], g, res) for r, g, res in zip(rows, golds, batch.results) if not res.correct]
    assert not failures, failures[:5]
    assert len(rows) >= 1000


# Alternative spellings whose *value* differs from the answer (kept by the data curators as
# accepted alternatives or flagged as ambiguous); everything else in alt_answers must match.
_ALT_DIFFERENT = {
    "minerva_math-10",
    "minerva_math-17",
    "minerva_math-19",
    "minerva_math-78",
    "minerva_math-88",
    "minerva_math-156",
    "minerva_math-163",
    "minerva_math-170",
    "minerva_math-193",
    "minerva_math-202",
}


def test_gold_alternative_spellings_match():
    rows = _eval_rows()
    pairs = [
        (r["id"], str(r["answer"]), a)
        for r in rows
        for a in r.get("alt_answers") or []
        if r["id"] not in _ALT_DIFFERENT
    ]
    batch = grade_batch([p[1] for p in pairs], [f"\\boxed{{{p[2]}}}" for p in pairs], timeout_s=30)
    failures = [p for p, res in zip(pairs, batch.results) if not res.correct]
    assert not failures, failures[:5]
    assert len(pairs) > 400


# ---------------------------------------------------------------------------------------------
# Command-line interface
# ---------------------------------------------------------------------------------------------


def _cli(args: list[str], stdin: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cpmobius.grading", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def test_cli_verify_and_vote():
    lines = [
        {"gold": "1/2", "response": r"so \boxed{0.5}"},
        {"gold": "7", "response": "no box"},
        {"gold": "x^2+1", "response": r"\boxed{1+x^2}"},
    ]
    out = _cli(["verify"], "\n".join(json.dumps(x) for x in lines) + "\n")
    assert out.returncode == 0, out.stderr
    assert [json.loads(x) for x in out.stdout.splitlines()] == [
        {"correct": True, "extracted": "0.5", "status": "ok"},
        {"correct": False, "extracted": None, "status": "no_answer"},
        {"correct": True, "extracted": "1+x^2", "status": "ok"},
    ]
    out = _cli(["vote"], json.dumps({"responses": [r"\boxed{\frac12}", r"\boxed{0.5}", r"\boxed{3}", "none"]}) + "\n")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"pseudo_label": "0.5", "pass_rate": 0.5, "clusters": [[0, 1], [2]]}


@pytest.mark.parametrize(
    "command, stdin, message",
    [
        ("verify", "{not json\n", "line 1: not valid JSON"),
        ("verify", json.dumps({"gold": "1"}) + "\n", "missing key 'response'"),
        ("vote", json.dumps({"gold": "1", "response": "x"}) + "\n", "missing key 'responses'"),
        ("vote", json.dumps({"responses": "abc"}) + "\n", "must be a list of strings"),
        ("verify", "[1, 2]\n", "expected a JSON object"),
    ],
    ids=["bad-json", "verify-missing-key", "vote-missing-key", "vote-not-a-list", "not-an-object"],
)
def test_cli_malformed_input_is_a_clear_error(command, stdin, message):
    out = _cli([command], stdin)
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "answer",
    [r"\sin((\pi^{99999})^{99999})", r"\exp((e^{99999})^{99999})", r"\tan((e^{99999})^{99999})", r"\cos(10^{15})"],
)
def test_a_function_of_a_huge_argument_is_decided_within_the_timeout(answer):
    """sin, exp and the like of an astronomically large value are not evaluated in the calling process (no timeout
    applies there: sin((π^99999)^99999) ran for minutes); the worker pool decides under the grading timeout."""
    started = time.monotonic()
    result = grade("2", rf"\boxed{{{answer}}}", timeout_s=2.0)
    assert time.monotonic() - started < 2.0 + 10  # the pool's start-up included
    assert not result.correct and result.status in ("ok", "timeout")
    assert grade(r"\sin(10^{12})", r"\boxed{\sin(1000000000000)}", timeout_s=2.0).correct  # at the bound
    started = time.monotonic()
    assert not answers_equivalent(answer, "2", timeout_s=2.0)
    assert time.monotonic() - started < 2.0 + 10
