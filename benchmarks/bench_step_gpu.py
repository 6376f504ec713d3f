"""One CPMöbius step at the paper's scale on one GPU, beside plain GRPO on the same model.

Both policies at the shape of Qwen2.5-Math-1.5B (by default Qwen2.5-Coder-1.5B-Instruct weights:
``python -m cpmobius.models fetch qwen2.5-coder-1.5b``), vLLM engines, the paper preset
(`configs/experiment/paper_qwen_1p5b.yaml`: m = 16 kept problems, n = 16 rollouts, oversampling 2.0
and up to 16 attempts, prompt 1024 + response 2048 tokens, AMC validation at k = 10), without the
Coach's warm-up SFT (a one-off before the loop). It runs in one process:

1. start-up: Ray, then each policy's phases (worker group, FSDP model init, rollout servers with their
   KV cache and CUDA graphs, agent loop, first sleep);
2. the yardstick: plain GRPO steps of the same Player — 16 fixed AMC prompts x 16 rollouts, the same
   lengths, rewards against the true answers, old and reference log-probs, one update (the `Policy`
   calls the loop makes, without the Coach, the filter and the validation);
3. the step-0 validation and loop steps in phases (``--phases released:1,adaptive:2,reserve:2``: one step
   with the released fixed oversampling, two with ``filter.adaptive_oversample``, two with that and
   ``filter.coach_reserve=1``);
4. optionally one Player checkpoint save (``--checkpoint``), timed and deleted.

It prints one table — seconds per stage, tokens and tokens/s per generating stage, engine switches, the
overhead share (the part of a step that is neither generation nor a model update), peak GPU memory per
phase (``nvidia-smi``, the whole device), the start-up split — and writes it with every step's metrics to
``--out`` (``bench_step_gpu.md``, ``bench_step_gpu.json``). Usage (one GPU, vLLM installed):

    python benchmarks/bench_step_gpu.py --out /tmp/bench [--phases released:1,adaptive:2,reserve:2]
        [--checkpoint] [--yardstick-steps 2] [hydra overrides ...]

``--memory-gb 80`` (default) scales vLLM's ``gpu_memory_utilization`` (a share of the whole device) so that
its KV cache is what it would be on an 80 GB A800 at the preset's share; the peak of the whole device is
reported against the same 80 GB. With ``--toy`` it runs the embedded default's tiny models on this
machine's CPU instead (a smoke test of the benchmark itself: its figures mean nothing for a GPU).

Figures on record (one H200 emulating 80 GB, Qwen2.5-Coder-1.5B-Instruct, 2026-12-04, the presets' fast path;
docs/gpu.md, "Newest whole steps", and results/h200_bench_step_1p5b_2026-12-04/): plain GRPO step 30.3 s
steady; CPMöbius steps (adaptive oversampling + Coach reserve) 100.5 and 83.2 s, 3 and 2 attempts, 5 and 3 engine
switches, ratio 2.75 (generation-bound: validation 26 s, Coach 11 s, rollouts of ~2.5 attempts' groups 35 s);
peak 74.5 GiB; one Player checkpoint 27.1 s; start-up 267-287 s (vLLM servers ~100 s each, one after the other).
Before the fast path (2026-12-02, run 4): plain GRPO 216.8 s, CPMöbius 259.9 and 226.4 s, start-up 342.8 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cpmobius.engine.timing import COMPUTE_OPS, SWITCH_OPS, op_marks, op_metrics, split_step  # noqa: E402

PAPER_SHAPE = [
    "experiment=paper_qwen_1p5b",
    "model=qwen2p5_coder_1p5b",
    "backend=vllm",
    "trainer.n_gpus_per_node=1",
    "warmup.enabled=false",
    "trainer.logger=[file]",
]
TOY = ["trainer.logger=[file]", "warmup.enabled=false", "filter.quota=2", "player.n=4", "validation.size=8"]
# Filter settings per phase: the released fixed oversampling; adaptive oversampling; adaptive oversampling
# with the Coach reserve (later attempts need no Coach wake).
PHASES = {
    "released": {"adaptive_oversample": False, "coach_reserve": 0.0},
    "adaptive": {"adaptive_oversample": True, "coach_reserve": 0.0},
    "reserve": {"adaptive_oversample": True, "coach_reserve": 1.0},
}
# Stages of a loop step as the table lists them: (label, the loop's stage name).
STAGES = (
    ("Coach generation", "coach"),
    ("Player rollouts + vote and filter", "difficulty_filter"),
    ("Player update (log-probs, reference, update)", "player_update"),
    ("validation (generation + grading)", "validation"),
    ("Coach update", "coach_update"),
    ("rollback bookkeeping", "rollback"),
)


class MemorySampler:
    """The whole device's memory in use, sampled by ``nvidia-smi`` every ``period_ms`` (MiB, perf_counter time)."""

    def __init__(self, period_ms: int = 500) -> None:
        self.samples: list[tuple[float, float]] = []
        self._process: Optional[subprocess.Popen] = None
        if shutil.which("nvidia-smi") is None:
            return
        self._process = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms", str(period_ms)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self._process.stdout:
            try:
                self.samples.append((time.perf_counter(), float(line.split(",")[0])))
            except ValueError:
                continue

    def peak(self, start: float = float("-inf"), end: float = float("inf")) -> Optional[float]:
        """The most MiB in use in [start, end], or None without a sample there."""
        inside = [mib for t, mib in self.samples if start <= t <= end]
        return max(inside) if inside else None

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()


