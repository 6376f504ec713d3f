r"""The baselines' rewards (cpmobius.baselines: rzero_rewards, rent_rewards, ttrl_rewards) against values worked out by hand.

BLEU below is nltk's sentence BLEU with method-1 smoothing and 4-gram uniform weights:
BLEU = BP · (p1·p2·p3·p4)^(1/4), p_n = clipped matching n-grams / hypothesis n-grams, a zero count
becomes 0.1 / (hypothesis n-grams, at least 1), BP = exp(1 − r/c) when the hypothesis (c tokens) is
shorter than the reference (r tokens), else 1; BLEU = 0 when no unigram matches at all.
Two 8-token questions with distinct tokens that share only their first m tokens have
p1·p2·p3·p4 = m(m−1)(m−2)(m−3) / (8·7·6·5) = m(m−1)(m−2)(m−3) / 1680.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from cpmobius.baselines import rzero_rewards
from cpmobius.baselines.rent_rewards import rent_rewards
from cpmobius.baselines.rzero_rewards import (
    rzero_bleu_distances,
    rzero_challenger_rewards,
    rzero_gradable,
    rzero_keep,
    rzero_majority_share,
    rzero_parse_question,
    rzero_repetition_penalty,
)
from cpmobius.baselines.ttrl_rewards import ttrl_rewards, ttrl_vote_then_train

A = "find the sum of all primes below ten"  # 8 distinct tokens
B = "find the sum of all primes below twenty"  # the first m = 7 tokens of A
C = "how many ways to tile a board"  # no token of A or B
# d(A, B) = 1 − (7·6·5·4 / 1680)^(1/4) = 1 − 0.5^(1/4) = 1 − 0.840896 = 0.159104
D_AB = 1 - 0.5**0.25


def numeric_equal(given: str, reference: str) -> bool:
    """A stand-in grader: equal as numbers (fractions allowed), never for text."""
    try:
        return Fraction(given) == Fraction(reference)
    except (ValueError, ZeroDivisionError):
        return False


# R-Zero: parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<question>\n What is 2+2? \n</question>\n\n\\boxed{4}", "What is 2+2?"),
        ("<question>first</question> <question>second</question> \\boxed{1}", "second"),  # the last block
        ("<question>line one\nline two</question>\\boxed{1}", "line one\nline two"),  # DOTALL
        ("<question>Q</question>", "Q"),  # no box: mathruler gives "None", which the check accepts
        ("<question>Q</question> \\boxed{5", "Q"),  # an unclosed box: "None" again
        ("<question>Q</question> \\boxed{} and later \\boxed{4}", "Q"),  # only the last box counts
        ("<question>Q</question> \\boxed{ }", None),  # the last box is empty: "" fails the check
        ("<question>Q</question> \\boxed{4} then \\boxed{}", None),
        ("<question>   </question> \\boxed{4}", None),  # an empty question
        ("What is 2+2? \\boxed{4}", None),  # no block
        ("<question>unclosed \\boxed{4}", None),
    ],
)
def test_rzero_parse_question(text, expected):
    assert rzero_parse_question(text) == expected


def test_rzero_parse_question_rejects_a_non_string():
    with pytest.raises(ValueError, match="must be a string"):
        rzero_parse_question(None)


# R-Zero: BLEU distances and the repetition penalty ---------------------------------------------------


def test_bleu_distances_follow_the_hypothesis_order():
    short, long = "a b c d", "a b c d e f g h"
    # (0, 1): hyp = short, ref = long: p1..p4 = 4/4, 3/3, 2/2, 1/1; BP = exp(1 − 8/4) = e^−1 → d = 1 − e^−1
    assert rzero_bleu_distances([short, long])[0, 1] == pytest.approx(1 - math.exp(-1))
    # reversed, hyp = long, ref = short: p = 4/8, 3/7, 2/6, 1/5 → product 24/1680 = 1/70; BP = 1
    # → d = 1 − 70^(−1/4)
    distances = rzero_bleu_distances([long, short])
    assert distances[0, 1] == pytest.approx(1 - 70**-0.25)  # 0.654194
    assert distances[1, 0] == distances[0, 1]  # mirrored
    assert np.all(np.diag(distances) == 0.0)


@pytest.mark.parametrize(
    "questions, expected",
    [
        ([A, B], D_AB),
        ([A, C], 1.0),  # no unigram in common: BLEU 0
        (["", ""], 1.0),  # two malformed outputs: BLEU of an empty hypothesis is 0
        (["x y", "x y"], 1 - 0.01**0.25),  # identical but 2 words: p = 1, 1, 0.1/1, 0.1/1 → BLEU 0.316228
        (["x", "x"], 1 - 0.001**0.25),  # 1 word: p = 1, 0.1, 0.1, 0.1 → BLEU 0.177828
        (["x y z w", "x y z w"], 0.0),  # identical, 4 words: BLEU 1
    ],
)
def test_bleu_distance_between_two_questions(questions, expected):
    assert rzero_bleu_distances(questions)[0, 1] == pytest.approx(expected)


def test_repetition_penalty_by_hand():
    # d(A, A) = 0, d(A, B) = 0.159, C and the two malformed outputs at distance 1 from everything.
    # Average linkage at 0.5: {A, A} at 0, then {A, A}–B at (0.159 + 0.159)/2 = 0.159 → {A, A, B};
    # everything else stays apart (average 1.0). N = 6: 3/6 for the A cluster, 1/6 for each singleton.
    penalties = rzero_repetition_penalty([A, A, B, C, None, ""])
    assert penalties == pytest.approx([3 / 6, 3 / 6, 3 / 6, 1 / 6, 1 / 6, 1 / 6])


@pytest.mark.parametrize(
    "d_12, expected",
    [
        # d01 = 0.2 merges {0, 1}; {0, 1}–2 averages (0.4 + 0.55)/2 = 0.475 < 0.5 → one cluster
        # (complete linkage, max 0.55, would keep 2 apart).
        (0.55, [1.0, 1.0, 1.0]),
        # averages (0.4 + 0.7)/2 = 0.55 ≥ 0.5 → {0, 1}, {2} (single linkage, min 0.4, would merge).
        (0.7, [2 / 3, 2 / 3, 1 / 3]),
    ],
)
def test_repetition_penalty_uses_average_linkage(monkeypatch, d_12, expected):
    distances = np.array([[0.0, 0.2, 0.4], [0.2, 0.0, d_12], [0.4, d_12, 0.0]])
    monkeypatch.setattr(rzero_rewards, "rzero_bleu_distances", lambda texts: distances)
    assert rzero_repetition_penalty(["q0", "q1", "q2"]) == pytest.approx(expected)


def test_repetition_penalty_threshold():
    # d(A, B) = 0.159: a threshold of 0.1 keeps them apart (1/2 each), 0.5 merges them (2/2 each).
    assert rzero_repetition_penalty([A, B], distance_threshold=0.1) == pytest.approx([0.5, 0.5])
    assert rzero_repetition_penalty([A, B], distance_threshold=0.5) == pytest.approx([1.0, 1.0])


def test_repetition_penalty_of_a_single_question_is_one():
    assert rzero_repetition_penalty([A]) == [1.0]
    assert rzero_repetition_penalty([None]) == [1.0]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: rzero_repetition_penalty([]), "empty batch"),
        (lambda: rzero_repetition_penalty([A, B], distance_threshold=0.0), "distance_threshold"),
        (lambda: rzero_bleu_distances([]), "empty batch"),
    ],
)
def test_repetition_penalty_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# R-Zero: the Challenger reward ---------------------------------------------------------------------

QUESTIONS = [A, A, B, C, None, ""]
SHARES = [0.5, 0.3, 0.9, 1.0, None, 0.7]  # the malformed outputs' shares are ignored
# penalties, from test_repetition_penalty_by_hand: 1/2, 1/2, 1/2, 1/6, 1/6, 1/6


def test_challenger_reward_code_form():
    # min(p, 1 − p) − penalty: 0.5 − 0.5, 0.3 − 0.5, 0.1 − 0.5, 0 − 1/6; malformed: −1 − 1/6
    expected = [0.0, -0.2, -0.4, -1 / 6, -7 / 6, -7 / 6]
    assert rzero_challenger_rewards(QUESTIONS, SHARES) == pytest.approx(expected)


def test_challenger_reward_paper_form():
    # 1 − 2|p − 0.5| − penalty: 1 − 0 − 0.5, 1 − 0.4 − 0.5, 1 − 0.8 − 0.5, 1 − 1 − 1/6;
    # malformed: −1 − 1/6
    expected = [0.5, 0.1, -0.3, -1 / 6, -7 / 6, -7 / 6]
    assert rzero_challenger_rewards(QUESTIONS, SHARES, uncertainty="paper") == pytest.approx(expected)


@pytest.mark.parametrize("p", [0.0, 0.1, 0.3, 0.5, 0.8, 1.0])
def test_paper_uncertainty_is_twice_the_codes(p):
    # one question: penalty 1, so reward + 1 is the uncertainty term alone
    code = rzero_challenger_rewards([A], [p])[0] + 1.0
    paper = rzero_challenger_rewards([A], [p], uncertainty="paper")[0] + 1.0
    assert paper == pytest.approx(2 * code)


@pytest.mark.parametrize(
    "questions, shares, kwargs, message",
    [
        ([], [], {}, "empty batch"),
        ([A, B], [0.5], {}, "2 questions but 1 shares"),
        ([A], [0.5], {"uncertainty": "both"}, "uncertainty must be one of"),
        ([A, B], [0.5, None], {}, "question 1 is well formed but has no majority share"),
        ([A], [1.5], {}, r"in \[0, 1\]"),
        ([A], [float("nan")], {}, r"in \[0, 1\]"),
    ],
)
def test_challenger_reward_errors(questions, shares, kwargs, message):
    with pytest.raises(ValueError, match=message):
        rzero_challenger_rewards(questions, shares, **kwargs)


# R-Zero: majority share and the Solver filter --------------------------------------------------------

SOLVER_ANSWERS = ["12", "12.0", "None", "None", "None", "", "7", "None", "12", "no solution"]
# Greedy classes in order: "12" opens; "12.0" ≡ 12 → 2; "None" opens, +2 → 3; "" never votes; "7" opens;
# "None" → 4; "12" → 3; "no solution" opens ("none" has no "no ", "12" and "7" are not text).
# Counts: None 4, 12 3, 7 1, no solution 1 → the majority is the no-box class "None".


@pytest.mark.parametrize("denominator, expected_p", [("all_samples", 4 / 10), ("nonempty", 4 / 9)])
def test_majority_share_by_hand(denominator, expected_p):
    label, p = rzero_majority_share(SOLVER_ANSWERS, numeric_equal, denominator=denominator)
    assert label == "None"
    assert p == pytest.approx(expected_p)


@pytest.mark.parametrize(
    "answers, expected",
    [
        (["no solution", "There is no such x", "5"], ("no solution", 2 / 3)),  # both contain "no "
        (["3", "4", "4", "3"], ("3", 0.5)),  # a 2–2 tie: the first opened class
        (["1/2", "0.5", "2/4", "3"], ("1/2", 3 / 4)),  # equivalent numbers pool under the first's text
        ([None, None, "3"], ("None", 2 / 3)),  # None is the no-box "None"
        (["", ""], ("", 0.0)),  # nothing votes
    ],
)
def test_majority_share_cases(answers, expected):
    label, p = rzero_majority_share(answers, numeric_equal)
    assert (label, p) == (expected[0], pytest.approx(expected[1]))


def test_majority_share_tries_both_orders():
    calls = []

    def upper_of_reference(given, reference):  # asymmetric: given must be reference.upper()
        calls.append((given, reference))
        return given == reference.upper()

    # "a" vs the class "A": ("a", "A") fails, ("A", "a") holds → one class of 3
    assert rzero_majority_share(["A", "a", "a"], upper_of_reference) == ("A", 1.0)
    assert calls[:2] == [("a", "A"), ("A", "a")]


def test_majority_share_errors():
    with pytest.raises(ValueError, match="empty batch"):
        rzero_majority_share([], numeric_equal)
    with pytest.raises(ValueError, match="denominator must be one of"):
        rzero_majority_share(["1"], numeric_equal, denominator="valid")


@pytest.mark.parametrize(
    "p, label, band, kept",
    [
        (3 / 10, "5", (0.3, 0.8), True),  # 3/10 is 0.3 in floating point: inclusive
        (8 / 10, "5", (0.3, 0.8), True),
        (3 / 9, "5", (0.3, 0.8), True),  # 9 samples: 3..7 of 9 kept
        (7 / 9, "5", (0.3, 0.8), True),
        (2 / 9, "5", (0.3, 0.8), False),  # 0.222
        (8 / 9, "5", (0.3, 0.8), False),  # 0.889
        (0.5, "", (0.3, 0.8), False),
        (0.5, "None", (0.3, 0.8), False),
        (0.8, "5", (0.3, 0.7), False),  # the paper's band
    ],
)
def test_rzero_keep(p, label, band, kept):
    assert rzero_keep(p, label, band) is kept


@pytest.mark.parametrize("p, band", [(1.2, (0.3, 0.8)), (0.5, (0.8, 0.3)), (0.5, (-0.1, 0.8))])
def test_rzero_keep_errors(p, band):
    with pytest.raises(ValueError):
        rzero_keep(p, "5", band)


@pytest.mark.parametrize(
    "question, label, gradable",
    [
        ("What is 2+3?", "5", True),
        ("请证明 x > 0", "5", False),
        ("Put your answer in a BOX.", "5", False),
        ("Is 7 prime?", "\\text{yes}", False),
    ],
)
def test_rzero_gradable(question, label, gradable):
    assert rzero_gradable(question, label) is gradable


# RENT ----------------------------------------------------------------------------------------------

ENTROPIES = torch.tensor(
    [
        [0.5, 1.0, 1.5, 9.9],  # 3 response tokens (9.9 is padding)
        [0.2, 0.4, 0.6, 0.8],  # 4 response tokens
        [0.1, 0.1, 0.0, 0.0],  # no box
    ]
)
MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]])
HAS_BOX = [True, True, False]


def test_rent_reward_all_tokens():
    # −(0.5 + 1.0 + 1.5)/3 = −1.0; −(0.2 + 0.4 + 0.6 + 0.8)/4 = −0.5; no box: −7.0
    out = rent_rewards(ENTROPIES, MASK, HAS_BOX)
    assert out.shape == (3,) and out.dtype == torch.float32
    assert out.tolist() == pytest.approx([-1.0, -0.5, -7.0])


@pytest.mark.parametrize(
    "fraction, expected",
    [
        # ceil(0.5·3) = 2 → −(1.0 + 1.5)/2; ceil(0.5·4) = 2 → −(0.6 + 0.8)/2
        (0.5, [-1.25, -0.7, -7.0]),
        # ceil(0.1·3) = ceil(0.1·4) = 1 → the last token alone
        (0.1, [-1.5, -0.8, -7.0]),
        (1.0, [-1.0, -0.5, -7.0]),  # the whole response
    ],
)
def test_rent_reward_last_fraction(fraction, expected):
    out = rent_rewards(ENTROPIES, MASK.bool(), HAS_BOX, window="last_fraction", last_fraction=fraction)
    assert out.tolist() == pytest.approx(expected)


def test_rent_reward_no_box_value_and_empty_unboxed_row():
    mask = MASK.clone()
    mask[2] = 0  # a response without a box needs no token
    assert rent_rewards(ENTROPIES.bfloat16(), mask, HAS_BOX, no_box_entropy=5.0)[2].item() == -5.0


@pytest.mark.parametrize(
    "entropies, mask, has_box, kwargs, message",
    [
        (ENTROPIES, MASK[:, :3], HAS_BOX, {}, r"must both be \(B, T\)"),
        (ENTROPIES[0], MASK[0], HAS_BOX, {}, r"must both be \(B, T\)"),
        (ENTROPIES[:0], MASK[:0], [], {}, "empty batch"),
        (ENTROPIES, MASK, [True, True], {}, "3 responses but 2 has_box flags"),
        (ENTROPIES, MASK, HAS_BOX, {"window": "last"}, "window must be one of"),
        (ENTROPIES, MASK, HAS_BOX, {"window": "last_fraction"}, "needs last_fraction"),
        (ENTROPIES, MASK, HAS_BOX, {"window": "last_fraction", "last_fraction": 0.0}, "needs last_fraction"),
        (ENTROPIES, MASK, HAS_BOX, {"window": "last_fraction", "last_fraction": 1.5}, "needs last_fraction"),
        (ENTROPIES, MASK, HAS_BOX, {"last_fraction": 0.5}, "only read with window='last_fraction'"),
        (ENTROPIES, torch.zeros_like(MASK), HAS_BOX, {}, "response 0 has a box but no response token"),
    ],
)
def test_rent_reward_errors(entropies, mask, has_box, kwargs, message):
    with pytest.raises(ValueError, match=message):
        rent_rewards(entropies, mask, has_box, **kwargs)


# TTRL ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extracted, n_train, label",
    [
        # exact strings: "0.25" ×2 wins although "0.5", "1/2", "\frac12" (3) are the same number
        (["0.5", "1/2", "\\frac12", "0.25", "0.25"], 3, "0.25"),
        (["b", "a", "a", "b"], 2, "b"),  # a 2–2 tie: the first seen
        (["", "3", ""], 1, ""),  # nothing extracted is a label like any other
        (["5", "7", "7", "", "5", "", "", "5"], 4, "5"),  # "5" ×3 and "" ×3: "5" was seen first
    ],
)
def test_ttrl_vote_then_train(extracted, n_train, label):
    assert ttrl_vote_then_train(extracted, n_train) == (label, list(range(n_train)))


@pytest.mark.parametrize(
    "extracted, n_train, message",
    [
        ([], 1, "empty batch"),
        (["1", None], 1, "must be a string"),
        (["1", "2"], 0, r"n_train must be in \[1, 2\]"),
        (["1", "2"], 3, r"n_train must be in \[1, 2\]"),
    ],
)
def test_ttrl_vote_errors(extracted, n_train, message):
    with pytest.raises(ValueError, match=message):
        ttrl_vote_then_train(extracted, n_train)


def test_ttrl_rewards():
    calls = []

    def grader(given, reference):
        calls.append((given, reference))
        return numeric_equal(given, reference)

    # lenient reward: "0.5" and "2/4" equal the label 1/2 as numbers, "0.25" does not
    assert ttrl_rewards(["0.5", "2/4", "0.25"], "1/2", grader) == [1.0, 1.0, 0.0]
    assert calls[0] == ("0.5", "1/2")  # grade_answer(answer, label)
    with pytest.raises(ValueError, match="empty batch"):
        ttrl_rewards([], "1/2", grader)
