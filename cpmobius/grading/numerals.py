r"""Number notations for canonicalisation (`cpmobius.grading.canonical`): digit grouping, mixed numbers,
repeating decimals and clock times, each rewritten to the one spelling the comparison reads.

Departures from the released code (marked `# CPMöbius:` where they are applied): its vote compares raw
strings; here a repeating decimal `0.\overline{3}` is the rational 1/3, a mixed number `3 1/2` is 7/2,
`7:15 PM` is the time `19:15`, `\sin 30^\circ` is sin(π/6) (`trig_degrees`), two numerals with base
subscripts compare by value (`base_numeral`; math-verify drops subscripts), and a notation that reads two
ways (`12 345/678`, `3 5/2`, `0.1(6)`) raises `AmbiguousNumeral` (the caller makes it no answer).
"""

from __future__ import annotations

import re

# Clock times with a meridiem: `7:15 PM`, `7:15 p.m.`, `7:15pm`, `7:15\\text{ PM}`, `7 PM` (hours 1–12).
_TIME_RE = re.compile(
    r"(?<![\d:.])(?P<h>\d{1,2})(?::(?P<m>[0-5]\d)(?::(?P<s>[0-5]\d))?)?(?:\s|~|\\[,;: ]|\\q?quad(?![A-Za-z]))*"
    r"(?P<mer>\\(?:text|mathrm)\s*\{\s*[AaPp]\.?\s*[Mm]\.?\s*\}|[AaPp]\.?\s*[Mm](?![A-Za-z])\.?)"
)


_THOUSANDS_RE = {
    inside: re.compile(r"(?<![\d.])(\d{1,3})((?:" + sep + r"\d{3})+)(?!\d)")
    for inside, sep in ((True, r"(?:\{,\}|,\\!)\s*"), (False, r"(?:\{,\}\s*|,\\!\s*|,)"))
}


# Spacing between two digit runs: white space and LaTeX spaces (`\ `, `\,`, `~`, `\quad`, ...).
_SEP = r"(?:\s|(?<!\\)\\[,;: ]|\\q?quad(?![A-Za-z])|\\(?:enspace|thinspace)(?![A-Za-z])|~)+"
_MIXED_SLASH_RE = re.compile(
    r"(?<![\d./^_])(?<![\^_]\{)(?P<whole>\d+(?:"
    + _SEP
    + r"\d{3})*)"
    + _SEP
    + r"(?P<num>\d+)\s*/\s*(?P<den>\d+)(?![\d.])"
)
_GROUPED_RE = re.compile(r"\d{1,3}(?:" + _SEP + r"\d{3})*")
_REPEND = r"(?:\{\s*(?P<rep>\d+)\s*\}|(?P<rep1>\d))"
_OVERLINE_RE = re.compile(
    r"(?<![\d.])(?P<whole>\d*)\.(?P<fixed>\d*)\\(?:overline|bar|widebar)\s*" + _REPEND + r"(?![\d.])"
)
_DOTS_RE = re.compile(r"(?<![\d.])(?P<whole>\d*)\.(?P<digits>(?:\d|\\dot\s*(?:\{\s*\d\s*\}|\d))+)(?![\d.])")
_DOT_DIGIT_RE = re.compile(r"\\dot\s*\{?\s*(\d)\s*\}?|(\d)")
_PAREN_REPEND_RE = re.compile(r"(?<![\d.])(?P<whole>\d*)\.(?P<fixed>\d*)\((?P<rep>\d+)\)(?![\d.])")


class AmbiguousNumeral(Exception):
    """The answer reads two ways (or is malformed in a way that has no safe reading)."""


def _rational_latex(whole: str, fixed: str, rep: str) -> str:
    """`whole.fixed(rep)(rep)...` as `\\frac{p}{q}` (or an integer): the exact repeating decimal."""
    from fractions import Fraction

    value = Fraction(int(whole or "0")) + Fraction(int(fixed or "0"), 10 ** len(fixed))
    value += Fraction(int(rep), (10 ** len(rep) - 1) * 10 ** len(fixed))
    if value.denominator == 1:
        return str(value.numerator)
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


def _dotted(m: re.Match) -> str:
    """`0.1\\dot{6}` (one dotted digit: the repetend) or `0.\\dot{1}4\\dot{2}` (first and last)."""
    marks = [(d or e, bool(d)) for d, e in _DOT_DIGIT_RE.findall(m.group("digits"))]
    dotted = [i for i, (_, dot) in enumerate(marks) if dot]
    if not dotted:
        return m.group(0)
    if len(dotted) > 2 or dotted[-1] != len(marks) - 1:
        raise AmbiguousNumeral
    digits = "".join(d for d, _ in marks)
    first = dotted[0]
    return _rational_latex(m.group("whole"), digits[:first], digits[first:])


