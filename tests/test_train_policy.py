"""`cpmobius.policy_api.train_policy`: the one update sequence of every trained policy, in verl's order."""

from __future__ import annotations

import torch
from verl import DataProto

from cpmobius.policy_api import train_policy


class CallLog:
    """A policy that records the passes it runs and what the batch held at each."""

    def __init__(self, uses_reference: bool) -> None:
        self.uses_reference, self.calls = uses_reference, []

    def compute_log_probs(self, batch):
        self.calls.append(("log_probs", sorted(batch.batch.keys())))
        return torch.full((2, 3), -0.5), torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])

    def compute_ref_log_probs(self, batch):
        self.calls.append(("ref", sorted(batch.batch.keys())))
        return torch.full((2, 3), -0.7)

    def update(self, batch):
        self.calls.append(("update", sorted(batch.batch.keys())))
        return {"actor/pg_loss": float(batch.batch["advantages"].sum())}


def test_log_probs_then_advantages_from_their_entropies_then_reference_then_update():
    policy = CallLog(uses_reference=True)
    batch = DataProto.from_dict(tensors={"responses": torch.ones(2, 3, dtype=torch.long)})
    seen = []
    metrics = train_policy(policy, batch, lambda entropies: seen.append(entropies) or -entropies)
    assert [name for name, _ in policy.calls] == ["log_probs", "ref", "update"]
    assert "old_log_probs" not in policy.calls[0][1]  # the log-prob pass runs on the rollouts alone
    assert {"old_log_probs", "advantages"} <= set(policy.calls[1][1])  # the advantages exist before the KL pass
    assert {"old_log_probs", "advantages", "ref_log_prob"} <= set(policy.calls[2][1])
    assert torch.equal(seen[0], torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]))  # RENT reads these
    assert abs(metrics["actor/pg_loss"] + 2.1) < 1e-6  # the update saw the advantages the callable returned


def test_no_reference_pass_without_a_kl_term():
    policy = CallLog(uses_reference=False)
    batch = DataProto.from_dict(tensors={"responses": torch.ones(2, 3, dtype=torch.long)})
    train_policy(policy, batch, lambda entropies: torch.zeros_like(entropies))
    assert [name for name, _ in policy.calls] == ["log_probs", "update"] and "ref_log_prob" not in batch.batch
