"""The toy world of the embedded default: integer arithmetic with known answers, tiny Qwen2 models.

A laptop CPU cannot run Qwen2.5-Math, so the default run shrinks the models and the task, never the
method: the Coach writes arithmetic problems ("What is ((7 * 3))?"), the Player answers with
``\\boxed{...}``, and the real chat-template, rollout, filter, update and validation code paths run
through verl. A minute or two of in-process pretraining (cached on disk) teaches the random-initialised
tiny models the formats and the answers.

Difficulty (`make_problem`, `problem_difficulty`): the nesting depth of the parentheses around a
one-digit a (+|-|*) b, levels 0 .. LEVELS-1. The Player knows every answer, but the deeper the nesting
the less often it writes the answer in the graded ``\\boxed{}`` form (`noisy_player_target`, one share
per level in ``model.pretrain.player_unboxed``): greedy, it boxes level 0 only. Majority-vote RL makes
boxing likelier at the levels above the ones it trains on, so the levels flip one after another. The
world's own problems (the Coach's corpus, the warm-up set) are mostly shallow (`NATURAL_LEVEL_DECAY`);
the validation set weighs every level the same.
"""

from __future__ import annotations

import ast
import functools
import operator
import random
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch
from tqdm.auto import tqdm

OPERATORS = ("+", "-", "*")
# Levels 0 .. LEVELS-1: a problem of level d is a one-digit a (+|-|*) b wrapped in d pairs of parentheses
# ("What is 7 - 3?", "What is ((7 - 3))?"): the arithmetic is the same at every level (300 facts a tiny
# Qwen2 learns reliably), the nesting is what makes a problem "harder" for the Player (see
# `noisy_player_target`) and what the Coach has to learn to write more of.
LEVELS = 5
# How the world's own problems are spread over the levels (the Coach's pretraining corpus, the warm-up
# set: the toy stand-in for the Eurus problems): level d has weight NATURAL_LEVEL_DECAY**d, so about
# 70 % are level 0, 21 % level 1, 6 % level 2, 2 % level 3, 0.6 % level 4. The validation set and the
# Player's pretraining cover every level equally.
NATURAL_LEVEL_DECAY = 0.3


def natural_level(rng: random.Random) -> int:
    """A level drawn from the world's own spread (`NATURAL_LEVEL_DECAY`)."""
    return rng.choices(range(LEVELS), weights=[NATURAL_LEVEL_DECAY**d for d in range(LEVELS)])[0]


@dataclass(frozen=True)
class ToyProblem:
    """One arithmetic problem: its text (as the Coach writes it), its exact integer answer, its level."""

    text: str
    answer: str
    difficulty: int


def make_problem(rng: random.Random, difficulty: Optional[int] = None) -> ToyProblem:
    """A random problem of level ``difficulty`` (0 .. LEVELS-1; None: drawn by `natural_level`):
    a one-digit a (+|-|*) b inside ``difficulty`` pairs of parentheses ("What is ((7 * 3))?" = 21)."""
    difficulty = natural_level(rng) if difficulty is None else difficulty
    if not 0 <= difficulty < LEVELS:
        raise ValueError(f"difficulty must be in 0..{LEVELS - 1}, got {difficulty}")
    expression = f"{rng.randint(0, 9)} {rng.choice(OPERATORS)} {rng.randint(0, 9)}"
    answer = str(integer_arithmetic(expression))
    return ToyProblem(f"What is {'(' * difficulty}{expression}{')' * difficulty}?", answer, difficulty)


def validation_problems(size: int, seed: int) -> list[ToyProblem]:
    """A fixed synthetic validation set (the toy world's stand-in for AMC), same seed → same set; the
    levels take turns (0, 1, …, LEVELS-1, 0, …), so every level has the same weight in the accuracy."""
    rng = random.Random(seed)
    return [make_problem(rng, i % LEVELS) for i in range(size)]


def player_target(problem: ToyProblem) -> str:
    """The Player's pretraining answer: the boxed result, nothing else (short responses keep CPU runs fast)."""
    return f"\\boxed{{{problem.answer}}}"


