"""The policy stand-in of the tests: scripted samples, no Ray, no model. It is a whole `TrainedPolicy`
(`tests/test_stand_ins.py` holds it against the protocol), so the loop, the Coach's candidates, the fixed pool and
R-Zero's schedule can all be driven by it."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch
from verl import DataProto

from cpmobius.engine.sharing import EngineGuard


class ScriptedPolicy:
    """A policy whose samples are scripted: ``script(prompt_text, index)`` gives the texts of the index-th prompt's
    group, in order (the first n are used). Records its activations, its generate calls and the batch it was last
    updated on.

    Args:
        script: the group's texts for a prompt's last message and its place in the call.
        entropies: per prompt text, the (n, 2) token entropies `compute_log_probs` returns for its group's rows
            (by place in the group); zeros when None.
    """

    max_prompt_tokens = 10_000
    uses_reference = False
    tokenizer = None  # nothing here decodes token ids: `decode_responses` reads the scripted texts
    stop_token_ids: set[int] = set()

    def __init__(
        self, script: Callable[[str, int], list[str]], entropies: Optional[dict[str, torch.Tensor]] = None
    ) -> None:
        self.script, self.entropies = script, entropies
        self.guard = EngineGuard()
        self.global_steps = self.generation_calls = self.activations = 0
        self.generated: list[tuple[list[str], int]] = []
        self.updated: DataProto | None = None
        self.saved: list[str] = []

    def activate(self) -> None:
        self.activations += 1

    def generate(self, prompts, n=1, validate=False, greedy=False):
        texts_in = [p[-1]["content"] for p in prompts]
        self.generated.append((texts_in, n))
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
        return list(batch.non_tensor_batch["text"]), [False] * len(batch)

    def count_prompt_tokens(self, prompts):
        return [10] * len(prompts)

    def prompt_token_ids(self, prompts):
        return [list(range(10)) for _ in prompts]

    def compute_log_probs(self, batch):
        """(B, response length) zero log-probs and each row's scripted entropies (by prompt and place in its group),
        or zeros."""
        shape = batch.batch["response_mask"].shape  # (B, response length), whoever built the batch
        if self.entropies is None:
            return torch.zeros(shape), torch.zeros(shape)
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

    def load(self, path, global_steps=None):
        if global_steps is not None:
            self.global_steps = global_steps
