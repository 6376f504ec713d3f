"""Benchmark of the Coach's near-duplicate check (`cpmobius.duplicates.mark_duplicates`) at a Coach batch's size.

Run: `python benchmarks/bench_duplicates.py [--candidates 300] [--seen 80] [--problems FILE.jsonl] [--seed 0]`.

A Coach wake of the paper preset writes a few hundred candidates (the attempt's count times the reserve),
each compared with every earlier valid one of the step; on one H200 host this check was most of the
~3 s a step the Coach stage spent beside generation. Candidates are drawn with repeats from ``--problems``
(a JSONL file with a ``problem`` field, e.g. MATH-500) or, without it, from generated word problems, each
given one of the Coach's usual openings; ``--seen`` of them stand for the step's earlier batches.

Printed: pairs compared, seconds for `mark_duplicates` and for the rule computed in full for every pair
(difflib ratio and word-multiset Dice), the speed-up, the duplicates found, and whether both made the
same decision for every candidate. Exit status 1 if they did not.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from difflib import SequenceMatcher
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpmobius.coach import Problem  # noqa: E402
from cpmobius.duplicates import _normalise, _word_counts, mark_duplicates  # noqa: E402

_OPENINGS = ["", "Here is a problem:\n\n", "**Problem:** ", "Problem: ", "Consider the following.\n"]
_NAMES = ["Alice", "Bob", "Carla", "Deepak", "Emma", "Farid"]
_THINGS = ["marbles", "apples", "coins", "cards", "books", "pencils"]
_ASKS = [
    "How many {t} does {n} have left?",
    "What is the probability that both {t} drawn are red?",
    "In how many ways can {n} arrange the {t} in a row?",
    "What is the remainder when the number of {t} is divided by {k}?",
]


def generated_problems(rng: random.Random, count: int) -> list[str]:
    """Word problems of one to three sentences (60–400 characters), numbers and names varied."""
    problems = []
    for _ in range(count):
        name, thing, k = rng.choice(_NAMES), rng.choice(_THINGS), rng.randint(2, 99)
        facts = [
            f"{name} has {rng.randint(2, 500)} {thing}.",
            f"{name} gives away {rng.randint(1, 50)} of them and buys {rng.randint(1, 50)} more.",
            f"A box holds {rng.randint(2, 30)} red and {rng.randint(2, 30)} blue {thing}.",
            f"Every day the number of {thing} grows by {rng.randint(2, 9)} percent.",
        ]
        text = " ".join(rng.sample(facts, rng.randint(1, 3))) + " " + rng.choice(_ASKS).format(t=thing, n=name, k=k)
        problems.append(text)
    return problems


def near_in_full(candidate: str, other: str, similarity: float) -> bool:
    """The duplicate rule with every pair's difflib ratio computed (what `mark_duplicates` must decide)."""
    a, b = _normalise(candidate), _normalise(other)
    wa, wb = _word_counts(a), _word_counts(b)
    dice = 2 * sum((wa & wb).values()) / max(1, sum(wa.values()) + sum(wb.values()))
    return max(dice, SequenceMatcher(None, a, b).ratio()) >= similarity


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=300)
    parser.add_argument("--seen", type=int, default=80)
    parser.add_argument("--similarity", type=float, default=0.9)
    parser.add_argument("--problems", type=Path, default=None, help="JSONL with a 'problem' field")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if args.problems:
        pool = [json.loads(line)["problem"] for line in args.problems.read_text().splitlines() if line.strip()]
    else:
        pool = generated_problems(rng, 400)
    texts = [rng.choice(_OPENINGS) + rng.choice(pool) for _ in range(args.seen + args.candidates)]
    seen, batch = [t.strip() for t in texts[: args.seen]], [t.strip() for t in texts[args.seen :]]

    problems = [Problem(text, i) for i, text in enumerate(batch)]
    start = time.perf_counter()
    mark_duplicates(problems, args.similarity, seen)
    fast_s = time.perf_counter() - start

    start = time.perf_counter()
    kept, full, pairs = list(seen), [], 0
    for text in batch:
        near = False
        for other in kept:
            pairs += 1
            if near_in_full(text, other, args.similarity):
                near = True
                break
        full.append("duplicate" if near else None)
        if not near:
            kept.append(text)
    full_s = time.perf_counter() - start

    same = [p.reject_reason for p in problems] == full
    source = args.problems.name if args.problems else "generated"
    columns = "candidates | seen | source | pairs | mark_duplicates s | every ratio in full s | speed-up | duplicates"
    print(f"| {columns} | same decisions |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.candidates} | {args.seen} | {source} | {pairs:,} | {fast_s:.3f} | {full_s:.3f} | "
        f"{full_s / max(fast_s, 1e-9):.0f}x | {full.count('duplicate')} | {same} |"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
