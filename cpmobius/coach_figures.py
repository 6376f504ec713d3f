"""Coach validation: a problem that refers to a picture the Player never sees (reason "needs_figure").

Stage: Coach generation (`cpmobius.coach.find_problem_fault` calls `needs_figure`). The Player gets text
only, so "as shown in the figure" makes a problem no one can solve; the released code keeps such problems.
"""

from __future__ import annotations

import re

from cpmobius.coach_text import LINE_START

# A figure the Player never sees: the Player gets text only. Each pattern names a picture that is
# *elsewhere* ("as shown in the figure", "the diagram below", "see Figure 2", "the graph shown",
# "In the figure, ...", an image placeholder). A figure word alone is not enough: "figure skating",
# "a four-digit figure", "figure out", "significant figures", "the figure formed by the lines ...",
# "the graph of y = x^2", "a graph with 5 vertices", "coins on the table" are text.
# Strong nouns almost always mean a picture; weak ones are often defined in the text (a graph
# with vertices, a 4x4 grid) and count only with a cue that the picture is elsewhere.
_STRONG = r"(?:figures?|fig\.|diagrams?|pictures?|images?|illustrations?|sketch(?:es)?|drawings?)"
_WEAK = r"(?:graphs?|charts?|plots?)"
_TABLE = r"(?:tables?)"
_SHOWN = r"(?:shown|depicted|illustrated|pictured|drawn|indicated|given|marked|labell?ed|seen)"
# "below"/"above"/"on the right" as a place on the page: followed by punctuation, the end, or a verb
# ("the diagram below shows"), not by what it is below ("the part of the graph below the x-axis").
_PLACE = (
    r"(?:below|above|here|on\s+the\s+(?:right|left)|to\s+the\s+(?:right|left)|at\s+(?:the\s+)?(?:right|left))"
    r"(?=\s*(?:[,.:;?!)]|$|\s(?:is|are|was|shows?|illustrates?|depicts?|represents?|gives?|has|have|consists?|"
    r"contains?|displays?|lists?)\b))"
)
_ADJ = r"(?:accompanying|adjoining|adjacent|attached|above|below|provided|preceding|following|given)"
_ADJ_WEAK = r"(?:accompanying|adjoining|adjacent|attached|above|below|provided|preceding)"  # "the following graph: ..."
_END = r"(?![a-z])"


def _picture_reference(
    nouns: str, *, adjectives: str, shown: str, source_nouns: str, locative: str | None
) -> re.Pattern:
    """A reference to a picture elsewhere, for one class of nouns (see the comment above).

    Args:
        nouns: the picture nouns (a regex).
        adjectives: those that place the picture elsewhere ("the accompanying figure").
        shown: the verbs of "as <shown> in the figure".
        source_nouns: the nouns of "from / using / according to the <noun>".
        locative: the nouns of "in the figure," / "in the figure?" (a bare place in the picture;
            not "picture": "two students in the picture." is a photo in the story), or None.
    """
    n = nouns + _END
    word = r"(?:[a-z][\w-]*\s+)?"  # one modifier: "the pie chart shown", "the following bar graph"
    patterns = [
        r"\b(?:as|is|are|be)\s+"
        + shown
        + r"\s+(?:in|on|by|from)\s+(?:the\s+)?(?:"
        + _ADJ
        + r"\s+)?"
        + n
        + r"(?!\s+of\b)",
        r"\bas\s+in\s+the\s+(?:" + _ADJ + r"\s+)?" + n,
        r"\b" + n + r"\s+(?:(?:is|are)\s+)?(?:" + _SHOWN + r"\s+)?" + _PLACE,
        r"\bthe\s+" + adjectives + r"\s+" + word + n + r"(?!\s+of\b)",
        r"\bthe\s+" + word + n + r"\s+(?:(?:is|are)\s+)?(?:shown|depicted|pictured|illustrated)\b",
        r"\bthe\s+" + word + n + r"\s+(?:shows|illustrates|depicts)\b",
        r"\b(?:see|refer\s+to|consult|look\s+at)\s+(?:the\s+)?(?:" + _ADJ + r"\s+)?" + n + r"(?!\s+of\b)",
        r"\b(?:from|using|based\s+on|according\s+to)\s+the\s+" + source_nouns + _END + r"(?!\s+of\b)",
    ]
    if locative:  # "In the figure, ABCD is a square", "How many triangles are in the figure?"
        patterns.append(r"\b(?:in|on)\s+the\s+" + locative + _END + r"\s*(?=[,.:;?!)]|$)")
    return re.compile("|".join(patterns), re.IGNORECASE)


