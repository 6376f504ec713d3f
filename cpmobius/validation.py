"""Stage 4, validation: the Player's accuracy on a fixed validation set, and Δt.

Paper §3 / released `_validate` + `_proposer_val_reward`: Δt = V_t − V_{t−1}, the Player's
validation accuracy after its update minus before. The score after step t is the score before
step t+1 (the Coach update does not touch the Player), so one pass per step suffices, plus one
before the loop (`DeltaTracker`). Accuracy is the mean over problems of the share of correct
samples (avg@k); with greedy decoding k = 1. Answers are graded by the one project grader.

Departures (`# CPMöbius:`): Δt is logged as a fraction (`val/delta_t`); every Coach reward uses it
in accuracy points, 100·Δt, as the released code does (`cpmobius.rewards`); after a Player rollback the
tracker restarts from the restored Player's score, so the jump caused by the rollback is not credited to the Coach (the
released code credits it); a rollout stopped at the length limit has no answer (graded as "no_answer",
counted wrong), as in the training vote (`cpmobius.difficulty_filter`): its text may
hold an earlier, retracted box; ``validation.metric=expected`` (toy world, off by default) feeds Δt
the teacher-forced probability of the canonical correct response instead of a decoded pass
(`expected_accuracy`).

Sampling noise: a sampled avg@k pass (k ≥ 2) carries its standard error, estimated from its own samples
(`sampling_standard_error`), and `DeltaTracker` the standard error of Δt from the two passes it subtracts, so a run
logs how far Δt stands above its noise (``val/delta_t_snr``; paper's 83 AMC problems × 10 samples: ``toy_paper_noise``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

import torch

from cpmobius.config import ConfigError
from cpmobius.eval.records import plain_answer
from cpmobius.grading import check_batch, grade_batch
from cpmobius.jsonl import JSONLineError, read_json_lines
from cpmobius.policy_api import TrainedPolicy
from cpmobius.prompts import PlayerPrompt
from cpmobius.settings import ValidationSettings
from cpmobius.worlds import world_of


@dataclass(frozen=True)
class ValidationSet:
    """Problems with gold answers. ``ids`` identify problems (avg@k groups by them); ``canonical_responses``,
    where a world defines them (the toy set), are the exact correct Player responses (`expected_accuracy`)."""

    name: str
    ids: list[str]
    problems: list[str]
    answers: list[str]
    canonical_responses: Optional[list[str]] = None

    def __len__(self) -> int:
        return len(self.problems)


def load_ood_set(settings: ValidationSettings) -> Optional[ValidationSet]:
    """The configured out-of-distribution set (``validation.ood_dataset``), or None without one.

    A world's set comes from the world (`cpmobius.worlds`; ``toy_ood``, `cpmobius.toy.ood`: the toy arithmetic in
    forms the validation set never holds, ``ood_size`` problems, 60 by default); anything else is read as
    ``validation.dataset`` would be, its first ``ood_size`` problems.

    Raises:
        ConfigError: naming ``validation.ood_dataset`` when its file is missing or malformed.
    """
    if settings.ood_dataset is None:
        return None
    world = world_of(settings.ood_dataset)
    if world is not None:
        return ValidationSet(world.name, *world.validation_set(settings.ood_size, settings.seed))
    try:
        return load_validation_set(
            replace(settings, dataset=settings.ood_dataset, size=settings.ood_size, ood_dataset=None)
        )
    except ConfigError as error:
        raise ConfigError(f"validation.ood_dataset ({settings.ood_dataset}): {error}") from error


def load_validation_set(settings: ValidationSettings) -> ValidationSet:
    """The configured validation set.

    ``dataset`` is a world (`cpmobius.worlds`: "toy", synthetic arithmetic), a benchmark name found as
    ``{data_dir}/eval/{name}/{name}.jsonl``, or a path to a JSONL file with ``problem`` (a non-empty string) and
    ``answer`` (text or a finite number) fields, and optionally ``id`` (text or a whole number, each once).

    Raises:
        ConfigError: naming ``validation.dataset`` and the file's line when the file is missing or malformed.
    """
    world = world_of(settings.dataset)
    if world is not None:
        return ValidationSet(world.name, *world.validation_set(settings.size, settings.seed))
    path = Path(settings.dataset).expanduser()
    if not path.suffix == ".jsonl":
        if not settings.data_dir:
            raise ConfigError(f"validation.data_dir: needed to find the benchmark {settings.dataset!r}")
        path = Path(settings.data_dir).expanduser() / "eval" / settings.dataset / f"{settings.dataset}.jsonl"
    if not path.is_file():
        raise ConfigError(f"validation.dataset: no file {path}")
    ids, problems, answers = [], [], []
    try:
        rows = read_json_lines(path)
    except JSONLineError as error:
        raise ConfigError(f"validation.dataset: {path}:{error.line_no}: {error.reason}") from error
    first_line: dict[str, int] = {}
    for line_no, row in rows:
        where = f"validation.dataset: {path}:{line_no}"
        problem, answer, row_id = row.get("problem"), row.get("answer"), row.get("id", f"{path.stem}-{len(problems)}")
        if not isinstance(problem, str) or not problem.strip():  # {"text": ...} was read as its Python repr
            raise ConfigError(f"{where}: needs 'problem', a non-empty string, got {problem!r:.60}")
        if isinstance(answer, bool) or not isinstance(answer, (str, int, float)) or not str(answer).strip():
            raise ConfigError(f"{where}: needs 'answer', text or a number, got {answer!r:.60}")
        if isinstance(answer, float) and not math.isfinite(answer):
            raise ConfigError(f"{where}: 'answer' must be a finite number, got {answer!r}")
        if isinstance(row_id, bool) or not isinstance(row_id, (str, int)):
            raise ConfigError(f"{where}: 'id' must be text or a whole number, got {row_id!r:.60}")
        if str(row_id) in first_line:  # two answers under one id: the per-problem figures would merge them
            raise ConfigError(f"{where}: id {str(row_id)!r} already on line {first_line[str(row_id)]}")
        first_line[str(row_id)] = line_no
        ids.append(str(row_id))
        problems.append(problem)
        answers.append(answer if isinstance(answer, str) else plain_answer(answer))  # 4.0 -> "4", as benchmark files
    if not problems:
        raise ConfigError(f"validation.dataset: {path} holds no problems")
    if settings.size is not None:
        if settings.size > len(problems):
            raise ConfigError(f"validation.size: {settings.size} asked, {path} holds {len(problems)} (null = all)")
        ids, problems, answers = ids[: settings.size], problems[: settings.size], answers[: settings.size]
    return ValidationSet(path.stem, ids, problems, answers)


@dataclass
class ValidationResult:
    """One validation pass: avg@k accuracy, grading counts and the tokens the Player generated."""

    accuracy: float
    correct_per_problem: list[float]
    grade_counts: dict[str, int]
    response_tokens: int  # over all problems × samples
    sampling: dict[str, float] = field(default_factory=dict)  # temperature, top_p, top_k the rows used
    truncated: int = 0  # samples stopped at the length limit (graded as no answer)
    # validation.metric=expected: accuracy and correct_per_problem are the expected ones, these the greedy pass's
    greedy_accuracy: Optional[float] = None
    greedy_per_problem: Optional[list[float]] = None
    # a sampled avg@k pass with k >= 2: the standard error of `accuracy` over its samples (`sampling_standard_error`)
    accuracy_se: Optional[float] = None
    # the out-of-distribution set's accuracy, measured as `accuracy` is (`load_ood_set`), and its decoded tokens
    ood_accuracy: Optional[float] = None
    ood_response_tokens: int = 0

    @property
    def mean_response_tokens(self) -> float:
        samples = sum(self.grade_counts.values())
        return self.response_tokens / samples if samples else 0.0

    @property
    def truncated_frac(self) -> float:
        samples = sum(self.grade_counts.values())
        return self.truncated / samples if samples else 0.0


def measure_accuracy(
    player: TrainedPolicy,
    val_set: ValidationSet,
    settings: ValidationSettings,
    prompt: PlayerPrompt = PlayerPrompt(),
    ood_set: Optional[ValidationSet] = None,
) -> ValidationResult:
    """The Player's avg@k accuracy on ``val_set`` (k = ``samples_per_problem``), and on ``ood_set`` when given.

    Uses the training prompt (``prompt``, the loop's `cpmobius.prompts.PlayerPrompt`), so training and
    validation render identically; samples with
    ``rollout.val_kwargs`` or greedily. A sample stopped at the length limit has no answer, as in
    training, and counts as wrong. With ``validation.metric=expected`` the result's ``accuracy`` and
    ``correct_per_problem`` are `expected_accuracy`'s, and the decoded pass's are ``greedy_accuracy`` and
    ``greedy_per_problem``. ``ood_set`` is measured as ``accuracy`` is: with ``expected`` by its expected accuracy
    alone (no decoded pass, so scoring it draws no sample and leaves the run's sampling as it was), else by a
    decoded pass of its own after the validation set's.

    Raises:
        cpmobius.grading.GradingError: when every answer of the pass failed to grade.
        ConfigError: naming ``validation.metric`` for ``expected`` on a set without canonical responses.
    """
    # CPMöbius: validation.metric=expected (`expected_accuracy`), scored before the decoded pass: the log-prob
    # pass puts the Player's engine to sleep, generating wakes it.
    expected = ood_expected = None
    if settings.metric == "expected":
        expected = expected_accuracy(player, val_set, prompt, settings.temperature)
        ood_expected = expected_accuracy(player, ood_set, prompt, settings.temperature) if ood_set is not None else None
    k = settings.samples_per_problem
    per_problem, grades, tokens, sampling, truncated = _decoded_pass(player, val_set, settings, prompt)
    result = ValidationResult(
        sum(per_problem) / len(per_problem),
        per_problem,
        dict(grades.counts),
        tokens,
        sampling,
        truncated=sum(bool(cut) for cut in truncated),
    )
    if ood_set is not None:  # CPMöbius: an out-of-distribution set beside validation; with `expected` no sample drawn
        if ood_expected is None:
            ood_expected, _, result.ood_response_tokens, _, _ = _decoded_pass(player, ood_set, settings, prompt)
        result.ood_accuracy = sum(ood_expected) / len(ood_expected)
    if expected is not None:
        result.greedy_accuracy, result.greedy_per_problem = result.accuracy, result.correct_per_problem
        result.accuracy, result.correct_per_problem = sum(expected) / len(expected), expected
    elif not settings.greedy:  # CPMöbius: the pass's own sampling noise, for Δt's SNR
        result.accuracy_se = sampling_standard_error(per_problem, k)
    return result


def _decoded_pass(player: TrainedPolicy, val_set: ValidationSet, settings: ValidationSettings, prompt: PlayerPrompt):
    """One decoded pass over ``val_set``: (per-problem share correct (P,), grades, response tokens, the sampling
    values used, (P·k,) truncated flags)."""
    k = settings.samples_per_problem
    player.activate()
    batch = player.generate(prompt.render(val_set.problems), n=k, validate=True, greedy=settings.greedy)
    texts, truncated = player.decode_responses(batch)
    # CPMöbius: a truncated sample has no answer, as in the vote: the text cut at the
    # length limit may hold an earlier, retracted \boxed{} that the grader would otherwise read.
    responses = [None if cut else text for text, cut in zip(texts, truncated)]
    golds = [answer for answer in val_set.answers for _ in range(k)]
    grades = grade_batch(golds, responses)
    check_batch(grades.results, context=f"validation on {val_set.name}")
    scores = [float(r.correct) for r in grades.results]
    per_problem = [sum(scores[i * k : (i + 1) * k]) / k for i in range(len(val_set))]
    sampling = dict(getattr(batch, "meta_info", {}).get("sampling", {}))
    return per_problem, grades, int(batch.batch["response_mask"].sum()), sampling, truncated


def sampling_standard_error(per_problem: list[float], k: int) -> Optional[float]:
    """The standard error of an avg@k accuracy from its own samples: the noise of resampling the responses to the
    same problems (a fixed validation set, as Δt compares two passes over it).

    Problem i's share correct p̂_i has the estimated variance p̂_i (1 − p̂_i) / (k − 1) (the unbiased sample variance
    of its k 0/1 scores, over k); the accuracy, their mean over P problems, has SE = sqrt(Σ_i p̂_i (1 − p̂_i) /
    (k − 1)) / P. 83 problems × 10 samples with every p̂_i = 0.5: sqrt(83 × 0.25 / 9) / 83 = 0.0183.

    Args:
        per_problem: (P,) each problem's share of correct samples.
        k: samples per problem.

    Returns:
        The standard error (a fraction), or None for k < 2 (one sample per problem gives no estimate).
    """
    if k < 2 or not per_problem:
        return None
    return math.sqrt(sum(p * (1.0 - p) for p in per_problem) / (k - 1)) / len(per_problem)


def expected_accuracy(
    player: TrainedPolicy,
    val_set: ValidationSet,
    prompt: PlayerPrompt = PlayerPrompt(),
    temperature: Optional[float] = None,
) -> list[float]:
    """Per problem, the probability that the Player, sampling at ``temperature``, writes exactly the problem's
    canonical correct response: exp of the summed teacher-forced log-probs of its tokens.

    # CPMöbius: the paper's avg@k at the sampling temperature in the limit k → ∞, without sampling noise,
    but restricted to the canonical response (the toy world's ``\\boxed{answer}``, then the end-of-turn
    token, as its Player was pretrained to answer): any other correct response counts 0, so this is a lower
    bound on P(correct). Exact for that string with top-p 1, top-k off and no repetition penalty (the
    toy's sampling). The log-probs are `TrainedPolicy.compute_log_probs`'s at ``temperature``.

    Args:
        player: the Player (``tokenizer``, ``prompt_token_ids``, ``compute_log_probs``).
        val_set: a set with ``canonical_responses`` (P of them).
        prompt: the Player's prompt, as in training and the decoded pass.
        temperature: the logit temperature (``validation.temperature``); None = the Player's ``rollout.temperature``.

    Returns:
        P probabilities in [0, 1].

    Raises:
        ConfigError: naming ``validation.metric`` when ``val_set`` has no canonical responses.
    """
    from cpmobius.engine.batches import token_rollouts  # verl's agent loop: not imported to read a config

    if val_set.canonical_responses is None:
        raise ConfigError(f"validation.metric: expected needs canonical responses, {val_set.name!r} has none")
    tokenizer = player.tokenizer
    prompts = player.prompt_token_ids(prompt.render(val_set.problems))
    responses = [
        tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
        for text in val_set.canonical_responses
    ]
    batch = token_rollouts(prompts, responses, tokenizer.pad_token_id)
    if temperature is not None:
        batch.meta_info["temperature"] = float(temperature)  # what the log-prob pass divides the logits by
    log_probs, _ = player.compute_log_probs(batch)  # (P, response_length), 0 on padding
    mask = batch.batch["response_mask"].to(torch.float64)
    return torch.exp((log_probs.to(torch.float64) * mask).sum(dim=-1)).tolist()


class DeltaTracker:
    """Δt bookkeeping: one score per step, optionally EMA-smoothed (released ``proposer_ema``).

    Args:
        ema_decay: decay of the moving average, or None to use raw scores.
    """

    def __init__(self, ema_decay: Optional[float] = None) -> None:
        self.ema_decay = ema_decay
        self.reference: Optional[float] = None  # the (smoothed) score before the next step
        self.reference_se: Optional[float] = None  # its sampling standard error, where the pass had one
        self.history: list[float] = []  # raw scores, one per pass
        # Δt's standard error after the last `update`: sqrt(SE_before² + SE_after²) (two independent passes), or
        # None (a pass without an SE, or EMA smoothing)
        self.delta_se: Optional[float] = None

    def start(self, score: float, se: Optional[float] = None) -> None:
        """Record the score before the first step (or after a rollback: the new reference), and its standard error."""
        self.history.append(score)
        self.reference, self.reference_se = score, se

    def update(self, score: float, se: Optional[float] = None) -> float:
        """Record the score after a Player update (``se``: its standard error, or None) and return Δt (a fraction).

        Raises:
            RuntimeError: when `start` was never called.
        """
        if self.reference is None:
            raise RuntimeError("DeltaTracker.update before start: validate once before the loop")
        self.history.append(score)
        smoothed = score if self.ema_decay is None else self.ema_decay * self.reference + (1 - self.ema_decay) * score
        delta_t = smoothed - self.reference
        known = se is not None and self.reference_se is not None and self.ema_decay is None
        self.delta_se = math.hypot(se, self.reference_se) if known else None
        self.reference, self.reference_se = smoothed, se
        return delta_t

    def state_dict(self) -> dict:
        return {
            "ema_decay": self.ema_decay,
            "reference": self.reference,
            "reference_se": self.reference_se,
            "history": list(self.history),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore the reference score, its standard error (None in checkpoints from before it was kept) and the
        history; the configured ``ema_decay`` stays as configured."""
        self.reference, self.history = state["reference"], list(state["history"])
        self.reference_se = state.get("reference_se")
