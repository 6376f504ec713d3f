"""The command line of `python -m cpmobius.eval`: its options, their defaults and help (`build_parser`).

The stages it drives are in `cpmobius.eval.cli`; the help's examples run as written from a fresh clone.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from cpmobius.eval.data import ANSWER_KEYS, BENCHMARKS
from cpmobius.eval.scoring import AVG_BENCHMARKS, DEFAULT_K, GRADERS, PAPER_VALIDATION_SET
from cpmobius.prompts import ANSWER_FORMATS

DEFAULT_OUT = "outputs/eval"


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written; "(default: X)" added only where the help text does not give one
    and there is a default worth printing (not None, False or an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "default" in text
            or action.default is None
            or action.default is False
            or action.default == []
            or action.default == argparse.SUPPRESS
        ):
            return text
        return super()._get_help_string(action)


EPILOG = """examples:
  python -m cpmobius.eval --model PATH --benchmarks demo --k 2 --max-new-tokens 16 --out outputs/eval/smoke
        the pipeline on the built-in 8-problem demo benchmark (no data files, no network)
  python -m cpmobius.eval --model PATH --out outputs/eval/run
        the paper's protocol on the six benchmarks (local copies: --data-dir, or data/eval from
        scripts/fetch_benchmarks.py; or --source hub)
  python -m cpmobius.eval --completions outputs/eval/run/LABEL/completions.jsonl --grader released
        score existing responses again (no GPU)
  python -m cpmobius.eval --completions outputs/eval/run/{base,trained}/completions.jsonl --validation-set math500
        base vs trained side by side, with the paired difference and its CI (no GPU)
