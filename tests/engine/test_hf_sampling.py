"""The HF rollout's seeded sampler: per-request streams, exact distribution, no host copy off the CPU."""

from __future__ import annotations

import pytest
import torch

from cpmobius.engine.hf_sampling import SeededSampler, counter_uniform, inverse_cdf_draw, splitmix64

MASK = (1 << 64) - 1


def splitmix64_reference(x: int) -> int:
    """SplitMix64's finaliser in Python integers (the published constants), for comparison."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


@pytest.mark.parametrize("value", [0, 1, 42, 2**40 + 7, 2**62 + 12345, -1, -(2**63)])
def test_splitmix64_matches_the_integer_reference(value):
    got = int(splitmix64(torch.tensor([value], dtype=torch.int64))[0]) & MASK
    assert got == splitmix64_reference(value & MASK)


def test_a_rows_uniform_depends_on_its_seed_and_step_alone():
    alone = counter_uniform(torch.tensor([7]), step=3)
    in_batch = counter_uniform(torch.tensor([11, 7, 5]), step=3)
    assert torch.equal(alone[0], in_batch[1])
    assert len(set(in_batch.tolist())) == 3
    assert not torch.equal(alone, counter_uniform(torch.tensor([7]), step=4))
    many = counter_uniform(torch.arange(20000), step=0)
    assert 0.0 < float(many.min()) and float(many.max()) < 1.0
    assert abs(float(many.mean()) - 0.5) < 0.01  # the mean of 20,000 uniforms: standard error 0.002


def test_inverse_cdf_draw_picks_the_token_whose_interval_holds_the_uniform():
    scores = torch.tensor([0.5, 0.25, 0.25]).log()[None, :].repeat(4, 1)
    uniforms = torch.tensor([0.1, 0.6, 0.8, 0.4999], dtype=torch.float64)
    assert inverse_cdf_draw(scores, uniforms).squeeze(1).tolist() == [0, 1, 2, 0]


def test_inverse_cdf_draw_at_the_top_edge_falls_back_to_the_last_possible_token():
    scores = torch.tensor([[0.0, 0.0, float("-inf"), float("-inf")]])
    assert inverse_cdf_draw(scores, torch.tensor([1.0], dtype=torch.float64)).item() == 1


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


PROBS = torch.tensor([0.5, 0.25, 0.15, 0.07, 0.03], dtype=torch.float64)
# chi-square with 4 degrees of freedom: P(X > 18.47) = 0.001
CHI2_4DOF_999 = 18.47


def test_vectorised_draws_follow_the_softmax_across_seeds_and_steps():
    scores = PROBS.log().float()[None, :].repeat(4000, 1) + 3.0  # unnormalised logits
    sampler = SeededSampler(list(range(1000, 5000)), vectorised=True)
    first = sampler(None, scores).argmax(-1)
    assert chi_square(torch.bincount(first, minlength=5).double(), PROBS) < CHI2_4DOF_999
    one_row = SeededSampler([123], vectorised=True)
    draws = torch.cat([one_row(None, scores[:1]).argmax(-1) for _ in range(4000)])
    assert chi_square(torch.bincount(draws, minlength=5).double(), PROBS) < CHI2_4DOF_999


def test_vectorised_draws_never_pick_a_token_the_warpers_removed():
    scores = torch.tensor([[0.0, float("-inf"), 0.0, float("-inf"), -30.0]]).repeat(2000, 1)
    chosen = SeededSampler(list(range(2000)), vectorised=True)(None, scores).argmax(-1)
    assert set(chosen.tolist()) <= {0, 2, 4} and {0, 2} <= set(chosen.tolist())


def test_forced_scores_leave_exactly_one_token_possible():
    scores = torch.randn(3, 17, generator=torch.Generator().manual_seed(0))
    for vectorised in (True, False):
        forced = SeededSampler([1, 2, 3], vectorised=vectorised)(None, scores)
        assert torch.isfinite(forced).sum(-1).tolist() == [1, 1, 1]


def test_on_a_cpu_each_row_draws_with_its_own_generator_as_before():
    """The CPU stream is unchanged (the toy default's numbers depend on it)."""
    scores = torch.randn(2, 30, generator=torch.Generator().manual_seed(1))
    sampler = SeededSampler([5, 9])
    generators = [torch.Generator().manual_seed(5), torch.Generator().manual_seed(9)]
    probs = torch.softmax(scores, -1)
    for _ in range(3):
        chosen = sampler(None, scores).argmax(-1).tolist()
        assert chosen == [int(torch.multinomial(probs[r], 1, generator=g)) for r, g in enumerate(generators)]
