r"""Benchmark of cpmobius.grading: throughput on a realistic answer mix, and pathological batches.

Run: `python benchmarks/bench_grading.py [--n 6000] [--timeout-s 3] [--seed 0]`.

Rows of the printed table:
* realistic mix, answers/s, cold caches: `grade()` one call at a time (single process; slow pairs
  go to one worker at a time) and `grade_batch()` (pooled: slow pairs fan out over the worker
  pool). Mix: integers, fractions, radicals, decimals, intervals, short text and a few symbolic
  expressions, written in equivalent and wrong forms inside 0.4–1.9 kB of reasoning text, with about
  30% of responses repeated verbatim. The same `grade_batch()` again with warm caches.
* pathological batches of 64 answers vs their configured timeout: exponent towers such as
  `\boxed{9^{9^{9^{9}}}}` (stopped by the cost guard), and 64 distinct towers hidden behind
  `\log_{10}` (judged by math-verify in the workers, killed at the deadline), each batch mixed with
  64 ordinary answers that must still be graded "ok".
Acceptance (issue 4): ≥ 2,000 answers/s on the mix; each pathological batch returns within
timeout + 1 s with the ordinary answers graded.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpmobius import grading  # noqa: E402

_FILLER = (
    "Let us set up the problem carefully. We denote the unknown quantity and use the given "
    "conditions. Substituting and simplifying gives an equation which we solve step by step. "
    "Checking the boundary cases confirms that no other solution exists. "
)


def _case(rng: random.Random) -> tuple[str, str]:
    """One (gold, answer-as-written) pair of the realistic mix."""
    kind = rng.choices(
        ["int", "frac", "radical", "decimal", "interval", "text", "symbolic"],
        weights=[30, 20, 15, 10, 10, 10, 5],
    )[0]
    wrong = rng.random() < 0.35
    if kind == "int":
        g = rng.randint(0, 2000)
        a = g + rng.randint(1, 9) if wrong else g
        forms = [str(a), f"{a:,}", f"x = {a}", f"{a}.0"]
        return str(g), rng.choice(forms)
    if kind == "frac":
        p, q = rng.randint(1, 40), rng.randint(2, 40)
        if wrong:
            p += 1
        forms = [f"\\frac{{{p}}}{{{q}}}", f"{p}/{q}", f"\\dfrac{{{p}}}{{{q}}}", f"\\frac{{{2 * p}}}{{{2 * q}}}"]
        return f"\\frac{{{p - wrong}}}{{{q}}}", rng.choice(forms)
    if kind == "radical":
        k, m = rng.randint(1, 12), rng.choice([2, 3, 5, 6, 7, 10, 11])
        km = k + 1 if wrong else k
        forms = [f"{km}\\sqrt{{{m}}}", f"\\sqrt{{{km * km * m}}}", f"\\frac{{{2 * km}\\sqrt{{{m}}}}}{{2}}"]
        return f"{k}\\sqrt{{{m}}}", rng.choice(forms)
    if kind == "decimal":
        q = rng.choice([2, 4, 5, 8, 10, 20, 25])
        p = rng.randint(1, 3 * q)
        d = p / q + (0.1 if wrong else 0)
        return f"\\frac{{{p}}}{{{q}}}", f"{d:g}"
    if kind == "interval":
        a, b = sorted(rng.sample(range(-20, 20), 2))
        lb, rb = rng.choice("(["), rng.choice(")]")
        wb = ")" if (wrong and rb == "]") else rb
        return f"{lb}{a}, {b}{rb}", rng.choice([f"{lb}{a},{b}{wb}", f"\\left{lb} {a}, {b} \\right{wb}"])
    if kind == "text":
        names = ["Evelyn", "Navin", "Tuesday", "east", "ellipse", "even"]
        g = rng.choice(names)
        a = rng.choice(names) if wrong else g
        return f"\\text{{{g}}}", rng.choice([a, f"\\text{{{a}}}", a.lower()])
    c = rng.randint(1, 9)
    g = f"x^2+{c}x"
    return g, rng.choice([f"x^{{2}} + {c + wrong}x", f"x({c + wrong}+x)", f"{c + wrong}x+x^2"])


def _response(rng: random.Random, answer: str) -> str:
    head = _FILLER * rng.randint(2, 9)  # 0.4-1.9 kB of reasoning before the answer
    early = f"A first attempt gives \\boxed{{{rng.randint(0, 99)}}}, but that was wrong. " if rng.random() < 0.2 else ""
    return f"{head}{early}Therefore the final answer is $\\boxed{{{answer}}}$."


def realistic_mix(n: int, seed: int) -> tuple[list[str], list[str]]:
    """(golds, responses) with ~30% of the responses repeated verbatim."""
    rng = random.Random(seed)
    golds: list[str] = []
    responses: list[str] = []
    for _ in range(n):
        if responses and rng.random() < 0.30:
            j = rng.randrange(len(responses))
            golds.append(golds[j])
            responses.append(responses[j])
        else:
            g, a = _case(rng)
            golds.append(g)
            responses.append(_response(rng, a))
    return golds, responses


def _clear_caches() -> None:
    grading._canonical.cache_clear()
    grading._fast_value.cache_clear()
    grading._fast_verdict.cache_clear()
    grading._VERDICTS.data.clear()


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=6000, help="answers in the realistic mix")
    ap.add_argument("--timeout-s", type=float, default=3.0, help="budget of each pathological batch")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    _, t_start = _timed(lambda: grading.grade("x^2", "\\boxed{x \\cdot x}"))  # starts the pool
    golds, responses = realistic_mix(args.n, args.seed)
    rows: list[tuple[str, str, str]] = []

    _clear_caches()
    singles, t_single = _timed(lambda: [grading.grade(g, r) for g, r in zip(golds, responses)])
    rows.append(("mix: grade() one by one, cold caches", f"{args.n / t_single:,.0f} answers/s",
                 f"{t_single:.2f} s for {args.n}"))
    _clear_caches()
    batch, t_batch = _timed(lambda: grading.grade_batch(golds, responses))
    rows.append(("mix: grade_batch() pooled, cold caches", f"{args.n / t_batch:,.0f} answers/s",
                 f"{t_batch:.2f} s; {batch.counts}"))
    warm, t_warm = _timed(lambda: grading.grade_batch(golds, responses))
    rows.append(("mix: grade_batch() pooled, warm caches", f"{args.n / t_warm:,.0f} answers/s", f"{t_warm:.2f} s"))
    same = [a.correct for a in singles] == [b.correct for b in batch.results] == [c.correct for c in warm.results]
    acc = sum(r.correct for r in batch.results) / len(batch.results)
    rows.append(("mix: verdicts identical across the three runs", str(same), f"accuracy {acc:.3f}"))

    ok_golds, ok_resps = golds[:64], responses[:64]
    patho = {
        "towers (cost guard)": [f"\\boxed{{{b}^{{{b}^{{{b}^{{{b}}}}}}}}}" for b in range(3, 67)],
        "towers behind \\log (workers killed)": [
            f"\\boxed{{10^{{(5^{{5^{{5^{{5^{{5}}}}}}}} \\cdot \\log_{{10}} {k}) - 4}}}}" for k in range(2, 66)
        ],
    }
    passed = True
    for name, answers in patho.items():
        grading.grade("1", "\\boxed{x}")  # let replacement workers of the previous batch come up
        res, t = _timed(lambda answers=answers: grading.grade_batch(
            ["3"] * 64 + ok_golds, answers + ok_resps, timeout_s=args.timeout_s))
        bad = res.results[:64]
        good = res.results[64:]
        within = t <= args.timeout_s + 1.0
        graded = all(r.status in ("ok",) for r in good) and all(r.status == "timeout" for r in bad)
        passed &= within and graded
        rows.append((f"64 pathological: {name} + 64 ordinary", f"{t:.2f} s (timeout {args.timeout_s:g} s)",
                     f"within timeout+1s: {within}; pathological all timeout & ordinary all ok: {graded}"))
    pool = grading._get_pool()
    rows.append(("pool", f"{pool.size} workers", f"start-up {t_start:.2f} s; workers killed so far: {pool.kills}"))

    w = max(len(r[0]) for r in rows)
    v = max(len(r[1]) for r in rows)
    print(f"{'measurement':<{w}}  {'value':<{v}}  detail")
    print("-" * (w + v + 40))
    for a, b, c in rows:
        print(f"{a:<{w}}  {b:<{v}}  {c}")
    rate = args.n / t_batch
    passed &= rate >= 2000 and same
    print(f"\nacceptance (>= 2,000 answers/s pooled cold; pathological within timeout + 1 s): {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