"""


def engine_args(text: str) -> dict:
    """``--engine-args``: a JSON object (keyword arguments of `vllm.LLM`).

    Raises:
        argparse.ArgumentTypeError: the text is not JSON, or not an object.
    """

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a number an engine takes")

    def unique(pairs: list[tuple[str, Any]]) -> dict:
        keys = [key for key, _ in pairs]
        if len(set(keys)) < len(keys):
            raise ValueError(f"a key given twice ({sorted({k for k in keys if keys.count(k) > 1})})")
        return dict(pairs)

    try:
        value = json.loads(text, parse_constant=no_constant, object_pairs_hook=unique)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON ({error.msg} at character {error.pos}): {text!r}") from None
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{error}: {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object of vllm.LLM arguments, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m cpmobius.eval",
        formatter_class=_HelpFormatter,
        epilog=EPILOG,
        description=__doc__.split("\n")[0] + "\n\n" + __doc__.split("\n\n")[1],
    )
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--model", nargs="+", help="generate mode: model folder(s) or hub id(s) to generate with")
    mode.add_argument(
        "--completions", nargs="+", help="score-only mode: completions JSONL file(s) of an earlier run (one model)"
    )
    p.add_argument("--label", nargs="+", help="one output label per --model (default: from the model path)")
    p.add_argument(
        "--benchmarks",
        nargs="+",
        default=list(AVG_BENCHMARKS),
        choices=BENCHMARKS,
        metavar="NAME",
        help=f"benchmarks to evaluate, of {', '.join(BENCHMARKS)}; `demo` is built in (8 problems, "
        f"no files needed) (default: the paper's six: {' '.join(AVG_BENCHMARKS)})",
    )
    p.add_argument(
        "--k",
        nargs="+",
        default=[],
        help="responses per problem: K (every benchmark) and/or BENCHMARK=K (default: the released k, "
        f"{', '.join(f'{b} {k}' for b, k in DEFAULT_K.items())}; 1 with --greedy)",
    )
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help="only the first N problems of each benchmark (complete for that slice; default: all; "
        "score-only: from the run.json beside the completions)",
    )
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="score-only: average benchmarks the completions cover only in part into Avg / OOD Avg",
    )
    p.add_argument(
        "--allow-uneven-k",
        action="store_true",
        help="accept problems with different numbers of responses (k = the smallest; n_min/n_max reported)",
    )
    p.add_argument(
        "--greedy",
        action="store_true",
        help="greedy decoding: temperature 0, top-p 1, repetition penalty 1.0 unless --repetition-penalty "
        "is given (k defaults to 1)",
    )
    sampling = p.add_argument_group("sampling (generate mode; the released protocol by default)")
    sampling.add_argument("--temperature", type=float, default=0.7, help="sampling temperature")
    sampling.add_argument("--top-p", type=float, default=0.9, help="nucleus sampling threshold")
    sampling.add_argument(
        "--repetition-penalty",
        type=float,
        default=None,
        help="repetition penalty, 1 = none (default: 1.05 when sampling, the released protocol; 1.0 with --greedy)",
    )
    sampling.add_argument("--max-new-tokens", type=int, default=4096, help="most tokens generated per response")
    sampling.add_argument("--seed", type=int, default=0, help="sampling seed")
    sampling.add_argument(
        "--system-prompt", default=None, help="an explicit system turn (default: none given, the chat template's own)"
    )
    sampling.add_argument(
        "--answer-format",
        default="auto",
        choices=ANSWER_FORMATS,
        help="the \\boxed{} instruction, as player.answer_format in training: auto appends "
        "Qwen2.5-Math evaluation's CoT instruction to the user turn iff the chat template "
        "lacks \\boxed (Qwen2.5-Math's has it: nothing added, the released prompt); "
        "template: never; append: always (default: auto)",
    )
    engine = p.add_argument_group("engine (generate mode)")
    engine.add_argument(
        "--backend",
        default="auto",
        choices=("auto", "vllm", "hf"),
        help="vllm, HF transformers, or auto: vLLM when importable, else HF",
    )
    engine.add_argument("--device", default="auto", help="HF backend: cpu, cuda, or auto (cuda when available)")
    engine.add_argument(
        "--dtype", default="auto", help="model weights' dtype (e.g. bfloat16, float32), or auto: the checkpoint's"
    )
    engine.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="run the Python code shipped with a checkpoint (only for architectures transformers/vLLM lack; "
        "Qwen2.5 and Llama need none)",
    )
    engine.add_argument("--batch-size", type=int, default=16, help="HF backend: sequences per generate call")
    engine.add_argument("--tensor-parallel-size", type=int, default=1, help="vLLM backend: GPUs per model")
    engine.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=0.9,
        help="vLLM backend: share of each GPU's memory the engine may take",
    )
    engine.add_argument(
        "--engine-args",
        type=engine_args,
        default=None,
        metavar="JSON",
        help="vLLM backend: more `vllm.LLM` arguments as a JSON object, e.g. "
        '\'{"max_num_seqs": 1024, "speculative_config": {"method": "ngram", "num_speculative_tokens": 4}}\'; '
        "meant for the engine's speed (an argument that changes the model, such as quantization, changes results)",
    )
    engine.add_argument(
        "--max-model-len",
        type=int,
        default=None,
        help="vLLM backend: context length, prompt + response (default: the model's)",
    )
    data = p.add_argument_group("data")
    data.add_argument(
        "--source",
        default="local",
        choices=("local", "hub"),
        help="local files (--data-dir, --data-file) or the Hugging Face hub (ids in cpmobius/eval/data.py)",
    )
    data.add_argument(
        "--data-dir",
        default=None,
        help="folder of <name>/<name>.jsonl|parquet (default: $CPMOBIUS_SHARED_DATA/eval or "
        "../shared/data/eval when present, else data/eval, where scripts/fetch_benchmarks.py writes)",
    )
    data.add_argument(
        "--data-file",
        nargs="+",
        default=[],
        metavar="BENCHMARK=PATH",
        help="one benchmark's file (JSONL or parquet, e.g. a released parquet), overriding --data-dir",
    )
    data.add_argument(
        "--allow-duplicate-ids",
        action="store_true",
        help="keep the first of several benchmark rows with one id (named on stderr) instead of refusing the file",
    )
    scoring = p.add_argument_group("scoring")
    scoring.add_argument(
        "--answer-key",
        default="corrected",
        choices=ANSWER_KEYS,
        help="corrected (the curated answers and their accepted spellings) or released "
        "(the released key exactly; needs local copies or the released parquet files)",
    )
    scoring.add_argument(
        "--grader",
        default="cpmobius",
        choices=GRADERS,
        help="cpmobius (this project's grader) or released (an imitation of the released one)",
    )
    scoring.add_argument(
        "--no-grader-report",
        action="store_true",
        help="skip grading with the other grader (and grader_disagreements.md)",
    )
    scoring.add_argument(
        "--validation-set",
        default=None,
        metavar="NAME",
        help="the benchmark that drove Δt in training (validation.dataset), left out of OOD Avg: "
        f"one of {', '.join(AVG_BENCHMARKS)} (default: {PAPER_VALIDATION_SET}, the paper's; "
        "score-only: the one the run.json beside the completions records, else "
        f"{PAPER_VALIDATION_SET})",
    )
    scoring.add_argument(
        "--paper-model",
        default="auto",
        help="published rows to show: auto (from the model path), none or a configs/model name",
    )
    scoring.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the 95%% CIs")
    p.add_argument(
        "--out", default=None, help=f"output folder (default: {DEFAULT_OUT}; score-only: the completions file's folder)"
    )
    return p
