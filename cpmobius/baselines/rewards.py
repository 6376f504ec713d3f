r"""The three comparison baselines' rewards, as their released code computes them.

Stage: none of CPMöbius's own: the rewards a baseline run trains with. docs/baselines.md records the
released code they follow, with file and line references.

R-Zero (`Chengsong-Huang/R-Zero`), the Challenger's reward (`examples/reward_function/caller_penalty.py`
`compute_score`): `min(p, 1 − p) − penalty`, or `−1 − penalty` for a malformed output; p is the Solver's
majority share, penalty the share of the batch in the question's BLEU cluster. The Solver's data: the
same vote with another denominator, kept in a band (`question_evaluate/`).

RENT (`satrams/rent-rl`), `verl/trainer/ppo/ray_trainer.py` `fit` (`trainer.minimize_entropy`):
−(mean token entropy over the whole response), −7.0 without a final `\boxed{}` (`base_format`).

TTRL (`PRIME-RL/TTRL`), `verl/utils/reward_score/ttrl/ttt_metrics.py` `test_time_train_metrics`:
the label is the most common extracted answer (exact strings, all votes); reward 1.0 for a rollout
whose answer is equivalent to it, else 0.0.

Departures from the released code (each marked `# CPMöbius:` where it happens):
- R-Zero, the `paper` uncertainty `1 − 2|p − 0.5|` is offered as an option; the code's `min(p, 1 − p)`
  (half of it) is the default.
- R-Zero, a batch of one question gets penalty 1.0 (scikit-learn cannot cluster one sample).
- RENT, an opt-in window over the last part of each response (the paper's analysis; the code has none).
- TTRL, the trained rollouts are the first `n_train` in generation order; the code takes the first
  `n_train` after verl's length-balancing reorder, which depends on the number of data-parallel ranks.
- Every function raises ValueError on inputs the released code would silently mis-handle (length
  mismatches, empty batches, shares outside [0, 1], unknown options).
"""

from __future__ import annotations

import math
import numbers
import re
from collections import Counter
from typing import Callable, Optional, Sequence

import numpy as np
import torch

Equivalent = Callable[[str, str], bool]
"""An answer-equivalence rule, called as ``equivalent(given, reference)`` (mathruler's or Qwen's
``grade_answer`` argument order); it returns False on a timeout or an error."""

RZERO_NO_BOX = "None"  # what mathruler's extract_boxed_content returns for a response without a box
RZERO_UNCERTAINTY = ("code", "paper")
RZERO_DENOMINATORS = ("all_samples", "nonempty")
RENT_WINDOWS = ("all", "last_fraction")

_QUESTION_RE = re.compile(r"<question>(.*?)</question>", re.DOTALL)


def _check_nonempty(name: str, items: Sequence) -> None:
    if len(items) == 0:
        raise ValueError(f"{name}: empty batch (at least one item is needed)")


def _check_share(name: str, p: float) -> None:
    if isinstance(p, bool) or not (isinstance(p, numbers.Real) and 0.0 <= p <= 1.0):
        raise ValueError(f"{name}: a majority share must be a number in [0, 1], got {p!r}")


# R-Zero -------------------------------------------------------------------------------------------


def _last_box_is_empty(text: str) -> bool:
    """Whether mathruler's ``extract_boxed_content(text)`` is ``""``: the last box holds only white space."""
    start = text.rfind("\\boxed{")
    if start == -1:
        return False
    body, depth = text[start + len("\\boxed{") :], 0
    for i, char in enumerate(body):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == -1:
            return not body[:i].strip()
    return False  # an unclosed box: mathruler returns "None", which passes the check