def stage_op_seconds(loop: Any, policies: dict[str, Any], since: float) -> dict[str, dict[str, float]]:
    """Seconds of each policy operation inside each loop stage, for stage intervals that started after ``since``.

    Returns:
        ``{stage: {op: seconds}}``; an operation is attributed to the stage whose interval contains its middle.
    """
    stages = [(name, start, end) for name, start, end in loop.stages.intervals if start >= since]
    result: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for policy in policies.values():
        for op, start, end in policy.ops.intervals:
            middle = (start + end) / 2
            for name, s_start, s_end in stages:
                if s_start <= middle <= s_end:
                    result[name][op] += end - start
                    break
    return {name: dict(ops) for name, ops in result.items()}


def run_loop_steps(
    loop: Any,
    phases: list[tuple[str, int]],
    memory: MemorySampler,
    rows: list[dict[str, Any]],
    on_step: Callable[[], None] = lambda: None,
) -> None:
    """Step 0's validation, then the phases' steps as `CoachPlayerLoop.fit` runs them (no checkpoints).

    Each step's figures are appended to ``rows``; ``on_step`` is called after each (results written as they come).
    """
    import dataclasses

    policies = {"coach": loop.coach, "player": loop.player}
    started = time.perf_counter()
    with loop.timed("validation"):
        result = loop._measure_validation()
    loop.delta.start(result.accuracy)
    rows.append(
        {
            "phase": "step 0",
            "step": 0,
            "val/accuracy": result.accuracy,
            "timing_s/validation": time.perf_counter() - started,
            "stage_ops": stage_op_seconds(loop, policies, started),
            "peak_mib": memory.peak(started),
        }
    )
    print(
        f"[bench] step 0 validation: accuracy {result.accuracy:.3f} in {rows[0]['timing_s/validation']:.1f} s",
        flush=True,
    )
    for phase, count in phases:
        loop.settings = dataclasses.replace(
            loop.settings, filter=dataclasses.replace(loop.settings.filter, **PHASES[phase])
        )
        for _ in range(count):
            switches = loop.player.guard.switches
            tokens = dict(loop.state.generated_tokens)
            marks, started = op_marks(loop.policies), time.perf_counter()
            metrics = loop.step()
            loop.state.step += 1
            ended = time.perf_counter()
            metrics["timing_s/step"] = ended - started
            metrics.update(op_metrics(loop.policies, marks))
            row = {
                "phase": phase,
                "step": loop.state.step,
                **metrics,
                "engine_switches": loop.player.guard.switches - switches,
                "tokens": {k: v - tokens.get(k, 0) for k, v in loop.state.generated_tokens.items()},
                "stage_ops": stage_op_seconds(loop, policies, started),
                "peak_mib": memory.peak(started, ended),
            }
            rows.append(row)
            print(
                f"[bench] step {row['step']} ({phase}): {row['timing_s/step']:.1f} s, "
                f"{row['filter/attempts']:.0f} attempts, "
                f"kept {row['filter/kept']:.0f}, {row['engine_switches']} engine switches, "
                f"val {row.get('val/accuracy', float('nan')):.3f}",
                flush=True,
            )
            on_step()


