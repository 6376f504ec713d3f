"""Coach-output validator: a problem about a figure the Player never sees.

`cpmobius.coach.needs_figure` (reason "needs_figure") in `find_problem_fault`, so the same check
runs in the loop (`propose_problems`, metric `coach/rejected/needs_figure`) and in the warm-up data
selection (`cpmobius.warmup_data.filter_problems`, drop `coach_validator/needs_figure`).
"""

from __future__ import annotations

from collections import Counter

import pytest

from cpmobius.coach import REJECT_REASONS, find_problem_fault, needs_figure, propose_problems
from cpmobius.metrics import filter_metrics
from cpmobius.settings import CoachSettings
from cpmobius.warmup.data import filter_problems
from cpmobius.warmup.sources import OverlapIndex, normalise_whitespace

NEEDS_FIGURE = [
    "As shown in the figure, ABCD is a square with side 2. Find the area of triangle ABE.",
    "In the diagram below, AB = AC. What is the measure of angle B?",
    "See Figure 2. What is the perimeter of the shaded region?",
    "Find x in Fig. 3.",
    "As shown in Figure 1, the quadrilateral ABCD is inscribed in a circle. Find angle A.",
    "The graph shown is the graph of y = f(x). How many zeros does f have?",
    "The pie chart shown represents a budget. What percent is spent on food?",
    "In the figure, ABCD is a rectangle. Find BD.",
    "How many triangles are in the figure?",
    "The diagram below shows a circle of radius 3. Find the shaded area.",
    "The following figure consists of 5 unit squares. What is its perimeter?",
    "The figure on the right is made of unit cubes. How many cubes are there?",
    "Refer to the accompanying diagram. Find x.",
    "In the adjoining figure, find angle x.",
    "As in the figure, find the length of AE.",
    "From the graph, determine the maximum value of f.",
    "Points A, B and C are placed as shown below. Find the area of triangle ABC.",
    "Look at the picture. How many circles are there?",
    "The grid below is filled with numbers. What is the sum of the diagonal?",
    "Using the table below, find the mean score.",
    "The table below gives the number of students in each class. How many students are there?",
    "<image> Find the value of x.",
    "![triangle](triangle.png) Find the area of the triangle.",
    "In the diagram below, AB = AC. What is angle B? [The figure is not drawn to scale.]",
]

NOT_A_FIGURE = [
    "A figure skating judge awards the scores 5, 6 and 7. What is the mean score?",
    "What is the largest four-digit figure divisible by 7?",
    "Round 3.14159 to three significant figures. What do you get?",
    "Find the area of the figure formed by the lines y = x, y = -x and y = 3.",
    "Sketch the graph of y = x^2 - 4 and find where it crosses the x-axis.",
    "Look at the graph of y = |x - 2|. For which x does it reach its minimum?",
    "A graph has 10 vertices and 15 edges. What is the sum of the degrees of the graph?",
    "Find the area of the part of the graph below the x-axis for y = x^2 - 1.",
    "A 4 x 4 grid of points is given. How many squares have all four vertices on the grid?",
    "Points are marked on the grid of a 5 by 5 board. How many points are there?",
    "There are 5 coins on the table. How many ways can 2 of them be chosen?",
    "Eight people sit around a round table. In how many ways can they be seated?",
    "What is the image of the point (1, 2) under reflection in the line y = x?",
    "A rectangular picture 8 by 10 inches has a frame 1 inch wide. What is the area of the frame?",
    "What is the place value of figure 5 in 3,512?",
    "What is the probability that a point chosen in the unit square lies above the line y = x?",
    "Each selfie has two or three students in the picture. What is the least number of selfies?",  # OlympiadBench
]

