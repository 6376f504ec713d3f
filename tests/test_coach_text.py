"""A real chat Coach's wrapping, refusals and worked solutions, as a first real run showed them.

Qwen2.5-Coder-0.5B-Instruct as Coach: 47 of 60 responses opened with "Sure, here's a valid math
problem:" and were rejected as chatter (34 valid once that line is removed); others closed with "I
hope this helps!" or "Let me know if you need the solution."; a refusal ("I'm sorry, but as an AI
language model, I can't ...?") and a worked solution ("Surely, here's ... the sum ... is 55.")
passed as valid. The texts below are of those kinds.
"""

from __future__ import annotations

from collections import Counter

import pytest
from stand_ins import ScriptedPolicy

from cpmobius.coach import EXTRACTED_KINDS, REJECT_REASONS, find_problem_fault, propose_problems, read_problem
from cpmobius.coach_text import extract_problem, is_refusal, is_worked_solution
from cpmobius.metrics import filter_metrics
from cpmobius.settings import CoachSettings


def _Coach(texts: list[str]) -> ScriptedPolicy:
    """A Coach whose batch row i is texts[i], finished (the shared stand-in, `stand_ins.ScriptedPolicy`)."""
    return ScriptedPolicy(lambda prompt, i: [texts[i]])


# (response, the problem that remains, what was cut)
WRAPPED = [
    (
        "Sure, here's a valid math problem:\n\nWhat is the sum of the first 10 positive odd integers?",
        "What is the sum of the first 10 positive odd integers?",
        ("preamble",),
    ),
    (
        "Sure, here's a valid math problem: A rectangle has length 8 and width 5. What is its area?",
        "A rectangle has length 8 and width 5. What is its area?",
        ("preamble",),
    ),
    (
        "Sure! Here's a math problem for you to solve.\n\nA train travels 60 km in 45 minutes. What is its speed in km/h?",
        "A train travels 60 km in 45 minutes. What is its speed in km/h?",
        ("preamble",),
    ),
    (
        "Certainly! Here is a valid math problem involving 3 variables:\n\nSolve for x: 2x + 3 = 11.",
        "Solve for x: 2x + 3 = 11.",
        ("preamble",),
    ),
    (
        "Of course. I'll create a problem for you:\n\nHow many positive divisors does 36 have?",
        "How many positive divisors does 36 have?",
        ("preamble",),
    ),
    (
        "Sure, here's one:\n\n**Problem:** Find all real x such that x^2 - 5x + 6 = 0.\n\nI hope this helps!",
        "Find all real x such that x^2 - 5x + 6 = 0.",
        ("preamble", "heading", "closing"),
    ),
    (
        "**Problem:**\nWhat is the least common multiple of 12 and 18?",
        "What is the least common multiple of 12 and 18?",
        ("heading",),
    ),
    (
        "### Math Problem\n\nHow many primes are less than 30?\n\n---\n\nThis problem tests your knowledge of primes.",
        "How many primes are less than 30?",
        ("heading", "closing"),
    ),
    ("What is 12 + 35?\n\nLet me know if you need the solution.", "What is 12 + 35?", ("closing",)),
    ("Compute 3^4 - 2^5. Good luck!", "Compute 3^4 - 2^5.", ("closing",)),
    (
        "What is the remainder when 2^10 is divided by 7?\n\nIf you'd like a hint, just ask!",
        "What is the remainder when 2^10 is divided by 7?",
        ("closing",),
    ),
    (
        'Here\'s a problem for you: "What is the greatest prime factor of 91?"',
        "What is the greatest prime factor of 91?",
        ("preamble",),
    ),
]

# Problems that merely look like wrapping: nothing is cut.
UNWRAPPED = [
    "If you have 3 apples and buy 5 more, how many apples do you have?",
    "Let us denote by S the set of integers from 1 to 10. How many subsets of S have an even sum?",
    "Great Britain has 4 nations. If 2 are chosen at random, how many pairs are possible?",
    "A problem set has 12 questions. How many ways can 3 of them be chosen?",
    "Enjoyment of a game rises by 3 points per hour. After 4 hours, how many points has it risen?",
]

REFUSALS = [
    "I'm sorry, but as an AI language model, I can't generate a math problem without more context. Could you give me a topic?",
    "As an AI, I cannot create problems. What would you like to know?",
    "Sure! What is 2 + 2? Unfortunately, I am unable to provide more problems today?",
    "I apologize, but I can't help with that. Can I help you with anything else?",
]

WORKED = [
    "Surely, here's a valid math problem:\n\nWhat is the sum of the first 10 positive integers? "
    "The sum of the first 10 positive integers is 55.",
    "What is 7 * 8? 7 * 8 = 56",
    "Calculate 2 + 3 * 4.\n\nTo solve this, we first multiply 3 by 4 to get 12, then add 2.",
    "Find x if 2x + 4 = 10.\n\nStep 1: Subtract 4 from both sides.",
    "How many ways can 5 books be arranged on a shelf?\n\nLet's calculate: 5! = 120 ways.",
    "A square has side 4. What is its area?\nTherefore, the area is 16.",
    "What is the product of 6 and 9? We can use multiplication: the product is 54.",
]

