"""Stage 1, Coach generation: coach prompt → coach rollouts → parsed, validated `Problem`s.

Paper §3 / released `_generate_instructions`: the Coach answers one fixed user message
("Generate a valid math problem.") in its own chat template; its whole response is the problem.

Departures from the released code (`# CPMöbius:` below): each candidate is validated (the released
code sends any text, even an empty or answer-leaking one, to the Player) and near-duplicates of an
earlier candidate in the same batch are dropped (public case BR-37). Rejected candidates never reach
the Player and never carry a Coach reward; their reasons are counted.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any, Optional

from cpmobius.prompts import coach_prompt, player_prompt
from cpmobius.settings import CoachSettings

# Why a candidate was rejected; each is counted as coach/rejected/<reason>.
REJECT_REASONS = (
    "empty", "truncated", "over_long", "no_question", "chatter", "several_problems", "leaks_answer", "duplicate",
    "prompt_too_long",
)

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
_HEADING = re.compile(r"(^|\n)\s*(problem|question|exercise)\s*(\d+|[ivx]+)\s*[:.)]", re.IGNORECASE)
_ENUMERATIONS = (
    (re.compile(r"(^|\s)1[.)]\s"), re.compile(r"(^|\s)2[.)]\s")),
    (re.compile(r"(^|\s)\(a\)\s", re.IGNORECASE), re.compile(r"(^|\s)\(b\)\s", re.IGNORECASE)),
)
# A leaked answer: a non-empty box, an Answer/Solution heading on its own line, or "answer is <value>"
# opening a sentence. Mid-sentence uses ("a 20% acid solution: 3 liters", "each correct answer = 4
# points", "the answer is a positive integer") and the empty format instruction "\boxed{}" are not leaks.
_LEAK = re.compile(
    r"\\(boxed|fbox)\s*\{\s*[^}\s]"
    r"|(^|\n)\s*(#+\s*|\*\*)?(final\s+)?(answer|solution)\b\s*(\*\*)?\s*([:.=]|\n|$)"
    r"|(^|[.!?]\s+|\n)\s*(the\s+)?(final\s+)?(answer|result)\s*(is|[:=])\s*\$?\s*[-+(\\\d]",
    re.IGNORECASE,
)


def _several_problems(text: str) -> bool:
    if len(_HEADING.findall(text)) >= 2:
        return True
    return any(first.search(text) and second.search(text) for first, second in _ENUMERATIONS)


@dataclass
class Problem:
    """One Coach proposal.

    Attributes:
        text: the problem as the Player will see it (stripped Coach response).
        coach_row: row of this proposal in the Coach rollout batch of its attempt.
        reject_reason: None for a valid problem, else one of `REJECT_REASONS`.
        response_tokens: length of the Coach response in tokens.
    """

    text: str
    coach_row: int
    reject_reason: Optional[str] = None
    response_tokens: int = 0

    @property
    def valid(self) -> bool:
        return self.reject_reason is None


def find_problem_fault(text: str, truncated: bool, settings: CoachSettings) -> Optional[str]:
    """Why ``text`` is not a usable problem, or None.

    Args:
        text: the Coach response, decoded without special tokens.
        truncated: the response stopped at the length limit (it never finished).
        settings: thresholds.

    Returns:
        One of "empty", "truncated", "over_long", "no_question", "chatter", "several_problems",
        "leaks_answer" (public case BR-40: a problem that states or boxes its own answer), or None.
    """
    stripped = text.strip()
    if not stripped:
        return "empty"
    if truncated:
        return "truncated"
    if len(stripped) > settings.max_problem_chars:
        return "over_long"
    if _LEAK.search(stripped):
        return "leaks_answer"
    if _CHATTER.search(stripped):
        return "chatter"
    if _several_problems(stripped):
        return "several_problems"
    if not _QUESTION_WORDS.search(stripped):
        return "no_question"
    return None


def _normalise(text: str) -> str:
    return re.sub(r"\d+", "#", re.sub(r"\s+", " ", text.lower())).strip()


def mark_duplicates(problems: list[Problem], similarity: float) -> None:
    """Reject every valid problem whose normalised text (digits → #) is ``similarity``-close to an
    earlier valid one in the list (difflib ratio). Order-dependent: the first of a family is kept.
    """
    if similarity >= 1.0:
        return
    kept: list[str] = []
    for problem in problems:
        if not problem.valid:
            continue
        normalised = _normalise(problem.text)
        if any(SequenceMatcher(None, normalised, other).ratio() >= similarity for other in kept):
            problem.reject_reason = "duplicate"
        else:
            kept.append(normalised)


def propose_problems(coach: Any, settings: CoachSettings, count: int) -> tuple[list[Problem], Any, Counter]:
    """Sample ``count`` candidate problems from the Coach and validate them.

    Args:
        coach: the Coach `Policy`, active.
        settings: the coach settings.
        count: number of candidates.

    Returns:
        ``(problems, coach_batch, rejected)``: every candidate (valid or not) in sampling order,
        the Coach rollout `DataProto` (one row per candidate, ``problems[i].coach_row == i``), and
        the count of each rejection reason.
    """
    batch = coach.generate([coach_prompt(settings.instruction)] * count, n=1)
    tokenizer, stops = coach.tokenizer, coach.stop_token_ids
    problems = []
    for row in range(count):
        mask = batch.batch["response_mask"][row].bool()
        ids = batch.batch["responses"][row][mask].tolist()
        finished = bool(ids) and ids[-1] in stops
        text = tokenizer.decode(ids, skip_special_tokens=True)
        problem = Problem(text=text.strip(), coach_row=row, response_tokens=len(ids))
        if settings.validate:
            # CPMöbius: the released code uses every Coach response verbatim.
            problem.reject_reason = find_problem_fault(text, truncated=not finished, settings=settings)
        elif not problem.text:
            problem.reject_reason = "empty"
        problems.append(problem)
    # CPMöbius: near-duplicates in one batch are dropped (BR-37); the released code keeps them.
    mark_duplicates(problems, settings.duplicate_similarity)
    rejected = Counter(p.reject_reason for p in problems if not p.valid)
    return problems, batch, rejected


def reject_unfit_prompts(problems: list[Problem], player: Any, system_prompt: Optional[str]) -> int:
    """Reject valid problems whose rendered Player prompt has more tokens than the Player accepts.

    # CPMöbius: verl would cut such a prompt from the left (losing the system turn and the start of
    the problem) and the Player would be trained on a problem it never saw whole; the released code
    does that. Applied whether or not ``coach.validate`` is on, since it is about the Player's
    context, not the Coach's format; ``coach.max_problem_chars`` bounds characters, this bounds tokens.

    Args:
        problems: candidates; valid ones whose prompt does not fit get reason "prompt_too_long".
        player: the Player `Policy` (``count_prompt_tokens``, ``max_prompt_tokens``).
        system_prompt: the Player's system turn (``player.system_prompt``).

    Returns:
        the number of problems rejected here.
    """
    valid = [p for p in problems if p.valid]
    if not valid:
        return 0
    counts = player.count_prompt_tokens([player_prompt(p.text, system_prompt) for p in valid])
    rejected = 0
    for problem, tokens in zip(valid, counts):
        if tokens > player.max_prompt_tokens:
            problem.reject_reason = "prompt_too_long"
            rejected += 1
    return rejected
