"""JSON-lines reading shared by every reader in the project (benchmarks, validation sets, completion
files, warm-up sources, the grader's command line): one place decides what a malformed line is."""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator


class JSONLineError(ValueError):
    """A line that is not a JSON object.

    Attributes:
        line_no: 1-based line number.
        reason: what is wrong, without the location ("not valid JSON (...)").
    """

    def __init__(self, line_no: int, reason: str) -> None:
        super().__init__(f"line {line_no}: {reason}")
        self.line_no = line_no
        self.reason = reason


def json_objects(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line; line numbers count blank lines too.

    Raises:
        JSONLineError: a line that is not valid JSON, or valid JSON that is not an object.
    """
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise JSONLineError(line_no, f"not valid JSON ({error.msg})") from None
        if not isinstance(value, dict):
            raise JSONLineError(line_no, f"expected a JSON object, got {type(value).__name__}")
        yield line_no, value