# Data stated before the question, or words that only resemble a solution: valid.
NOT_WORKED = [
    "The sum of two numbers is 55 and their difference is 5. What are the numbers?",
    "A bag holds 3 red and 5 blue marbles; the total is 8. What is the probability of drawing red?",
    "What is the value of x? Express your answer as a common fraction.",
    "First, Tom buys 3 pens. Then he buys 4 more. How many pens does he have?",
    "So far, Anna has read 40 pages of a 100-page book. What percent has she read?",
]


@pytest.mark.parametrize("response,problem,removed", WRAPPED)
def test_the_problem_is_extracted_from_its_wrapping_and_kept(response, problem, removed):
    assert extract_problem(response).text == problem
    assert extract_problem(response).removed == removed
    read = read_problem(response, False, CoachSettings())
    assert (read.text, read.reject_reason, read.extracted) == (problem, None, removed)


@pytest.mark.parametrize("text", UNWRAPPED)
def test_problems_that_resemble_wrapping_are_left_whole(text):
    assert extract_problem(text) == extract_problem(text).__class__(text, ())
    assert read_problem(text, False, CoachSettings()).reject_reason is None


@pytest.mark.parametrize(
    "response",
    [
        "Sure, here's a valid math problem:",
        "Certainly! Here is a problem for you.\n\nI hope this helps!",
        "I hope this helps!",
    ],
)
def test_wrapping_with_no_problem_is_chatter(response):
    read = read_problem(response, False, CoachSettings())
    assert read.reject_reason == "chatter" and read.text == response.strip()  # the archive shows what was said


def test_wrapping_that_cannot_be_cut_safely_stays_chatter():
    # "Here is a sequence:" introduces data, not a problem: not cut, and the user-facing opening is rejected
    text = "Here is a sequence: 2, 4, 8, 16. What is the next term?"
    assert extract_problem(text).removed == ()
    assert read_problem(text, False, CoachSettings()).reject_reason == "chatter"


@pytest.mark.parametrize("text", REFUSALS)
def test_refusals_are_rejected_wherever_they_stand(text):
    assert is_refusal(text)
    assert find_problem_fault(text, False, CoachSettings()) == "refusal"
    assert read_problem(text, False, CoachSettings()).reject_reason == "refusal"


@pytest.mark.parametrize(
    "text",
    [
        "Tom said he was sorry 3 times a day for 5 days. How many apologies is that?",
        "I can't remember the number, but it is odd and less than 10. How many numbers fit?",
    ],
)
def test_problems_mentioning_sorry_or_cannot_are_not_refusals(text):
    assert not is_refusal(text)


@pytest.mark.parametrize("text", WORKED)
def test_worked_solutions_are_rejected(text):
    assert read_problem(text, False, CoachSettings()).reject_reason == "worked_solution"


@pytest.mark.parametrize("text", NOT_WORKED)
def test_data_before_the_question_is_not_a_worked_solution(text):
    assert not is_worked_solution(text)
    assert find_problem_fault(text, False, CoachSettings()) is None


def test_answer_headings_keep_their_reason():
    # a worked solution under an "Answer:" heading is leaks_answer (checked first, as before)
    assert find_problem_fault("What is 3 + 4?\n\nAnswer: 7", False, CoachSettings()) == "leaks_answer"


def test_without_validation_the_response_is_used_verbatim():
    # coach.validate=false is the released code: no extraction, no rejection but "empty"
    response = WRAPPED[0][0]
    read = read_problem(response, False, CoachSettings(validate=False))
    assert (read.text, read.reject_reason, read.extracted) == (response, None, ())
    assert read_problem("  ", False, CoachSettings(validate=False)).reject_reason == "empty"


def test_propose_problems_sends_the_extracted_text_and_counts_reasons_and_extractions():
    texts = [WRAPPED[0][0], WRAPPED[5][0], REFUSALS[0], WORKED[0], "Sure, here's a valid math problem:", UNWRAPPED[0]]
    problems, _, rejected = propose_problems(_Coach(texts), CoachSettings(), len(texts))
    assert [p.reject_reason for p in problems] == [None, None, "refusal", "worked_solution", "chatter", None]
    assert problems[0].text == WRAPPED[0][1] and problems[1].text == WRAPPED[5][1]
    assert [p.coach_row for p in problems] == list(range(6))
    assert rejected == Counter({"refusal": 1, "worked_solution": 1, "chatter": 1})
    extracted = Counter(kind for p in problems for kind in p.extracted)
    assert extracted == Counter({"preamble": 4, "heading": 1, "closing": 1})
    metrics = filter_metrics(1, len(texts), rejected, [], 0, 0, 0, extracted)
    assert metrics["coach/valid_frac"] == 0.5
    assert metrics["coach/rejected/refusal"] == 1 and metrics["coach/rejected/worked_solution"] == 1
    assert metrics["coach/extracted/preamble"] == 4 and metrics["coach/extracted/closing"] == 1
    assert {f"coach/rejected/{r}" for r in REJECT_REASONS} | {f"coach/extracted/{k}" for k in EXTRACTED_KINDS} <= set(
        metrics
    )


