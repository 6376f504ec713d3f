"""`python -m cpmobius.grading verify|vote`: the grader on JSON lines (debugging a verdict).

`verify` reads `{"gold": .., "response": ..}` lines and prints `{"correct", "extracted", "status"}`;
`vote` reads `{"responses": [..]}` lines and prints `{"pseudo_label", "pass_rate", "clusters"}`.
Malformed input is a one-line error on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from typing import Iterable, Iterator, Sequence

from cpmobius.jsonl import JSONLineError, json_objects

from . import __doc__ as PACKAGE_DOC
from .results import DEFAULT_TIMEOUT_S, MODES
from .scoring import grade
from .vote import majority_vote


def _stdin_lines() -> Iterator[str]:
    """Standard input's lines, each decoded as UTF-8 on its own (whatever the locale: a C locale's stdin would turn
    bad bytes into surrogates and grade them); a byte-order mark at the start is read.

    Raises:
        JSONLineError: a line that is not UTF-8, with its number and the first bad byte.
    """
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream put in place of stdin (already decoded)
        yield from sys.stdin
        return
    for line_no, raw in enumerate(stream, 1):
        try:
            yield raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
        except UnicodeDecodeError as error:
            raise JSONLineError(line_no, f"not UTF-8 text (byte {raw[error.start]:#04x})") from None


def _cli_lines(stream: Iterable[str], required: dict[str, type]) -> Iterable[dict]:
    """The JSON objects of non-blank lines; malformed input: SystemExit with a one-line message."""
    try:
        for lineno, obj in json_objects(stream):
            for key, typ in required.items():
                if key not in obj:
                    raise SystemExit(f"error: line {lineno}: missing key {key!r}")
                value = obj[key]
                if typ is list and not (
                    isinstance(value, list) and all(x is None or isinstance(x, str) for x in value)
                ):
                    raise SystemExit(f"error: line {lineno}: {key!r} must be a list of strings")
                if typ is str and (not isinstance(value, (str, int, float)) or isinstance(value, bool)):
                    raise SystemExit(f"error: line {lineno}: {key!r} must be a string")
            yield obj
    except JSONLineError as error:
        raise SystemExit(f"error: {error}") from None


def build_parser() -> argparse.ArgumentParser:
    """The command line of `python -m cpmobius.grading` (every option with its help text)."""
    parser = argparse.ArgumentParser(
        prog="python -m cpmobius.grading",
        description=PACKAGE_DOC.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "command",
        choices=("verify", "vote"),
        help='verify: {"gold", "response"} lines → {"correct", "extracted", "status"}; '
        'vote: {"responses": [...]} lines → {"pseudo_label", "pass_rate", "clusters"} '
        "(JSON lines on stdin, one result line each on stdout)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="cpmobius",
        help="cpmobius (this project's grader and equivalence vote) or released (the released "
        "code's evaluation grader and exact-string vote)",
    )
    parser.add_argument(
        "--timeout-s",
        type=_seconds,
        default=DEFAULT_TIMEOUT_S,
        help="hard time limit per answer comparison, seconds (a comparison past it is a timeout)",
    )
    return parser


def _seconds(text: str) -> float:
    """``--timeout-s``: a finite number of seconds > 0 (inf overflowed the poll, nan and 0 timed everything out)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m cpmobius.grading verify|vote` on JSON lines from stdin (see the package docstring)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s")
    try:
        if args.command == "verify":
            for obj in _cli_lines(_stdin_lines(), {"gold": str, "response": str}):
                r = grade(str(obj["gold"]), str(obj["response"]), mode=args.mode, timeout_s=args.timeout_s)
                print(json.dumps({"correct": r.correct, "extracted": r.extracted, "status": r.status}), flush=True)
        else:
            for obj in _cli_lines(_stdin_lines(), {"responses": list}):
                v = majority_vote(obj["responses"], mode=args.mode, timeout_s=args.timeout_s)
                print(
                    json.dumps({"pseudo_label": v.pseudo_label, "pass_rate": v.pass_rate, "clusters": v.clusters}),
                    flush=True,
                )
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
