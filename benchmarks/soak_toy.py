"""Soak: the embedded default for hundreds of steps, killed and resumed in the middle, watched for growth.

Runs ``python -m cpmobius.main`` (the toy world on this CPU) for ``--steps`` steps (default 200); when the
checkpoint of step ``--kill-at`` (default: half way) is written it kills the run (SIGTERM by default, as a
cluster's preemption does; ``--kill-signal KILL`` for SIGKILL) and starts the same command again, which
resumes. Every ``--every`` steps (default 25) it prints one row:

- resident memory (RSS) of the driver and of the Ray workers by kind (the policies' FSDP workers, the
  rollout servers, the agent loop, Ray's own processes), in MB;
- disk: the run folder (checkpoints, metrics, problem archive) and Ray's session logs, in MB, and MB
  per step since the last row;
- Ray's object store in use (``ray memory --stats-only``), in MB;
- the mean step time since the last row, in seconds.

The rows go to ``<out>/soak.md`` and ``<out>/soak.json`` as they come. Extra arguments are Hydra
overrides for the run (``trainer.max_actor_ckpt_to_keep=2``, ``seed=1``).

Usage:
    python benchmarks/soak_toy.py --out /tmp/soak                 # 200 steps, killed at step 100 (~35 min on 2 cores)
    python benchmarks/soak_toy.py --out /tmp/soak --steps 50 --every 10 trainer.max_actor_ckpt_to_keep=2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
# How Ray names a worker process ("ray::PolicyWorker.update_actor" while busy, "ray::PolicyWorker" idle).
KINDS = {
    "PolicyWorker": "fsdp_workers",
    "HFGenerationServer": "rollout_servers",
    "AgentLoopWorker": "agent_loop",
}


def process_kind(proc: psutil.Process, driver_pid: int) -> str:
    if proc.pid == driver_pid:
        return "driver"
    try:
        cmd = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "gone"
    for marker, kind in KINDS.items():
        if f"ray::{marker}" in cmd or proc.name().startswith(f"ray::{marker}"):
            return kind
    if "gcs_server" in cmd:
        return "gcs"
    if " -c " in f" {cmd} " and "ray" not in cmd:
        return "graders"  # the grader's isolated worker processes (cpmobius.grading.isolation)
    return "ray_other"  # raylet, dashboard agent, idle Ray workers, verl's request balancers, torchrun


def memory_by_kind(driver_pid: int) -> dict[str, float]:
    """RSS in MB of the driver and every process under it (Ray's head and workers are its descendants)."""
    try:
        driver = psutil.Process(driver_pid)
        procs = [driver] + driver.children(recursive=True)
    except psutil.NoSuchProcess:
        return {}
    totals: dict[str, float] = {}
    for proc in procs:
        try:
            rss = proc.memory_info().rss / 1e6
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        kind = process_kind(proc, driver_pid)
        totals[kind] = totals.get(kind, 0.0) + rss
    totals["total"] = sum(v for k, v in totals.items() if k != "gone")
    return totals


def folder_mb(path: Path, pattern: str = "*") -> float:
    if not path.exists():
        return 0.0
    return sum(f.stat().st_size for f in path.rglob(pattern) if f.is_file()) / 1e6


def disk_usage(run_dir: Path) -> dict[str, float]:
    checkpoints = sum(folder_mb(p) for p in run_dir.glob("global_step_*"))
    return {
        "run_dir": folder_mb(run_dir),
        "checkpoints": checkpoints,
        "metrics": sum(f.stat().st_size for f in run_dir.glob("metrics*.jsonl")) / 1e6,
        "problem_archive": folder_mb(run_dir / "problems"),
        "ray_logs": folder_mb(Path("/tmp/ray/session_latest/logs")),
    }


def object_store_mb() -> float | None:
    """Ray's object store in use, from ``ray memory --stats-only`` (None when it cannot be read)."""
    try:
        out = subprocess.run(
            ["ray", "memory", "--stats-only", "--address", "auto"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "RAY_AUTH_MODE": "token"},
        )  # the run's Ray asks for its token
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"Plasma memory usage (\d+(?:\.\d+)?) MiB", out.stdout)
    return float(match.group(1)) * 1.048576 if match else None


