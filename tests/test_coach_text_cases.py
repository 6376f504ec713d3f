"""Coach-output validator, QA cases: answer leaks of every form, linear time on long text,
near-duplicates that reorder their facts or repeat an earlier attempt's problem.

`cpmobius.coach.read_problem` / `find_problem_fault` / `cpmobius.duplicates.mark_duplicates` / `propose_problems` and
`cpmobius.coach_text.is_worked_solution`. Pure, CPU, fast.
"""

from __future__ import annotations

from collections import Counter

import pytest

from cpmobius.coach import WRAPPING_CHARS, Problem, find_problem_fault, propose_problems, read_problem
from cpmobius.coach_text import extract_problem, is_worked_solution
from cpmobius.duplicates import mark_duplicates
from cpmobius.settings import CoachSettings

LEAK_REASONS = ("leaks_answer", "worked_solution")


def reason(text: str) -> str | None:
    return read_problem(text, False, CoachSettings()).reject_reason


# ----------------------------------------------------------------------------- the problem states its answer

# An answer label or a box, wherever it opens a line, a sentence or a bracket: "leaks_answer".
LABELLED = [
    r"What is $17 \times 3$? (Answer: 51)",
    r"What is $17 \times 3$? [Answer: 51]",
    r"Compute $17 \times 3$. **Answer**: 51",
    r"Compute $17 \times 3$. \textbf{Answer:} 51",
    r"Compute $17 \times 3$. \boxed 51",
    r"Compute $17 \times 3$. \boxed\frac{51}{1}",
    r"Compute $17 \times 3$. Ans: 51",
    r"Compute $17 \times 3$.  Ans. 51",
    r"Compute $17 \times 3$. Answer — 51",
    r"Compute $17 \times 3$. Answer = $51$",
    r"Compute $17 \times 3$. Final answer: 51",
    r"Compute $17 \times 3$. Expected output: 51",
    r"Compute $17 \times 3$ (the answer is 51).",
    r"Find $x$ such that $x + 2 = 5$. Solution: $x = 3$.",
    "Find $x$ such that $x + 2 = 5$. Solution: x = 3",
    "Compute $17 \\times 3$.\n\n(Answer: 51)",
    "What is 17 × 3? The correct answer is 51.",
    "What is 17 × 3? Answer\uff1a 51",  # a full-width colon
    "What is 17 × 3? Answer 51",
    "Q: What is 17 × 3? A: 51",
]

# A sentence after the one that asks ("?" or an imperative), whose subject is the asked quantity and
# which asserts its value: "worked_solution".
STATED = [
    r"Compute $17 \times 3$. (Hint: the result is 51.)",
    r"Find $17 \times 3$. It equals 51.",
    r"Find $17 \times 3$. (It equals 51.)",
    r"Find the value of $17 \times 3$. The value is 51.",
    r"Find the value of $x$ such that $x + 2 = 5$. We get $x=3$.",
    r"Evaluate $\frac{1}{2} + \frac{1}{3}$. The answer is \frac{5}{6}.",
    "Calculate 12 / 4. Hint: the result is 3.",
    "Determine 7 + 8. That is 15.",
    "Simplify 6/8. It is 3/4.",
    "What is 17 × 3? It is 51.",
    "What is 17 × 3? It's 51.",
    "Compute 17 × 3. That\u2019s 51.",
]


@pytest.mark.parametrize("text", LABELLED)
def test_labelled_or_boxed_answers_leak(text):
    assert find_problem_fault(text, False, CoachSettings()) == "leaks_answer"
    assert reason(text) == "leaks_answer"


@pytest.mark.parametrize("text", STATED)
def test_a_value_stated_after_the_question_is_a_worked_solution(text):
    assert reason(text) in LEAK_REASONS
    assert is_worked_solution(extract_problem(text).text) or reason(text) == "leaks_answer"


@pytest.mark.parametrize(
    "text", [r"Compute $17 \times 3$. (Hint: the result is 51.)", r"Find $17 \times 3$. It equals 51."]
)
def test_the_imperative_leaks_of_the_qa_report_have_the_documented_reason(text):
    assert reason(text) == "worked_solution"