def repeating_decimals(s: str) -> str:
    r"""Rewrite repeating decimals as exact rationals (item: `0.\overline{1}` is 1/9, not 0).

    `0.1\overline{6}` and `0.1\bar{6}` (bar over the repetend), `0.1\dot{6}` and
    `0.\dot{1}4\dot{2}` (dots over its first and last digit), `0.(3)` (the repetend in
    parentheses right after the point). `0.1(6)` is no answer: digits between the point and the
    parenthesis also read as a product or as an uncertainty (`1.5(2)` = 1.5 ± 0.2).
    """
    if "." not in s:
        return s
    s = _OVERLINE_RE.sub(
        lambda m: _rational_latex(m.group("whole"), m.group("fixed"), m.group("rep") or m.group("rep1")), s
    )
    if "\\dot" in s:
        s = _DOTS_RE.sub(_dotted, s)

    def paren(m: re.Match) -> str:
        if m.group("fixed"):
            raise AmbiguousNumeral
        return _rational_latex(m.group("whole"), "", m.group("rep"))

    return _PAREN_REPEND_RE.sub(paren, s)


def _clock_time(m: re.Match) -> str:
    """`7:15 PM` → `19:15`, `12:30 AM` → `0:30`, `7 PM` → `19:00` (24-hour, no leading zero).

    Left as written: an hour outside 1–12, and a lower-case undotted meridiem without minutes
    (`2am` is also the product 2·a·m)."""
    hour, meridiem = int(m.group("h")), m.group("mer")
    if not 1 <= hour <= 12 or (m.group("m") is None and meridiem.islower() and "." not in meridiem):
        return m.group(0)
    pm = "p" in meridiem.lower()  # neither "text" nor "mathrm" has a p
    clock = f"{hour % 12 + (12 if pm else 0)}:{m.group('m') or '00'}"
    return clock + (f":{m.group('s')}" if m.group("s") else "")


def _mixed(m: re.Match) -> str:
    whole, num, den = re.sub(r"\D", "", m.group("whole")), m.group("num"), m.group("den")
    proper = num[0] != "0" and 0 < int(num) < int(den)
    grouping = len(num) == 3 and _GROUPED_RE.fullmatch(m.group("whole")) is not None
    if proper and not grouping:
        return f"\\frac{{{int(whole) * int(den) + int(num)}}}{{{int(den)}}}"
    if grouping and not proper:
        return m.group(0)  # digit groups: `1 000/3` is 1000/3 (the spaces vanish below)
    raise AmbiguousNumeral  # `12 345/678` (both readings), `3 5/2` (neither)


def mixed_numbers(s: str) -> str:
    r"""Rewrite `3 1/2`, `2\ 3/4`, `-1~1/2` (an integer, spacing, a proper fraction) as 7/2, 11/4, -3/2.

    The fraction must be proper, and the spaces must not also read as digit grouping (`1 000/3`
    is 1000/3, `12 345/678` is ambiguous: no answer). `3\frac{1}{2}` is read as 7/2 by the fast
    path (the LaTeX mixed-number convention) and is not touched here.
    """
    if "/" not in s:
        return s
    return _MIXED_SLASH_RE.sub(_mixed, s)


def join_thousands(s: str) -> str:
    # Inside brackets a plain comma separates elements; {,} and ,\! still group digits.
    pat = _THOUSANDS_RE[s[:1] in "([" or s.startswith("\\{")]
    return pat.sub(lambda m: m.group(1) + re.sub(r"\D", "", m.group(2)), s)


def clock_times(s: str) -> str:
    """Every clock time with a meridiem in ``s`` as 24-hour time (`_clock_time`)."""
    return _TIME_RE.sub(_clock_time, s)


# A numeral with its base as a subscript, the whole answer: `52_8`, `52_{8}`, `1A_{16}`, `10110_2`.
_BASE_NUMERAL_RE = re.compile(r"^([0-9A-Za-z]+)_\{?(\d{1,2})\}?$")