# Slips of a noisy Player: the true result plus one of these offsets.
SLIPS = (-2, -1, 1, 2)


def unboxed_share(level: int, unboxed: float | Sequence[float], growth: float = 1.0) -> float:
    """The share of a level's pretraining answers written without ``\\boxed{}``: ``unboxed[level]`` when
    ``unboxed`` is one share per level; else ``unboxed`` at level 0, its odds multiplied by ``growth``
    for each level up (growth 1: the same share at every level)."""
    if not isinstance(unboxed, (int, float)):
        return float(unboxed[level])
    if unboxed <= 0.0 or unboxed >= 1.0:
        return unboxed
    odds = unboxed / (1.0 - unboxed) * growth**level
    return odds / (1.0 + odds)


def noisy_player_target(
    problem: ToyProblem,
    rng: random.Random,
    noise: float,
    unboxed: float | Sequence[float] = 0.0,
    unboxed_growth: float = 1.0,
) -> str:
    """`player_target`, except that a share ``noise`` of the answers is off by a slip (`SLIPS`) and a
    share `unboxed_share` of the problem's level (``unboxed[level]`` for one share per level, as the toy
    preset gives; or one share with an odds ``unboxed_growth`` per level up) is written as a sentence
    without ``\\boxed{}`` (which no grader accepts).

    A Player pretrained on these knows the answers (the true one stays the most likely) but gives them
    in the graded format less and less reliably as problems get deeper: its greedy answer is boxed up
    to some level and unboxed above it. Majority-vote RL on the levels where enough samples are boxed
    to form a pseudo-label makes boxing likelier at the levels above too, so the levels flip one after
    another (paper §3; format and consistency are what such RL first teaches a real base model, too).
    """
    answer = problem.answer if rng.random() >= noise else str(int(problem.answer) + rng.choice(SLIPS))
    if rng.random() < unboxed_share(problem.difficulty, unboxed, unboxed_growth):
        return f"The answer is {answer}."
    return f"\\boxed{{{answer}}}"


# The Coach's generic pretraining: arithmetic in several surface forms, answering generic prompts
# (never the Coach instruction). Only the question form is a well-formed problem; the warm-up (SFT
# on instruction → "What is ...?") teaches the Coach to write that form when asked.
GENERIC_PROMPTS = ("Write some arithmetic.", "Say something about numbers.", "Give an example.")


def generic_coach_text(problem: ToyProblem, rng: random.Random) -> str:
    """One of four surface forms of a problem: a question (well-formed), an equation with its result,
    a bare expression, or a sentence stating the result (the last three fail the Coach-output validator)."""
    expression = problem.text[len("What is ") : -1]
    forms = (problem.text, f"{expression} = {problem.answer}", expression, f"{expression} makes {problem.answer}.")
    return rng.choice(forms)


def coach_warmup_messages(instruction: str, count: int, seed: int) -> list[list[dict[str, str]]]:
    """The toy Coach warm-up set in the ``messages`` format of `cpmobius.warmup.data` (user turn =
    the Coach instruction, assistant turn = one problem); the toy stand-in for the 4K Eurus problems."""
    rng = random.Random(seed)
    return [
        [{"role": "user", "content": instruction}, {"role": "assistant", "content": make_problem(rng).text}]
        for _ in range(count)
    ]


@dataclass(frozen=True)
class PretrainSpec:
    """How the toy models are pretrained; the cache key of the pretrained folders."""

    player_steps: int = 600
    coach_steps: int = 150
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 0
    # Share of the Player's pretraining answers that carry a slip, share written unboxed at level 0, and the
    # factor on the odds of an unboxed answer per level up (`noisy_player_target`).
    player_answer_noise: float = 0.0
    player_unboxed: float | tuple[float, ...] = 0.0  # one share for all levels (see growth) or one per level
    player_unboxed_growth: float = 1.0
    # "generic": the Coach learns arithmetic in mixed forms from generic prompts (warm-up needed);
    # "problems": it learns the Coach instruction → a question directly (no warm-up needed).
    coach_corpus: str = "problems"

    def __post_init__(self) -> None:
        if not isinstance(self.player_unboxed, (int, float)):  # a list from the config: hashable, JSON-able
            shares = tuple(float(share) for share in self.player_unboxed)
            if len(shares) != LEVELS or not all(0.0 <= share < 1.0 for share in shares):
                raise ValueError(
                    f"model.pretrain.player_unboxed: one share in [0, 1) per level ({LEVELS}), got {list(shares)}"
                )
            object.__setattr__(self, "player_unboxed", shares)