def rzero_parse_question(text: str) -> Optional[str]:
    r"""The question of one Challenger output, or None for a malformed output.

    Source: R-Zero `examples/reward_function/caller_penalty.py` `compute_score`: the last
    ``<question>...</question>`` block (``re.DOTALL``), stripped. The output is malformed when it has
    no such block, when the block is empty after stripping, or when its last ``\boxed{...}`` holds
    only white space. The Challenger's boxed answer is otherwise never checked: without any box
    mathruler returns the string ``"None"``, which the released check accepts.

    Args:
        text: the Challenger's decoded response.

    Returns:
        The stripped question, or None.

    Raises:
        ValueError: ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise ValueError(f"rzero_parse_question: text must be a string, got {type(text).__name__}")
    questions = _QUESTION_RE.findall(text)
    if not questions or _last_box_is_empty(text):
        return None
    return questions[-1].strip() or None


def rzero_bleu_distances(questions: Sequence[str]) -> np.ndarray:
    """BLEU distances between questions, as R-Zero's repetition penalty computes them.

    Source: R-Zero `caller_penalty.py` `_bleu_distance_matrix`: for i < j, BLEU =
    ``sentence_bleu([q_j.split()], q_i.split(), smoothing_function=SmoothingFunction().method1)``
    (4-gram uniform weights, white-space tokens, q_i the hypothesis), mirrored to (j, i); the
    diagonal's BLEU is 1. BLEU is not symmetric, so the order of the batch matters. BLEU is 0 for an
    empty question (even against another empty one), and below 1 for identical questions of fewer than
    4 words (smoothed zero counts of the missing n-grams).

    Args:
        questions: (N,) question texts; a malformed output is ``""``.

    Returns:
        (N, N) float64 distances 1 − BLEU, symmetric, zero diagonal.

    Raises:
        ValueError: an empty batch.
    """
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    _check_nonempty("rzero_bleu_distances", questions)
    smoother = SmoothingFunction().method1
    n = len(questions)
    distances = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            bleu = sentence_bleu([questions[j].split()], questions[i].split(), smoothing_function=smoother)
            distances[i, j] = distances[j, i] = 1.0 - bleu
    return distances


def rzero_repetition_penalty(questions: Sequence[Optional[str]], distance_threshold: float = 0.5) -> list[float]:
    """R-Zero's repetition penalty: the share of the batch in each question's BLEU cluster.

    Source: R-Zero `caller_penalty.py` `cluster_share_per_problem` (called with
    ``distance_threshold=0.5``): `rzero_bleu_distances`, then
    ``AgglomerativeClustering(n_clusters=None, distance_threshold=..., metric="precomputed",
    linkage="average")``; penalty_i = |cluster(i)| / N over the whole batch, malformed outputs included.
    A malformed output (None or ``""``) is the question ``""``, whose BLEU with any question is 0: each
    one is a cluster of its own (penalty 1/N), never one shared cluster.

    Args:
        questions: (N,) parsed questions, None for a malformed output.
        distance_threshold: the linkage distance (1 − BLEU) at or above which clusters stay apart.

    Returns:
        (N,) penalties in (0, 1].

    Raises:
        ValueError: an empty batch, or a threshold outside (0, 1].
    """
    _check_nonempty("rzero_repetition_penalty", questions)
    if not 0.0 < distance_threshold <= 1.0:
        raise ValueError(f"rzero_repetition_penalty: distance_threshold must be in (0, 1], got {distance_threshold}")
    if len(questions) == 1:
        # CPMöbius: scikit-learn needs two samples to cluster; one question is its own whole cluster.
        return [1.0]
    from sklearn.cluster import AgglomerativeClustering

    texts = [q or "" for q in questions]
    clustering = AgglomerativeClustering(
        n_clusters=None, distance_threshold=distance_threshold, metric="precomputed", linkage="average"
    )
    labels = clustering.fit_predict(rzero_bleu_distances(texts))
    sizes = Counter(labels.tolist())
    return [sizes[label] / len(texts) for label in labels.tolist()]


def rzero_challenger_rewards(
    questions: Sequence[Optional[str]],
    majority_shares: Sequence[Optional[float]],
    uncertainty: str = "code",
    distance_threshold: float = 0.5,
) -> list[float]:
    """R-Zero's Challenger reward for one step's batch of outputs.

    Source: R-Zero `caller_penalty.py` `compute_score`:
    ``(min(p, 1 − p) if question else −1) − penalty``, no clip, no weight on the penalty
    (`rzero_repetition_penalty` over the whole batch).

    ``uncertainty="code"`` (default) is the released ``min(p, 1 − p)`` in [0, 0.5];
    ``uncertainty="paper"`` is the paper's ``1 − 2|p − 0.5|`` in [0, 1], exactly twice the code's, so the
    two differ in the weight of the uncertainty against the penalty (after GRPO's normalisation too).
    A malformed output gets −1 − penalty under both.

    Args:
        questions: (N,) from `rzero_parse_question`; None (or ``""``) for a malformed output.
        majority_shares: (N,) the Solver's majority share p of each question (`rzero_majority_share`
            with ``denominator="all_samples"``); ignored (may be None) for a malformed output.
        uncertainty: ``"code"`` or ``"paper"``.
        distance_threshold: passed to `rzero_repetition_penalty`.

    Returns:
        (N,) rewards in [−2, 0.5] (code) or [−2, 1] (paper).

    Raises:
        ValueError: an empty batch, lengths that differ, an unknown ``uncertainty``, a missing share for
            a parsed question, or a share outside [0, 1].
    """
    _check_nonempty("rzero_challenger_rewards", questions)
    if len(questions) != len(majority_shares):
        raise ValueError(f"rzero_challenger_rewards: {len(questions)} questions but {len(majority_shares)} shares")
    if uncertainty not in RZERO_UNCERTAINTY:
        raise ValueError(
            f"rzero_challenger_rewards: uncertainty must be one of {RZERO_UNCERTAINTY}, got {uncertainty!r}"
        )
    penalties = rzero_repetition_penalty(questions, distance_threshold)
    rewards = []
    for i, (question, p, penalty) in enumerate(zip(questions, majority_shares, penalties)):
        if not question:
            rewards.append(-1.0 - penalty)
            continue
        if p is None:
            raise ValueError(f"rzero_challenger_rewards: question {i} is well formed but has no majority share")
        _check_share(f"rzero_challenger_rewards[{i}]", p)
        if uncertainty == "code":
            rewards.append(min(p, 1.0 - p) - penalty)
        else:
            # CPMöbius: the paper's form, offered as an option; the released code uses min(p, 1 − p).
            rewards.append(1.0 - 2.0 * abs(p - 0.5) - penalty)
    return rewards


def _rzero_same_class(answer: str, existing: str, equivalent: Equivalent) -> bool:
    """R-Zero's greedy class test: equal strings, both saying "no ", or equivalent either way."""
    if answer == existing or ("no " in answer.lower() and "no " in existing.lower()):
        return True
    return bool(equivalent(answer, existing)) or bool(equivalent(existing, answer))


