"""The toy Coach's problem levels on its checkpoints: a larger sample than a run's own per-step batches.

For each run folder and step, loads the Coach (step 0: the warmed-up Coach the run started from, found in
``warmup.cache_dir`` from the run's own composed config; step N: ``global_step_N/coach``, verl's FSDP checkpoint),
samples ``--samples`` responses to the Coach prompt at the Coach's rollout temperature
(`cpmobius.warmup.sft.sample_coach_problems`), and classifies each well-formed problem by its level
(`cpmobius.toy.world.problem_difficulty`). Prints one row per run and step, then the mean ± standard error over
the runs of the mean level at each step. A run whose Coach was never updated saves no Coach weights: its Coach
is the step-0 Coach throughout.

Usage:
    python benchmarks/toy_coach_levels.py /tmp/bench/full_seed* --steps 0 10 15           # bench_toy_learning's runs
    python benchmarks/toy_coach_levels.py RUN_DIR --steps 0 15 --samples 128 --out levels.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def run_config(run_dir: Path) -> Any:
    """The run's composed config (Hydra's ``.hydra/config.yaml`` under the run's ``hydra`` folder; the newest
    launch's when the run was resumed).

    Raises:
        FileNotFoundError: the run folder holds no composed config.
    """
    from omegaconf import OmegaConf

    found = sorted((run_dir / "hydra").glob("*/.hydra/config.yaml")) + sorted(run_dir.glob("hydra/.hydra/config.yaml"))
    if not found:
        raise FileNotFoundError(f"{run_dir}: no hydra/<time>/.hydra/config.yaml (is it a run folder of cpmobius.main?)")
    return OmegaConf.load(found[-1])


def start_coach(cfg: Any) -> Path:
    """The HF folder of the Coach a run started from: its stored warm-up, or the pretrained Coach without one.

    Raises:
        FileNotFoundError: the warm-up the config names is no longer stored in ``warmup.cache_dir``.
    """
    from cpmobius.warmup.sft import record_key, stored_warmup_matches, warmup_record

    if not cfg.warmup.enabled:
        return Path(str(cfg.model.coach_path)).expanduser()
    record = warmup_record(cfg, Path(str(cfg.warmup.data)).expanduser())
    folder = Path(str(cfg.warmup.cache_dir)).expanduser() / record_key(record)
    if not stored_warmup_matches(folder, record):
        raise FileNotFoundError(f"the run's warm-up is not stored in {folder} any more")
    step = (folder / "latest_checkpointed_iteration.txt").read_text().strip()
    return folder / f"global_step_{step}" / "huggingface"


def checkpoint_as_hf(checkpoint: Path, out: Path) -> Optional[Path]:
    """verl's one-rank FSDP checkpoint of a policy (``global_step_N/coach``) as an HF folder in ``out``; None when
    it holds no weights (a Coach that was never updated saves none). Raises ValueError for a checkpoint of
    several ranks.

    Not verl's model merger (``python -m verl.model_merger``): it casts every weight to bf16, and the toy
    policies sample in fp32, so the levels measured would be of another model than the run's."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    shards = sorted(checkpoint.glob("model_world_size_*_rank_*.pt"))
    if not shards:
        return None
    if len(shards) > 1:
        raise ValueError(f"{checkpoint}: {len(shards)} shards; merge them first (python -m verl.model_merger)")
    state = torch.load(shards[0], map_location="cpu", weights_only=False)
    state = {key: value.full_tensor() if hasattr(value, "full_tensor") else value for key, value in state.items()}
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(checkpoint / "huggingface"))
    model.load_state_dict(state)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(checkpoint / "huggingface").save_pretrained(out)
    return out


def coach_levels(model_dir: Path, cfg: Any, samples: int, seed: int = 0) -> dict[str, Any]:
    """``{"levels": {level: share of all samples}, "mean_level": of the well-formed problems of the world,
    "valid": share well-formed}`` of ``samples`` Coach samples."""
    from cpmobius.toy.world import problem_difficulty
    from cpmobius.warmup.sft import sample_coach_problems

    problems = sample_coach_problems(model_dir, cfg, count=samples, seed=seed)
    levels = [problem_difficulty(p.text) for p in problems if p.valid]
    known = [level for level in levels if level is not None]
    counts = Counter(known)
    return {
        "levels": {level: counts[level] / samples for level in sorted(counts)},
        "mean_level": statistics.fmean(known) if known else math.nan,
        "valid": sum(p.valid for p in problems) / samples,
    }


def measure(run_dir: Path, steps: list[int], samples: int) -> dict[int, dict[str, Any]]:
    """`coach_levels` of ``run_dir``'s Coach at each of ``steps`` (0: the Coach it started from)."""
    cfg = run_config(run_dir)
    start = start_coach(cfg)
    out: dict[int, dict[str, Any]] = {}
    for step in steps:
        with tempfile.TemporaryDirectory() as tmp:
            model = start if step == 0 else checkpoint_as_hf(run_dir / f"global_step_{step}" / "coach", Path(tmp))
            out[step] = coach_levels(model or start, cfg, samples)
    return out


def _mean_se(values: list[float]) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "–"
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.2f} ± {se:.2f}"


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+", help="run folders (trainer.default_local_dir)")
    parser.add_argument("--steps", type=int, nargs="+", default=[0, 10, 15])
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--out", type=Path, default=None, help="write every figure here as JSON")
    args = parser.parse_args(argv)

    results = {}
    print("| run | step | mean level | well-formed | share per level |")
    print("|---|---|---|---|---|")
    for run in args.runs:
        results[str(run)] = measure(run, args.steps, args.samples)
        for step, figures in results[str(run)].items():
            shares = ", ".join(f"{level}: {share:.2f}" for level, share in figures["levels"].items())
            row = f"| {run.name} | {step} | {figures['mean_level']:.2f} | {figures['valid']:.2f} | {shares} |"
            print(row, flush=True)
    print("\n| step | mean level ± SE over the runs |\n|---|---|")
    for step in args.steps:
        print(f"| {step} | {_mean_se([results[str(run)][step]['mean_level'] for run in args.runs])} |")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
