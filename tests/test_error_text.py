"""`cpmobius.error_text.first_line`: the one line every message quotes of an error."""

import pytest

from cpmobius.engine.sharing import describe_ray_start_error
from cpmobius.error_text import first_line


@pytest.mark.parametrize(
    ("error", "limit", "line"),
    [
        (ValueError("bad value\n  detail"), None, "bad value"),
        (ValueError("\n\n  bad value  \nmore"), None, "bad value"),  # blank lines first
        (ValueError(), None, "ValueError"),  # no text: its type, where splitlines()[0] raised IndexError
        (KeyError(""), None, "''"),
        ("", None, "no message"),
        ("a long line", 6, "a long"),
    ],
)
def test_the_first_non_empty_line_or_the_errors_type(error, limit, line):
    assert first_line(error, limit) == line


def test_a_ray_start_error_without_text_still_gives_its_line():
    assert describe_ray_start_error(RuntimeError()).startswith("Ray did not start (RuntimeError: no message)")
