r"""What a response writes around its value, dropped before comparison (`cpmobius.grading.canonical`).

Stage: grading (canonicalisation). Three spellings that carry no value of their own:

* compound SI units after a number, in `\mathrm{}` / `\text{}` or bare: `9.8\mathrm{m/s^2}`,
  `6.6\times10^{-34}\,\mathrm{J\cdot s}`, `2\mathrm{kg\cdot m^2}`, `12\,\Omega` (a single unit word is
  dropped by `canonical` already; Minerva and OlympiadBench answers carry these);
* an approximation sign before the value: `\approx 3.14` is 3.14 (then compared under the decimals
  policy, so it does not equal π);
* a parenthetical remark in `\text{}` after the value: `12 \text{ (since x > 0)}` is 12.

Departures from the released code (marked `# CPMöbius:` where applied): its grader compares the strings.
"""

from __future__ import annotations

import re

# A compound unit: unit letters joined by `\cdot`, `/`, `.`, spaces or exponents, at least one joint
# (a lone word is `canonical`'s rule); no digits but exponents.
_UNIT_BODY = r"(?:[A-Za-z]+|\\(?:Omega|mu|circ)(?![A-Za-z]))"
_JOINT = r"(?:\s*(?:\\cdot|/|\.|\s)\s*|\s*\^\s*\{?\s*-?\d+\s*\}?\s*)"
_COMPOUND_UNIT_RE = re.compile(
    r"^(.*?[0-9}])\s*\\(?:text|mathrm|rm)\s*\{\s*" + _UNIT_BODY + r"(?:" + _JOINT + r"+" + _UNIT_BODY + r"?)+\s*\}"
    r"(?:\s*\^\s*\{?\s*-?\d+\s*\}?)?\s*$",
    re.S,
)
# A bare resistance or micro- unit after a number: `12\Omega`, `5\mu m`.
_BARE_UNIT_RE = re.compile(r"^(.*?[0-9}])\s*\\(?:Omega|mu\s*[A-Za-z]{1,2})(?![A-Za-z])\s*$", re.S)
_APPROX_RE = re.compile(r"^\\(?:approx|simeq|thickapprox)(?![A-Za-z])\s*")
_REMARK_RE = re.compile(r"^(.*?\S)\s*\\text\s*\{\s*\([^{}]*\)\s*\.?\s*\}\s*$", re.S)


def strip_annotations(s: str) -> str:
    """`s` without a trailing compound unit, a leading `\\approx` or a trailing `\\text{(remark)}`.

    Args:
        s: a partly canonical answer (spacing commands already spaces).

    Returns:
        The value alone; `s` unchanged when nothing matches or nothing would be left.
    """
    if s.startswith("\\"):
        s = _APPROX_RE.sub("", s, count=1) or s
    if "\\text" in s and (m := _REMARK_RE.match(s)) and not m.group(1).endswith(("=", "+", "-", "\\cdot")):
        s = m.group(1)
    if m := _COMPOUND_UNIT_RE.match(s):
        s = m.group(1)
    elif m := _BARE_UNIT_RE.match(s):
        s = m.group(1)
    return s.strip()