Sampler = Callable[[random.Random], tuple[str, str]]


def _chat_ids(tokenizer: Any, user: str, assistant: str) -> tuple[list[int], int]:
    """Token ids of a user turn + assistant turn, and where the assistant's tokens start."""
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": user}], add_generation_prompt=True, tokenize=False
    )
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    answer_ids = tokenizer.encode(assistant, add_special_tokens=False) + [tokenizer.eos_token_id]
    return prompt_ids + answer_ids, len(prompt_ids)


def pretrain(
    model: Any, tokenizer: Any, sample: Sampler, steps: int, spec: PretrainSpec, progress: Optional[str] = None
) -> list[float]:
    """Supervised next-token training on (user, assistant) pairs drawn fresh from ``sample`` each
    step, loss on assistant tokens only (on a GPU when there is one; the model is returned on the CPU).

    Args:
        progress: a label for a progress bar on stderr (steps, loss), or None for none.

    Returns:
        The loss of every step (mean over assistant tokens of the batch).
    """
    rng = random.Random(spec.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # matrices this small gain nothing from threads, which spin on a busy CPU
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: min(1.0, (i + 1) / 50) * max(0.1, 1 - i / max(steps, 1))
    )
    model.train()
    losses = []
    # A terminal redraws the bar in place; a log file gets a line every 15 s.
    bar = tqdm(
        total=steps,
        desc=progress,
        unit="step",
        disable=progress is None,
        dynamic_ncols=True,
        mininterval=0.5 if sys.stderr.isatty() else 15.0,
    )
    # The corpora hold a few thousand distinct pairs: each is tokenized once (a fifth of a step's time otherwise).
    chat_ids = functools.lru_cache(maxsize=None)(functools.partial(_chat_ids, tokenizer))
    pad = tokenizer.pad_token_id
    for _ in range(steps):
        batch = [chat_ids(*sample(rng)) for _ in range(spec.batch_size)]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in batch])
        labels = torch.tensor([[-100] * start + ids[start:] + [-100] * (width - len(ids)) for ids, start in batch])
        attention = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in batch])
        loss = model(input_ids=input_ids.to(device), attention_mask=attention.to(device), labels=labels.to(device)).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        bar.update()
        if bar.n % 25 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    bar.close()
    torch.set_num_threads(threads)
    model.to("cpu").eval()
    if device.type == "cuda":
        # The driver keeps no GPU memory that the policies' workers and engines need (on the H200 run,
        # 37 GiB of optimizer state and cached blocks stayed behind).
        del optimizer, schedule
        import gc

        gc.collect()
        torch.cuda.empty_cache()
    return losses


def coach_sampler(instruction: str, corpus: str) -> Sampler:
    """(user, assistant) pairs of the Coach's pretraining corpus (`PretrainSpec.coach_corpus`)."""
    if corpus == "problems":
        return lambda rng: (instruction, make_problem(rng).text)
    if corpus == "generic":
        return lambda rng: (rng.choice(GENERIC_PROMPTS), generic_coach_text(make_problem(rng), rng))
    raise ValueError(f"model.pretrain.coach_corpus: 'problems' or 'generic', got {corpus!r}")


def player_sampler(noise: float, unboxed: float | Sequence[float] = 0.0, unboxed_growth: float = 1.0) -> Sampler:
    """(problem, answer) pairs of the Player's pretraining, every level equally often, with slips and
    unboxed answers (`noisy_player_target`)."""

    def sample(rng: random.Random) -> tuple[str, str]:
        problem = make_problem(rng, rng.randrange(LEVELS))
        return problem.text, noisy_player_target(problem, rng, noise, unboxed, unboxed_growth)

    return sample


