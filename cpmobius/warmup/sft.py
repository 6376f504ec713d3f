"""Coach SFT warm-up through verl's own SFT trainer (paper §3: a light SFT before co-evolution).

Run under torchrun, one process per device: ``python -m torch.distributed.run --standalone
--nproc_per_node=N -m cpmobius.warmup <verl sft_trainer_engine overrides>``. The data is a
``messages`` parquet (user turn = the Coach instruction, assistant turn = one problem); the loss
falls on assistant tokens only (verl's `MultiTurnSFTDataset`). On the CPU platform the same process
fixes as the policy workers apply, plus a gloo process group for verl's SFT entry point.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any, Optional

from cpmobius.config import ConfigError
from cpmobius.engine.config import worker_env_vars
from cpmobius.engine.varlen_attention import write_standard_attention


def _gloo_process_group(timeout_second: int = 36000) -> tuple[int, int, int]:
    """verl's `initialize_global_process_group` with a plain gloo backend.

    (verl's backend string is "cpu:gloo,cpu:gloo" on a CPU.)
    """
    import torch.distributed as dist

    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=timeout_second))
    return int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def quoted(value: Any) -> str:
    """``value`` as a quoted Hydra override value, read back as exactly that string: a run folder named
    ``quota=4`` or ``q4,n8`` is otherwise a parse error or a sweep of verl's SFT trainer."""
    text = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", str(value))  # a quote, and backslashes before it
    return "'" + re.sub(r"(\\+)$", lambda m: m.group(1) * 2, text) + "'"


def sft_overrides(cfg: Any, data_path: str, output_dir: Path) -> list[str]:
    """verl ``sft_trainer_engine`` overrides for the Coach warm-up, from the ``warmup`` group and the
    Coach's model and engine settings (dtype, mixed precision, strategy follow the backend)."""
    w = cfg.warmup
    actor = cfg.actor_rollout_ref.actor
    overrides = [
        f"model.path={quoted(cfg.model.coach_path)}",
        f"data.train_files={quoted(data_path)}",
        "data.messages_key=messages",
        f"data.train_batch_size={w.batch_size}",
        f"data.micro_batch_size_per_gpu={w.micro_batch_size_per_gpu}",
        "data.use_dynamic_bsz=false",
        f"data.max_length={w.max_length}",
        "data.truncation=right",
        "data.num_workers=0",
        f"optim.lr={w.lr}",
        f"trainer.total_epochs={w.epochs}",
        f"trainer.total_training_steps={w.max_steps if w.max_steps else 'null'}",
        f"trainer.default_local_dir={quoted(output_dir)}",
        f"trainer.n_gpus_per_node={cfg.trainer.n_gpus_per_node}",
        "trainer.logger=[console]",
        "trainer.resume_mode=disable",
        f"hydra.run.dir={quoted(output_dir / 'hydra')}",  # Hydra's logs beside the warm-up, not in the cwd
        f"trainer.seed={cfg.actor_rollout_ref.rollout.seed}",
        "checkpoint.save_contents=[model,optimizer,extra,hf_model]",
        f"engine.strategy={actor.strategy}",
        f"model.use_remove_padding={cfg.actor_rollout_ref.model.use_remove_padding}",
        f"model.enable_gradient_checkpointing={cfg.actor_rollout_ref.model.enable_gradient_checkpointing}",
        f"+model.override_config.attn_implementation={cfg.actor_rollout_ref.model.override_config.attn_implementation}",
    ]
    if cfg.backend.platform == "cpu":
        overrides += [
            "engine.dtype=float32",
            "+engine.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}",
            "trainer.device=cpu",
        ]
    return overrides


def run_warmup(cfg: Any) -> Path:
    """Run the Coach SFT warm-up (unless its output exists) and return the HF folder to start the Coach from.

    Raises:
        ConfigError: naming ``warmup.data`` when the data file is missing.
        RuntimeError: when verl's SFT trainer fails (its log is in ``<output>/sft.log``).
    """
    return start_warmup(cfg).wait()


class Warmup:
    """A Coach warm-up started by `start_warmup`: its torchrun process group runs in the background
    (None when the output already exists or a stored one is reused) while the caller does other work;
    `wait` returns the HF folder and, with ``cache`` = (folder, record), stores a finished one there."""

    def __init__(
        self,
        output: Path,
        process: Optional[subprocess.Popen] = None,
        log: Any = None,
        cache: Optional[tuple[Path, dict]] = None,
    ) -> None:
        self.output, self.process, self.log, self.cache = output, process, log, cache
        self._hf_dir: Optional[Path] = None

    @property
    def running(self) -> bool:
        """Whether the warm-up's process group is still running (False once it ended or when it was cached)."""
        return self.process is not None and self.process.poll() is None

    def wait(self) -> Path:
        """Wait for the warm-up to end; return the HF folder to start the Coach from (again on a later call).

        Raises:
            RuntimeError: when verl's SFT trainer fails (its log is in ``<output>/sft.log``).
        """
        if self._hf_dir is not None:
            return self._hf_dir
        tracker = self.output / "latest_checkpointed_iteration.txt"
        ran = self.process is not None
        if ran:
            try:
                returncode = wait_process_group(self.process)
            finally:
                self.log.close()
            self.process = None
            if returncode != 0 or not tracker.is_file():
                raise RuntimeError(f"Coach warm-up failed (exit {returncode}); see {self.output / 'sft.log'}")
        text = tracker.read_text(errors="replace").strip()
        hf_dir = self.output / f"global_step_{_tracker_step(text)}" / "huggingface"
        if _tracker_step(text) is None or not hf_dir.is_dir():  # an empty or cut tracker: not the step-None folder
            raise RuntimeError(f"Coach warm-up: {tracker} names no saved step ({text[:40]!r}); see {self.output}")
        write_standard_attention(hf_dir)  # the Coach's start model, readable by any process
        if ran and self.cache is not None:
            store_warmup(hf_dir, *self.cache)
        print(f"[cpmobius] Coach warm-up: starting the Coach from {hf_dir}", flush=True)
        self._hf_dir = hf_dir
        return hf_dir

    def stop(self) -> None:
        """Stop a warm-up still running (its whole process group); nothing when it ended."""
        if self.process is not None and self.process.poll() is None:
            stop_process_group(self.process)
        if self.log is not None:
            self.log.close()
        self.process = None


def start_warmup(cfg: Any) -> Warmup:
    """Start the Coach SFT warm-up in the background; `Warmup.wait` for its result.

    Nothing is started when the run folder holds a finished warm-up (a resumed run), or when
    ``warmup.cache_dir`` holds one made from the same inputs (`warmup_record`: the same Coach weights, data,
    SFT settings, seed and versions; the toy world keeps one per seed beside its models). A warm-up that
    runs here is stored there once it ends (`store_warmup`). # CPMöbius: the released code repeats the SFT.

    Raises:
        ConfigError: naming ``warmup.data`` when the data file is missing.
    """
    data = Path(str(cfg.warmup.data)).expanduser()
    if not data.is_file():
        raise ConfigError(f"warmup.data: no file {data} (scripts/prepare_warmup_data.py writes it)")
    output = Path(cfg.trainer.default_local_dir) / "coach_warmup"
    tracker = output / "latest_checkpointed_iteration.txt"
    if tracker.is_file():
        return Warmup(output)
    cache = None
    if cfg.warmup.get("cache_dir"):
        record = warmup_record(cfg, data)
        folder = Path(str(cfg.warmup.cache_dir)).expanduser() / record_key(record)
        if stored_warmup_matches(folder, record):
            print(f"[cpmobius] Coach warm-up: reusing {folder} (the same Coach, data and SFT settings)", flush=True)
            return Warmup(folder)
        cache = (folder, record)
    print(f"[cpmobius] Coach warm-up: SFT through verl's SFT trainer on {data} (log: {output / 'sft.log'})", flush=True)
    output.mkdir(parents=True, exist_ok=True)
    nproc = int(cfg.trainer.n_gpus_per_node) if cfg.backend.platform != "cpu" else 1
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        "cpmobius.warmup",
        *sft_overrides(cfg, str(data), output),
    ]
    env = {**os.environ, **worker_env_vars(cfg)}
    log = open(output / "sft.log", "w")
    try:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    except BaseException:
        log.close()
        raise
    return Warmup(output, process, log, cache)