# The figure or the table is in the text: kept (MATH's problems carry Asymptote code).
FIGURE_IN_TEXT = [
    'In the diagram below, AB = AC.\n[asy]\ndraw((0,0)--(1,2)--(2,0)--cycle);\nlabel("$A$",(1,2),N);\n[/asy]\n'
    "If angle A is 40 degrees, what is angle B?",
    "As shown in the figure, find the side of the square.\n\\begin{tikzpicture}\\draw (0,0) rectangle (2,2);\\end{tikzpicture}",
    "The table below shows the scores.\n| name | score |\n|---|---|\n| Ann | 3 |\n| Bob | 5 |\nWhat is the total score?",
    "Using the table below, find the mean.\n\\begin{tabular}{c|c} x & 1 \\\\ y & 2 \\end{tabular}",
    # MATH-500: a grid drawn in Asymptote
    "A set of three points is chosen randomly from the grid shown. What is the probability that the points lie on "
    "the same straight line?\n\n[asy]\nsize(50);\nfor (int i=0; i<3; ++i) {\nfor (int j=0; j<3; ++j) {\ndot((i,j));};}\n[/asy]",
    # AIME 2024 I #3: the grid is an array in the text
    "Find the number of ways to fill a 2x3 grid with digits. The grid below is an example of such an arrangement. "
    "\\[\\begin{array}{|c|c|c|} \\hline 0 & 0 & 8 \\\\ \\hline 9 & 9 & 1 \\\\ \\hline \\end{array}\\]",
]


@pytest.mark.parametrize("text", NEEDS_FIGURE)
def test_figure_dependent_problems_are_rejected(text):
    assert needs_figure(text)
    assert find_problem_fault(text, False, CoachSettings()) == "needs_figure"


@pytest.mark.parametrize("text", NOT_A_FIGURE)
def test_figure_words_that_are_text_are_kept(text):
    assert not needs_figure(text)
    assert find_problem_fault(text, False, CoachSettings()) is None


def test_figure_out_is_not_a_figure():
    assert not needs_figure("Figure out the number of ways to arrange 5 books on a shelf.")


@pytest.mark.parametrize("text", FIGURE_IN_TEXT)
def test_figure_given_in_the_text_is_kept(text):
    assert not needs_figure(text)
    assert find_problem_fault(text, False, CoachSettings()) is None


def test_a_table_does_not_stand_for_a_missing_figure():
    text = "As shown in the figure, the table lists heights.\n| a | b |\n|---|---|\n| 1 | 2 |\nFind the mean height."
    assert needs_figure(text)


def test_earlier_faults_keep_their_reason():
    # one reason per problem, in find_problem_fault's order: leaks_answer comes first
    text = "As shown in the figure, compute the area. Answer: 4"
    assert find_problem_fault(text, False, CoachSettings()) == "leaks_answer"
    assert find_problem_fault("As shown in the figure, find x.", True, CoachSettings()) == "truncated"


# ----------------------------------------------------------------------------- in the loop


def test_propose_problems_counts_needs_figure_and_logs_its_metric(scripted_coach):
    texts = [NEEDS_FIGURE[0], NOT_A_FIGURE[0], NEEDS_FIGURE[1], FIGURE_IN_TEXT[0]]
    problems, _, rejected = propose_problems(scripted_coach(texts), CoachSettings(), len(texts))
    assert [p.reject_reason for p in problems] == ["needs_figure", None, "needs_figure", None]
    assert rejected == Counter({"needs_figure": 2})
    assert "needs_figure" in REJECT_REASONS
    metrics = filter_metrics(1, len(texts), rejected, [], 0, 0, 0)
    assert metrics["coach/rejected/needs_figure"] == 2 and metrics["coach/valid_frac"] == 0.5


# ----------------------------------------------------------------------------- in the warm-up data


def _row(problem: str) -> dict:
    return {
        "data_source": "numina_cn_k12",
        "ability": "math",
        "prompt": [
            {"role": "user", "content": problem + "\n\nPresent the answer in LaTex format: \\boxed{Your answer}"}
        ],
    }


def test_warmup_selection_drops_figure_problems_with_the_same_reason():
    problems = NEEDS_FIGURE[:3] + NOT_A_FIGURE[:2] + FIGURE_IN_TEXT[:1]
    report = filter_problems([_row(p) for p in problems], OverlapIndex([]), min_chars=10)
    assert report.drops == Counter({"coach_validator/needs_figure": 3})
    assert [c.problem for c in report.pool] == [normalise_whitespace(p) for p in problems[3:]]
    # the validator switch governs it, as `coach.validate` does in the loop
    report = filter_problems([_row(p) for p in problems], OverlapIndex([]), min_chars=10, coach_validate=False)
    assert not report.drops and len(report.pool) == len(problems)