_PROBLEM = re.compile(r"^What is ([0-9+\-*() ]+)\?$")


def solve(text: str) -> Optional[str]:
    """The exact answer of a well-formed toy problem ("What is 3 + 4 * 2?", "What is ((3 - 8))?"),
    or None for any other text (other characters, numbers of more than 6 digits, unbalanced or
    misplaced parentheses).

    Used to log pseudo-label accuracy in the toy world, where the truth is known.
    """
    match = _PROBLEM.match(text.strip())
    if not match or not re.fullmatch(r"\s*\d+(\s*[+\-*]\s*\d+)*\s*", re.sub(r"[()]", "", match.group(1))):
        return None
    if any(len(number) > 6 for number in re.findall(r"\d+", match.group(1))):
        return None
    expression = re.sub(r"\d+", lambda m: str(int(m.group())), match.group(1))  # "05" is 5, not a syntax error
    try:
        return str(integer_arithmetic(expression))
    except (SyntaxError, ValueError, RecursionError):  # "(3 +) 4", "(3)(4)", a tree too deep to parse
        return None


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def integer_arithmetic(expression: str) -> int:
    """The value of an expression of non-negative integers, + - * and parentheses (Python's precedence),
    computed from its syntax tree: nothing in the text is run as code.

    Raises:
        SyntaxError: not a Python expression ("(3 +) 4").
        ValueError: anything but integers, + - * and parentheses ("(3)(4)", "2 ** 3", "-1", "x").
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # "(3)(4)": 'int' object is not callable
        tree = ast.parse(expression.strip(), mode="eval")

    values: list[int] = []
    todo: list[tuple[ast.AST, bool]] = [(tree.body, False)]  # post-order without recursion: 1+1+...+1 is deep
    while todo:
        node, operands_done = todo.pop()
        if isinstance(node, ast.Constant) and type(node.value) is int:
            values.append(node.value)
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            if operands_done:
                right = values.pop()
                values.append(_ARITHMETIC[type(node.op)](values.pop(), right))
            else:
                todo += [(node, True), (node.right, False), (node.left, False)]
        else:
            raise ValueError(f"not integer arithmetic: {ast.dump(node)[:80]}")
    return values[0]


_LEVELLED = re.compile(r"^What is (\(*)(\d \S \d)(\)*)\?$")


def problem_difficulty(text: str) -> Optional[int]:
    """The level (`make_problem`) of a toy problem text: the depth of the parentheses around a one-digit
    a (+|-|*) b; None for any other text (for the per-difficulty metrics).
    """
    match = _LEVELLED.match(text.strip())
    if not match or len(match.group(1)) != len(match.group(3)) or len(match.group(1)) >= LEVELS:
        return None
    return len(match.group(1)) if match.group(2)[2] in OPERATORS else None


class ToyWorld:
    """The toy world as the loop sees a world (`cpmobius.worlds.World`): its own validation set, and the true answer
    and level of every problem text it defines. Real data sets are not worlds: they have answers only for their own
    problems, none for what a Coach writes."""

    name = "toy"
    default_size = 32  # validation problems when validation.size is null

    def validation_set(self, size: Optional[int], seed: int) -> tuple[list[str], list[str], list[str], list[str]]:
        """``size`` problems (`default_size` when None) from ``seed``: their ids, texts, answers and the Player's
        correct responses token for token (`player_target`)."""
        rows = validation_problems(size or self.default_size, seed)
        ids = [f"{self.name}-{i}" for i in range(len(rows))]
        return ids, [r.text for r in rows], [r.answer for r in rows], [player_target(r) for r in rows]

    def solve(self, text: str) -> Optional[str]:
        return solve(text)

    def difficulty(self, text: str) -> Optional[int]:
        return problem_difficulty(text)


WORLD = ToyWorld()
