"""Near-duplicate Coach problems: a paraphrase of a problem already accepted this step is rejected.

Used by `cpmobius.coach.propose_problems`; the threshold is ``coach.duplicate_similarity``.
"""

from __future__ import annotations

import re
from collections import Counter
from difflib import SequenceMatcher
from typing import Any, Iterable

_NUMBER_WORDS = re.compile(
    r"\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
    r"seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand)\b"
)
_WORD = re.compile(r"[a-z]+|#|[^\sa-z#]")


def _normalise(text: str) -> str:
    text = _NUMBER_WORDS.sub("#", re.sub(r"\s+", " ", text.lower().replace("$", " ")))
    return re.sub(r"#(?:\s*#)*", "#", re.sub(r"\d+(?:[.,]\d+)*", "#", text)).strip()


def _word_counts(normalised: str) -> Counter:
    # a light stem ("contains"/"containing", "marble"/"marbles") so that a paraphrase's inflections match
    return Counter(re.sub(r"(?:ing|es|s)$", "", word) if len(word) > 4 else word for word in _WORD.findall(normalised))


def _similarity(a: tuple[str, Counter], b: tuple[str, Counter]) -> float:
    """max(difflib ratio of the normalised texts, Dice overlap of their word multisets)."""
    shared = sum((a[1] & b[1]).values())
    dice = 2 * shared / max(1, sum(a[1].values()) + sum(b[1].values()))
    return max(dice, SequenceMatcher(None, a[0], b[0]).ratio()) if dice < 1.0 else dice


def mark_duplicates(problems: list[Any], similarity: float, seen: Iterable[str] = ()) -> None:
    """Reject every valid problem whose text is ``similarity``-close to an earlier valid one in the list,
    or to one of ``seen``. Order-dependent: the first of a family is kept.

    Texts are compared normalised (lower case, whitespace collapsed, ``$`` dropped, numbers and number
    words → ``#``), by the larger of the difflib ratio and the Dice overlap of their word multisets,
    so that a paraphrase with its facts reordered ("Two marbles are drawn ... from a bag containing 5
    red and 3 blue marbles." vs "A bag contains 5 red marbles and 3 blue marbles. Two marbles are
    drawn ...") is a duplicate too.

    Args:
        problems: candidates in sampling order (`cpmobius.coach.Problem`), changed in place (reason "duplicate").
        similarity: threshold in (0, 1] (``coach.duplicate_similarity``); 1 turns the check off.
        seen: texts already accepted earlier in the step (earlier filter attempts), so that a
            duplicate across attempts is caught too; they are never marked themselves.
    """
    if similarity >= 1.0:
        return
    # CPMöbius: the released code keeps near-duplicates; the word-multiset overlap and ``seen`` are ours.
    kept = [(normalised, _word_counts(normalised)) for normalised in map(_normalise, seen)]
    for problem in problems:
        if not problem.valid:
            continue
        normalised = _normalise(problem.text)
        candidate = (normalised, _word_counts(normalised))
        if any(_similarity(candidate, other) >= similarity for other in kept):
            problem.reject_reason = "duplicate"
        else:
            kept.append(candidate)