# Problems that use the same words without stating their answer: valid.
LEGIT = [
    "Find the answer to $17 \\times 3$.",
    "Find the solution set of $x^2 < 4$.",
    "What is the result of 17 x 3?",
    "Answer the following question: what is 17 x 3?",
    "How many solutions does $x^2 = 4$ have?",
    "How many solutions does the equation x^2 = 4 have? Give the number of solutions.",
    "Find the number of solutions: $x^2 = 4$.",
    "A number is doubled and the result is 14. What is the number?",
    "Find the area. It's a rectangle of length 5 and width 3.",
    "It's 5 km from A to B. How long does the walk take at 4 km/h?",
    "Which is larger? A: 51 or B: 52",  # options, no "Q:" label
    "What is 17 × 3? Answer in words.",
    "A number is doubled. The result is 14. What is the number?",
    "The answer is a positive integer. Find n such that n^2 = 49.",
    "A solution of salt water is 10% salt. How much water must be added to 5 L of it to make it 5% salt?",
    "The solution is 10% salt. How much salt is in 3 L of it?",
    "Each correct answer = 4 points and each wrong answer = -1 point. Ana answered 10 questions and scored 30. "
    "How many did she get right?",
    "What is 2+2? Please put your final answer within \\boxed{}.",
    "Calculate the area of the rectangle. The length is 5 and the width is 3.",
    "Find the area of the rectangle. Its length is 5 and its width is 3.",
    "Find x. It is given that x + 2 = 5.",
    "Find the value of k. The value of k is positive and k^2 = 16.",
    "Find two numbers. Their sum is 10 and their product is 21.",
    "Express your answer as a common fraction. What is 1/2 + 1/3?",
    "Compute the sum of the first 10 positive integers. Give your answer as an integer.",
]


@pytest.mark.parametrize("text", LEGIT)
def test_problems_that_only_mention_answers_or_solutions_are_valid(text):
    assert reason(text) is None


# ----------------------------------------------------------------------------- long text: bounded, linear time


@pytest.mark.parametrize(
    "text",
    [
        "What is 2+2?" + "\n" * 20_000 + "x",
        "What is 2+2?" + " " * 50_000 + "x",
        "What is 2+2?" + " \n" * 25_000 + "x",
        "What is 2+2?" + "\nI hope" * 8_000,
        "What is 2+2?" + "\n\n---" * 10_000,
        "x" * 50_000 + "?",
    ],
)
def test_long_responses_are_over_long(text):
    problem = read_problem(text, False, CoachSettings())
    assert problem.reject_reason == "over_long" and problem.text == text.strip()


def test_whitespace_around_a_problem_does_not_count():
    # stripped, the response is short: judged as a problem
    assert reason("\n" * 20_000 + "What is 2+2?" + " " * 30_000) is None