def run_yardstick(loop: Any, steps: int, prompts: int, memory: MemorySampler) -> list[dict[str, Any]]:
    """Plain GRPO steps of the loop's Player on ``prompts`` fixed validation problems with their true answers.

    The same `Policy` calls as the loop's Player update (wake and sync, generate n, rewards, advantages,
    old and reference log-probs, update), without the Coach, the filter and the validation pass.
    """
    from cpmobius.grading import grade_batch
    from cpmobius.rewards import grpo_advantages, player_token_rewards

    player, n, val = loop.player, loop.settings.player.n, loop.val_set
    chosen = list(range(min(prompts, len(val))))
    messages = loop.player_prompt.render([val.problems[i] for i in chosen])
    golds = [val.answers[i] for i in chosen for _ in range(n)]
    rows = []
    player._release_engine()  # each plain step wakes the engine with the updated weights, as verl's trainer does
    for index in range(steps):
        mark, switches, started = player.ops.mark(), player.guard.switches, time.perf_counter()
        player.activate()
        batch = player.generate(messages, n=n)
        texts, _ = player.decode_responses(batch)
        grading_started = time.perf_counter()
        graded = grade_batch(golds, texts)
        grading = time.perf_counter() - grading_started
        agrees = [bool(r.correct) for r in graded.results]
        mask = batch.batch["response_mask"]
        batch.batch["advantages"] = grpo_advantages(
            player_token_rewards(agrees, mask), mask, batch.non_tensor_batch["uid"]
        )
        batch.batch["old_log_probs"], _ = player.compute_log_probs(batch)
        if player.uses_reference:
            batch.batch["ref_log_prob"] = player.compute_ref_log_probs(batch)
        player.update(batch)
        ended = time.perf_counter()
        ops = player.ops.seconds_since(mark)
        rows.append(
            {
                "step": index + 1,
                "timing_s/step": ended - started,
                "ops": ops,
                "grading_s": grading,
                # a comparison past the grader's deadline holds its whole batch until then (10 s by default)
                "grading_timeouts": graded.counts["timeout"],
                "engine_switches": player.guard.switches - switches,
                "reward_mean": sum(agrees) / len(agrees),
                "tokens": int(mask.sum()),
                "peak_mib": memory.peak(started, ended),
                **split_step(ended - started, ops),
            }
        )
        print(
            f"[bench] plain GRPO step {index + 1}: {ended - started:.1f} s (generate {ops.get('generate', 0):.1f}, "
            f"update {ops.get('update', 0):.1f}), reward {rows[-1]['reward_mean']:.2f}",
            flush=True,
        )
    return rows


def startup_split(loop: Any, total: float) -> dict[str, float]:
    """Seconds per start-up phase: each policy's start-up phases (`cpmobius.engine.sharing.start_policies`:
    the two policies' model builds overlap), and the rest of the wall clock (config, Ray, driver).

    Returns:
        ``{"<policy>/<phase>": s, ..., "driver (config, data, Ray start)": s, "total (wall clock)": total}``.
    """
    split, intervals = {}, []
    for name, policy in (("player", loop.player), ("coach", loop.coach)):
        for op, start, end in policy.ops.intervals:
            if op.startswith("startup/"):
                key = f"{name}/{op.split('/', 1)[1]}"
                split[key] = split.get(key, 0.0) + end - start
                intervals.append((start, end))
    covered, reach = 0.0, float("-inf")  # the union of the phases' intervals: overlapping builds count once
    for start, end in sorted(intervals):
        covered += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    split["driver (config, data, Ray start)"] = total - covered
    split["total (wall clock)"] = total
    return split


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def operation_peaks(policies: dict[str, Any], memory: MemorySampler) -> dict[str, float]:
    """``{"<policy>/<op>": MiB}``: the most device memory in use during any interval of that operation."""
    peaks: dict[str, float] = {}
    for name, policy in policies.items():
        for op, start, end in policy.ops.intervals:
            peak = memory.peak(start, end)
            if peak is not None:
                peaks[f"{name}/{op}"] = max(peak, peaks.get(f"{name}/{op}", 0.0))
    return dict(sorted(peaks.items()))