# The overrides that name where things are, not what is trained: the record holds the contents instead.
_LOCATION_KEYS = ("model.path=", "data.train_files=", "trainer.default_local_dir=", "hydra.run.dir=")


def warmup_record(cfg: Any, data: Path) -> dict:
    """What a finished warm-up was made from (the key of ``warmup.cache_dir``): verl's SFT overrides
    (`sft_overrides`, less the paths), the sha256 of every file of the Coach's start folder and of the
    data, the device count, the versions of verl, torch and transformers and the CPU kernels
    (`cpmobius.cpu_kernels.kernel_settings`).

    Reading a 1.5B Coach's 3 GB of weights takes some seconds; runs without ``warmup.cache_dir`` never do.
    """
    import hashlib

    import torch
    import transformers
    import verl

    from cpmobius.cpu_kernels import kernel_settings

    def sha256(path: Path) -> str:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 24), b""):
                digest.update(block)
        return digest.hexdigest()

    coach = Path(str(cfg.model.coach_path)).expanduser()
    overrides = [o for o in sft_overrides(cfg, str(data), Path("<output>")) if not o.startswith(_LOCATION_KEYS)]
    return {
        "sft": overrides,
        "coach": {p.name: sha256(p) for p in sorted(coach.iterdir()) if p.is_file()},
        "data": sha256(data),
        "versions": {"verl": verl.__version__, "torch": torch.__version__, "transformers": transformers.__version__},
        "kernels": kernel_settings({**os.environ, **worker_env_vars(cfg)}),  # what torchrun's processes compute on
    }