def rzero_majority_share(
    answers: Sequence[Optional[str]], equivalent: Equivalent, denominator: str = "all_samples"
) -> tuple[str, float]:
    r"""The Solver's majority answer and its share p over one question's samples, as R-Zero votes.

    Source: R-Zero `vllm_service_init/start_vllm_server.py` `process_single` (the Challenger's reward,
    ``denominator="all_samples"``) and `question_evaluate/evaluate.py` (the Solver's data,
    ``denominator="nonempty"``). Each answer joins the first existing class whose first answer is the
    same string, also contains ``"no "`` (both lower-cased), or is equivalent in either order
    (``equivalent(answer, first)`` then ``equivalent(first, answer)``); otherwise it opens a class. The
    majority is the largest class, ties to the first opened. (`evaluate.py` skips the second order
    after a timeout of the first; here a timeout is False and the second order is still tried.)

    The answers are mathruler's ``extract_boxed_content``: the last box's stripped content, ``"None"``
    for a response without a box (None is read as ``"None"`` too), ``""`` for an empty box. ``""``
    never votes. ``"None"`` is an ordinary class and can be the majority.

    Args:
        answers: (n,) the extracted answer of each Solver sample.
        equivalent: ``equivalent(given, reference) -> bool`` (R-Zero: mathruler ``grade_answer`` with a
            10 s timeout counted as False).
        denominator: ``"all_samples"``: p = largest class / n (the Challenger's reward, n = 10);
            ``"nonempty"``: p = largest class / number of non-``""`` answers (the Solver filter, n = 9).

    Returns:
        (majority answer, p); ``("", 0.0)`` when no answer votes (``evaluate.py`` then drops the
        question, which `rzero_keep` does for the label ``""``).

    Raises:
        ValueError: no answers, or an unknown ``denominator``.
    """
    _check_nonempty("rzero_majority_share", answers)
    if denominator not in RZERO_DENOMINATORS:
        raise ValueError(f"rzero_majority_share: denominator must be one of {RZERO_DENOMINATORS}, got {denominator!r}")
    texts = [RZERO_NO_BOX if a is None else a for a in answers]
    voting = [a for a in texts if a]
    counts: dict[str, int] = {}
    for answer in voting:
        match = next((first for first in counts if _rzero_same_class(answer, first, equivalent)), None)
        if match is None:
            counts[answer] = 1
        else:
            counts[match] += 1
    if not counts:
        return "", 0.0
    label = max(counts, key=counts.__getitem__)  # the first opened among equal counts, as `max` keeps
    total = len(texts) if denominator == "all_samples" else len(voting)
    return label, counts[label] / total