def steps_done(run_dir: Path) -> tuple[int, list[float]]:
    """The last step logged in the metrics files, and every step's ``timing_s/step`` so far."""
    times: dict[int, float] = {}
    for path in sorted(run_dir.glob("metrics*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line being written
            step = int(row.get("step", 0))
            seconds = row.get("data", row).get("timing_s/step")
            if step > 0 and seconds is not None:
                times[step] = float(seconds)
    return (max(times) if times else 0), [times[s] for s in sorted(times)]


def latest_checkpoint(run_dir: Path) -> int:
    tracker = run_dir / "latest_checkpointed_iteration.txt"
    try:
        return int(tracker.read_text().strip())
    except (OSError, ValueError):
        return 0


def start(command: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        cwd=REPO,
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )


def format_row(row: dict) -> str:
    mem, disk = row["memory_mb"], row["disk_mb"]
    store = "-" if row["object_store_mb"] is None else f"{row['object_store_mb']:.1f}"
    return (
        f"| {row['step']:>4} | {row['launch']} | {mem.get('driver', 0):>7.0f} | {mem.get('fsdp_workers', 0):>7.0f} | "
        f"{mem.get('rollout_servers', 0):>7.0f} | {mem.get('agent_loop', 0):>6.0f} | {mem.get('gcs', 0):>5.0f} | "
        f"{mem.get('ray_other', 0) + mem.get('graders', 0):>7.0f} | "
        f"{mem.get('total', 0):>7.0f} | {disk['checkpoints']:>8.1f} | {disk['metrics']:>6.2f} | "
        f"{disk['problem_archive']:>6.2f} | "
        f"{disk['ray_logs']:>6.1f} | {row['disk_mb_per_step']:>6.2f} | {store:>6} | {row['step_s_mean']:>6.2f} |"
    )


HEADER = (
    "| step | launch | driver MB | FSDP workers MB | rollout servers MB | agent loop MB | Ray GCS MB | other MB | "
    "total MB | checkpoints MB | metrics MB | archive MB | Ray logs MB | disk MB/step | object store MB | step s |\n"
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the run folder and the soak's results")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every", type=int, default=25, help="a row every this many steps")
    parser.add_argument(
        "--kill-at", type=int, default=None, help="kill after this step's checkpoint (default: steps // 2; 0: never)"
    )
    parser.add_argument("--kill-signal", choices=["TERM", "KILL"], default="TERM")
    args, overrides = parser.parse_known_args(argv)
    kill_at = args.steps // 2 if args.kill_at is None else args.kill_at
    run_dir = (args.out / "run").absolute()
    args.out.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "cpmobius.main",
        f"trainer.total_training_steps={args.steps}",
        f"trainer.default_local_dir={run_dir}",
        *overrides,
    ]
    log = args.out / "soak_run.log"
    rows: list[dict] = []
    md = args.out / "soak.md"
    md.write_text(f"soak: {' '.join(command[1:])}\n\n{HEADER}\n")
    print(HEADER, flush=True)
    launch, process = 1, start(command, log)
    next_row, last_disk, last_step, killed, began = args.every, 0.0, 0, False, time.time()
    while True:
        time.sleep(2)
        step, times = steps_done(run_dir)
        if (
            step >= next_row
            and process.poll() is None
            or (process.poll() is not None and step > last_step and step >= args.steps)
        ):
            disk = disk_usage(run_dir)
            recent = times[last_step:step] if step > last_step else times[-1:]
            row = {
                "step": step,
                "launch": launch,
                "memory_mb": memory_by_kind(process.pid),
                "disk_mb": disk,
                "disk_mb_per_step": (disk["run_dir"] - last_disk) / max(step - last_step, 1),
                "object_store_mb": object_store_mb() if process.poll() is None else None,
                "step_s_mean": sum(recent) / max(len(recent), 1),
                "wall_s": time.time() - began,
            }
            rows.append(row)
            line = format_row(row)
            print(line, flush=True)
            with md.open("a") as f:
                f.write(line + "\n")
            (args.out / "soak.json").write_text(json.dumps(rows, indent=1))
            last_disk, last_step = disk["run_dir"], step
            next_row = (step // args.every + 1) * args.every
        if not killed and kill_at and latest_checkpoint(run_dir) >= kill_at:
            children = psutil.Process(process.pid).children(recursive=True)  # before their parent is gone
            process.send_signal(signal.SIGTERM if args.kill_signal == "TERM" else signal.SIGKILL)
            if args.kill_signal == "KILL":  # nothing left to stop Ray and the workers: stop them as a crash would
                for child in children:
                    try:
                        child.kill()
                    except psutil.NoSuchProcess:
                        pass
            code = process.wait(timeout=300)
            print(
                f"killed after step {latest_checkpoint(run_dir)} (SIG{args.kill_signal}, exit {code}); resuming",
                flush=True,
            )
            killed, launch, process = True, 2, start(command, log)
            continue
        if process.poll() is not None:
            if step >= args.steps:
                print(f"done: {step} steps in {time.time() - began:.0f} s; {md}", flush=True)
                return 0
            print(
                f"the run stopped at step {step} of {args.steps} with exit {process.returncode}; see {log}", flush=True
            )
            return 1


if __name__ == "__main__":
    sys.exit(main())
