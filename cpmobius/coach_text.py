"""Stage 1, Coach generation: how a chat model's response becomes a problem text (used by `cpmobius.coach`).

A chat-tuned Coach wraps its problem in talk to the user: a preamble ("Sure, here's a valid math
problem:", a "**Problem:**" heading) and a closing remark ("I hope this helps!", "Let me know if you
need the solution."). On a real run (Qwen2.5-Coder-0.5B-Instruct as Coach): 47 of 60 responses carried such
a preamble, 34 of them held a valid problem once it was removed. It also refuses ("I'm sorry, but as
an AI language model, I can't ...?") and answers its own problem ("Surely, here's ... the sum ... is
55."); both used to pass as valid because they end with "?" or hold a question word.

Departures from the released code (`# CPMöbius:`): the released code sends the whole response,
preamble and all, to the Player. Here the preamble and the closing remark are cut off
(`extract_problem`), and the text sent to the Player and archived is what remains; refusals
(`is_refusal`) and problems followed by their solution or answer (`is_worked_solution`; after an
imperative question too, "Find 17 × 3. It equals 51.": the problem leaks its answer) are rejected. The Coach's
REINFORCE update still uses the whole response it generated (its tokens are unchanged).

Every pattern here runs in time linear in the text (a response of 20,000 newlines used to take 86 s):
a match may start inside a run of whitespace only at its first character (`LINE_START`), and
whitespace is consumed possessively, never by two quantifiers that can split one run between them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The start of a line, further in: matched once per run of whitespace that holds a newline, from the
# run's first character, so that a long run of blank lines is not rescanned from each of its characters.
LINE_START = r"(?<!\s)[^\S\n]*+\n\s*+"

# Interjections that open a chat answer: "Sure,", "Certainly!", "Of course.", "Okay -".
_INTERJECTION = re.compile(
    r"^\s*(?:sure(?:ly)?|certainly|of\s+course|absolutely|okay|ok|alright|all\s+right|great|no\s+problem|yes|happy\s+to\s+help)"
    r"\s*(?:[,!.:;\u2014-]+|\s(?=here|i\b|i'|let|below|this|the\s+following))\s*",
    re.IGNORECASE,
)
# A sentence presenting what follows ("here's a valid math problem:", "I'll create a problem for
# you.", "Below is one:"): it must name what it presents, and carry no mathematics itself.
_PRESENTER = re.compile(
    r"^\s*(?:here(?:'s|\u2019s|\s+is)|below\s+is|"
    r"(?:i(?:'ll|\u2019ll|\s+will|\s+can|'d|\s+would)|let\s+me)\s+(?:be\s+happy\s+to\s+|gladly\s+)?"
    r"(?:give|generate|create|write|provide|offer|share|come\s+up\s+with|make|pose|present|propose))\b"
    r"(?P<body>[^\n:.!?$=\\]{0,100}?)\s*(?P<end>:|\.|!|\n|$)\s*",
    re.IGNORECASE,
)
_NOUN = r"\b(?:problems?|questions?|exercises?|puzzles?|challenges?|ones?|examples?|tasks?|riddles?)\b"
_PRESENTED = re.compile(_NOUN, re.IGNORECASE)
# Ended by "." or "!" rather than ":", the presenter must end with its noun ("Here's a problem for
# you to solve."), so that "Here is a problem where you roll two dice." keeps its content.
_PRESENTED_END = re.compile(
    _NOUN + r"(?:\s+(?:for\s+you|to\s+(?:solve|try)|you\s+can\s+(?:try|solve)"
    r"|(?:for\s+you\s+)?to\s+(?:solve|try|practice)))*\s*$",
    re.IGNORECASE,
)
# A heading naming the problem: "**Problem:**", "### Math Problem", "Problem statement:", "Question:".
_HEADING = re.compile(
    r"^\s*+(?:#{1,6}\s*+)?(?:\*\*|__)?\s*+(?:(?:valid|new|sample|example|math(?:ematical|s)?|word|practice|your)\s++)*"
    r"(?:problem|question|exercise|puzzle|challenge)(?:\s+statement)?[^\S\n]*+(?:\*\*|__)?[^\S\n]*+(?::|\n|$)\s*+(?:\*\*|__)?\s*+",
    re.IGNORECASE,
)
# A presenter further in, after talk about the task ("Regarding problem-solving, a valid math problem
# should ... Here's a question:\n\n"The square root of 49 is what?""): cut only when it ends with ":"
# and a quoted paragraph follows, which is then the whole problem (recorded from
# Qwen2.5-Coder-0.5B-Instruct, 2026-12-01 H200 run, step 6).
_LEAD_IN_AT = re.compile(
    r"(?:(?<=[.!?])[ \t]++|" + LINE_START + r")(?=(?:here(?:'s|\u2019s|\s+is)|below\s+is)\b)", re.IGNORECASE
)
_QUOTED_PARAGRAPH = re.compile(r'(?:"[^"\n]+"|\u201c[^\u201d\n]+\u201d)[ \t]*(?:\n|$)')
_RULE = re.compile(r"^\s*+(?:-{3,}|\*{3,}|_{3,})[^\S\n]*+(?:\n|$)|" + LINE_START + r"(?:-{3,}|\*{3,}|_{3,})\s*+$")
# Closing remarks addressed to the user: where the first one starts (it runs to the end of the response).
_CLOSING = re.compile(
    r"(?:^|(?<=[.!?:)\]$])\s++|" + LINE_START + r")(?:\(\s*+)?"
    r"(?:i\s+hope\s+(?:this|that|you)|hope\s+(?:this|that|you)|let\s+me\s+know|feel\s+free|don'?t\s+hesitate|"
    r"good\s+luck|enjoy\b|have\s+fun|happy\s+(?:solving|problem|calculating|math)|"
    r"if\s+you(?:'d|\s+would)?\s+(?:need|want|like)\b[^\n]{0,200}?\b(?:help|hint|solution|answer|explanation|assistance|another|more)\b|"
    r"if\s+you\s+have\s+any\s+(?:questions|trouble|doubts)|"
    r"can\s+you\s+(?:solve|figure|find|work)\s+(?:it|this|that)\b[^\n]{0,200}?\?\s*+$|"
    r"this\s+(?:problem|question|exercise)\s+(?:tests?|requires?|involves?|combines?|is\s+(?:designed|a\s+good|an?\s+example|"
    r"suitable|appropriate|great|classic|straightforward|simple|easy|fairly|quite|relatively|challenging|interesting|valid|"
    r"well[- ]posed)|can\s+be\s+solved|will\s+(?:help|test|challenge)|checks?|covers?|practices?|assesses?|helps?|"
    r"does\s+not\s+require|(?:also\s+)?(?:meets|satisfies))\b)",
    re.IGNORECASE,
)

# A refusal of the task, wherever it appears: an apology, "as an AI", "I can't <do that>".
_REFUSAL = re.compile(
    r"\b(?:i'?m|i\s+am)\s+(?:so\s+|very\s+|really\s+)?(?:sorry|afraid|unable|not\s+able)\b"
    r"|\bi\s+apologi[sz]e\b|\bas\s+an?\s+(?:ai|artificial\s+intelligence|language\s+model)\b"
    r"|\b(?:sorry|unfortunately),?\s+(?:but\s+)?(?:i|as\s+an)\b"
    r"|\bi\s+(?:can(?:no|'|\u2019)?t|cannot|won'?t|will\s+not|am\s+not\s+able\s+to|'m\s+not\s+able\s+to)\s+"
    r"(?:generate|create|provide|help|assist|do|write|comply|fulfil+|answer|produce|give|complete|make)\b",
    re.IGNORECASE,
)
# Asking the user back instead of writing a problem (recorded from Qwen2.5-Coder-0.5B-Instruct at the
# Coach's T=0.9: "Could you please provide me with a specific math problem that you'd like me to
# generate?", "What type of math problem are you looking for?", "Please provide the problem
# description so that I can create a valid one."). Each names the task itself (a problem, details, a
# topic), so that a problem's own "Please provide your answer as a fraction." is not matched.
_TASK_NOUN = (
    r"(?:(?:a|the|some|more|any|your)\s+)?(?:(?:specific|more|particular|math(?:ematical|s)?|valid)\s+){0,3}"
    r"(?:problems?|questions?|details?|topics?|subjects?|difficulty|information|description|context|type|kind|"
    r"requirements?|instructions?)\b"
)
# What the user would choose: "topic", "area of math", "kind of problem" (in the clauses below only; a
# bare "area" is a problem's quantity: "Could you tell me which of the two areas is larger?").
_TOPIC = (
    r"(?:topics?|subjects?|difficulty|level|problems?|questions?|exercises?|"
    r"(?:areas?|fields?|branch(?:es)?)\s+of\s+(?:math(?:ematic)?s?)|"
    r"(?:type|kind|sort)s?\s+of\s+(?:(?:math(?:ematical|s)?|word)\s+)?(?:problems?|questions?|exercises?))\b"
)
_ASKS_USER = re.compile(
    r"\b(?:(?:could|would|can|will)\s+you\s+(?:please\s+)?|please\s+)"
    r"(?:provide|give|tell|share|specify|clarify|describe|send)\s+(?:me\s+)?(?:with\s+)?"
    + _TASK_NOUN
    + r"|\b(?:what|which)\s+(?:type|kind|sort|level|topic|area|difficulty)s?\s+of\s+"
    r"(?:(?:math(?:ematical|s)?|word)\s+)?"
    r"(?:problems?|questions?|exercises?)\s+(?:are|would|do|did|should)\s+you\b"
    r"|\byou(?:'d|\u2019d|\s+would)\s+like\s+me\s+to\s+(?:generate|create|write|make|come\s+up|help|provide)\b"
    r"|\b(?:problems?|questions?)\s+(?:are|were)\s+you\s+looking\s+for\b"
    # Offers of help: "What do you need assistance with?", "How can I help you today?".
    r"|\bwhat\s+(?:do|would)\s+you\s+(?:need|want|like)\s+(?:some\s+)?(?:help|assistance)\b"
    r"|\b(?:how|what)\s+(?:can|could|may|shall)\s+i\s+(?:help|assist|do\s+for)\b"
    r"|\bwhat\s+would\s+you\s+like\s+me\s+to\s+do\b|\byou(?:'d|\u2019d|\s+would)\s+like\s+me\s+to\s+focus\b"
    r"|\bi\s+(?:need|require|would\s+need)\s+(?:a\s+(?:bit|little)\s+)?(?:more\s+)?"
    r"(?:information|details|context|clarification)\b"
    # CPMöbius: asked back without naming the task ("Could you clarify ...?", "What grade level are you at?",
    # "Would you like an algebra or a geometry problem?", "What would you like to solve?").
    r"|\b(?:could|would|can|will)\s+you\s+(?:please\s+)?(?:clarify|elaborate|specify\s+(?:the\s+nature|what|which))\b"
    r"|\bplease\s+clarify\b|\byour\s+(?:grade|skill|math|current)\s+level\b"
    r"|\b(?:what|which)\s+(?:grade|grade\s+level|level|class|year|age\s+group)\s+(?:\w+\s+){0,3}?(?:are|were)\s+you\b"
    r"|\bwould\s+you\s+(?:like|prefer|rather)\b[^?\n]{0,80}?\b(?:problems?|questions?|exercises?|topics?)\b"
    r"|\bwould\s+you\s+like\s+me\s+to\b|\bwhat\s+(?:would|do)\s+you\s+(?:like|want)\s+(?:me\s+|the\s+(?:math\s+)?problem\s+)?to\b"
    r"|\bwhat\s+would\s+you\s+like\s+the\s+(?:math\s+)?problem\b"
    r"|\b(?:problems?|questions?)\s+you(?:'re|\u2019re|\s+are)\s+looking\s+for\b"
    r"|\bcan\s+you\s+(?:please\s+)?(?:generate|create|write|make|give\s+me|come\s+up\s+with)\s+(?:me\s+)?(?:a|an|another)\s+"
    r"(?:\w+\s+){0,3}?problems?\b|\b(?:requirements|constraints|guidelines|preferences)\b[^?.\n]{0,40}?\bin\s+mind\b"
    r"|\b(?:concept|topic|area|kind)\s+(?:do|would)\s+you\s+(?:have|want|like)\b",
    re.IGNORECASE,
)
# The task's topic or kind as a clause: "Could you tell me which topic you would like?", "Let me know what
# area of math you want.", "What topic would you like?", "Do you have a specific topic in mind?", "the
# problem you have in mind".
_ASKS_TOPIC = re.compile(
    rf"\b(?:(?:could|would|can|will)\s+you\s+(?:please\s+)?tell\s+me|let\s+me\s+know)\s+(?:which|what)\s+"
    rf"(?:\w+\s+){{0,3}}?{_TOPIC}"
    rf"|\b(?:what|which)\s+(?:(?:specific|particular)\s+)?{_TOPIC}\s+(?:of\s+\w+\s+)?(?:would|do|should)\s+you\s+"
    rf"(?:like|prefer|want|need|choose)\b"
    rf"|\b(?:do|did)\s+you\s+have\s+(?:a|any)\s+(?:(?:specific|particular|certain)\s+)?{_TOPIC}\s+in\s+mind\b"
    rf"|\b{_TOPIC}\s+(?:that\s+)?you\s+have\s+in\s+mind\b",
    re.IGNORECASE,
)
# A worked solution: a sentence that starts solving ("To solve this, we", "Let's calculate",
# "Step 1:", "Therefore, the sum ...") ...
_SOLVING = re.compile(
    r"(?:^|(?<=[.!?:])\s++|" + LINE_START + r")(?:\*\*)?(?:"
    r"to\s+(?:solve|find|calculate|compute|determine|answer|work\s+out)\s+(?:this|the|it)\b[^.?!\n]{0,200},\s*(?:we|you|let|first|i)\b"
    r"|let(?:'s|\s+us)\s+(?:solve|calculate|compute|find|break|work|add|multiply|substitute|simplify|check|(?:start|begin)\s+by)\b"
    r"|step\s*1\s*[:.)]|first,?\s+(?:we|let's)\b"
    r"|we\s+(?:can|get|need\s+to|will|first)\s+(?:use|solve|find|calculate|compute|apply|substitute|add|multiply|simplify|obtain|get)\b"
    r"|(?:therefore|thus|hence),?\s+(?:the|we|x|it|this)\b|so,?\s+the\s+(?:answer|result|sum|total|value|product)\b"
    r"|substituting\b|plugging\b)",
    re.IGNORECASE,
)
# ... or, after the question, a sentence asserting a value ("The sum ... is 55.", "... = 55", "(It equals
# 51.)", "we get $x = 3$"): a number, a decimal, a/b or \frac{a}{b}, closing the sentence.
_VALUE = (
    r"\$?+\\?[(\[]?\s*+(?:[a-z]\s*+=\s*+)?-?(?:\d[\d,]*+(?:\.\d+)?(?:\s*+/\s*+\d+)?|\\d?frac\{-?\d+\}\{\d+\})"
    r"\s*+(?:\\[)\]])?\s*+\$?\s*+[.!]?\s*+[)\]]?\s*+[.!]?\s*+$"
)
_VALUE_CLAIM = re.compile(r"(?:\b(?:is|are|equals?|was|will\s+be|gives?|makes?)\b|=)\s*+:?\s*+" + _VALUE, re.IGNORECASE)
# CPMöbius: answer leaks. A problem whose question is an imperative ends with "." rather than "?" ("Compute
# 17 × 3. (Hint: the result is 51.)", "Find 17 × 3. It equals 51."). The sentence that asks: one
# with "?" or one opening with a question word or an imperative.
_ASKING = re.compile(
    r"\?|^\W{0,3}(?:compute|calculate|find|determine|evaluate|solve|simplify|express|factor|expand|prove|show|"
    r"estimate|approximate|count|give|state|list|convert|write|what|which|how|who|when|where|why)\b",
    re.IGNORECASE,
)
# After it, a sentence whose subject is the asked quantity itself ("It", "The answer", "The value",
# "We get") and which only asserts its value. "Its length is 5.", "The total is 12." and "It is
# given that x + 2 = 5." are data, not answers.
_STATED_VALUE = re.compile(
    r"^\W{0,3}(?:(?:hint|note)\s*+:\s*+)?(?:(?:it|this|that|which)(?:\s+(?:is|equals?|was|will\s+be|comes\s+to)|['\u2019]s)"
    r"|the\s+(?:final\s+|correct\s+|exact\s+)?(?:answer|result|value|solution)\s+(?:is|equals?|was|will\s+be|comes\s+to)"
    r"|(?:so\s+|then\s+)?we\s+(?:get|obtain|find|have))\s*+:?\s*+" + _VALUE,
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class Extraction:
    """A Coach response with its chat wrapping cut off.

    Attributes:
        text: the problem text (stripped); "" when nothing but wrapping was there.
        removed: what was cut, in order, each of "preamble", "heading", "closing".
    """

    text: str
    removed: tuple[str, ...] = ()


def _strip_opening(text: str) -> tuple[str, tuple[str, ...]]:
    removed: list[str] = []
    for _ in range(4):  # "Sure! Here's one:\n\n**Problem:** ..." has three layers
        before = text
        match = _INTERJECTION.match(text)
        if match:
            text, removed = text[match.end() :], removed + ["preamble"]
        match = _PRESENTER.match(text)
        if (
            match
            and _PRESENTED.search(match.group("body"))
            and (match.group("end") in (":", "\n", "") or _PRESENTED_END.search(match.group("body")))
        ):
            text, removed = text[match.end() :], removed + ["preamble"]
        match = _HEADING.match(text) or _RULE.match(text)
        if match:
            text, removed = text[match.end() :], removed + ["heading"]
        if text == before:
            break
    return text, tuple(dict.fromkeys(removed))


def _cut_lead_in(text: str) -> tuple[str, tuple[str, ...]]:
    """Cut talk before a later presenter sentence that introduces a quoted problem (`_LEAD_IN_AT`)."""
    for at in _LEAD_IN_AT.finditer(text):
        rest = text[at.end() :]
        match = _PRESENTER.match(rest)
        if (
            match
            and match.group("end") == ":"
            and _PRESENTED.search(match.group("body"))
            and _QUOTED_PARAGRAPH.match(rest[match.end() :])
        ):
            return rest[match.end() :], ("preamble",)
    return text, ()


def extract_problem(response: str) -> Extraction:
    """Cut a chat model's preamble, problem heading and closing remark off a Coach response.

    # CPMöbius: the released code uses the response verbatim (a real chat Coach opens with
    "Sure, here's a valid math problem:" or closes with "I hope this helps!").

    Args:
        response: the Coach response, decoded without special tokens.

    Returns:
        An `Extraction`: ``text`` is what remains, stripped (a response with no wrapping comes back
        unchanged but stripped); ``removed`` names what was cut ("preamble", "heading", "closing").
        An interjection or presenter sentence is cut only from the start and only when it names
        what it presents ("here's a problem:", not "Here is a sequence: 2, 4, 8, ..."); further in,
        only when it ends with ":" and a quoted paragraph follows (talk before it is cut); a closing
        remark runs from its first word to the end of the response.
    """
    text, removed = _strip_opening(response.strip())
    text, lead_in = _cut_lead_in(text)
    removed = tuple(dict.fromkeys(removed + lead_in))
    match = _CLOSING.search(text)
    if match:
        text, removed = text[: match.start()], removed + ("closing",)
    text = _RULE.sub("", text.strip()).strip()
    # A problem set in quotes or bold by the presenter: "Here's one: \"What is 2 + 3?\"".
    for left, right in (('"', '"'), ("\u201c", "\u201d"), ("**", "**")):
        inner = text[len(left) : -len(right)] if len(text) > len(left) + len(right) else ""
        if text.startswith(left) and text.endswith(right) and left not in inner and right not in inner:
            text = inner.strip()
    return Extraction(text, removed)


def is_refusal(text: str) -> bool:
    """Whether the response declines the task ("I'm sorry, but as an AI language model, I can't ...").

    Checked on the whole response, wherever the refusal stands (a real one ended with "?" and
    passed as a problem).
    """
    return bool(_REFUSAL.search(text))


def asks_user(text: str) -> bool:
    """Whether the response asks the user for the problem (or its kind) instead of writing one.

    Checked on the whole response, like a refusal: "Sure! What type of math problem are you looking
    for?" ends with "?" and would pass as a problem (4 of 16 responses of Qwen2.5-Coder-0.5B-Instruct
    as Coach, recorded on a CPU at T=0.9, asked back). Also offers of help ("What do you need
    assistance with?") and questions about the topic ("Could you tell me which topic you would
    like?"); a problem's own question ("What is the value of x?", "Could you tell how many divisors
    360 has?") is not matched.
    """
    return bool(_ASKS_USER.search(text) or _ASKS_TOPIC.search(text))


def is_worked_solution(text: str) -> bool:
    """Whether the problem is followed by (part of) its own solution or answer.

    Three kinds (a real Coach: "Surely, here's ... the sum ... is 55."; an answer leak): a sentence that
    starts solving ("To solve this, we ...", "Let's calculate", "Step 1:", "Therefore, the ...", "We
    can use ..."), anywhere; after the first question mark, a sentence that ends by asserting a number
    ("The sum of the first 10 positive integers is 55.", "... = 55"); and after the first sentence that
    asks (a "?" or an imperative: "Compute 17 × 3."), a sentence whose subject is the asked quantity
    and that asserts its value ("It equals 51.", "(Hint: the result is 51.)", "The value is 51.", "We
    get $x = 3$."). Data stated before the question ("The sum of two numbers is 55. What are they?",
    "A number is doubled and the result is 14. What is it?") or after an imperative ("Find the area.
    Its length is 5 and its width is 3.") is not a solution. Answer labels and boxed answers are
    ``leaks_answer`` (`cpmobius.coach`), checked first.

    Args:
        text: the problem text (any length; the patterns run in linear time).
    """
    if _SOLVING.search(text):
        return True
    sentences = [sentence.strip() for sentence in _SENTENCE_END.split(text) if sentence.strip()]
    after_mark = after_ask = False
    for sentence in sentences:
        if (after_mark and _VALUE_CLAIM.search(sentence)) or (after_ask and _STATED_VALUE.search(sentence)):
            return True
        after_mark = after_mark or "?" in sentence
        after_ask = after_ask or bool(_ASKING.search(sentence))
    return False