def rzero_keep(p: float, label: str, band: tuple[float, float] = (0.3, 0.8)) -> bool:
    """Whether R-Zero keeps a generated question for the Solver's training set.

    Source: R-Zero `question_evaluate/upload.py` (called with ``--min_score 0.3 --max_score 0.8``):
    keep iff ``band[0] <= p <= band[1]`` (both inclusive) and the label is neither ``""`` nor ``"None"``.
    The paper states 0.3-0.7 of 10 answers; the code keeps 0.3-0.8 of 9. `rzero_gradable` is the
    other filter the released pipeline applies before this one.

    Args:
        p: the majority share (`rzero_majority_share` with ``denominator="nonempty"``).
        label: the majority answer (the pseudo-label the Solver trains on).
        band: (low, high) inclusive bounds of p, 0 <= low <= high <= 1.

    Returns:
        True to keep the question.

    Raises:
        ValueError: a share outside [0, 1] or a band that is not 0 <= low <= high <= 1.
    """
    _check_share("rzero_keep", p)
    low, high = band
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"rzero_keep: band must satisfy 0 <= low <= high <= 1, got {band}")
    return low <= p <= high and label not in ("", RZERO_NO_BOX)


def rzero_gradable(question: str, label: str) -> bool:
    """R-Zero's filter of questions hard to grade automatically, applied before `rzero_keep`.

    Source: R-Zero `question_evaluate/evaluate.py`: drop a question containing "证明" (proof) or "box"
    (any case), or whose majority answer contains "text" (any case).

    Returns:
        False for a question the released pipeline drops.
    """
    return not ("证明" in question or "box" in question.lower() or "text" in label.lower())


# RENT ---------------------------------------------------------------------------------------------


def rent_rewards(
    entropies: torch.Tensor,
    response_mask: torch.Tensor,
    has_box: Sequence[bool],
    no_box_entropy: float = 7.0,
    window: str = "all",
    last_fraction: Optional[float] = None,
) -> torch.Tensor:
    r"""RENT's reward: minus the mean token entropy of each response; −7.0 without a final box.

    Source: RENT `verl/trainer/ppo/ray_trainer.py` `fit` (``trainer.minimize_entropy``,
    ``trainer.base_format``, ``trainer.entropy_base=7.0``): H_i = ``entropys[i, :L_i].mean()`` with L_i the
    response length (the final EOS token included), H_i := 7.0 when ``extract_answer`` finds no
    ``\boxed{}`` (verl ``last_boxed_only_string`` is None), reward = −H_i on the last response token. The
    entropies are of the rollout policy before the update, at the rollout temperature, in nats.

    ``window="all"`` (default) is the released code: every response token. ``window="last_fraction"``
    averages over the last ceil(``last_fraction`` · L_i) response tokens only (at least one), the part
    of the response the paper's analysis singles out; the released code has no such window and no
    released value of the fraction, so ``last_fraction`` must be given.

    Args:
        entropies: (B, T) float, per-token entropy in nats.
        response_mask: (B, T) 1 (or True) on response tokens, 0 on padding. Rows are read through the
            mask; for verl's right-padded responses this is the code's ``[:L_i]``.
        has_box: (B,) whether each response has a final ``\boxed{}``.
        no_box_entropy: H for a response without a box (the reward is its negative), nats.
        window: ``"all"`` or ``"last_fraction"``.
        last_fraction: in (0, 1], required with ``window="last_fraction"``, refused with ``"all"``.

    Returns:
        (B,) float32 rewards, nats (≤ 0 for non-negative entropies).

    Raises:
        ValueError: shapes not both (B, T), B = 0, ``len(has_box) != B``, an unknown window, a missing,
            out-of-range or unused ``last_fraction``, or a boxed response with no response token.
    """
    if entropies.dim() != 2 or entropies.shape != response_mask.shape:
        raise ValueError(
            f"rent_rewards: entropies and response_mask must both be (B, T), got "
            f"{tuple(entropies.shape)} and {tuple(response_mask.shape)}"
        )
    _check_nonempty("rent_rewards", entropies)
    if len(has_box) != entropies.shape[0]:
        raise ValueError(f"rent_rewards: {entropies.shape[0]} responses but {len(has_box)} has_box flags")
    if window not in RENT_WINDOWS:
        raise ValueError(f"rent_rewards: window must be one of {RENT_WINDOWS}, got {window!r}")
    if window == "last_fraction" and (last_fraction is None or not 0.0 < last_fraction <= 1.0):
        raise ValueError(f"rent_rewards: window='last_fraction' needs last_fraction in (0, 1], got {last_fraction}")
    if window == "all" and last_fraction is not None:
        raise ValueError("rent_rewards: last_fraction is only read with window='last_fraction'")
    rewards = torch.empty(entropies.shape[0], dtype=torch.float32)
    for i, boxed in enumerate(has_box):
        if not boxed:
            rewards[i] = -float(no_box_entropy)
            continue
        row = entropies[i][response_mask[i].bool()].float()
        if row.numel() == 0:
            raise ValueError(f"rent_rewards: response {i} has a box but no response token in its mask")
        if window == "last_fraction":
            # CPMöbius: the paper's window over the end of the response, opt-in; the released code has none.
            row = row[-max(1, math.ceil(last_fraction * row.numel())) :]
        rewards[i] = -row.mean()
    return rewards