def summarize(
    rows: list[dict[str, Any]],
    yardstick: list[dict[str, Any]],
    startup: dict[str, float],
    checkpoint_s: Optional[float],
    memory: MemorySampler,
    memory_limit_mib: float,
    op_peaks: dict[str, float],
) -> tuple[str, dict[str, Any]]:
    """The benchmark's table (markdown) and its figures."""
    steps = [r for r in rows if r["step"] > 0]
    phases = list(dict.fromkeys(r["phase"] for r in steps))
    lines = [
        "| stage | " + " | ".join(f"{p} (s, mean of {sum(r['phase'] == p for r in steps)})" for p in phases) + " |",
        "|---|" + "---|" * len(phases),
    ]

    def per_phase(fn) -> list[float]:
        return [_mean([fn(r) for r in steps if r["phase"] == p]) for p in phases]

    def row(label: str, values: list[float], fmt: str = "{:.1f}") -> None:
        lines.append(f"| {label} | " + " | ".join(fmt.format(v) for v in values) + " |")

    def inside(stage: str, ops: tuple[str, ...]):
        return per_phase(lambda r: sum(r["stage_ops"].get(stage, {}).get(op, 0.0) for op in ops))

    for label, stage in STAGES:
        row(label, per_phase(lambda r: r.get(f"timing_s/{stage}", 0.0)))
        if stage in ("coach", "difficulty_filter", "validation"):
            row("  of which generation", inside(stage, ("generate",)))
        if stage in ("player_update", "coach_update"):
            row("  of which model compute", inside(stage, COMPUTE_OPS))
        row("  of which engine wake + weight sync / sleep", inside(stage, SWITCH_OPS))
    splits = [split_step(r["timing_s/step"], _summed_ops(r)) for r in steps]
    for r, s in zip(steps, splits):
        r["split"] = s
    row("**step**", per_phase(lambda r: r["timing_s/step"]))
    row("generation (all stages)", per_phase(lambda r: r["split"]["generation_s"]))
    row("model compute (log-probs, updates)", per_phase(lambda r: r["split"]["compute_s"]))
    row("overhead (switches, syncs, grading, data movement, Python)", per_phase(lambda r: r["split"]["overhead_s"]))
    row("  of which engine switches and weight syncs", per_phase(lambda r: r["split"]["switch_s"]))
    row("**overhead share**", per_phase(lambda r: 100 * r["split"]["overhead_share"]), "{:.1f} %")
    row("engine switches per step", per_phase(lambda r: r["engine_switches"]), "{:.1f}")
    row("Coach attempts per step", per_phase(lambda r: r.get("filter/attempts", 0)), "{:.1f}")
    for stage, op_stage in (("coach", "coach"), ("player_rollouts", "difficulty_filter"), ("validation", "validation")):
        row(f"tokens generated: {stage}", per_phase(lambda r, s=stage: r["tokens"].get(s, 0)), "{:,.0f}")
        row(
            f"tokens/s: {stage}",
            per_phase(
                lambda r, s=stage, o=op_stage: (
                    r["tokens"].get(s, 0) / max(r["stage_ops"].get(o, {}).get("generate", 0.0), 1e-9)
                )
            ),
            "{:,.0f}",
        )
    row("peak GPU memory (GiB, whole device)", per_phase(lambda r: (r["peak_mib"] or 0) / 1024), "{:.1f}")
    figures: dict[str, Any] = {
        "phases": phases,
        "steps": steps,
        "step0": rows[0] if rows else None,
        "startup_s": startup,
        "checkpoint_s": checkpoint_s,
        "operation_peak_mib": op_peaks,
    }
    text = ["## CPMöbius step", "", *lines, ""] if steps else []
    if yardstick:
        plain = plain_step_seconds(yardstick)
        text += [
            "## Plain GRPO step (same Player, 16 fixed prompts x n, no Coach / filter / validation)",
            "",
            "| step | seconds | generate | log-probs + ref | update | wake/sleep | grading (timeouts) | overhead share "
            "| tokens | switches |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for y in yardstick:
            o = y["ops"]
            text.append(
                f"| {y['step']} | {y['timing_s/step']:.1f} | {o.get('generate', 0):.1f} | "
                f"{o.get('log_prob', 0) + o.get('ref_log_prob', 0):.1f} | "
                f"{o.get('update', 0):.1f} | {o.get('wake', 0) + o.get('sleep', 0):.1f} | "
                f"{y['grading_s']:.1f} ({y['grading_timeouts']}) | "
                f"{100 * y['overhead_share']:.1f} % | {y['tokens']:,} | {y['engine_switches']} |"
            )
        text.append("")
        if steps:
            text += [f"| phase | CPMöbius step ÷ plain GRPO step ({plain:.1f} s) |", "|---|---|"]
            for phase, value in zip(phases, per_phase(lambda r: r["timing_s/step"])):
                text.append(f"| {phase} | {value / plain:.2f} |")
            text.append("")
        figures["yardstick"] = yardstick
        figures["plain_grpo_step_s"] = plain
    text += ["## Peak GPU memory by operation (whole device, GiB)", "", "| operation | peak |", "|---|---|"]
    text += [f"| {op} | {mib / 1024:.1f} |" for op, mib in op_peaks.items()]
    text += ["", "## Start-up", "", "| phase | seconds |", "|---|---|"]
    text += [
        f"| {k} | {v:.1f} |" if not k.startswith("total") else f"| **{k}** | {v:.1f} |" for k, v in startup.items()
    ]
    text += ["", "The two policies build their models at once, so their model-init rows overlap.", ""]
    if rows:
        text.append(
            f"Step-0 validation: {rows[0]['timing_s/validation']:.1f} s, accuracy {rows[0]['val/accuracy']:.3f}."
        )
    if checkpoint_s is not None:
        text.append(f"One Player checkpoint (model, optimizer, extra state): {checkpoint_s:.2f} s.")
    peak = memory.peak()
    if peak is not None:
        figures["peak_mib"] = peak
        text.append(
            f"Peak GPU memory over the whole run: {peak / 1024:.1f} GiB (limit for an 80 GB A800: "
            f"{memory_limit_mib / 1024:.1f} GiB): {'within' if peak <= memory_limit_mib else 'OVER'}."
        )
    return "\n".join(text) + "\n", figures


def plain_step_seconds(yardstick: list[dict[str, Any]]) -> float:
    """The plain GRPO step's seconds: the mean over the yardstick's steps after its first (which meets
    cold caches) when there are several, else its one step."""
    steps = yardstick[1:] if len(yardstick) > 1 else yardstick
    return _mean([y["timing_s/step"] for y in steps])


def _summed_ops(row: dict[str, Any]) -> dict[str, float]:
    summed: dict[str, float] = defaultdict(float)
    for key, value in row.items():
        if key.startswith("timing_s/ops/"):
            summed[key.rsplit("/", 1)[1]] += value
    return summed


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def parse_phases(text: str) -> list[tuple[str, int]]:
    """``"released:2,adaptive:2"`` → ``[("released", 2), ("adaptive", 2)]``.

    Raises:
        ValueError: for an unknown phase name or a count < 1.
    """
    phases = []
    for part in text.split(","):
        name, _, count = part.partition(":")
        if name not in PHASES or not count.isdigit() or int(count) < 1:
            raise ValueError(f"--phases: {part!r} is not <{'|'.join(PHASES)}>:<steps >= 1>")
        phases.append((name, int(count)))
    return phases


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--phases", default="released:1,adaptive:2,reserve:2")
    parser.add_argument("--yardstick-steps", type=int, default=2)
    parser.add_argument("--yardstick-prompts", type=int, default=16)
    parser.add_argument("--checkpoint", action="store_true", help="time one Player checkpoint save (then deleted)")
    parser.add_argument(
        "--memory-gb", type=float, default=80.0, help="the GPU memory to emulate (vLLM's share is scaled to it)"
    )
    parser.add_argument(
        "--profile-startup",
        action="store_true",
        help="profile each policy's model build (cProfile, <out>/profiles/); slows the build it times",
    )
    parser.add_argument("--toy", action="store_true", help="the embedded default's tiny models on CPU (smoke test)")
    args, overrides = parser.parse_known_args(argv)
    phases = parse_phases(args.phases)
    args.out.mkdir(parents=True, exist_ok=True)

    from cpmobius.config import compose_config

    base = TOY if args.toy else PAPER_SHAPE
    cfg = compose_config(
        [*base, f"trainer.default_local_dir={args.out / 'run'}", "trainer.resume_mode=disable", *overrides]
    )
    memory = MemorySampler()
    limit_mib = args.memory_gb * 1024
    if not args.toy:
        import torch

        total_gib = torch.cuda.get_device_properties(0).total_memory / 2**30
        share = float(cfg.actor_rollout_ref.rollout.gpu_memory_utilization)
        scaled = round(share * min(1.0, args.memory_gb * 1e9 / 2**30 / total_gib), 3)
        cfg = compose_config(
            [
                *base,
                f"trainer.default_local_dir={args.out / 'run'}",
                "trainer.resume_mode=disable",
                f"actor_rollout_ref.rollout.gpu_memory_utilization={scaled}",
                *overrides,
            ]
        )
        print(
            f"[bench] vLLM gpu_memory_utilization {share} of {args.memory_gb:.0f} GB → {scaled} of this "
            f"{total_gib:.0f} GiB device",
            flush=True,
        )
    from cpmobius.main import build_loop

    if args.profile_startup:  # cProfile slows the builds it profiles: the start-up figures are then not clean
        os.environ.setdefault("CPMOBIUS_PROFILE_DIR", str(args.out / "profiles"))
    started = time.perf_counter()
    loop = build_loop(cfg)
    startup = startup_split(loop, time.perf_counter() - started)
    startup_peak = memory.peak(started)
    print("[bench] start-up: " + ", ".join(f"{k} {v:.1f}" for k, v in startup.items()), flush=True)
    rows: list[dict[str, Any]] = []
    yardstick: list[dict[str, Any]] = []
    checkpoint_s = None
    signal.signal(signal.SIGTERM, _interrupt)  # a stopped benchmark still writes what it measured

    def write() -> None:  # after every step: what was measured is kept when a later part fails or is stopped
        write_results(args.out, rows, yardstick, startup, checkpoint_s, memory, limit_mib, loop, startup_peak)

    try:
        # The yardstick first: short, and the ratio needs it. It trains the Player two steps before the loop's
        # steps, which changes their content little and their shapes not at all.
        if args.yardstick_steps:
            yardstick += run_yardstick(loop, args.yardstick_steps, args.yardstick_prompts, memory)
            write()
        run_loop_steps(loop, phases, memory, rows, on_step=write)
    finally:
        write()
    if args.checkpoint:
        path = args.out / "checkpoint_probe"
        t = time.perf_counter()
        loop.player.save(str(path))
        checkpoint_s = time.perf_counter() - t
        shutil.rmtree(path, ignore_errors=True)
        print(f"[bench] one Player checkpoint: {checkpoint_s:.1f} s", flush=True)
        write_results(args.out, rows, yardstick, startup, checkpoint_s, memory, limit_mib, loop, startup_peak)
    memory.stop()
    return 0


def write_results(out: Path, rows, yardstick, startup, checkpoint_s, memory, limit_mib, loop, startup_peak) -> None:
    op_peaks = operation_peaks({"coach": loop.coach, "player": loop.player}, memory)
    table, figures = summarize(rows, yardstick, startup, checkpoint_s, memory, limit_mib, op_peaks)
    figures["startup_peak_mib"] = startup_peak
    (out / "bench_step_gpu.md").write_text(table)
    (out / "bench_step_gpu.json").write_text(json.dumps(figures, indent=1, default=str))
    print(table, flush=True)


if __name__ == "__main__":
    sys.exit(main())