def record_key(record: dict) -> str:
    """The folder name of ``record``'s warm-up under ``warmup.cache_dir`` (16 hex digits)."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]


def _tracker_step(text: str) -> Optional[str]:
    """The step verl's SFT tracker names (``str(N)``: ASCII digits, no leading zero), else None (empty, cut short)."""
    if text.isascii() and text.isdigit() and len(text) <= 18 and (text == "0" or not text.startswith("0")):
        return text
    return None


def stored_warmup_matches(folder: Path, record: dict) -> bool:
    """Whether ``folder`` holds a whole stored warm-up (`store_warmup`) made from ``record``."""
    import json

    marker = folder / "cpmobius_warmup.json"
    tracker = folder / "latest_checkpointed_iteration.txt"
    try:
        step = _tracker_step(tracker.read_text(errors="replace").strip())
        same = json.loads(marker.read_text()) == record
    except (OSError, ValueError):  # absent, unreadable or cut short: done again
        return False
    return same and step is not None and (folder / f"global_step_{step}" / "huggingface").is_dir()


def store_warmup(hf_dir: Path, folder: Path, record: dict) -> None:
    """Copy a finished warm-up's HF folder into ``folder`` (under ``warmup.cache_dir``) with its record.

    Written to a temporary sibling and renamed, so that a crash never leaves a half-written warm-up; when
    another run stored the same warm-up first (two runs of one seed side by side), that copy stays.
    """
    import json
    import shutil

    if stored_warmup_matches(folder, record):
        return
    step = hf_dir.parent.name.removeprefix("global_step_")
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(hf_dir, tmp / f"global_step_{step}" / "huggingface")
    if (hf_dir.parents[1] / "sft.log").is_file():
        shutil.copy2(hf_dir.parents[1] / "sft.log", tmp / "sft.log")
    (tmp / "latest_checkpointed_iteration.txt").write_text(step)
    (tmp / "cpmobius_warmup.json").write_text(json.dumps(record))
    if stored_warmup_matches(folder, record):  # another run stored it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
        return
    if folder.exists():  # a half-kept folder of the same key
        shutil.rmtree(folder, ignore_errors=True)
    try:
        tmp.rename(folder)
    except OSError:  # another run renamed its copy there first
        shutil.rmtree(tmp, ignore_errors=True)


def wait_process_group(process: subprocess.Popen, grace_s: float = 30.0) -> int:
    """Wait for ``process`` (started with ``start_new_session=True``); on any exception while waiting
    (Ctrl-C, SIGTERM) stop its whole group (`stop_process_group`) before the exception goes on:
    killing torchrun alone, as `subprocess.run` does, would leave its worker running."""
    try:
        return process.wait()
    except BaseException:
        stop_process_group(process, grace_s)
        raise