# TTRL ---------------------------------------------------------------------------------------------


def ttrl_vote_then_train(extracted: Sequence[str], n_train: int) -> tuple[str, list[int]]:
    """TTRL's label from all votes, and which rollouts train.

    Source: TTRL `verl/utils/reward_score/ttrl/ttt_metrics.py` `test_time_train_metrics`: label =
    ``Counter(extracted).most_common(1)[0][0]`` over all votes (64 in `examples/ttrl/amc.sh`):
    exact strings after Qwen's ``strip_string``, ties to the first seen, and ``""`` (nothing extracted)
    can win. The rollouts that train (32 of the 64) are chosen in `ray_trainer.py`
    ``_select_top_k_per_prompt``.

    Args:
        extracted: (n_votes,) each vote's extracted, normalised answer, in generation order.
        n_train: how many rollouts train, 1 <= n_train <= n_votes.

    Returns:
        (label, train_indices): train_indices = [0, 1, ..., n_train − 1].

    Raises:
        ValueError: no votes, a vote that is not a string, or n_train outside [1, n_votes].
    """
    _check_nonempty("ttrl_vote_then_train", extracted)
    if not all(isinstance(a, str) for a in extracted):
        raise ValueError("ttrl_vote_then_train: every extracted answer must be a string ('' when none was found)")
    if not 1 <= n_train <= len(extracted):
        raise ValueError(f"ttrl_vote_then_train: n_train must be in [1, {len(extracted)}], got {n_train}")
    label = Counter(extracted).most_common(1)[0][0]
    # CPMöbius: the first n_train in generation order. The released code keeps the first n_train of each
    # group after verl's length-balancing reorder over the data-parallel ranks (8 there), an order that
    # depends on the world size and on the other prompts' lengths.
    return label, list(range(n_train))


def ttrl_rewards(extracted_train: Sequence[str], label: str, equivalent: Equivalent) -> list[float]:
    """TTRL's reward: 1.0 for a rollout whose answer is equivalent to the voted label, else 0.0.

    Source: TTRL `ttt_metrics.py` `test_time_train_metrics` → `qwen/qwen_eval.py` `qwen_reward_fn`:
    ``1.0 if grade_answer(answer, label) else 0.0``; no format term. The vote is exact-string
    (`ttrl_vote_then_train`), the reward lenient (``equivalent``).

    Args:
        extracted_train: (n_train,) the training rollouts' extracted answers.
        label: the voted label.
        equivalent: ``equivalent(given, reference) -> bool`` (TTRL: Qwen's ``math_grade.grade_answer``).

    Returns:
        (n_train,) rewards in {0.0, 1.0}.

    Raises:
        ValueError: no rollouts.
    """
    _check_nonempty("ttrl_rewards", extracted_train)
    return [1.0 if equivalent(answer, label) else 0.0 for answer in extracted_train]
