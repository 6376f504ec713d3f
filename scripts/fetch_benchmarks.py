"""Write the evaluation benchmarks as ``<out>/<name>/<name>.jsonl`` (the layout training validation,
``prepare_warmup_data.py --eval-dir`` and ``python -m cpmobius.eval --data-dir`` read).

    python scripts/fetch_benchmarks.py --out data/eval                     # from the Hugging Face hub
    python scripts/fetch_benchmarks.py --out data/eval --source local --data-dir /path/to/copies

Rows are the uniform schema of `cpmobius.eval.data` (``id``, ``problem``, ``answer``, ``alt_answers``,
``answer_upstream``); the hub ids are `cpmobius.eval.data.HUB_SOURCES`. A benchmark already written is
kept unless ``--force``; each file is written to a temporary name and renamed, so an interrupted run
leaves no half-written benchmark. Exit 2 with one line on an error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cpmobius.eval.data import HUB_SOURCES, load_benchmark  # noqa: E402
from cpmobius.jsonl import write_jsonl  # noqa: E402


def write_benchmark(name: str, rows: list[dict], out: Path) -> Path:
    """Write ``rows`` to ``out/<name>/<name>.jsonl`` atomically; return the path."""
    return write_jsonl(out / name / f"{name}.jsonl", rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("data/eval"), help="output folder (default: data/eval)")
    parser.add_argument(
        "--benchmarks",
        nargs="+",
        default=list(HUB_SOURCES),
        choices=list(HUB_SOURCES),
        help="benchmarks to write (default: all of them; the built-in demo needs no file)",
    )
    parser.add_argument(
        "--source",
        choices=["hub", "local"],
        default="hub",
        help="the Hugging Face hub (default), or local copies in --data-dir",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="with --source local: folder of <name>/<name>.jsonl"
    )
    parser.add_argument("--force", action="store_true", help="rewrite benchmarks already in --out")
    args = parser.parse_args(argv)
    for name in args.benchmarks:
        target = args.out / name / f"{name}.jsonl"
        if target.is_file() and not args.force:
            print(f"{name}: kept {target}")
            continue
        try:
            rows = load_benchmark(name, args.data_dir, source=args.source)
        except Exception as error:  # hub unreachable, missing file, malformed rows: one line, no traceback
            print(f"fetch_benchmarks: {name}: {type(error).__name__}: {error}", file=sys.stderr)
            return 2
        print(f"{name}: {len(rows)} problems -> {write_benchmark(name, rows, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
