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


class _Text:
    """A normalised text with what the comparisons need, computed once: its word multiset and a difflib
    matcher holding it as the second sequence (difflib indexes that one; the first is cheap to swap)."""

    def __init__(self, text: str) -> None:
        self.normalised = _normalise(text)
        self.words = _word_counts(self.normalised)
        self.size = sum(self.words.values())
        self.matcher = SequenceMatcher(None, b=self.normalised)

    def is_near(self, candidate: "_Text", similarity: float) -> bool:
        """Whether ``max(Dice overlap of the word multisets, difflib ratio of candidate vs self)`` reaches
        ``similarity``. difflib's two cheap upper bounds of the ratio (lengths, then characters) settle most
        pairs before its ratio is computed; the answer is the same as computing it for every pair."""
        shared = sum((candidate.words & self.words).values())
        if 2 * shared / max(1, candidate.size + self.size) >= similarity:
            return True
        matcher = self.matcher
        matcher.set_seq1(candidate.normalised)
        return (
            matcher.real_quick_ratio() >= similarity
            and matcher.quick_ratio() >= similarity
            and matcher.ratio() >= similarity
        )


def mark_duplicates(problems: list[Any], similarity: float, seen: Iterable[str] = ()) -> None:
    """Reject every valid problem whose text is ``similarity``-close to an earlier valid one in the list,
    or to one of ``seen``. Order-dependent: the first of a family is kept.

    Texts are compared normalised (lower case, whitespace collapsed, ``$`` dropped, numbers and number
    words → ``#``), by the larger of the difflib ratio and the Dice overlap of their word multisets,
    so that a paraphrase with its facts reordered ("Two marbles are drawn ... from a bag containing 5
    red and 3 blue marbles." vs "A bag contains 5 red marbles and 3 blue marbles. Two marbles are
    drawn ...") is a duplicate too. A Coach batch of a few hundred candidates is a few ten thousand pairs:
    each is settled by the cheapest test that can (`_Text.is_near`).

    Args:
        problems: candidates in sampling order (`cpmobius.coach.Problem`), changed in place (reason "duplicate").
        similarity: threshold in (0, 1] (``coach.duplicate_similarity``); 1 turns the check off.
        seen: texts already accepted earlier in the step (earlier filter attempts), so that a
            duplicate across attempts is caught too; they are never marked themselves.
    """
    if similarity >= 1.0:
        return
    # CPMöbius: the released code keeps near-duplicates; the word-multiset overlap and ``seen`` are ours.
    kept = [_Text(text) for text in seen]
    for problem in problems:
        if not problem.valid:
            continue
        candidate = _Text(problem.text)
        if any(other.is_near(candidate, similarity) for other in kept):
            problem.reject_reason = "duplicate"
        else:
            kept.append(candidate)
