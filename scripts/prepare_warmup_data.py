"""Prepare the Coach warm-up set (paper §3: 4K math problems from PRIME's Eurus-2-RL-Data).

Writes ``<out>`` (a parquet with a ``messages`` column: user = the Coach instruction, assistant =
one problem) and ``manifest.json`` beside it. See `cpmobius.warmup.data` (the pipeline) and
`cpmobius.warmup.sources` (reading, one row, the overlap rule) for every filter.

Usage:
    python scripts/prepare_warmup_data.py                               # from the hub
    python scripts/prepare_warmup_data.py --source eurus_train.parquet  # offline, local file
    python scripts/prepare_warmup_data.py --source rows.jsonl --out data/warmup --num 4000 --seed 0
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from cpmobius.warmup import data as wd
from cpmobius.warmup import sources

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = "data/warmup/coach_warmup.parquet"


def default_eval_dir() -> Path:
    """``$CPMOBIUS_SHARED_DATA/eval``, else ``../shared/data/eval`` beside the checkout, else ``data/eval``."""
    candidates = [REPO.parent / "shared" / "data" / "eval", REPO / "data" / "eval"]
    if os.environ.get("CPMOBIUS_SHARED_DATA"):
        candidates.insert(0, Path(os.environ["CPMOBIUS_SHARED_DATA"]) / "eval")
    return next((c for c in candidates if c.is_dir()), candidates[-1])


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--source",
        "--input",
        dest="source",
        default=wd.HUB_ID,
        help="hub dataset id (split 'train'), or a local Eurus-schema .parquet/.jsonl file",
    )
    parser.add_argument(
        "--eval-dir",
        type=Path,
        default=None,
        help=f"folder of <name>/<name>.jsonl benchmarks to decontaminate against (default: {default_eval_dir()})",
    )
    parser.add_argument("--out", default=DEFAULT_OUT, help="output parquet, or a folder for coach_warmup.parquet")
    parser.add_argument("--num", type=int, default=wd.DEFAULT_NUM, help="problems to select (paper: 4,000)")
    parser.add_argument("--seed", type=int, default=wd.DEFAULT_SEED, help="selection seed")
    parser.add_argument("--min-chars", type=int, default=wd.DEFAULT_MIN_CHARS, help="shortest kept problem, characters")
    parser.add_argument("--max-chars", type=int, default=wd.DEFAULT_MAX_CHARS, help="longest kept problem, characters")
    parser.add_argument("--ngram", type=int, default=sources.DEFAULT_NGRAM, help="n of the word n-gram overlap rule")
    parser.add_argument(
        "--no-coach-validator", action="store_true", help="keep problems the Coach-output validator would reject"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser.parse_args(argv)


def load_source(source: str) -> tuple[object, int, dict]:
    """Rows, their number and the manifest's ``source`` entry, from a local file or the hub."""
    path = Path(source)
    if path.suffix in (".parquet", ".jsonl") or path.exists():
        rows = sources.read_rows(path)  # FileNotFoundError / ValueError with the path
        return rows, len(rows), {"kind": "file", "path": str(source), "sha256": sources.file_sha256(path)}
    if "/" not in source or source.startswith((".", "/")):
        raise FileNotFoundError(f"source {source!r} is neither an existing file nor a hub id (owner/name)")
    import datasets

    rows = datasets.load_dataset(source, split="train")
    return rows, len(rows), {"kind": "hub", "id": source, "split": "train", "datasets_version": datasets.__version__}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    if out.suffix != ".parquet":
        out = out / Path(DEFAULT_OUT).name
    eval_dir = args.eval_dir if args.eval_dir is not None else default_eval_dir()
    try:
        benchmarks = sources.load_benchmarks(eval_dir)
        rows, total, source = load_source(args.source)
        sft_rows, manifest = wd.prepare_warmup_data(
            rows,
            benchmarks,
            num=args.num,
            seed=args.seed,
            min_chars=args.min_chars,
            max_chars=args.max_chars,
            ngram=args.ngram,
            coach_validate=not args.no_coach_validator,
            total=total,
            progress=not args.quiet,
        )
    except (OSError, ValueError) as error:  # a missing or unreadable file; NotEnoughProblemsError is a ValueError
        print(f"prepare_warmup_data: error: {error}", file=sys.stderr)
        return 2
    sha256 = wd.write_parquet(sft_rows, out)
    eval_files = sorted(Path(eval_dir).glob("*/*.jsonl"))
    manifest = {
        "source": source,
        "output": {
            "file": out.name,
            "rows": len(sft_rows),
            "sha256": sha256,
            "columns": ["messages", "data_source", "source_row"],
        },
        "eval_files": {str(p.relative_to(eval_dir)): sources.file_sha256(p) for p in eval_files},
        **manifest,
    }
    manifest_path = out.parent / "manifest.json"
    manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    drops = ", ".join(f"{k}: {v}" for k, v in manifest["drops"].items())
    print(
        f"wrote {len(sft_rows)} problems to {out} (sha256 {sha256[:12]}), manifest {manifest_path}; "
        f"pool {manifest['pool']} of {manifest['rows_in']} rows; dropped {drops or 'none'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
