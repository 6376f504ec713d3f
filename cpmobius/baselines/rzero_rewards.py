r"""R-Zero's rewards (`Chengsong-Huang/R-Zero`), as its released code computes them.

The Challenger's reward (`examples/reward_function/caller_penalty.py` `compute_score`): `min(p, 1 − p) − penalty`,
or `−1 − penalty` for a malformed output; p is the Solver's majority share, penalty the share of the batch in the
question's BLEU cluster. The Solver's data: the same vote with another denominator, kept in a band
(`question_evaluate/`). docs/baselines.md has the file and line references.

Departures from the released code (each marked `# CPMöbius:` where it happens):
- the `paper` uncertainty `1 − 2|p − 0.5|` is offered as an option; the code's `min(p, 1 − p)` (half of it) is
  the default;
- a batch of one question gets penalty 1.0 (scikit-learn cannot cluster one sample);
- every function raises ValueError on inputs the released code would silently mis-handle (length mismatches,
  empty batches, shares outside [0, 1], unknown options).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Optional, Sequence

import numpy as np

from cpmobius.baselines.checks import Equivalent, check_nonempty, check_share

RZERO_NO_BOX = "None"  # what mathruler's extract_boxed_content returns for a response without a box
RZERO_UNCERTAINTY = ("code", "paper")
RZERO_DENOMINATORS = ("all_samples", "nonempty")

_QUESTION_RE = re.compile(r"<question>(.*?)</question>", re.DOTALL)


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

    check_nonempty("rzero_bleu_distances", questions)
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
    check_nonempty("rzero_repetition_penalty", questions)
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
    check_nonempty("rzero_challenger_rewards", questions)
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
        check_share(f"rzero_challenger_rewards[{i}]", p)
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
    check_nonempty("rzero_majority_share", answers)
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
    check_share("rzero_keep", p)
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