def test_the_metrics_page_defines_every_reject_reason_and_extraction_kind():
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "docs" / "metrics.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `coach/candidates`"))
    assert all(reason in row for reason in REJECT_REASONS)
    row = next(line for line in readme.splitlines() if line.startswith("| `coach/extracted/<kind>`"))
    assert all(kind in row for kind in EXTRACTED_KINDS)


# Recorded from Qwen2.5-Coder-0.5B-Instruct as Coach ("Generate a valid math problem.", T=0.9, CPU,
# 2026-12-01): 4 of the first 8 responses asked the user back instead of writing a problem; 2 passed
# as valid problems before `asks_user` existed.
ASKS_BACK = [
    "Sure! Could you please provide me with a specific math problem that you'd like me to generate?",
    "Sure! What type of math problem are you looking for?",
    "Sure, I'd be happy to generate a mathematical problem for you. Please provide the problem description so "
    "that I can create a valid one.",
    "Sure! Please provide me with a problem you'd like me to help you generate.",
    "Which kind of problems would you like? Could you give me more details?",
    # Asked back in other words (offers of help, the topic as a clause), at the start, middle or end.
    "What do you need assistance with?",
    "Could you tell me which topic you would like?",
    "Please provide more details about the problem you have in mind.",
    "Hello! How can I help you today? I can write problems in algebra or geometry.",
    "I can write a problem in algebra, geometry or number theory. Do you have a specific topic in mind?",
    "Sure. What topic would you like the problem to be about?",
    "Let me know which area of math you want, and I will write a problem for it.",
    "Happy to help. I need more information about what kind of problem you want.",
    "Is there a particular subject you would like me to focus on? For example, fractions.",
]
# Problems that talk to the solver in the same words, and stay problems.
ASKS_THE_SOLVER = [
    "A rectangle has perimeter 20 and area 24. What are its side lengths? Please provide your answer as an ordered pair.",
    "Could you tell how many positive divisors 360 has?",
    "What kind of triangle has sides 3, 4 and 5?",
    "Tom is looking for a number whose square is 144. What number is he looking for?",
    "What is the value of x if 2x + 3 = 11?",
    "Could you tell me which of the two areas is larger: a circle of radius 2 or a square of side 3?",
    "A farmer has 12 cows. What do you need to add to 12 to get 20?",
    "If the number you have in mind is doubled, it gives 10. What is the number?",
    "How can I arrange 5 books on a shelf in a row? Count the arrangements.",
]


@pytest.mark.parametrize("text", ASKS_BACK)
def test_asking_the_user_back_is_rejected(text):
    assert read_problem(text, False, CoachSettings()).reject_reason == "asks_user"


@pytest.mark.parametrize("text", ASKS_THE_SOLVER)
def test_problems_addressing_the_solver_are_not_asking_back(text):
    assert read_problem(text, False, CoachSettings()).reject_reason is None


def test_a_recorded_preamble_with_a_quoted_problem_and_closing_remark_is_extracted():
    response = (
        "Sure, here's a math problem for you:\n\n\"How many unique paths of length 5 using the characters "
        "'a', 'b', and 'c'?\"\n\nThis problem requires generating all unique sequences of length 5 that use "
        "the characters 'a', 'b', and 'c', where each character can be used only once."
    )
    read = read_problem(response, False, CoachSettings())
    assert read.reject_reason is None and read.extracted == ("preamble", "closing")
    assert read.text == "How many unique paths of length 5 using the characters 'a', 'b', and 'c'?"


def test_a_recorded_lead_in_after_talk_about_the_task_is_cut_to_the_quoted_problem():
    # Qwen2.5-Coder-0.5B-Instruct as Coach, 2026-12-01 H200 run, step 6: kept with the talk around it.
    response = (
        "Regarding problem-solving, a valid math problem should typically involve a problem that can be "
        "efficiently administered and approached from different angles. Suppose we have a problem that "
        "involves finding the square root of a given number. Here's a question:\n\n\"The square root of 49 "
        'is what?"\n\nThis question is straightforward and does not require any additional steps beyond '
        "counting the number of digits or solving it in a calculator. It also meets the criteria of being "
        "appropriate to ask someone from different angles, and it involves a straightforward and familiar "
        "problem."
    )
    read = read_problem(response, False, CoachSettings())
    assert (read.text, read.reject_reason, read.extracted) == (
        "The square root of 49 is what?",
        None,
        ("preamble", "closing"),
    )


@pytest.mark.parametrize(
    "text",
    [
        # The data before "Here is the question:" belongs to the problem: no quoted paragraph follows, nothing cut.
        "A set S has 5 elements. Here is the question: how many subsets of S have 2 elements?",
        "Ann has 3 cats and 2 dogs.\nHere is the problem:\nHow many pets does she have?",
    ],
)
def test_a_lead_in_without_a_quoted_problem_keeps_the_data_before_it(text):
    assert extract_problem(text).text == text