@pytest.mark.parametrize(
    "unit", ["\n", " ", " \n", "\t", "? ", ". ", "Answer: ", "|a|\n", "to solve the ", "if you need "]
)
def test_long_text_is_judged_when_the_limit_allows_it(unit):
    # max_problem_chars lifted: every pattern runs on 50,000 characters (86 s for 20,000 newlines before);
    # the reason is what matters, the time only has to be sane
    settings = CoachSettings(max_problem_chars=10**6)
    text = "What is 2+2?" + unit * (50_000 // len(unit)) + "x"
    assert read_problem(text, False, settings).reject_reason in (
        None,
        "needs_figure",
        "worked_solution",
        "several_problems",
    )


def test_a_wrapped_problem_just_past_the_limit_is_still_cut_and_judged():
    # the response is over max_problem_chars but within the wrapping allowance: the problem inside is kept
    settings = CoachSettings(max_problem_chars=40)
    response = "Sure! Here's a problem:\n\nWhat is 2 + 3?\n\n" + "I hope this helps! " * 10
    assert 40 < len(response) < 40 + WRAPPING_CHARS
    problem = read_problem(response, False, settings)
    assert (problem.text, problem.reject_reason) == ("What is 2 + 3?", None)


def test_over_long_takes_no_precedence_over_truncated_or_refusal():
    assert read_problem("What is 2+2?" + "\n" * 20_000 + "x", True, CoachSettings()).reject_reason == "truncated"
    refusal = "I'm sorry, but as an AI language model I can't do that." + " x" * 20_000
    assert read_problem(refusal, False, CoachSettings()).reject_reason == "refusal"


# ----------------------------------------------------------------------------- near-duplicates

BAG = "A bag contains 5 red marbles and 3 blue marbles. Two marbles are drawn without replacement. What is the probability that both are red?"
PARAPHRASES = [
    "Two marbles are drawn without replacement from a bag containing 5 red and 3 blue marbles. What is the probability that both are red?",
    "A bag contains five red marbles and three blue marbles. Two marbles are drawn without replacement. What is the probability that both are red?",
    "A bag contains $7$ red marbles and $4$ blue marbles. Two marbles are drawn without replacement. What is the probability that both are red?",
    "A BAG CONTAINS 5 RED MARBLES AND 3 BLUE MARBLES.  TWO MARBLES ARE DRAWN WITHOUT REPLACEMENT. WHAT IS THE PROBABILITY THAT BOTH ARE RED?",
    "What is the probability that both are red if two marbles are drawn without replacement from a bag that contains 5 red marbles and 3 blue marbles?",
]
DISTINCT = [
    "What is the sum of the first 100 positive integers?",
    "Find all real x with x^2 - 5x + 6 = 0.",
    "A bag contains 5 red marbles and 3 blue marbles. One marble is drawn. What is the probability that it is blue?",
    "A fair die is rolled twice. What is the probability that the sum is 7?",
    "How many positive divisors does 360 have?",
]


@pytest.mark.parametrize("paraphrase", PARAPHRASES)
def test_a_reordered_or_respelled_paraphrase_is_a_duplicate(paraphrase):
    problems = [Problem(BAG, 0), Problem(paraphrase, 1)]
    mark_duplicates(problems, 0.9)
    assert [p.reject_reason for p in problems] == [None, "duplicate"]


def test_distinct_problems_sharing_words_are_kept():
    problems = [Problem(text, i) for i, text in enumerate([BAG] + DISTINCT)]
    mark_duplicates(problems, 0.9)
    assert all(p.valid for p in problems)


def test_six_paraphrases_and_two_distinct_keep_three():
    problems = [Problem(text, i) for i, text in enumerate([BAG] + PARAPHRASES + DISTINCT[:2])]
    mark_duplicates(problems, 0.9)
    assert [p.text for p in problems if p.valid] == [BAG] + DISTINCT[:2]


def test_texts_seen_earlier_in_the_step_make_duplicates_and_stay_untouched():
    # the loop's later filter attempt: BAG was kept by attempt 1, so its reordered paraphrase is a duplicate now
    problems = [Problem(PARAPHRASES[0], 0), Problem(DISTINCT[0], 1), Problem(DISTINCT[0], 2)]
    mark_duplicates(problems, 0.9, seen=[BAG])
    assert [p.reject_reason for p in problems] == ["duplicate", None, "duplicate"]
    mark_duplicates(problems := [Problem(BAG, 0)], 1.0, seen=[BAG])  # 1 = off, seen or not
    assert problems[0].valid


def test_propose_problems_passes_seen_texts_to_the_duplicate_check(scripted_coach):
    texts = [PARAPHRASES[0], DISTINCT[0], r"What is $17 \times 3$? (Answer: 51)"]
    problems, _, rejected = propose_problems(scripted_coach(texts), CoachSettings(), len(texts), seen=[BAG])
    assert [p.reject_reason for p in problems] == ["duplicate", None, "leaks_answer"]
    assert rejected == Counter({"duplicate": 1, "leaks_answer": 1})
    problems, _, _ = propose_problems(scripted_coach(texts), CoachSettings(), len(texts))  # default: nothing seen
    assert [p.reject_reason for p in problems] == [None, None, "leaks_answer"]
