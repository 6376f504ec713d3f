"""The Coach loss under the paper preset is driven by the Player's progress, not by its regularisers.

The Coach's entropy bonus (+0.01) and KL coefficient (0.001) are the released code's, tuned for its
reward in accuracy points (100·Δt). On a fixed batch of Coach responses from a tiny Qwen2 whose
next-token distributions are peaked (as a trained model's are), we take verl's own loss pieces
(policy-gradient loss, entropy, KL to a reference) with the coefficients and aggregation of the
composed paper preset, and compare the gradient norms of the three parts for a one-point Δt.
"""

from __future__ import annotations

import copy

import torch

from cpmobius.config import compose_config
from cpmobius.engine.config import policy_config
from cpmobius.rewards import coach_advantages, coach_rewards

PASS_RATES = [0.25, 0.5, 0.5, 0.75]  # four kept problems inside the band [0.2, 0.8]


def _coach_actor_config():
    cfg = compose_config(["experiment=paper_qwen_1p5b"])
    return policy_config(cfg, "coach").actor_rollout_ref.actor


def _batch():
    from cpmobius.toy.tiny_models import build_char_tokenizer, build_tiny_qwen2

    tokenizer = build_char_tokenizer()
    spec = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
    }
    model = build_tiny_qwen2(tokenizer, spec, seed=3)
    with torch.no_grad():  # peaked next-token distributions (mean entropy ~1.5 nats), like a trained model's
        model.get_output_embeddings().weight.mul_(6.0)
    reference = copy.deepcopy(model)
    with torch.no_grad():  # the Coach has moved away from its initial weights a little
        generator = torch.Generator().manual_seed(0)
        for parameter in reference.parameters():
            parameter.add_(0.02 * torch.randn(parameter.shape, generator=generator))
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 256, (len(PASS_RATES), 24), generator=generator)
    mask = torch.ones(len(PASS_RATES), 23)
    mask[1, 15:] = 0  # one shorter response
    return model, reference, ids, mask


def _parts(model, reference, ids, mask, advantages, actor):
    from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn, kl_penalty
    from verl.utils.torch_functional import entropy_from_logits, logprobs_from_logits

    logits = model(input_ids=ids).logits[:, :-1]
    log_prob = logprobs_from_logits(logits, ids[:, 1:])
    entropy = entropy_from_logits(logits)
    with torch.no_grad():
        ref_log_prob = logprobs_from_logits(reference(input_ids=ids).logits[:, :-1], ids[:, 1:])
    mode = actor.loss_agg_mode
    pg_loss, _ = get_policy_loss_fn(actor.policy_loss.loss_mode)(
        old_log_prob=log_prob.detach(),
        log_prob=log_prob,
        advantages=advantages,
        response_mask=mask.bool(),
        loss_agg_mode=mode,
        config=actor,
    )
    entropy_part = -float(actor.entropy_coeff) * agg_loss(loss_mat=entropy, loss_mask=mask, loss_agg_mode=mode)
    kld = kl_penalty(logprob=log_prob, ref_logprob=ref_log_prob, kl_penalty=actor.kl_loss_type)
    kl_part = float(actor.kl_loss_coef) * agg_loss(loss_mat=kld, loss_mask=mask, loss_agg_mode=mode)
    return {"pg": pg_loss, "entropy": entropy_part, "kl": kl_part}, float((entropy.detach() * mask).sum() / mask.sum())


def _grad_norms(delta_t: float) -> tuple[dict[str, float], float]:
    from verl.utils.config import omega_conf_to_dataclass

    actor = omega_conf_to_dataclass(_coach_actor_config())
    model, reference, ids, mask = _batch()
    advantages = coach_advantages(coach_rewards("paper", delta_t, PASS_RATES), mask)
    parts, mean_entropy = _parts(model, reference, ids, mask, advantages, actor)
    norms = {}
    for name, loss in parts.items():
        model.zero_grad()
        loss.backward(retain_graph=True)
        norms[name] = float(torch.sqrt(sum((p.grad**2).sum() for p in model.parameters() if p.grad is not None)))
    return norms, mean_entropy


def test_paper_preset_uses_the_released_regularisers_with_token_mean():
    actor = _coach_actor_config()
    assert float(actor.entropy_coeff) == 0.01 and float(actor.kl_loss_coef) == 0.001
    assert actor.loss_agg_mode == "token-mean"


def test_policy_gradient_dominates_entropy_and_kl_for_a_one_point_delta_t():
    norms, mean_entropy = _grad_norms(delta_t=0.01)  # Δt = one accuracy point
    assert 0.2 < mean_entropy < 3.0, mean_entropy  # the batch is in the regime the test is about
    assert norms["entropy"] > 0 and norms["kl"] > 0  # all three parts act on the weights
    assert norms["pg"] > 10 * norms["entropy"], norms
    assert norms["pg"] > 10 * norms["kl"], norms


def test_the_reward_scale_is_what_makes_the_difference():
    # The same batch with the reward of a fractional Δt (R_i = pass_rate × 0.01, the scale before the
    # fix): the entropy bonus alone then pushes the weights harder than the reward.
    norms, _ = _grad_norms(delta_t=0.0001)  # 100 × 0.0001 = 0.01 "points": the old fractional value
    assert norms["entropy"] > norms["pg"], norms


if __name__ == "__main__":  # pragma: no cover
    print(_grad_norms(0.01))
