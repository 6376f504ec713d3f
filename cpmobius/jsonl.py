"""JSON-lines reading shared by every reader in the project (benchmarks, validation sets, completion
files, warm-up sources, the grader's command line): one place decides what a malformed line is; and
the one whole-file writer."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping


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


class _DuplicateKey(ValueError):
    """A key that appears twice in one JSON object (raised by `_unique_keys`)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: the object, refusing a key given twice."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def json_objects(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line; line numbers count blank lines too.

    Raises:
        JSONLineError: a line that is not valid JSON (a key twice in one object included: JSON would keep the last
            without a word), nested too deeply or holding an integer too long to read, or valid JSON that is not an
            object.
    """
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as error:
            raise JSONLineError(line_no, f"not valid JSON ({error.msg})") from None
        except _DuplicateKey as error:  # {"gold": "2", ..., "gold": "3"}: json keeps the last one without a word
            raise JSONLineError(line_no, f"the key {error.args[0]!r} appears twice in one object") from None
        except RecursionError:  # [[[[...]]]] thousands deep: the parser's recursion, not a traceback
            raise JSONLineError(line_no, "JSON nested too deeply to read") from None
        except ValueError as error:  # an integer of over 4,300 digits (Python's limit on int from text)
            raise JSONLineError(line_no, f"not readable JSON ({str(error).split(';')[0]})") from None
        if not isinstance(value, dict):
            raise JSONLineError(line_no, f"expected a JSON object, got {type(value).__name__}")
        yield line_no, value


def decode_lines(raw: bytes) -> list[str]:
    """UTF-8 bytes as text lines, split on ``"\\n"`` alone (`str.splitlines` also splits inside JSON strings, at
    U+2028 or U+0085; a ``"\\r"`` before the newline is JSON white space). A leading byte-order mark (as some
    editors write) is dropped.

    Raises:
        JSONLineError: the bytes are not UTF-8 (UTF-16, Latin-1): the line of the first bad byte, and the byte.
    """
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    if raw.startswith(b"\x1f\x8b"):  # gzip's magic number: a compressed file under a plain name
        raise JSONLineError(1, "gzip-compressed bytes, not text (a .gz file under another name?)")
    try:
        return raw.decode("utf-8").split("\n")
    except UnicodeDecodeError as error:
        line_no = raw.count(b"\n", 0, error.start) + 1
        raise JSONLineError(line_no, f"not UTF-8 text (byte {raw[error.start]:#04x})") from None


def read_json_lines(path: str | os.PathLike) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of a UTF-8 JSON-lines file (`decode_lines`,
    `json_objects`), whatever the locale's encoding.

    Raises:
        OSError: the file cannot be read.
        JSONLineError: a line that is not a JSON object, or bytes that are not UTF-8.
    """
    return list(json_objects(decode_lines(Path(path).read_bytes())))


def write_jsonl(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``rows`` as UTF-8 JSON lines (non-ASCII kept as is) to ``path``, atomically: into a
    temporary file beside it, then renamed over it, so a reader never sees half a file. Creates the
    parent folder. Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    os.replace(tmp, path)
    return path
