r"""Canonicalisation: an extracted answer → its canonical string (stage: grading).

A cheap, deterministic, cached string rewrite applied before any comparison: unicode and LaTeX
spelling variants, option labels, degrees, percent, units, currency, thousands separators,
code-style `pi`/`sqrt(..)`/`**`, and a leading single-variable assignment. Equal canonical strings
are equivalent answers; the policy table in the package docstring lists every rule.

Departures from the paper / released code (marked `# CPMöbius:`): the released vote compares raw
strings, with no canonicalisation; here `x = 5` is the answer `5`, a repeating decimal
`0.\overline{3}` is the rational 1/3, a mixed number `3 1/2` is 7/2, and a notation that reads two
ways (`12 345/678`, `3 5/2`, `0.1(6)`) is no answer (canonical string "", a placeholder).
"""

from __future__ import annotations

import re
from functools import lru_cache


_PLACEHOLDERS = frozenset(
    {"", "none", "null", "nan", "n/a", "na", "answer", "youranswer", "your answer", "finalanswer",
     "final answer", "...", "\\ldots", "\\dots", "\\cdots", "?", "\\text{}"}
)


def match_brace(text: str, i: int) -> int:
    """Index just past the group opened by text[i] == "{", or -1 if it never closes."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2  # an escaped character (\{, \}, \\) is never a group delimiter
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


_UNICODE = str.maketrans({
    "\u2212": "-", "\u2013": "-", "\u2014": "-", "\u00d7": "\\times ", "\u22c5": "\\cdot ",
    "\u00b7": "\\cdot ", "\u03c0": "\\pi ", "\u221e": "\\infty ", "\u221a": "\\sqrt",
    "\u00b0": "^\\circ", "\u2264": "\\leq ", "\u2265": "\\geq ", "\u2260": "\\neq ",
    "\u00a0": " ", "\u2009": " ", "\u202f": " ", "\u20ac": "", "\u00a3": "", "\u00a5": "",
    "\n": " ", "\t": " ", "\r": " ",
    # vulgar fractions: "3½" is the mixed number 3\frac{1}{2} (read as 7/2 like any LaTeX mixed number)
    **{c: f"\\frac{{{p}}}{{{q}}}" for c, (p, q) in {
        "½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅕": (1, 5), "⅖": (2, 5), "⅗": (3, 5),
        "⅘": (4, 5), "⅙": (1, 6), "⅚": (5, 6), "⅛": (1, 8), "⅜": (3, 8), "⅝": (5, 8), "⅞": (7, 8)}.items()},
})
_WHOLE_BOX_RE = re.compile(r"^\\(?:boxed|fbox)\s*\{(.*)\}$", re.S)
_LEFTRIGHT_RE = re.compile(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|big|Big|bigg|Bigg)(?![A-Za-z])")
_STYLE_RE = re.compile(r"\\(?:displaystyle|textstyle|scriptstyle|limits|mathrm\{\s*\})(?![A-Za-z])")
_FRAC_RE = re.compile(r"\\[dtc]frac(?![A-Za-z])")
_TEXTCMD_RE = re.compile(r"\\(?:textbf|textrm|textit|textnormal|textsf|texttt|mbox|hbox)(?![A-Za-z])")
_OPTION_RE = re.compile(r"^(?:\\text\s*\{\s*)?\(\s*([A-E])\s*\)\s*\}?\s*(?:~|\\ |\\quad|\\,|:)*\s*(.*)$", re.S)
_OPTION_ONLY_RE = re.compile(r"^(?:\\text\s*\{\s*|\\mathbf\s*\{\s*|\\mathrm\s*\{\s*)?\(?\s*([A-E])\s*\)?\s*\}?$")
_DEGREE_RE = re.compile(
    r"(?:\^\s*\{?\s*\\circ\s*\}?|\\circ\s*$|\\degree(?![A-Za-z]))(?:\s*(?:\\mathrm\{[CF]\}|[CF])(?![A-Za-z]))?"
    r"|(?<=[\d}])\s*(?:\^\s*\{?\s*(?:\\prime\s*)+\}?|'+)\s*$"
)
_PERCENT_RE = re.compile(r"\\?%|\\text\{\s*percent\s*\}")
_EMPTY_TEXT_RE = re.compile(r"\\text\s*\{\s*\}")
_SPACING_RE = re.compile(r"\\!|(?<!\\)\\[,;: ]|\\q?quad(?![A-Za-z])|\\(?:enspace|thinspace)(?![A-Za-z])|~")
_UNIT_TEXT_RE = re.compile(
    r"^(.*?[0-9A-Za-z})\]])\s*\\(?:text|mathrm)\s*\{\s*[A-Za-z][A-Za-z .\-/]*\}(?:\s*\^\s*\{?\s*-?\d+\s*\}?)?\s*$", re.S
)
_UNIT_WORD_RE = re.compile(
    r"(?<=[0-9}])\s+(?:cm|mm|km|m|in|inch|inches|ft|feet|foot|yd|yards?|miles?|meters?|metres?|"
    r"units?|dollars?|cents?|degrees?|seconds?|minutes?|hours?|days?|years?|sq\.?\s*units|square\s+units|"
    r"percent|s|ms|Hz|kHz|MHz|GHz|J|kJ|eV|keV|MeV|GeV|K|kg|g|mg|N|W|kW|V|A|Pa|kPa|atm|mol|L|mL|nm|pc|kpc|"
    r"Mpc|AU|erg|ergs|cal|kcal|ohms?)\.?\s*$"
)
_SCI_RE = re.compile(r"(?<![\w.\\])(\d+(?:\.\d+)?)[eE]([+-]?\d+)(?![\w.])")
_PI_WORD_RE = re.compile(r"(?<![\\A-Za-z])pi(?![A-Za-z])")
_INF_WORD_RE = re.compile(r"(?<![\\A-Za-z])(?:infinity|inf)(?![A-Za-z])", re.I)
_BARE_POINT_RE = re.compile(r"(\d)\.(?![\d])")
_SPACE_RE = re.compile(r"(?<![A-Za-z]) | (?![A-Za-z])")
_FRAC_DIGITS_RE = re.compile(r"\\frac(\d)(\d)")
_FRAC_DIGIT_BRACE_RE = re.compile(r"\\frac(\d)\{")
_FRAC_BRACE_DIGIT_RE = re.compile(r"\\frac(\{[^{}]*\})(\d)")
_SQRT_DIGIT_RE = re.compile(r"\\sqrt(\d)")
_SINGLE_SUP_RE = re.compile(r"([_^])\{([0-9A-Za-z])\}")
_ASSIGN_RE = re.compile(r"^(?:[A-Za-z]|\\[A-Za-z]+)(?:_\{?[A-Za-z0-9]+\}?)?(?:=(?!=)|\\in(?![A-Za-z]))")
_REL_OPS = {"\\le": "\\leq", "\\ge": "\\geq", "\\ne": "\\neq", ">=": "\\geq", "<=": "\\leq", "!=": "\\neq"}


_THOUSANDS_RE = {
    inside: re.compile(r"(?<![\d.])(\d{1,3})((?:" + sep + r"\d{3})+)(?!\d)")
    for inside, sep in ((True, r"(?:\{,\}|,\\!)\s*"), (False, r"(?:\{,\}\s*|,\\!\s*|,)"))
}


# Spacing between two digit runs: white space and LaTeX spaces (`\ `, `\,`, `~`, `\quad`, ...).
_SEP = r"(?:\s|(?<!\\)\\[,;: ]|\\q?quad(?![A-Za-z])|\\(?:enspace|thinspace)(?![A-Za-z])|~)+"
_MIXED_SLASH_RE = re.compile(
    r"(?<![\d./^_])(?<![\^_]\{)(?P<whole>\d+(?:" + _SEP + r"\d{3})*)" + _SEP
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


class _Ambiguous(Exception):
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
        raise _Ambiguous
    digits = "".join(d for d, _ in marks)
    first = dotted[0]
    return _rational_latex(m.group("whole"), digits[:first], digits[first:])


def _repeating_decimals(s: str) -> str:
    r"""Rewrite repeating decimals as exact rationals (item: `0.\overline{1}` is 1/9, not 0).

    `0.1\overline{6}` and `0.1\bar{6}` (bar over the repetend), `0.1\dot{6}` and
    `0.\dot{1}4\dot{2}` (dots over its first and last digit), `0.(3)` (the repetend in
    parentheses right after the point). `0.1(6)` is no answer: digits between the point and the
    parenthesis also read as a product or as an uncertainty (`1.5(2)` = 1.5 ± 0.2).
    """
    if "." not in s:
        return s
    s = _OVERLINE_RE.sub(lambda m: _rational_latex(m.group("whole"), m.group("fixed"), m.group("rep") or m.group("rep1")), s)
    if "\\dot" in s:
        s = _DOTS_RE.sub(_dotted, s)

    def paren(m: re.Match) -> str:
        if m.group("fixed"):
            raise _Ambiguous
        return _rational_latex(m.group("whole"), "", m.group("rep"))

    return _PAREN_REPEND_RE.sub(paren, s)


def _mixed(m: re.Match) -> str:
    whole, num, den = re.sub(r"\D", "", m.group("whole")), m.group("num"), m.group("den")
    proper = num[0] != "0" and 0 < int(num) < int(den)
    grouping = len(num) == 3 and _GROUPED_RE.fullmatch(m.group("whole")) is not None
    if proper and not grouping:
        return f"\\frac{{{int(whole) * int(den) + int(num)}}}{{{int(den)}}}"
    if grouping and not proper:
        return m.group(0)  # digit groups: `1 000/3` is 1000/3 (the spaces vanish below)
    raise _Ambiguous  # `12 345/678` (both readings), `3 5/2` (neither)


def _mixed_numbers(s: str) -> str:
    r"""Rewrite `3 1/2`, `2\ 3/4`, `-1~1/2` (an integer, spacing, a proper fraction) as 7/2, 11/4, -3/2.

    The fraction must be proper, and the spaces must not also read as digit grouping (`1 000/3`
    is 1000/3, `12 345/678` is ambiguous: no answer). `3\frac{1}{2}` is read as 7/2 by the fast
    path (the LaTeX mixed-number convention) and is not touched here.
    """
    if "/" not in s:
        return s
    return _MIXED_SLASH_RE.sub(_mixed, s)


def _join_thousands(s: str) -> str:
    # Inside brackets a plain comma separates elements; {,} and ,\! still group digits.
    pat = _THOUSANDS_RE[s[:1] in "([" or s.startswith("\\{")]
    return pat.sub(lambda m: m.group(1) + re.sub(r"\D", "", m.group(2)), s)


def _replace_call(s: str, name: str, fmt: str) -> str:
    """Rewrite code-style `name(arg)` (not `\\name`) as fmt.format(arg), parentheses matched."""
    out = s
    while name + "(" in out:
        m = re.search(r"(?<![\\A-Za-z])" + name + r"\(", out)
        if not m:
            return out
        depth, i = 0, m.end() - 1
        while i < len(out):
            depth += {"(": 1, ")": -1}.get(out[i], 0)
            if depth == 0:
                break
            i += 1
        if depth:
            return out
        out = out[: m.start()] + fmt.format(out[m.end() : i]) + out[i + 1 :]
    return out


def _strip_outer_braces(s: str) -> str:
    while s.startswith("{") and match_brace(s, 0) == len(s):
        s = s[1:-1].strip()
    return s


_KNOWN_CMDS_RE = re.compile(
    r"\\(?:frac|sqrt|pi|infty|cdot|times|div|cup|sin|cos|tan|cot|sec|csc|arcsin|arccos|arctan|sinh|cosh|tanh|ln|exp)"
    r"(?![A-Za-z])"
)


def strip_commands(s: str) -> str:
    """`s` without the LaTeX commands the fast path knows (to spot letters, words and relations)."""
    return _KNOWN_CMDS_RE.sub("", s)


@lru_cache(maxsize=1 << 16)
def canonicalize(ans: str) -> str:
    """Canonical string of an extracted answer (policy table in the package docstring)."""
    s = ans.translate(_UNICODE).strip()
    while (m := _WHOLE_BOX_RE.match(s)) and match_brace(s, s.index("{")) == len(s):
        s = m.group(1).strip()
    s = s.replace("\\$", "").replace("$", "")
    if s[:2] in ("\\(", "\\[") and s[-2:] in ("\\)", "\\]"):
        s = s[2:-2]
    s = _LEFTRIGHT_RE.sub("", s)
    s = _STYLE_RE.sub("", s)
    s = _FRAC_RE.sub(r"\\frac", s)
    s = _TEXTCMD_RE.sub(r"\\text", s).strip()
    if m := _OPTION_ONLY_RE.match(s):
        return m.group(1)
    if (m := _OPTION_RE.match(s)) and m.group(2)[:1] and (m.group(2)[0].isdigit() or m.group(2)[0] in "-\\"):
        return canonicalize(m.group(2))  # "(B) 12": the value after an option label
    s = _DEGREE_RE.sub("", s)
    s = _PERCENT_RE.sub("", s)
    s = _EMPTY_TEXT_RE.sub("", s)
    s = _join_thousands(s)
    try:
        # CPMöbius: a repeating decimal keeps its point (`0.\overline{1}` is 1/9, not 0·bar(1)),
        # and a mixed number keeps its space (`3 1/2` is 7/2, never 31/2).
        s = _mixed_numbers(_repeating_decimals(s))
    except _Ambiguous:
        return ""  # two readings: no answer (a placeholder)
    s = _SPACING_RE.sub(lambda m: "" if m.group(0) == "\\!" else " ", s)
    while m := _UNIT_TEXT_RE.match(s):
        s = m.group(1)
    s = _UNIT_WORD_RE.sub("", s).strip()
    s = s.replace("**", "^")
    s = _replace_call(s, "sqrt", "\\sqrt{{{}}}")
    s = _replace_call(s, "exp", "e^{{{}}}")
    s = _PI_WORD_RE.sub(r"\\pi ", s)
    s = _INF_WORD_RE.sub(r"\\infty ", s)
    for a, b in _REL_OPS.items():
        s = re.sub(re.escape(a) + r"(?![A-Za-z])", lambda _m, b=b: b, s)
    s = s.replace("*", "\\cdot ")
    s = _SCI_RE.sub(r"\1\\times10^{\2}", s)
    s = _SPACE_RE.sub("", " ".join(s.split()))
    s = s.replace("+-", "-").replace("-+", "-")
    s = _BARE_POINT_RE.sub(r"\1", s)
    s = _FRAC_DIGITS_RE.sub(r"\\frac{\1}{\2}", s)
    s = _FRAC_DIGIT_BRACE_RE.sub(r"\\frac{\1}{", s)
    s = _FRAC_BRACE_DIGIT_RE.sub(r"\\frac\1{\2}", s)
    s = _SQRT_DIGIT_RE.sub(r"\\sqrt{\1}", s)
    s = _SINGLE_SUP_RE.sub(r"\1\2", s)
    if (m := _ASSIGN_RE.match(s)) and not re.search(r"[=<>A-Za-z]", strip_commands(s[m.end() :])):
        # CPMöbius: "x = 5" is the answer 5, "x \in [2, 5)" is [2, 5) (a leading assignment of a
        # constant is dropped; "y = 2x + 3" stays an equation for math-verify).
        s = s[m.end() :]
    s = _strip_outer_braces(s.lstrip("="))
    return s.rstrip(".,;").strip()


def is_placeholder(canon: str) -> bool:
    """Whether a canonical answer is a placeholder (`None`, `N/A`, `...`, ...): no answer."""
    c = canon
    if c.startswith("\\text{") and c.endswith("}"):
        c = c[6:-1]
    return c.strip().lower() in _PLACEHOLDERS
