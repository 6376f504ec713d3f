"""Stage 1, Coach generation: coach prompt → coach rollouts → parsed, validated `Problem`s.

Paper §3 / released `_generate_instructions`: the Coach answers one fixed user message
("Generate a valid math problem.") in its own chat template; its whole response is the problem.

Departures from the released code (`# CPMöbius:` below): each candidate is validated (the released
code sends any text, even an empty, answer-leaking or figure-dependent one, to the Player) and
near-duplicates of an earlier candidate in the same batch, or of a text the caller has already
accepted this step (``seen``), are dropped (reordered paraphrases included). Rejected
candidates never reach the Player and never carry a Coach reward; their reasons are counted. A chat
model's preamble ("Sure, here's a valid math problem:"), problem heading and closing remark ("I hope
this helps!") are cut off before validation (`cpmobius.coach_text.extract_problem`; counted as
``coach/extracted/<kind>``), and the Player and the problem archive get the problem that remains;
refusals and problems followed by their own solution are rejected (a real chat Coach wrote both). A response far longer
than a problem may be (``coach.max_problem_chars`` + `WRAPPING_CHARS`) is "over_long" before any
of this, and every pattern runs in linear time, so that the validator's cost stays bounded.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from cpmobius.coach_exploits import (
    has_random_answer,
    has_several_questions,
    instructs_solver,
    is_not_math,
    is_undetermined,
    leaks_answer_in_format,
    points_at_missing_problem,
)
from cpmobius.coach_figures import needs_figure
from cpmobius.coach_text import LINE_START, asks_user, extract_problem, is_refusal, is_worked_solution
from cpmobius.duplicates import mark_duplicates
from cpmobius.policy_api import TrainedPolicy
from cpmobius.prompts import PlayerPrompt, coach_prompt
from cpmobius.settings import CoachSettings

# Why a candidate was rejected; each is counted as coach/rejected/<reason>.
REJECT_REASONS = (
    "empty",
    "truncated",
    "refusal",
    "asks_user",
    "over_long",
    "no_question",
    "chatter",
    "several_problems",
    "leaks_answer",
    "instructs_solver",
    "worked_solution",
    "needs_figure",
    "random_answer",
    "not_math",
    "undetermined",
    "duplicate",
    "prompt_too_long",
    "off_world",
)
# What a chat Coach wraps its problem in, cut off before validation; each counted as coach/extracted/<kind>.
EXTRACTED_KINDS = ("preamble", "heading", "closing")

_QUESTION_WORDS = re.compile(
    r"\?|\b(what|which|who|when|where|why|find|compute|calculate|determine|evaluate|solve|simplify|how many|how much|"
    r"prove|show that|express|factor|expand|rationali[sz]e|write|convert|list|estimate|approximate|count|give|state)\b",
    re.IGNORECASE,
)
_CHATTER = re.compile(
    r"^\s*(sure|certainly|of course|okay|ok|here is|here's|i can|i will|i'll|as an ai)\b|\bi hope (this|that)\b",
    re.IGNORECASE,
)
# Several problems: two numbered headings, or an enumeration with a first and a second item.
_HEADING = re.compile(
    r"(?:^|" + LINE_START + r")\s*+(?:problem|question|exercise)\s*+(?:\d+|[ivx]+)\s*+[:.)]", re.IGNORECASE
)
_ENUMERATIONS = (
    (re.compile(r"(^|\s)1[.)]\s"), re.compile(r"(^|\s)2[.)]\s")),
    (re.compile(r"(^|\s)\(a\)\s", re.IGNORECASE), re.compile(r"(^|\s)\(b\)\s", re.IGNORECASE)),
)
# A leaked answer (the problem states its answer): a box with content ("\boxed{51}", "\boxed 51"); an Answer/Solution
# heading on its own line ("### Answer", "**Solution:**"); or, opening a line, a sentence or a bracket,
# an answer label followed by a value: "Answer: 51", "(Answer: 51)", "**Answer**: 51", "\textbf{Answer:}
# 51", "Ans. 51", "Final answer = 51", "Solution: $x = 3$", "Expected output: 51", "the answer is 51".
# Mid-sentence uses ("a 20% acid solution: 3 liters", "each correct answer = 4 points"), labels followed
# by words ("Answer the following question:", "The answer is a positive integer", "The solution is 10%
# salt") and the empty format instruction "\boxed{}" are not leaks.
_LABEL_START = r"(?:^|(?<=[.!?])\s++|" + LINE_START + r"|[(\[]\s*+)"
_LABEL = r"(?:#{1,6}\s*+|\*\*|__|\\text(?:bf|it)?\{)?(?:the\s+)?(?:(?:final|correct|expected)\s+)?"
_LEAK_VALUE = r"\s*+(?:\*\*|__|\})?\s*+(?:\$|\\[(\[]|\\(?:d?frac|sqrt)\b|[-+(]?\d|[a-z]\s*+=)"
_LEAK = re.compile(
    r"\\(?:boxed|fbox)\s*+(?:\{\s*+[^}\s]|[^{\s])"
    r"|(?:^|"
    + LINE_START
    + r")(?:#+[^\S\n]*+|\*\*)?(?:final\s+)?(?:answer|solution)\b[^\S\n]*+(?:\*\*)?[^\S\n]*+(?:[:.=]|\n|$)"
    r"|" + _LABEL_START + _LABEL + r"(?:answer|ans|solution|result|output)\b(?:\*\*|__|\})?[^\S\n]*+"
    r"(?:[:=\u2014\u2013\uff1a]|-(?=\s)|\.(?=[^\S\n]))"
    + _LEAK_VALUE
    + r"|"
    + _LABEL_START
    + _LABEL
    + r"answer\s+is"
    + _LEAK_VALUE
    # right after the question, the bare label and a value ("What is 17 × 3? Answer 51"), and a question-and-
    # answer pair ("Q: What is 17 × 3? A: 51"; options "A: 51, B: 52" without a leading "Q:" are not this)
    + r"|(?<=\?)\s*+(?:answer|ans)\b[^\S\n]++"
    + _LEAK_VALUE
    + r"|^\W{0,3}q\s*+[:.][^?]*+\?\s*+a\s*+[:.]"
    + _LEAK_VALUE,
    re.IGNORECASE,
)


def _several_problems(text: str) -> bool:
    if len(_HEADING.findall(text)) >= 2 or has_several_questions(text):
        return True
    return any(first.search(text) and second.search(text) for first, second in _ENUMERATIONS)


@dataclass
class Problem:
    """One Coach proposal.

    Attributes:
        text: the problem as the Player will see it: the stripped Coach response, with its preamble,
            heading and closing remark cut off (`cpmobius.coach_text.extract_problem`) when
            ``coach.validate`` is on.
        coach_row: row of this proposal in the Coach rollout batch of its attempt.
        reject_reason: None for a valid problem, else one of `REJECT_REASONS`.
        response_tokens: length of the Coach response in tokens.
        extracted: what was cut off the response, each of `EXTRACTED_KINDS`.
    """

    text: str
    coach_row: int
    reject_reason: Optional[str] = None
    response_tokens: int = 0
    extracted: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        return self.reject_reason is None

    def archive_row(
        self, step: int, attempt: Optional[int], outcome: Any = None, label_correct: Optional[bool] = None
    ) -> dict:
        """This proposal's row in the run's problem archive (``problems/step_*.jsonl``, docs/metrics.md).

        Args:
            step: the loop step (1-based); attempt: the filter attempt that used it (None: never rolled out).
            outcome: its group's `cpmobius.difficulty_filter.GroupOutcome`, when the Player rolled it out.
            label_correct: whether the pseudo-label is the true answer (None: unknown).
        """
        row = {
            "step": step,
            "attempt": attempt,
            "text": self.text,
            "valid": self.valid,
            "reject_reason": self.reject_reason,
            "extracted": list(self.extracted),
        }
        if outcome is not None:
            row.update(
                pass_rate=outcome.pass_rate,
                pseudo_label=outcome.pseudo_label,
                kept=outcome.kept,
                drop_reason=outcome.drop_reason,
                pseudo_label_correct=label_correct,
            )
        return row


# CPMöbius: a response longer than this many characters beyond ``coach.max_problem_chars`` is "over_long"
# before its wrapping is cut: no preamble or closing remark is that long, and the validator's cost then
# stays bounded whatever the Coach writes (a 20,000-newline response used to take 86 s).
WRAPPING_CHARS = 2000


def find_problem_fault(text: str, truncated: bool, settings: CoachSettings) -> Optional[str]:
    """Why ``text`` is not a usable problem, or None.

    Args:
        text: the Coach response, decoded without special tokens.
        truncated: the response stopped at the length limit (it never finished).
        settings: thresholds.

    Returns:
        One of "empty", "truncated", "refusal" (`cpmobius.coach_text.is_refusal`: "I'm sorry, but as an
        AI ..."), "asks_user" (`cpmobius.coach_text.asks_user`: "What type of math problem are you
        looking for?"), "over_long", "leaks_answer" (a problem that states or boxes its own answer, labelled
        or in a machine format: `cpmobius.coach_exploits.leaks_answer_in_format`), "instructs_solver"
        (`cpmobius.coach_exploits.instructs_solver`: "Ignore all previous instructions."), "worked_solution"
        (`cpmobius.coach_text.is_worked_solution`: the problem followed by its solution), "chatter",
        "several_problems", "needs_figure" (`needs_figure`: it depends on a figure the Player never sees),
        "no_question" (no question, or one about a problem the text does not hold:
        `cpmobius.coach_exploits.points_at_missing_problem`), "random_answer"
        (`cpmobius.coach_exploits.has_random_answer`: "Roll a die. What does it show?"), "not_math"
        (`cpmobius.coach_exploits.is_not_math`), "undetermined"
        (`cpmobius.coach_exploits.is_undetermined`: "What is x + y?"), or None. The first
        that applies, in this order (one reason per candidate).
    """
    # CPMöbius: a full-width question mark ends a question as "?" does (it was "no_question").
    stripped = text.strip().replace("\uff1f", "?")
    if not stripped:
        return "empty"
    if truncated:
        return "truncated"
    if is_refusal(stripped):
        # CPMöbius: from a real chat Coach, a refusal ending with "?" passed as a problem and cost n rollouts.
        return "refusal"
    if asks_user(stripped):
        # CPMöbius: "What type of math problem are you looking for?" is a question, not a problem.
        return "asks_user"
    if len(stripped) > settings.max_problem_chars:
        return "over_long"
    if _LEAK.search(stripped) or leaks_answer_in_format(stripped):
        return "leaks_answer"
    if instructs_solver(stripped):
        # CPMöbius: text aimed at the Player or its grader ("Reply with only 42") buys agreement, not a problem.
        return "instructs_solver"
    if is_worked_solution(stripped):
        return "worked_solution"
    if _CHATTER.search(stripped):
        return "chatter"
    if _several_problems(stripped):
        return "several_problems"
    if needs_figure(stripped):
        # CPMöbius: the Player sees text only; a problem about a picture it never sees has no answer.
        return "needs_figure"
    if not _QUESTION_WORDS.search(stripped) or points_at_missing_problem(stripped):
        # CPMöbius: "Can you solve this equation?" asks about a problem it never states.
        return "no_question"
    # CPMöbius: a chance answer, a non-mathematical question or an open one lands in the band by construction
    # (the Player's answers scatter), so the Coach would be paid for noise labels.
    if has_random_answer(stripped):
        return "random_answer"
    if is_not_math(stripped):
        return "not_math"
    if is_undetermined(stripped):
        return "undetermined"
    return None


def read_problem(response: str, truncated: bool, settings: CoachSettings) -> Problem:
    """One Coach response → its problem text and verdict (row 0; the caller sets ``coach_row``).

    With ``settings.validate`` the chat wrapping is cut off first (`extract_problem`) and the rest
    is judged by `find_problem_fault`; a refusal is judged on the whole response, and a response
    that was wrapping only (nothing left once it is cut) is "chatter". Without it the response is
    used verbatim, as the released code does, and only an empty one is rejected.

    A response longer than ``settings.max_problem_chars + WRAPPING_CHARS`` (stripped) that is not
    empty, truncated, a refusal or a question to the user is "over_long" at once, uncut.

    Args:
        response: the Coach response, decoded without special tokens.
        truncated: the response stopped at the length limit.
        settings: the coach settings.
    """
    text = response.strip()
    if not settings.validate:
        return Problem(text=text, coach_row=0, reject_reason=None if text else "empty")
    # CPMöbius: the released code uses every Coach response verbatim.
    reason = find_problem_fault(text, truncated, settings)
    if reason == "over_long" and len(text) > settings.max_problem_chars + WRAPPING_CHARS:
        return Problem(text=text, coach_row=0, reject_reason=reason)
    extraction = extract_problem(text)
    if reason not in (
        "empty",
        "truncated",
        "refusal",
        "asks_user",
    ):  # the rest is judged on the problem, not its wrapping
        reason = find_problem_fault(extraction.text, False, settings) if extraction.text else "chatter"
    return Problem(text=extraction.text or text, coach_row=0, reject_reason=reason, extracted=extraction.removed)


def propose_problems(
    coach: TrainedPolicy, settings: CoachSettings, count: int, seen: Iterable[str] = ()
) -> tuple[list[Problem], Any, Counter]:
    """Sample ``count`` candidate problems from the Coach and validate them.

    Args:
        coach: the Coach `Policy`, active.
        settings: the coach settings.
        count: number of candidates.
        seen: problem texts already accepted earlier in the step; a near-duplicate of one is "duplicate"
            (`mark_duplicates`).

    Returns:
        ``(problems, coach_batch, rejected)``: every candidate (valid or not) in sampling order,
        the Coach rollout `DataProto` (one row per candidate, ``problems[i].coach_row == i``), and
        the count of each rejection reason.
    """
    batch = coach.generate([coach_prompt(settings.instruction)] * count, n=1)
    texts, truncated = coach.decode_responses(batch)  # the one decode path of every policy's rollouts
    problems = []
    for row, (text, cut) in enumerate(zip(texts, truncated)):
        problem = read_problem(text, truncated=cut, settings=settings)
        problem.coach_row, problem.response_tokens = row, int(batch.batch["response_mask"][row].sum())
        problems.append(problem)
    # CPMöbius: near-duplicates in one batch, or of ``seen``, are dropped; the released code keeps them.
    mark_duplicates(problems, settings.duplicate_similarity, seen)
    rejected = Counter(p.reject_reason for p in problems if not p.valid)
    return problems, batch, rejected


def reject_unfit_prompts(problems: list[Problem], player: TrainedPolicy, prompt: PlayerPrompt) -> int:
    """Reject valid problems whose rendered Player prompt has more tokens than the Player accepts.

    # CPMöbius: verl would cut such a prompt from the left (losing the system turn and the start of
    the problem) and the Player would be trained on a problem it never saw whole; the released code
    does that. Applied whether or not ``coach.validate`` is on, since it is about the Player's
    context, not the Coach's format; ``coach.max_problem_chars`` bounds characters, this bounds tokens.

    Args:
        problems: candidates; valid ones whose prompt does not fit get reason "prompt_too_long".
        player: the Player `Policy` (``count_prompt_tokens``, ``max_prompt_tokens``).
        prompt: the Player's prompt (`cpmobius.prompts.PlayerPrompt`).

    Returns:
        the number of problems rejected here.
    """
    valid = [p for p in problems if p.valid]
    if not valid:
        return 0
    rejected = 0
    for problem, fits in zip(valid, prompt.fits(player, [p.text for p in valid])):
        if not fits:
            problem.reject_reason = "prompt_too_long"
            rejected += 1
    return rejected


def reject_off_world(problems: list[Problem], difficulty_of: Optional[Callable[[str], Optional[int]]]) -> int:
    """Mark the valid candidates that the world cannot read as one of its problems "off_world"
    (``coach.world_problems_only``; the toy world: `cpmobius.toy.world.problem_difficulty`).

    Args:
        problems: the candidates of one Coach batch, changed in place.
        difficulty_of: problem text → the world's level, or None for text that is no problem of the world.

    Returns:
        The number of candidates rejected here.

    Raises:
        ValueError: ``difficulty_of`` is None (the world defines no problems).
    """
    # CPMöbius: not in the paper or the released code. A toy Coach updated at 10x the toy's learning rate
    # drifts to such text (0.11 -> 0.69 of its problems in 15 steps, docs/toy.md, "The ablation table in
    # miniature"): the Player answers it inconsistently, so the filter keeps it and Δt rewards it, yet it
    # has no true answer and teaches nothing the validation set measures.
    if difficulty_of is None:
        raise ValueError("coach.world_problems_only needs a world that defines its problems (validation.dataset=toy)")
    rejected = 0
    for problem in problems:
        if problem.valid and difficulty_of(problem.text) is None:
            problem.reject_reason = "off_world"
            rejected += 1
    return rejected
