"""The policy stand-in of the tests: scripted samples, no Ray, no model. It is a whole `TrainedPolicy`
(`tests/test_stand_ins.py` holds it against the protocol), so the loop, the Coach's candidates, the fixed pool,
R-Zero's schedule, validation and the checkpoints can all be driven by it. Beside it, `FAST_TOY`: the toy world the
tests that run a loop (but not for the default run's numbers) stand in for the default's."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import numpy as np
import torch
from verl import DataProto

from cpmobius.engine.sharing import EngineGuard

# A quicker toy world than the default run's: short pretraining, a Coach pretrained on problems that writes them
# without a warm-up (the warm-up has its own test), Player answers always boxed. Loops built inside pytest and the
# bench's process compute on this CPU's own kernels and share one cache folder, ``model_cache / "fast_toy"``, so one
# pretraining; a `python -m cpmobius.main` run holds the portable kernels and would pretrain it again there.
FAST_TOY = [
    "model.pretrain.player_steps=300",
    "model.pretrain.coach_steps=300",
    "model.pretrain.coach_corpus=problems",
    "model.pretrain.player_unboxed=0.0",
    "warmup.enabled=false",
]
# Large steps on the quick toy world: the Player's greedy validation accuracy moves within a step or two, and every
# Coach parameter moves (1e-2 wrecks the Coach's text).
LARGE_STEPS = ["actor_rollout_ref.actor.optim.lr=1e-2", "coach.verl.actor.optim.lr=1e-3"]


class ScriptedPolicy:
    """A policy whose samples are scripted: ``script(prompt_text, index)`` gives the texts of the index-th prompt's
    group, in order (the first n are used). Records its activations, its generate calls, the batch it was last
    updated on, its saves and its loads.

    Args:
        script: the group's texts for a prompt's last message and its place in the call.
        entropies: per prompt text, the (n, 2) token entropies `compute_log_probs` returns for its group's rows
            (by place in the group); zeros when None.
        name: the policy's name in its `guard`'s history ("coach", "player").
        guard: the `EngineGuard` it wakes through, shared with the other policy as the real ones share theirs; its
            own when None.
        truncated: the texts decoded as cut at the length limit (`decode_responses`' second list).
        token_prob: the probability of every response token under the teacher-forced pass (`compute_log_probs`).
        tokenizer: what `prompt_token_ids` renders prompts with (``apply_chat_template``); ten ids a prompt when None.
        weight: the one number its checkpoint holds: `save` writes it to ``<path>/policy.json``, `load` reads it back.
        save_error: raised by `save` after the file is written (a full disk, a process killed mid-save).
    """

    max_prompt_tokens = 10_000
    uses_reference = False
    stop_token_ids: set[int] = set()

    def __init__(
        self,
        script: Callable[[str, int], list[str]],
        entropies: Optional[dict[str, torch.Tensor]] = None,
        *,
        name: str = "policy",
        guard: Optional[EngineGuard] = None,
        truncated: Iterable[str] = (),
        token_prob: float = 1.0,
        tokenizer: Any = None,
        weight: float = 0.0,
        save_error: Optional[BaseException] = None,
    ) -> None:
        self.script, self.entropies = script, entropies
        self.name, self.guard = name, guard if guard is not None else EngineGuard()
        self.truncated, self.token_prob, self.tokenizer = set(truncated), token_prob, tokenizer
        self.weight, self.save_error = weight, save_error
        self.global_steps = self.generation_calls = self.activations = 0
        self.generated: list[tuple[list[str], int]] = []  # each call's prompts (last messages) and n
        self.prompts: list[list[list[dict]]] = []  # each call's whole chat prompts
        self.updated: DataProto | None = None
        self.saved: list[str] = []
        self.loaded: list[str] = []

    def activate(self) -> None:
        """Wakes through the guard as `Policy.activate` does (the other policy is put to sleep)."""
        self.activations += 1
        if self.guard.awake is not self:
            self.guard.before_wake(self)
            self.guard.after_wake(self)

    def deactivate(self) -> None:
        self.guard.after_sleep(self)

    def generate(self, prompts, n=1, validate=False, greedy=False):
        texts_in = [p[-1]["content"] for p in prompts]
        self.generated.append((texts_in, n))
        self.prompts.append([list(p) for p in prompts])
        groups = [self.script(text, i)[:n] for i, text in enumerate(texts_in)]
        texts = [text for group in groups for text in group]
        return DataProto.from_dict(
            tensors={"response_mask": torch.ones(len(texts), 2), "row": torch.arange(len(texts))},
            non_tensors={
                "uid": np.array([f"g{i // n}" for i in range(len(texts))], dtype=object),
                "text": np.array(texts, dtype=object),
                "question": np.array([q for q, group in zip(texts_in, groups) for _ in group], dtype=object),
            },
            meta_info={"temperature": 1.0},
        )

    def decode_responses(self, batch):
        texts = list(batch.non_tensor_batch["text"])
        return texts, [text in self.truncated for text in texts]

    def count_prompt_tokens(self, prompts):
        return [10] * len(prompts)

    def prompt_token_ids(self, prompts):
        if self.tokenizer is None:
            return [list(range(10)) for _ in prompts]
        kwargs = dict(add_generation_prompt=True, tokenize=True, return_dict=False)
        return [list(self.tokenizer.apply_chat_template(p, **kwargs)) for p in prompts]

    def compute_log_probs(self, batch):
        """(B, response length) log-probs of ``log(token_prob)`` on the response mask, and each row's scripted
        entropies (by prompt and place in its group), or zeros."""
        mask = batch.batch["response_mask"].float()  # (B, response length), whoever built the batch
        if self.entropies is None:
            return mask * math.log(self.token_prob), torch.zeros_like(mask)
        rows = batch.batch["row"].tolist()
        n = len(next(iter(self.entropies.values())))
        questions = batch.non_tensor_batch["question"]
        return torch.zeros(len(rows), 2), torch.stack([self.entropies[q][r % n] for q, r in zip(questions, rows)])

    def compute_ref_log_probs(self, batch):
        return torch.zeros(len(batch), 2)

    def update(self, batch):
        self.updated = batch
        self.global_steps += 1
        return {"actor/pg_loss": 0.0}

    def save(self, path):
        self.saved.append(path)
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "policy.json").write_text(json.dumps({"weight": self.weight}))
        if self.save_error is not None:
            raise self.save_error

    def load(self, path, global_steps=None):
        self.loaded.append(path)
        self.weight = json.loads((Path(path) / "policy.json").read_text())["weight"]
        if global_steps is not None:
            self.global_steps = global_steps


def not_sampled(prompt: str, index: int) -> list[str]:
    """The script of a stand-in whose samples a test makes otherwise (a stage it replaces): being sampled fails."""
    raise AssertionError(f"the stand-in was asked to sample for {prompt!r}")