def stop_process_group(process: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM to the process group of ``process``, SIGKILL after ``grace_s``."""
    for signum, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, signum)
            process.wait(timeout=wait_s)
            break
        except ProcessLookupError:
            break
        except subprocess.TimeoutExpired:
            continue


def sample_coach_problems(
    model_dir: str | os.PathLike, cfg: Any, count: int = 128, seed: int = 0, batch_size: int = 64
) -> list[Any]:
    """``count`` Coach samples, each read as `propose_problems` reads one (a diagnostic beside the loop).

    Samples responses to the Coach prompt (`cpmobius.prompts.coach_prompt`, the chat template of the
    checkpoint's tokenizer) with the Coach's rollout temperature and response length, directly with HF
    transformers on the CPU (the loop samples through verl), and reads each with `cpmobius.coach.read_problem`
    (chat wrapping cut off, then validated; a response that hits the length limit is "truncated").

    Returns:
        ``count`` `cpmobius.coach.Problem` rows: ``text``, ``valid`` and ``reject_reason`` each.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cpmobius.coach import read_problem
    from cpmobius.engine.config import policy_config
    from cpmobius.engine.stop_tokens import stop_token_ids
    from cpmobius.prompts import coach_prompt
    from cpmobius.settings import load_settings

    settings = load_settings(cfg).coach
    rollout = policy_config(cfg, "coach").actor_rollout_ref.rollout
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    prompt = tokenizer.apply_chat_template(
        coach_prompt(settings.instruction), add_generation_prompt=True, tokenize=False
    )
    input_ids = torch.tensor([tokenizer.encode(prompt, add_special_tokens=False)])
    stops = set(stop_token_ids(tokenizer, None))  # the loop's rule for where a response ends
    torch.manual_seed(seed)
    problems = []
    for start in range(0, count, batch_size):
        rows = min(batch_size, count - start)
        with torch.no_grad():
            out = model.generate(
                input_ids=input_ids.repeat(rows, 1),
                attention_mask=torch.ones(rows, input_ids.shape[1], dtype=torch.long),
                max_new_tokens=int(rollout.response_length),
                do_sample=True,
                temperature=float(rollout.temperature),
                top_p=float(rollout.top_p),
                top_k=0,
                eos_token_id=sorted(stops),
                pad_token_id=tokenizer.pad_token_id,
            )
        for ids in out[:, input_ids.shape[1] :].tolist():
            end = next((i for i, token in enumerate(ids) if token in stops), None)
            finished = end is not None
            ids = ids[:end] if finished else ids
            problems.append(
                read_problem(tokenizer.decode(ids, skip_special_tokens=True), truncated=not finished, settings=settings)
            )
    return problems


def measure_coach_validity(
    model_dir: str | os.PathLike, cfg: Any, count: int = 128, seed: int = 0, batch_size: int = 64
) -> tuple[float, dict[str, int]]:
    """The share of Coach samples that the Coach-output validator accepts (the warm-up's check), from
    `sample_coach_problems`.

    Returns:
        ``(valid_frac, rejected)``: the accepted share and the count of each rejection reason.
    """
    from collections import Counter

    problems = sample_coach_problems(model_dir, cfg, count, seed, batch_size)
    rejected = Counter(problem.reject_reason for problem in problems if not problem.valid)
    return sum(problem.valid for problem in problems) / count, dict(rejected)


def main() -> None:
    import cpmobius.engine.extensions  # noqa: F401  (CPU platform registered in this process)
    from cpmobius.engine.cpu_platform import install_cpu_engine_fixes, is_cpu_platform
    from cpmobius.engine.varlen_attention import register as register_varlen_attention

    register_varlen_attention()  # the GPU presets' attn_implementation

    if is_cpu_platform():
        import verl.utils.distributed as distributed

        install_cpu_engine_fixes()
        distributed.initialize_global_process_group = _gloo_process_group  # read by run_sft at call time
    from verl.trainer import sft_trainer

    sys.argv[0] = "cpmobius.warmup"
    sft_trainer.main()


if __name__ == "__main__":
    main()
