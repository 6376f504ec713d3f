"""Placeholder answers: the canonical strings that stand for no answer (stage: grading).

`None`, `\\mathrm{N/A}`, `\\text{None.}`, `N.A.`, `[answer]`, `\\text{your answer here}`, `...`, `?`, an empty
answer: a model that writes one has given no answer, so it is never graded correct nor counted in a vote
(`cpmobius.grading.vote`, `cpmobius.grading.scoring`), and an extracted box holding one is passed over
(`cpmobius.grading.extraction`).
"""

from __future__ import annotations

import re

from cpmobius.grading.canonical import FONT, match_brace

# Placeholders after `_placeholder_key` (font wrappers, brackets, spaces, dots and backslashes gone).
_PLACEHOLDERS = frozenset(
    {
        "",
        "none",
        "null",
        "nan",
        "n/a",
        "na",
        "answer",
        "youranswer",
        "youranswerhere",
        "answerhere",
        "insertanswerhere",
        "finalanswer",
        "yourfinalanswer",
        "ldots",
        "dots",
        "cdots",
    }
)
_WRAPPED_RE = re.compile(r"^" + FONT + r"\s*\{(.*)\}$", re.S)
_PLACEHOLDER_NOISE_RE = re.compile(r"\\q?quad(?![A-Za-z])|\\[ ,;:!]|[\s.~\\]")


def _placeholder_key(canon: str) -> str:
    """`canon` without font wrappers (`\\mathrm{..}`, `\\emph{..}`, ...), `[..]` / `<..>` brackets,
    spaces, dots and backslashes, lower-cased: `\\mathrm{N.A.}` → `na`."""
    c = canon.strip()
    while True:
        m = _WRAPPED_RE.match(c)
        if m and match_brace(c, c.index("{")) == len(c):
            c = m.group(1).strip()
        elif len(c) > 2 and c[0] + c[-1] in ("[]", "<>"):
            c = c[1:-1].strip()
        else:
            return _PLACEHOLDER_NOISE_RE.sub("", c).lower()


def is_placeholder(canon: str) -> bool:
    """Whether a canonical answer is a placeholder (`None`, `\\mathrm{N/A}`, `\\text{None.}`, `N.A.`,
    `[answer]`, `\\text{your answer here}`, `...`, `?`, empty or only spaces): no answer."""
    key = _placeholder_key(canon)
    return key in _PLACEHOLDERS or not key.strip("?")
