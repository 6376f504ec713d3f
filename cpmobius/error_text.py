"""One line naming an error, for messages that quote the error they stopped on (a leaf: standard library only).

Every message of the project that cites an exception's text takes its first non-empty line here, so an
exception whose text is empty (``ValueError()``) or starts with blank lines still gives a line, where
``str(error).splitlines()[0]`` raised IndexError inside the error handling itself.
"""

from __future__ import annotations


def first_line(error: BaseException | str, limit: int | None = None) -> str:
    """The first non-empty line of an error's text, stripped, at most ``limit`` characters; the exception's type
    name when its text has none (a string with no text gives ``"no message"``).

    >>> first_line(ValueError("bad value\\n  detail"))
    'bad value'
    >>> first_line(ValueError())
    'ValueError'
    """
    text = error if isinstance(error, str) else str(error)
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), None)
    if line is None:
        line = "no message" if isinstance(error, str) else type(error).__name__
    return line if limit is None else line[:limit]