_SHOWN_ONLY = r"(?:shown|depicted|illustrated|pictured)"  # "points marked on the grid" may be text
_FIGURE_REFS = (
    _picture_reference(
        _STRONG,
        adjectives=_ADJ,
        shown=_SHOWN,
        source_nouns=_STRONG,
        locative=r"(?:figures?|diagrams?|illustrations?|sketch(?:es)?|drawings?)",
    ),
    _picture_reference(
        _WEAK, adjectives=_ADJ_WEAK, shown=_SHOWN_ONLY, source_nouns=r"(?:graphs?|charts?)", locative=None
    ),
)
# A table or a grid may be given in the text as an array: "The grid below ... \begin{array}".
_TABLE_REF = _picture_reference(
    r"(?:tables?|grids?)",
    adjectives=_ADJ,
    shown=r"(?:shown|depicted|illustrated|pictured|given|listed)",
    source_nouns=_TABLE,
    locative=None,
)
# "as shown below", "Figure 2", "Fig. 3" (capitalised, as captions are), "in figure 2", image placeholders.
_FIGURE_NUMBER = re.compile(
    r"\b(?i:as\s+(?:shown|depicted|illustrated|pictured))\s+(?i:" + _PLACE + ")"
    r"|\b(?:Figure|FIGURE|Fig\.|FIG\.)\s*\d+[a-z]?\b"
    r"|\b(?i:in|see|from)\s+(?i:fig\.|figure)\s*\d+[a-z]?\b"
    r"|(?i:<image>|<img\b|\[(?:figure|diagram|image|picture|graph)\b[^\]]*\])|!\[[^\]]*\]\([^)]*\)|\\includegraphics",
)
# The figure is in the text after all: Asymptote (MATH's `[asy]`), TikZ, LaTeX picture code.
_FIGURE_CODE = re.compile(r"\[asy\]|\\begin\{(?:tikzpicture|picture|pspicture)\}", re.IGNORECASE)
# A table (or grid) in the text: two Markdown rows, or a tabular/array environment.
_TABLE_CODE = re.compile(
    r"(?:^|" + LINE_START + r")\s*+\|.*\|[^\S\n]*+\n\s*+\|.*\||\\begin\{(?:tabular|array)\}", re.IGNORECASE
)


def needs_figure(text: str) -> bool:
    """Whether the problem depends on a figure, diagram, graph, picture or table the Player never sees.

    The Player gets the problem's text only, so a reference to a picture given elsewhere ("As
    shown in the figure", "in the diagram below", "see Figure 2", "the graph shown", an image
    placeholder) makes it unsolvable, unless the picture is in the text itself: Asymptote
    (`[asy]...[/asy]`, as in MATH), TikZ or LaTeX picture code keeps any reference, and a
    Markdown, tabular or array table keeps a table or grid reference ("the table below", "the grid
    below is an example ... \\begin{array}", AIME 2024 I #3). Mentions that are not pictures
    elsewhere are kept: "figure skating", "a four-digit figure", "figure out", "significant
    figures", "the figure formed by the lines ...", "the graph of y = x^2", "two students in the
    picture" (a photo in the story).
    """
    figure = any(p.search(text) for p in _FIGURE_REFS) or _FIGURE_NUMBER.search(text)
    if figure and not _FIGURE_CODE.search(text):
        return True
    return bool(_TABLE_REF.search(text)) and not (_TABLE_CODE.search(text) or _FIGURE_CODE.search(text))
