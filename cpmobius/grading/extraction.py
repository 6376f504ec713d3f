r"""Answer extraction: a response → its final `\boxed{}` answer (stage: grading).

Rules ("Extraction" in the package docstring): the last real box wins, a truncated final box is no
answer, mentions of `\boxed` in prose or code spans are not boxes, boxes joined only by
connectors form one multi-answer unless they all hold the same answer (then it is that answer),
placeholders are no answer. Extraction is linear in the response's length (one pass matches every
brace, one pass tracks code spans), so no response can stall the calling process. `released` mode
reads the body of verl's `last_boxed_only_string` instead.

Departures from the paper / released code (marked `# CPMöbius:`): a truncated final box is no
answer (never an earlier, retracted box); the same answer boxed twice in a row is one answer.
"""

from __future__ import annotations

import re

from . import released
from .canonical import brace_ends, canonicalize
from .fast_path import fast_verdict
from .placeholders import is_placeholder
from .results import check_mode

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_BOX_TOKEN_RE = re.compile(r"[^\s$]+")
_MATHY_TOKEN_RE = re.compile(r"\d|^\\|^-|^\(?[A-Za-z]\)?$")
# What may stand between two boxes that form one explicit multi-answer.
_CONNECTOR_RE = re.compile(r"(?:\s|\$|,|;|&|\band\b|\bor\b|\\quad|\\qquad|\\text\{\s*(?:and|or|,)?\s*\})*", re.I)


def _token_end(text: str, j: int, end: int, ends: dict[int, int]) -> int:
    """End of the unbraced box token text[j:end] (`\boxed \frac{7}{2}`), extended past every group it
    opens (and past the rest of the token after it); -1 if one of its groups never closes
    (`\boxed \frac{7`: truncated)."""
    i = text.find("{", j, end)
    while i >= 0:
        close = ends.get(i, end)  # an escaped "\{" is not in `ends`
        if close < 0:
            return -1
        if close > end:
            rest = _BOX_TOKEN_RE.match(text, close)
            end = rest.end() if rest else close
        i = text.find("{", i + 1, end)
    return end


def _boxes(text: str) -> list[tuple[int, int, str | None]]:
    """All real boxes of `text` in order: (start, end, body), body None when truncated."""
    out: list[tuple[int, int, str | None]] = []
    n = len(text)
    ends = brace_ends(text) if "{" in text else {}
    scanned, opened = 0, False  # an odd number of backticks on the line before text[scanned]; updated incrementally
    next_tick = next_newline = -1  # the first backtick / newline at or after the current box (cached: linear time)
    for m in _BOX_RE.finditer(text):
        newline = text.rfind("\n", scanned, m.start())
        if newline >= 0:
            scanned, opened = newline + 1, False
        opened ^= text.count("`", scanned, m.start()) % 2 == 1
        scanned = m.start()
        if opened:
            if next_tick < m.start():
                next_tick = text.find("`", m.start())
            if next_newline < m.start():
                next_newline = text.find("\n", m.start())
            # A backtick opens a code span only when a closing one follows on its line (Markdown): a lone
            # apostrophe-like backtick ("It`s") is text, and a box after it is an answer.
            if next_tick >= 0 and (next_newline < 0 or next_tick < next_newline):
                continue  # inside a `code span`: a mention, not an answer
        j = m.end()
        while j < n and text[j] in " \t\n":
            j += 1
        if j >= n:
            out.append((m.start(), n, None))  # cut off right after "\boxed"
        elif text[j] == "{":
            end = ends.get(j, -1)
            if end < 0:
                out.append((m.start(), n, None))  # cut off inside the box
            elif text[j + 1 : end - 1].strip():
                out.append((m.start(), end, text[j + 1 : end - 1].strip()))
            # an empty \boxed{} is a mention ("put it in \boxed{}")
        elif j > m.end():
            tok = _BOX_TOKEN_RE.match(text, j)
            body = tok.group(0).rstrip(".,;:") if tok else ""
            if body and _MATHY_TOKEN_RE.search(body):
                end = _token_end(text, j, j + len(body), ends)
                # CPMöbius: `\boxed \frac{7` (a group never closed) is cut off: no answer.
                out.append((m.start(), n, None) if end < 0 else (m.start(), end, text[j:end].rstrip(".,;: \t\n")))
    return out


def _extract_cpmobius(text: str) -> str | None:
    boxes = _boxes(text)
    if not boxes:
        return None
    start, _, body = boxes[-1]
    if body is None:
        # CPMöbius: a truncated final box is no answer; never fall back to an earlier box.
        return None
    parts = [body]
    k = len(boxes) - 2
    while (
        k >= 0
        and boxes[k][2] is not None
        and boxes[k][1] <= start
        and _CONNECTOR_RE.fullmatch(text, boxes[k][1], start)
    ):
        parts.append(boxes[k][2])  # type: ignore[arg-type]
        start = boxes[k][0]
        k -= 1
    if len(parts) > 1 and all(_same_answer(part, body) for part in parts[1:]):
        # CPMöbius: the final answer boxed again (`\boxed{12} \boxed{12}`) is that answer, not
        # the two-element list `12, 12` (which matched neither 12 nor its own cluster).
        return body
    return ", ".join(reversed(parts))


def _same_answer(a: str, b: str) -> bool:
    r"""Same canonical string, or equal on the in-process fast path (`\frac12` and `0.5`)."""
    ca, cb = canonicalize(a), canonicalize(b)
    return ca == cb or (bool(ca) and bool(cb) and fast_verdict(ca, cb) is True)


def extract_answer(response: str | None, mode: str = "cpmobius") -> str | None:
    r"""Extract the final answer of one response.

    Args:
        response: the response text only (never prompt + response).
        mode: "cpmobius" (rules in the package docstring) or "released" (the body of verl's
            `last_boxed_only_string`, which the released training vote uses).

    Returns:
        The raw answer string (stripped; several connected boxes joined by ", "), or None when the
        response has no (complete) final box or only a placeholder.

    Raises:
        ValueError: unknown mode.

    Source: CPMöbius released code `main_ppo.py::MajorityVoteRewardManager` (last `\boxed{}`);
    truncation and mention rules are ours (nested braces, close boxes, cut-off boxes, placeholders, leaks).
    """
    check_mode(mode)
    if not response:
        return None
    if mode == "released":
        boxed = released.last_boxed(response)
        return None if boxed is None else released.unwrap_box(boxed).strip()
    ans = _extract_cpmobius(response)
    if ans is None or is_placeholder(canonicalize(ans)):
        return None
    return ans
