r"""Benchmark of cpmobius.grading: throughput on a realistic answer mix, and pathological batches.

Run: `python benchmarks/bench_grading.py [--n 6000] [--timeout-s 3] [--seed 0]`.

Rows of the printed table:
* realistic mix, answers/s, cold start (in-process caches emptied, workers restarted; their
  start-up is not timed): `grade()` one call at a time (single process: slow pairs go to one
  worker at a time) and `grade_batch()` (pooled: slow pairs fan out over the worker pool); then
  `grade_batch()` again with warm caches. Mix: integers 28%, fractions 18%, radicals 14%,
  decimals 10%, intervals 10%, short text 10%, polynomials and trigonometric expressions 5%
  (decided in-process), expressions with Greek letters 5% (math-verify in the workers; MATH-500
  has ~5% golds of that kind), written in equivalent and wrong forms inside 0.4–1.9 kB of
  reasoning, about 30% of responses repeated verbatim.
* the math-verify share alone: 300 distinct pairs that no fast path or cache decides.
* pathological batches of 64 answers vs their configured timeout, each mixed with 64 ordinary
  answers that must still be graded "ok": exponent towers such as `\boxed{9^{9^{9^{9}}}}`
  (stopped by the cost guard), and 64 distinct towers hidden behind `\log_{10}` (judged by
  math-verify in the workers, which are killed at the deadline).
Acceptance: ≥ 2,000 answers/s on the mix (pooled); each pathological batch returns
within timeout + 1 s with every ordinary answer graded. Exit status 1 if not met.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpmobius import grading  # noqa: E402
from cpmobius.grading import canonical, equivalence, fast_path, isolation  # noqa: E402

_FILLER = (
    "Let us set up the problem carefully. We denote the unknown quantity and use the given "
    "conditions. Substituting and simplifying gives an equation which we solve step by step. "
    "Checking the boundary cases confirms that no other solution exists. "
)
_KINDS = {"int": 28, "frac": 18, "radical": 14, "decimal": 10, "interval": 10, "text": 10, "expr": 5, "greek": 5}


def _case(rng: random.Random) -> tuple[str, str]:
    """One (gold, answer as written) pair of the realistic mix; about 35% are wrong."""
    kind = rng.choices(list(_KINDS), weights=list(_KINDS.values()))[0]
    w = int(rng.random() < 0.35)  # 1: the answer is wrong
    if kind == "int":
        g = rng.randint(0, 2000)
        a = g + w * rng.randint(1, 9)
        return str(g), rng.choice([str(a), f"{a:,}", f"x = {a}", f"{a}.0"])
    if kind == "frac":
        p, q = rng.randint(1, 40), rng.randint(2, 40)
        a = p + w
        return (
            f"\\frac{{{p}}}{{{q}}}",
            rng.choice(
                [f"\\frac{{{a}}}{{{q}}}", f"{a}/{q}", f"\\dfrac{{{a}}}{{{q}}}", f"\\frac{{{2 * a}}}{{{2 * q}}}"]
            ),
        )
    if kind == "radical":
        k, m = rng.randint(1, 12), rng.choice([2, 3, 5, 6, 7, 10, 11])
        a = k + w
        return f"{k}\\sqrt{{{m}}}", rng.choice(
            [f"{a}\\sqrt{{{m}}}", f"\\sqrt{{{a * a * m}}}", f"\\frac{{{2 * a}\\sqrt{{{m}}}}}{{2}}"]
        )
    if kind == "decimal":
        q = rng.choice([2, 4, 5, 8, 10, 20, 25])
        p = rng.randint(1, 3 * q)
        return f"\\frac{{{p}}}{{{q}}}", f"{p / q + 0.1 * w:g}"
    if kind == "interval":
        a, b = sorted(rng.sample(range(-20, 20), 2))
        lb, rb = rng.choice("(["), rng.choice(")]")
        wb = {")": "]", "]": ")"}[rb] if w else rb
        return f"{lb}{a}, {b}{rb}", rng.choice([f"{lb}{a},{b}{wb}", f"\\left{lb} {a}, {b} \\right{wb}"])
    if kind == "text":
        names = ["Evelyn", "Navin", "Tuesday", "east", "ellipse", "even"]
        g = rng.choice(names)
        a = rng.choice([n for n in names if n != g]) if w else g
        return f"\\text{{{g}}}", rng.choice([a, f"\\text{{{a}}}", a.lower()])
    c = rng.randint(1, 9)
    if kind == "expr":  # decided in-process: evaluated at two fixed rational points
        if rng.random() < 0.5:
            return f"x^2+{c}x", rng.choice([f"x^{{2}} + {c + w}x", f"x({c + w}+x)", f"{c + w}x+x^2"])
        return f"\\sin({c}x)+x", rng.choice([f"x+\\sin({c + w}x)", f"\\sin ( {c + w} x ) + x"])
    a, b = rng.randint(1, 30), rng.randint(2, 9)  # Greek letters: math-verify in the worker pool
    return f"{a}\\alpha+\\beta^{b}", rng.choice([f"\\beta^{{{b}}}+{a + w}\\alpha", f"{a + w} \\alpha + \\beta^{b}"])


def _response(rng: random.Random, answer: str) -> str:
    head = _FILLER * rng.randint(2, 9)
    early = f"A first attempt gives \\boxed{{{rng.randint(0, 99)}}}, but that was wrong. " if rng.random() < 0.2 else ""
    return f"{head}{early}Therefore the final answer is $\\boxed{{{answer}}}$."


def realistic_mix(n: int, seed: int) -> tuple[list[str], list[str]]:
    """(golds, responses), about 30% of the responses repeated verbatim."""
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


def _cold_start() -> float:
    """Empty the in-process caches and restart the workers (their parse caches too); start-up seconds."""
    grading.shutdown_pool()
    t0 = time.perf_counter()
    grading.grade(r"\alpha", r"\boxed{\alpha+0}")  # a math-verify pair: waits for the new pool
    startup = time.perf_counter() - t0
    canonical.canonicalize.cache_clear()
    fast_path.fast_value.cache_clear()
    fast_path.fast_verdict.cache_clear()
    equivalence.VERDICT_CACHE.data.clear()
    return startup


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
    golds, responses = realistic_mix(args.n, args.seed)
    rows: list[tuple[str, str, str]] = []

    t_start = _cold_start()
    singles, t_single = _timed(lambda: [grading.grade(g, r) for g, r in zip(golds, responses)])
    rows.append(
        ("mix: grade() one by one, cold", f"{args.n / t_single:,.0f} answers/s", f"{t_single:.2f} s for {args.n}")
    )
    _cold_start()
    batch, t_batch = _timed(lambda: grading.grade_batch(golds, responses))
    rows.append(
        ("mix: grade_batch() pooled, cold", f"{args.n / t_batch:,.0f} answers/s", f"{t_batch:.2f} s; {batch.counts}")
    )
    warm, t_warm = _timed(lambda: grading.grade_batch(golds, responses))
    rows.append(("mix: grade_batch() pooled, warm caches", f"{args.n / t_warm:,.0f} answers/s", f"{t_warm:.2f} s"))
    same = [a.correct for a in singles] == [b.correct for b in batch.results] == [c.correct for c in warm.results]
    acc = sum(r.correct for r in batch.results) / len(batch.results)
    rows.append(("mix: verdicts identical in the three runs", str(same), f"accuracy {acc:.3f} (~35% written wrong)"))

    rng = random.Random(args.seed + 1)
    sym = [
        (f"\\alpha^2+{a}\\alpha+{b}", f"\\boxed{{{b + (rng.random() < 0.3)}+\\alpha(\\alpha+{a})}}")
        for a in range(1, 21)
        for b in range(1, 16)
    ]
    _cold_start()
    sres, t_sym = _timed(lambda: grading.grade_batch([g for g, _ in sym], [r for _, r in sym]))
    rows.append(
        (
            f"math-verify only: {len(sym)} distinct pairs, pooled",
            f"{len(sym) / t_sym:,.0f} answers/s",
            f"{t_sym:.2f} s; {sres.counts}",
        )
    )

    ok_golds, ok_resps = golds[:64], responses[:64]
    patho = {
        "towers (cost guard)": [f"\\boxed{{{b}^{{{b}^{{{b}^{{{b}}}}}}}}}" for b in range(3, 67)],
        "towers behind \\log (workers killed)": [
            f"\\boxed{{10^{{(5^{{5^{{5^{{5^{{5}}}}}}}} \\cdot \\log_{{10}} {k}) - 4}}}}" for k in range(2, 66)
        ],
    }
    passed = True
    for name, answers in patho.items():
        grading.grade(r"\alpha", r"\boxed{\alpha}")  # wait for replacements of workers killed before
        res, t = _timed(
            lambda answers=answers: grading.grade_batch(
                ["3"] * 64 + ok_golds, answers + ok_resps, timeout_s=args.timeout_s
            )
        )
        within = t <= args.timeout_s + 1.0
        graded = all(r.status == "timeout" for r in res.results[:64]) and all(
            r.status == "ok" for r in res.results[64:]
        )
        passed &= within and graded
        rows.append(
            (
                f"64 pathological: {name} + 64 ordinary",
                f"{t:.2f} s (timeout {args.timeout_s:g} s)",
                f"within timeout + 1 s: {within}; 64 timeouts and 64 ok: {graded}",
            )
        )
    pool = isolation.get_pool()
    rows.append(
        ("pool", f"{pool.size} workers", f"start-up {t_start:.2f} s (not timed above); killed so far: {pool.kills}")
    )

    w, v = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    print(f"{'measurement':<{w}}  {'value':<{v}}  detail")
    print("-" * (w + v + 60))
    for a, b, c in rows:
        print(f"{a:<{w}}  {b:<{v}}  {c}")
    passed &= args.n / t_batch >= 2000 and same
    print(
        "\nacceptance (>= 2,000 answers/s pooled, cold; pathological within timeout + 1 s): "
        + ("PASS" if passed else "FAIL")
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
