"""What the stages use of a policy: the Coach and the Player as the loop, the filter, the Coach's
generation, validation and checkpoints see them (`cpmobius.engine.policy.Policy` is the one
implementation on verl; tests pass stand-ins with the members they need).

`TrainedPolicy` is static types only (`typing.Protocol`, not checked at run time); `train_policy` is the one
update sequence every method runs on it.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol, Sequence

from verl import DataProto

from cpmobius.prompts import Messages


class TrainedPolicy(Protocol):
    """One policy as the stages call it (paper Algorithm 1: both the Coach and the Player).

    Attributes:
        guard: the `EngineGuard` the policies share (``guard.switches`` counts engine switches).
        global_steps: optimizer steps taken (saved with each checkpoint).
        generation_calls: `generate` calls made (saved, so resumed request names stay deterministic).
    """

    guard: Any
    global_steps: int
    generation_calls: int

    @property
    def tokenizer(self) -> Any:
        """The policy's Hugging Face tokenizer."""

    @property
    def stop_token_ids(self) -> set[int]:
        """Token ids that end a response (a response ending otherwise was cut at the length limit)."""

    @property
    def uses_reference(self) -> bool:
        """Whether the update needs reference log-probs (a KL term)."""

    @property
    def max_prompt_tokens(self) -> int:
        """The longest prompt in tokens the policy accepts (``data.max_prompt_length``)."""

    def activate(self) -> None:
        """Wake this policy's engine (putting the other policy's to sleep)."""

    def generate(self, prompts: Sequence[Messages], n: int = 1, validate: bool = False, greedy: bool = False) -> Any:
        """P chat prompts → a `DataProto` of P·n rollouts (groups contiguous); see `Policy.generate`."""

    def decode_responses(self, batch: DataProto) -> tuple[list[str], list[bool]]:
        """(B,) response texts and (B,) flags: stopped at the length limit."""

    def count_prompt_tokens(self, prompts: Sequence[Messages]) -> list[int]:
        """(P,) tokens of each chat prompt as rendered by the policy's chat template."""

    def prompt_token_ids(self, prompts: Sequence[Messages]) -> list[list[int]]:
        """(P,) lists of each chat prompt's token ids as rendered by the policy's chat template."""

    def compute_log_probs(self, batch: DataProto) -> tuple[Any, Any]:
        """(B, response_length) log-probs and entropies of the batch's responses."""

    def compute_ref_log_probs(self, batch: DataProto) -> Any:
        """(B, response_length) reference-policy log-probs."""

    def update(self, batch: DataProto) -> dict[str, float]:
        """One actor update on the batch (``advantages`` set); returns verl's ``actor/*`` metrics."""

    def save(self, path: str) -> None:
        """Write weights, optimizer and scheduler state under ``path``."""

    def load(self, path: str, global_steps: Optional[int] = None) -> None:
        """Restore what `save` wrote."""


def train_policy(policy: TrainedPolicy, batch: DataProto, advantages: Callable[[Any], Any]) -> dict[str, float]:
    """One GRPO or REINFORCE update of ``policy`` on its own rollouts, in verl's order (`RayPPOTrainer.fit`): the
    log-prob pass of the policy that sampled them (``old_log_probs``), the advantages, the reference pass when
    the loss has a KL term, then verl's actor update. The Player's update and the Coach's (CPMöbius's REINFORCE,
    R-Zero's Challenger GRPO) all run it.

    Args:
        batch: B rollouts of ``policy`` (``responses``, ``response_mask``, ...); the passes' outputs are written
            into it.
        advantages: the log-prob pass's (B, response_length) entropies → (B, response_length) advantages; a
            reward that needs the entropies (RENT's) reads them, the others ignore them.

    Returns:
        verl's ``actor/*`` metrics of the update.
    """
    batch.batch["old_log_probs"], entropies = policy.compute_log_probs(batch)
    batch.batch["advantages"] = advantages(entropies)
    if policy.uses_reference:
        batch.batch["ref_log_prob"] = policy.compute_ref_log_probs(batch)
    return policy.update(batch)
