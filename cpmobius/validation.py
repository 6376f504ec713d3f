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
hold an earlier, retracted box.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from cpmobius.engine.config import ConfigError
from cpmobius.grading import check_batch, grade_batch
from cpmobius.jsonl import JSONLineError, json_objects
from cpmobius.policy_api import TrainedPolicy
from cpmobius.prompts import PlayerPrompt
from cpmobius.settings import ValidationSettings


@dataclass(frozen=True)
class ValidationSet:
    """Problems with gold answers. ``ids`` identify problems (avg@k groups by them)."""

    name: str
    ids: list[str]
    problems: list[str]
    answers: list[str]

    def __len__(self) -> int:
        return len(self.problems)


def load_validation_set(settings: ValidationSettings) -> ValidationSet:
    """The configured validation set.

    ``dataset`` is "toy" (synthetic arithmetic, `cpmobius.toy.world`), a benchmark name found as
    ``{data_dir}/eval/{name}/{name}.jsonl``, or a path to a JSONL file with ``problem`` and
    ``answer`` fields (and optionally ``id``).

    Raises:
        ConfigError: naming ``validation.dataset`` when the file is missing or malformed.
    """
    if settings.dataset == "toy":
        from cpmobius.toy.world import validation_problems

        rows = validation_problems(settings.size or 32, settings.seed)
        return ValidationSet(
            "toy", [f"toy-{i}" for i in range(len(rows))], [r.text for r in rows], [r.answer for r in rows]
        )
    path = Path(settings.dataset).expanduser()
    if not path.suffix == ".jsonl":
        if not settings.data_dir:
            raise ConfigError(f"validation.data_dir: needed to find the benchmark {settings.dataset!r}")
        path = Path(settings.data_dir).expanduser() / "eval" / settings.dataset / f"{settings.dataset}.jsonl"
    if not path.is_file():
        raise ConfigError(f"validation.dataset: no file {path}")
    ids, problems, answers = [], [], []
    with path.open() as handle:
        try:
            for line_no, row in json_objects(handle):
                if row.get("problem") is None or row.get("answer") is None:
                    raise ConfigError(f"validation.dataset: {path}:{line_no}: needs 'problem' and 'answer'")
                ids.append(str(row.get("id", f"{path.stem}-{len(problems)}")))
                problems.append(str(row["problem"]))
                answers.append(str(row["answer"]))
        except JSONLineError as error:
            raise ConfigError(f"validation.dataset: {path}:{error.line_no}: {error.reason}") from error
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
) -> ValidationResult:
    """The Player's avg@k accuracy on ``val_set`` (k = ``samples_per_problem``).

    Uses the training prompt (``prompt``, the loop's `cpmobius.prompts.PlayerPrompt`), so training and
    validation render identically; samples with
    ``rollout.val_kwargs`` or greedily. A sample stopped at the length limit has no answer, as in
    training, and counts as wrong.

    Raises:
        cpmobius.grading.GradingError: when every answer of the pass failed to grade.
    """
    k = settings.samples_per_problem
    player.activate()
    batch = player.generate(
        prompt.render(val_set.problems),
        n=k,
        validate=True,
        greedy=settings.greedy,
    )
    texts, truncated = player.decode_responses(batch)
    # CPMöbius: a truncated sample has no answer, as in the vote: the text cut at the
    # length limit may hold an earlier, retracted \boxed{} that the grader would otherwise read.
    responses = [None if cut else text for text, cut in zip(texts, truncated)]
    golds = [answer for answer in val_set.answers for _ in range(k)]
    grades = grade_batch(golds, responses)
    check_batch(grades.results, context=f"validation on {val_set.name}")
    scores = [float(r.correct) for r in grades.results]
    per_problem = [sum(scores[i * k : (i + 1) * k]) / k for i in range(len(val_set))]
    tokens = int(batch.batch["response_mask"].sum())
    sampling = dict(getattr(batch, "meta_info", {}).get("sampling", {}))
    return ValidationResult(
        sum(per_problem) / len(per_problem),
        per_problem,
        dict(grades.counts),
        tokens,
        sampling,
        truncated=sum(bool(cut) for cut in truncated),
    )


class DeltaTracker:
    """Δt bookkeeping: one score per step, optionally EMA-smoothed (released ``proposer_ema``).

    Args:
        ema_decay: decay of the moving average, or None to use raw scores.
    """

    def __init__(self, ema_decay: Optional[float] = None) -> None:
        self.ema_decay = ema_decay
        self.reference: Optional[float] = None  # the (smoothed) score before the next step
        self.history: list[float] = []  # raw scores, one per pass

    def start(self, score: float) -> None:
        """Record the score before the first step (or after a rollback: the new reference)."""
        self.history.append(score)
        self.reference = score

    def update(self, score: float) -> float:
        """Record the score after a Player update and return Δt (a fraction).

        Raises:
            RuntimeError: when `start` was never called.
        """
        if self.reference is None:
            raise RuntimeError("DeltaTracker.update before start: validate once before the loop")
        self.history.append(score)
        smoothed = score if self.ema_decay is None else self.ema_decay * self.reference + (1 - self.ema_decay) * score
        delta_t = smoothed - self.reference
        self.reference = smoothed
        return delta_t

    def state_dict(self) -> dict:
        return {"ema_decay": self.ema_decay, "reference": self.reference, "history": list(self.history)}

    def load_state_dict(self, state: dict) -> None:
        """Restore the reference score and history; the configured ``ema_decay`` stays as configured."""
        self.reference, self.history = state["reference"], list(state["history"])
