"""The toy world of the embedded default: integer arithmetic with known answers, tiny Qwen2 models.

A laptop CPU cannot run Qwen2.5-Math, so the default run shrinks the models and the task, never the
method: the Coach writes arithmetic problems ("What is 12 + 7 * 3?"), the Player answers with
``\\boxed{...}``, and the real chat-template, rollout, filter, update and validation code paths run
through verl. A few seconds of in-process pretraining (cached on disk) teach the random-initialised
tiny models the formats, so the Coach writes well-formed problems and the Player solves a middling
share of them: the difficulty filter has groups to keep and Δt has something to measure.

Difficulty knob: the operators, the number of operands and the size of the numbers (`make_problem`).
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from cpmobius.tiny_models import TINY_SPEC, build_char_tokenizer, build_tiny_qwen2

OPERATORS = ("+", "-", "*")


@dataclass(frozen=True)
class ToyProblem:
    """One arithmetic problem: its text (as the Coach writes it) and its exact integer answer."""

    text: str
    answer: str
    difficulty: int


def make_problem(rng: random.Random, difficulty: Optional[int] = None) -> ToyProblem:
    """A random problem of difficulty 0–3.

    0: a + b with one-digit numbers; 1: a (+|-|*) b, one digit; 2: two-digit a (+|-) b;
    3: three one-digit operands.
    """
    difficulty = rng.randint(0, 3) if difficulty is None else difficulty
    digits = 99 if difficulty == 2 else 9
    count = 3 if difficulty == 3 else 2
    operators = ("+",) if difficulty == 0 else OPERATORS[:2] if difficulty == 2 else OPERATORS
    operands = [rng.randint(0, digits) for _ in range(count)]
    expression = str(operands[0])
    for operand in operands[1:]:
        expression += f" {rng.choice(operators)} {operand}"
    return ToyProblem(f"What is {expression}?", str(eval(expression)), difficulty)  # noqa: S307 - digits and + - * only


def validation_problems(size: int, seed: int) -> list[ToyProblem]:
    """A fixed synthetic validation set (the toy world's stand-in for AMC), same seed → same set."""
    rng = random.Random(seed)
    return [make_problem(rng) for _ in range(size)]


def player_target(problem: ToyProblem) -> str:
    """The Player's pretraining answer: the boxed result, nothing else (short responses keep CPU runs fast)."""
    return f"\\boxed{{{problem.answer}}}"


@dataclass(frozen=True)
class PretrainSpec:
    """How the toy models are pretrained; the cache key of the pretrained folders."""

    player_steps: int = 600
    coach_steps: int = 150
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 0


def _chat_ids(tokenizer: Any, user: str, assistant: str) -> tuple[list[int], int]:
    """Token ids of a user turn + assistant turn, and where the assistant's tokens start."""
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": user}], add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    answer_ids = tokenizer.encode(assistant, add_special_tokens=False) + [tokenizer.eos_token_id]
    return prompt_ids + answer_ids, len(prompt_ids)


def pretrain(model: Any, tokenizer: Any, pairs: list[tuple[str, str]], steps: int, spec: PretrainSpec) -> list[float]:
    """Supervised next-token training on (user, assistant) pairs, loss on assistant tokens only
    (on a GPU when there is one; the model is returned on the CPU).

    Returns:
        The loss of every step (mean over assistant tokens of the batch).
    """
    rng = random.Random(spec.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(steps):
        batch = [_chat_ids(tokenizer, *rng.choice(pairs)) for _ in range(spec.batch_size)]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, start) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            labels[row, start : len(ids)] = torch.tensor(ids[start:])
            attention[row, : len(ids)] = 1
        loss = model(input_ids=input_ids.to(device), attention_mask=attention.to(device), labels=labels.to(device)).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.to("cpu").eval()
    return losses


def materialize_toy_models(
    coach_path: str | os.PathLike,
    player_path: str | os.PathLike,
    coach_instruction: str,
    tiny_spec: Optional[dict[str, int]] = None,
    pretrain_spec: PretrainSpec = PretrainSpec(),
) -> tuple[Path, Path]:
    """Build, pretrain and save the toy Coach and Player (HF layout), unless cached with the same specs.

    The Coach learns ``coach_instruction`` → a problem; the Player learns problem → ``\\boxed{answer}``,
    trained only ``player_steps`` steps so that it is right on some problems and wrong on others.

    Returns:
        ``(coach_path, player_path)``.
    """
    record = {"tiny_spec": dict(tiny_spec or TINY_SPEC), "pretrain": asdict(pretrain_spec), "instruction": coach_instruction}
    rng = random.Random(pretrain_spec.seed)
    problems = [make_problem(rng) for _ in range(4000)]
    jobs = (
        (Path(coach_path).expanduser(), [(coach_instruction, p.text) for p in problems], pretrain_spec.coach_steps, 1),
        (Path(player_path).expanduser(), [(p.text, player_target(p)) for p in problems], pretrain_spec.player_steps, 2),
    )
    for path, pairs, steps, model_seed in jobs:
        marker = path / "cpmobius_toy.json"
        if marker.exists() and json.loads(marker.read_text()) == record:
            continue
        tokenizer = build_char_tokenizer()
        model = build_tiny_qwen2(tokenizer, tiny_spec, seed=model_seed)
        torch.manual_seed(pretrain_spec.seed + model_seed)
        losses = pretrain(model, tokenizer, pairs, steps, pretrain_spec)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "cpmobius_toy.json").write_text(json.dumps(record))
        (tmp / "pretrain_loss.json").write_text(json.dumps({"first": losses[:5], "last": losses[-5:]}))
        if path.exists():
            import shutil

            shutil.rmtree(path)
        tmp.rename(path)
    return jobs[0][0], jobs[1][0]


_PROBLEM = re.compile(r"^What is ([0-9+\-* ]+)\?$")


def solve(text: str) -> Optional[str]:
    """The exact answer of a well-formed toy problem ("What is 3 + 4 * 2?"), or None for any other text.

    Used to log pseudo-label accuracy in the toy world, where the truth is known.
    """
    match = _PROBLEM.match(text.strip())
    if not match or not re.fullmatch(r"\s*\d+(\s*[+\-*]\s*\d+)*\s*", match.group(1)):
        return None
    if any(len(number) > 6 for number in re.findall(r"\d+", match.group(1))):
        return None
    expression = re.sub(r"\d+", lambda m: str(int(m.group())), match.group(1))  # "05" is 5, not a syntax error
    return str(eval(expression))  # noqa: S307 - digits and + - * only, checked above