def base_numeral(canonical: str) -> tuple | None:
    """The value of an answer that is one numeral with a base subscript, else None.

    math-verify drops subscripts (`52_{10}` read as `52_8`), so two such answers are compared here: by value
    when the digits are valid in their bases (`52_8` = `42_{10}` = 42; `52_8` ≠ `52_{10}`), else by digits
    and base. An answer without a base is not a base numeral (`52` against `52_8` goes on as before).

    Returns:
        ("value", int) or ("digits", digits, base), or None.
    """
    m = _BASE_NUMERAL_RE.match(canonical)
    if m is None or not any(c.isdigit() for c in m.group(1)):
        return None
    digits, base = m.group(1), int(m.group(2))
    if not 2 <= base <= 36:
        return None
    try:
        return ("value", int(digits, base))
    except ValueError:  # a digit the base does not have (`59_8`): compared as written
        return ("digits", digits.upper(), base)


# An angle in degrees as a trigonometric function's argument: `\sin 30^\circ`, `\cos(45^{\circ})`, `\tan 60°`
# (the `°` is `^\circ` by then). Read as radians before degree signs are dropped: `\sin 30^\circ` is 1/2.
_TRIG_DEGREES_RE = re.compile(
    r"\\(sin|cos|tan|cot|sec|csc)\s*(\(?)\s*(-?\d+(?:\.\d+)?)\s*\^\s*\{?\s*\\circ\s*\}?\s*(\)?)"
)


def _in_radians(m: re.Match) -> str:
    if bool(m.group(2)) != bool(m.group(4)):  # an unbalanced parenthesis: not one argument, left alone
        return m.group(0)
    return f"\\{m.group(1)}(\\frac{{{m.group(3)}\\pi}}{{180}})"


def trig_degrees(s: str) -> str:
    """`\\sin 30^\\circ` → `\\sin(\\frac{30\\pi}{180})`: a degree sign in a trigonometric function's argument
    is an angle in degrees."""
    return _TRIG_DEGREES_RE.sub(_in_radians, s)


# A whole answer that is a cardinal number in English words: `fifty-one`, `\text{twenty one}`, `one hundred and
# five`, `a thousand`, `minus three`. Ordinals, fractions in words and numbers inside a phrase are not read.
_UNITS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_WORDS_WRAPPER_RE = re.compile(r"^\\(?:text|mathrm|textrm|mbox|mathbf|textbf|emph|textit|mathit)\{([^{}]*)\}\.?$")


def number_words(s: str) -> str | None:
    """The digits of an answer written as a cardinal number in words (`fifty-one` → "51", `\\text{one hundred and
    five}` → "105", `minus three` → "-3"), else None: any word outside the number's vocabulary, or words out of
    a number's order (`one twenty`, `twenty thirty`), leave the answer as it was (`\\text{one solution}`)."""
    m = _WORDS_WRAPPER_RE.match(s.strip())
    text = (m.group(1) if m else s).strip().rstrip(".").lower()
    if not text or not text[0].isalpha():
        return None
    words = [w for w in re.split(r"[\s\-]+", text) if w]
    sign = ""
    if words and words[0] in ("minus", "negative"):
        sign, words = "-", words[1:]
    total, group, last = 0, 0, None  # `last`: the kind of the previous word, to refuse words out of order
    scale_above = None  # the last scale word: each later one must be smaller (`one thousand two million` is no number)
    for i, word in enumerate(words):
        if word == "and":
            if last in ("hundred", "scale") and i + 1 < len(words) and words[i + 1] != "and":
                continue
            return None
        if word == "a":
            if last not in (None, "scale") or i + 1 == len(words):
                return None
            if words[i + 1] != "hundred" and words[i + 1] not in _SCALES:
                return None
            group, last = 1, "unit"
        elif word in _UNITS:
            if (
                last in ("unit", "teen")
                or (last == "ten" and _UNITS[word] >= 10)
                or (word == "zero" and len(words) > 1)
            ):
                return None
            group, last = group + _UNITS[word], "teen" if _UNITS[word] >= 10 else "unit"
        elif word in _TENS:
            if last in ("unit", "teen", "ten"):
                return None
            group, last = group + _TENS[word], "ten"
        elif word == "hundred":
            if last not in ("unit", "teen") or group >= 100 or group == 0:
                return None
            group, last = group * 100, "hundred"
        elif word in _SCALES:
            if last is None or last == "scale" or group == 0:
                return None
            if scale_above is not None and _SCALES[word] >= scale_above:
                return None
            total, group, last, scale_above = total + group * _SCALES[word], 0, "scale", _SCALES[word]
        else:
            return None
    if last is None:
        return None
    return f"{sign}{total + group}"
