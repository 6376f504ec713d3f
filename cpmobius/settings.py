"""Typed, validated settings of each loop stage, built from the Hydra config before any worker starts.

One dataclass per config group; each field's comment gives meaning, unit and paper symbol; each
``__post_init__`` rejects bad values with a `ConfigError` naming the key (``filter.band_low``).
`load_settings` also checks the run's ``trainer``/``data`` keys (`validate_run_config`): the
driver calls it first, before anything reads ``trainer.total_training_steps``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from cpmobius.config import CONFIG_DIR, validate_run_config
from cpmobius.config.sections import default, read_section, require, require_choice
from cpmobius.prompts import ANSWER_FORMATS
from cpmobius.worlds import is_world

# player.vote: the grading modes of `cpmobius.grading` (its `MODES`; not imported here, to keep config checks light).
VOTES = ("cpmobius", "released")
# player.reward: the paper's reward against the pseudo-label, or random rewards (a null control).
PLAYER_REWARDS = ("pseudo_label", "random")

COACH_REWARDS = ("paper", "released_uniform", "released_advantage")
# coach.delta_t_source: the Δt that R_i multiplies; all but "measured" are ablations (`cpmobius.rewards.coach_delta_t`).
DELTA_T_SOURCES = ("measured", "constant", "noise", "shuffled")
SHORTFALL_POLICIES = ("train_on_fewer", "skip_step", "error")
# filter.label_from: which rollouts may label a group (`cpmobius.difficulty_filter.assign_pseudo_labels`).
LABEL_SOURCES = ("all", "answered")
# validation.metric: the accuracy that feeds Δt (`cpmobius.validation.measure_accuracy`).
VALIDATION_METRICS = ("greedy", "expected")

# The defaults of every method key live in one place, configs/cpmobius.yaml; the dataclasses below read
# theirs from it (`default`), so a test or notebook that builds them runs the command line's defaults.


def method_configs() -> tuple[str, ...]:
    """The methods ``method=`` offers: the files of ``configs/method/`` (one YAML per registered method,
    `cpmobius.methods`; read here, since the methods' own checks import the loop, `cpmobius.methods.check_settings`)."""
    return tuple(sorted(path.stem for path in (CONFIG_DIR / "method").glob("*.yaml")))


@dataclass
class CoachSettings:
    """Config group ``coach`` (the ``verl`` delta aside)."""

    # The one fixed user message the Coach answers with a problem (released code: data.proposer_prompt).
    instruction: str = default("coach.instruction")
    # Reject malformed candidates (empty, over-long, no question, chatter, several problems, leaked answer).
    validate: bool = default("coach.validate")
    # Longest accepted problem, in characters.
    max_problem_chars: int = default("coach.max_problem_chars")
    # Candidates whose normalised texts are at least this similar (0–1) to an earlier one are duplicates; 1 = off.
    duplicate_similarity: float = default("coach.duplicate_similarity")
    # Coach reward R_i: "paper" = pass_rate_i × 100·Δt (Δt in points);
    # "released_uniform" = 100·Δt (released 1.5B script);
    # "released_advantage" = 100·Δt × token-weighted mean Player advantage (released 7B/3B scripts).
    reward: str = default("coach.reward")
    # Train the Coach at all (False = the paper's "no Coach update" ablation).
    update: bool = default("coach.update")
    # Reject a candidate the world cannot read as one of its problems (reason "off_world"): only a world that
    # defines its problems has this check (the toy world, `cpmobius.toy.world.problem_difficulty`).
    world_problems_only: bool = default("coach.world_problems_only")
    # Ablations of the Δt in R_i (`cpmobius.rewards.coach_delta_t`): "measured" (the method: the Player's Δt),
    # "constant" (delta_t_constant every step), "noise" (a fresh N(0, delta_t_noise_sd²) each step) or
    # "shuffled" (the measured Δt of a uniformly random earlier step). Both values are fractions, as val/delta_t.
    delta_t_source: str = default("coach.delta_t_source")
    delta_t_constant: Optional[float] = default("coach.delta_t_constant")
    delta_t_noise_sd: Optional[float] = default("coach.delta_t_noise_sd")

    def __post_init__(self) -> None:
        require(bool(self.instruction.strip()), "coach.instruction", "must not be empty")
        require(self.max_problem_chars > 0, "coach.max_problem_chars", "must be positive")
        require(0.0 < self.duplicate_similarity <= 1.0, "coach.duplicate_similarity", "must be in (0, 1]")
        require_choice(self.reward, COACH_REWARDS, "coach.reward")
        require_choice(self.delta_t_source, DELTA_T_SOURCES, "coach.delta_t_source")
        for source, key in (("constant", "delta_t_constant"), ("noise", "delta_t_noise_sd")):
            require(
                (self.delta_t_source == source) == (getattr(self, key) is not None),
                f"coach.{key}",
                f"set it exactly when coach.delta_t_source={source} (got delta_t_source={self.delta_t_source!r})",
            )
        require(self.delta_t_constant != 0.0, "coach.delta_t_constant", "0 never updates the Coach: coach.update=false")
        require(self.delta_t_noise_sd is None or self.delta_t_noise_sd > 0.0, "coach.delta_t_noise_sd", "must be > 0")


@dataclass
class RollbackSettings:
    """Config group ``player.rollback``: the released code's return to the best-on-validation Player."""

    # Enable rollback (released scripts: save_load_actor=True).
    enabled: bool = default("player.rollback.enabled")
    # Non-improving validation steps before rolling back (released: save_load_interval = 15).
    patience: int = default("player.rollback.patience")
    # First step at which non-improving steps are counted (released 1.5B: save_load_begin_steps = 100).
    begin_step: int = default("player.rollback.begin_step")

    def __post_init__(self) -> None:
        require(self.patience >= 1, "player.rollback.patience", "must be >= 1")
        require(self.begin_step >= 0, "player.rollback.begin_step", "must be >= 0")


@dataclass
class PlayerSettings:
    """Config group ``player`` (the ``verl`` delta aside)."""

    # Rollouts per problem, n in the paper (released: 16); they are the filter's and the GRPO group.
    n: int = default("player.n")
    # A system message for every Player prompt (training and validation alike), or None for the chat
    # template's own default (Qwen2.5-Math inserts "Please reason step by step, ... \boxed{}.").
    system_prompt: Optional[str] = default("player.system_prompt")
    # The \boxed{} answer instruction (cpmobius/prompts.py): "auto" appends Qwen2.5-Math evaluation's CoT
    # instruction to the user turn iff the rendered chat template lacks "\boxed"; "template" never (released);
    # "append" always. Training, Δt validation and `python -m cpmobius.eval --answer-format` alike.
    answer_format: str = default("player.answer_format")
    # The filter's vote over a group: "cpmobius" clusters equivalent answers (math-verify) and leaves
    # truncated rollouts out; "released" counts exact strings of the last \boxed{} (the released code's).
    vote: str = default("player.vote")
    # The Player's reward: "pseudo_label" (paper) is 1 iff a rollout's answer equals its group's pseudo-label;
    # "random" is 1 with probability random_reward_p whatever the rollout answers, on the same problems and
    # schedule: the null control for a gain that any reward would give (random rewards alone lifted
    # Qwen2.5-Math-7B's MATH-500 by 21.4 points, arXiv 2506.10947).
    reward: str = default("player.reward")
    random_reward_p: float = default("player.random_reward_p")
    rollback: Any = None

    def __post_init__(self) -> None:
        require(self.n >= 2, "player.n", "a group needs at least 2 rollouts")
        require_choice(self.answer_format, ANSWER_FORMATS, "player.answer_format")
        require_choice(self.vote, VOTES, "player.vote")
        require_choice(self.reward, PLAYER_REWARDS, "player.reward")
        require(
            isinstance(self.random_reward_p, (int, float)) and 0.0 <= self.random_reward_p <= 1.0,
            "player.random_reward_p",
            f"must be a probability in [0, 1], got {self.random_reward_p!r}",
        )
        if not isinstance(self.rollback, RollbackSettings):
            self.rollback = RollbackSettings(**(self.rollback or {}))


@dataclass
class FilterSettings:
    """Config group ``filter``: the difficulty filter and its resampling."""

    # Keep a problem iff band_low ≤ pass rate ≤ band_high, both inclusive (paper/released: [0.2, 0.8]).
    band_low: float = default("filter.band_low")
    band_high: float = default("filter.band_high")
    # Kept problems per step, m in the paper (released: 16).
    quota: int = default("filter.quota")
    # Candidates per attempt = ceil(missing × oversample): one Coach batch covers the expected losses.
    oversample: float = default("filter.oversample")
    # CPMöbius: size each Coach batch from the acceptance rate seen so far (`candidates_per_attempt`),
    # oversample as the floor and oversample_max as the cap, so a typical step needs one attempt.
    adaptive_oversample: bool = default("filter.adaptive_oversample")
    oversample_max: float = default("filter.oversample_max")
    # Candidates asked for per problem still missing, over 1 / acceptance: a margin for its noise.
    adaptive_margin: float = default("filter.adaptive_margin")
    # CPMöbius: when the Coach is woken for an attempt it writes ceil(count × (1 + coach_reserve))
    # candidates; the attempt takes count of them and later attempts of the same step take the rest
    # first, so they need no Coach wake (two engine switches fewer each). Unused ones are dropped at the
    # step's end. 0 = the released behaviour (one Coach batch per attempt, exactly its count).
    coach_reserve: float = default("filter.coach_reserve")
    # Attempts (Coach batch → Player rollouts → vote) per step before the shortfall policy applies: far above what
    # a step needs, so that the filter resamples until the quota is full (the released loop's, unbounded).
    max_attempts: int = default("filter.max_attempts")
    # What to do when the quota is not met: "train_on_fewer", "skip_step" or "error".
    on_shortfall: str = default("filter.on_shortfall")
    # With train_on_fewer: fewer kept problems than this skip the step instead.
    min_kept: int = default("filter.min_kept")
    # Apply the band at all (False = the paper's "no filter" ablation: every labelled problem is kept).
    enabled: bool = default("filter.enabled")
    # "all" (paper, released): a group whose unanswered rollouts tie or outnumber its plurality answer is
    # dropped; "answered": the plurality of the answered rollouts labels it (`assign_pseudo_labels`).
    label_from: str = default("filter.label_from")

    def __post_init__(self) -> None:
        require(0.0 <= self.band_low <= 1.0, "filter.band_low", "must be in [0, 1]")
        require(0.0 <= self.band_high <= 1.0, "filter.band_high", "must be in [0, 1]")
        require(self.band_low <= self.band_high, "filter.band_low", "must not exceed filter.band_high")
        require(self.quota >= 1, "filter.quota", "must be >= 1")
        require(self.oversample >= 1.0, "filter.oversample", "must be >= 1")
        require(self.oversample_max >= self.oversample, "filter.oversample_max", "must be >= filter.oversample")
        require(self.adaptive_margin >= 1.0, "filter.adaptive_margin", "must be >= 1")
        require(self.coach_reserve >= 0.0, "filter.coach_reserve", "must be >= 0")
        require(self.max_attempts >= 1, "filter.max_attempts", "must be >= 1")
        require_choice(self.label_from, LABEL_SOURCES, "filter.label_from")
        require_choice(self.on_shortfall, SHORTFALL_POLICIES, "filter.on_shortfall")
        require(1 <= self.min_kept <= self.quota, "filter.min_kept", "must be in [1, filter.quota]")

    def count_band(self, n: int) -> tuple[int, int]:
        """The band as agreeing-rollout counts for a group of n, exact (no float drift at 0.2/0.8)."""
        low, high = Fraction(str(self.band_low)) * n, Fraction(str(self.band_high)) * n
        return -(-low.numerator // low.denominator), high.numerator // high.denominator


@dataclass
class ValidationSettings:
    """Config group ``validation``: the Player's validation accuracy and Δt."""

    # "toy" (synthetic arithmetic), or a benchmark name under data_dir/eval (amc, minerva_math, ...),
    # or a path to a JSONL file with "problem" and "answer" fields.
    dataset: str = default("validation.dataset")
    # Folder holding eval/<name>/<name>.jsonl (the repository's shared data copy, or prepared data).
    data_dir: Optional[str] = default("validation.data_dir")
    # First `size` problems of a benchmark (null = all); the toy set's size (null = 32).
    size: Optional[int] = default("validation.size")
    # Sampled responses per problem (released 1.5B: 10 copies of AMC at the Player's temperature).
    samples_per_problem: int = default("validation.samples_per_problem")
    # Greedy decoding (then samples_per_problem must be 1); else rollout.val_kwargs sampling.
    greedy: bool = default("validation.greedy")
    # The accuracy that feeds Δt: "greedy" = the decoded pass above (paper, released); "expected" = the mean
    # teacher-forced probability of each problem's canonical correct response at the Player's sampling
    # temperature (a departure; toy set only, with the greedy pass logged beside it as val/accuracy_greedy).
    metric: str = default("validation.metric")
    # The temperature `expected` scores at (null = the Player's rollout temperature): one for every method compared.
    temperature: Optional[float] = default("validation.temperature")
    # Δt from an exponential moving average of validation accuracy with this decay, or null for none
    # (released option proposer_ema, decay 0.99, off in every script).
    ema_decay: Optional[float] = default("validation.ema_decay")
    # Seed of the toy validation set (and of the toy out-of-distribution set).
    seed: int = default("validation.seed")
    # An out-of-distribution set scored beside validation every step (val/ood_accuracy; never Δt): "toy_ood" (the
    # toy world's arithmetic in forms the validation set never holds, `cpmobius.toy.ood`), a benchmark name or a
    # JSONL path as for `dataset`, or null. Measured as `metric` says; its first `ood_size` (null = all; toy: 60).
    ood_dataset: Optional[str] = default("validation.ood_dataset")
    ood_size: Optional[int] = default("validation.ood_size")

    def __post_init__(self) -> None:
        require(self.samples_per_problem >= 1, "validation.samples_per_problem", "must be >= 1")
        require(
            not (self.greedy and self.samples_per_problem > 1),
            "validation.samples_per_problem",
            "greedy decoding gives identical samples: use 1, or set validation.greedy=false"
            # the expected accuracy logs a greedy pass beside it: sampling needs the decoded metric too
            + (" validation.metric=greedy" if self.metric == "expected" else ""),
        )
        require(self.size is None or self.size >= 1, "validation.size", "must be >= 1 or null")
        require_choice(self.metric, VALIDATION_METRICS, "validation.metric")
        require(
            self.metric != "expected" or is_world(self.dataset),
            "validation.metric",
            "expected needs a set whose correct responses are known token for token (validation.dataset=toy), "
            f"got validation.dataset={self.dataset!r} (the toy default measures expected accuracy: add "
            "validation.metric=greedy coach.world_problems_only=false to validate on another set)",
        )
        require(
            self.metric != "expected" or self.greedy,
            "validation.metric",
            "expected logs the greedy pass beside it (val/accuracy_greedy): set validation.greedy=true",
        )
        require(self.temperature is None or self.temperature > 0, "validation.temperature", "must be > 0 or null")
        require(
            self.ema_decay is None or 0.0 < self.ema_decay < 1.0, "validation.ema_decay", "must be in (0, 1) or null"
        )
        require(self.ood_size is None or self.ood_size >= 1, "validation.ood_size", "must be >= 1 or null")
        require(self.ood_dataset != self.dataset, "validation.ood_dataset", "is the validation set itself")
        require(
            self.metric != "expected" or self.ood_dataset is None or is_world(self.ood_dataset),
            "validation.ood_dataset",
            f"validation.metric=expected scores it by canonical responses: toy_ood or null, got {self.ood_dataset!r}",
        )


@dataclass
class WarmupSettings:
    """Config group ``warmup``: the Coach SFT warm-up (paper §3; the paper gives no hyperparameters)."""

    # Run the warm-up before the loop (false = the paper's "no warm-up" ablation).
    enabled: bool = default("warmup.enabled")
    # The messages parquet: user = coach.instruction, assistant = one problem.
    data: str = default("warmup.data")
    # Passes over the data, and an optional cap on optimizer steps.
    epochs: int = default("warmup.epochs")
    max_steps: Optional[int] = default("warmup.max_steps")
    # AdamW learning rate.
    lr: float = default("warmup.lr")
    # Sequences per optimizer step, and per device per forward pass.
    batch_size: int = default("warmup.batch_size")
    micro_batch_size_per_gpu: int = default("warmup.micro_batch_size_per_gpu")
    # Tokens per conversation (instruction + problem); longer ones are cut on the right.
    max_length: int = default("warmup.max_length")
    # A folder of finished warm-ups, one per set of inputs (`cpmobius.warmup.sft.warmup_record`): a run whose
    # Coach, data and SFT settings match a stored one starts from it (null: every run does its own).
    cache_dir: Optional[str] = default("warmup.cache_dir")

    def __post_init__(self) -> None:
        require(self.epochs >= 1, "warmup.epochs", "must be >= 1")
        require(self.max_steps is None or self.max_steps >= 1, "warmup.max_steps", "must be >= 1 or null")
        require(self.lr > 0, "warmup.lr", "must be positive")
        require(self.batch_size >= 1 and self.micro_batch_size_per_gpu >= 1, "warmup.batch_size", "must be >= 1")
        require(
            self.batch_size % self.micro_batch_size_per_gpu == 0,
            "warmup.micro_batch_size_per_gpu",
            "must divide warmup.batch_size",
        )
        require(self.max_length >= 16, "warmup.max_length", "must be >= 16 tokens")


@dataclass
class MethodSettings:
    """Config group ``method``: which algorithm trains the Player (configs/method/, docs/baselines.md), and that
    method's own keys as composed (``method.votes``, ...; from ``configs/method_defaults/<name>.yaml``). The method
    reads them into its own settings class (`cpmobius.methods.base.Method.read_settings`, which checks each key and
    value); they are not read here, where checking a config must not import the methods and, with them, torch."""

    # cpmobius (paper Algorithm 1), a baseline on a fixed pool: ttrl (vote-then-train), rent (entropy), or
    # rzero (Challenger and Solver phases, docs/baselines.md).
    name: str = default("method.name")
    # The method's own keys and values, e.g. {"votes": 64, "prompts_per_step": 8} for ttrl.
    options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        require_choice(self.name, method_configs(), "method.name")


@dataclass
class Settings:
    """All stage settings of a run."""

    coach: CoachSettings
    player: PlayerSettings
    filter: FilterSettings
    validation: ValidationSettings
    warmup: WarmupSettings
    method: MethodSettings = field(default_factory=MethodSettings)


def read_method(cfg: DictConfig) -> MethodSettings:
    """The ``method`` group: its name, checked, and the method's own keys as they are (`MethodSettings`)."""
    node = OmegaConf.to_container(cfg.method, resolve=True) if "method" in cfg else {}
    name = node.pop("name", default("method.name"))
    return MethodSettings(name=name, options=node)


def load_settings(cfg: DictConfig) -> Settings:
    """Build and validate every stage's settings from the composed config, and its ``trainer``/``data`` keys;
    the checks a method adds across sections are `cpmobius.methods.check_settings`'s.

    Raises:
        ConfigError: naming the first bad or unknown key.
    """
    validate_run_config(cfg)
    settings = Settings(
        coach=read_section(cfg, "coach", CoachSettings),
        player=read_section(cfg, "player", PlayerSettings, nested={"rollback": RollbackSettings}),
        filter=read_section(cfg, "filter", FilterSettings),
        validation=read_section(cfg, "validation", ValidationSettings),
        warmup=read_section(cfg, "warmup", WarmupSettings),
        method=read_method(cfg),
    )
    require(
        not settings.coach.world_problems_only or is_world(settings.validation.dataset),
        "coach.world_problems_only",
        "needs a world that defines its problems (validation.dataset=toy), "
        f"got validation.dataset={settings.validation.dataset!r}: set coach.world_problems_only=false",
    )
    low, high = settings.filter.count_band(settings.player.n)
    require(
        low <= high,
        "filter.band_low",
        f"[{settings.filter.band_low}, {settings.filter.band_high}] holds no whole number of agreeing rollouts "
        f"out of player.n={settings.player.n}: every problem would be dropped",
    )
    return settings
