r"""The built-in `demo` benchmark: eight short problems shipped with the package (stage: evaluation, data).

It lets the evaluation run from a fresh clone with no benchmark files and no network (the README's
CPU smoke test, `python -m cpmobius.eval --benchmarks demo ...`). The problems were written for this
project (none is taken from a benchmark); each answer is worked out in the comment above it. The
rows have the uniform schema of `cpmobius.eval.data` with `answer_upstream` equal to `answer`, so
both answer keys (`corrected`, `released`) work on it. It is never part of Avg / OOD Avg and its
numbers mean nothing about a model's maths: it checks the pipeline, not the model.
"""

from __future__ import annotations

from typing import Any

_PROBLEMS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # 7 rows × 12 muffins = 84
    ("A baker puts 7 rows of 12 muffins on a tray. How many muffins are on the tray?", "84", ()),
    # 2^10 = 1024 = 7·146 + 2
    ("What is the remainder when $2^{10}$ is divided by 7?", "2", ()),
    # 3x = 26 − 5 = 21, x = 7
    ("Solve for $x$: $3x + 5 = 26$.", "7", ()),
    # 3/6 + 2/6 = 5/6
    ("Compute $\\frac{1}{2} + \\frac{1}{3}$.", "\\frac{5}{6}", ("5/6",)),
    # 36 = 2^2·3^2: (2+1)(2+1) = 9 divisors
    ("How many positive divisors does 36 have?", "9", ()),
    # 2(l + 5) = 30 → l = 10; area 10·5 = 50
    ("A rectangle has perimeter 30 and width 5. What is its area?", "50", ()),
    # 1 + 3 + … + 19 = 10^2 = 100
    ("What is the sum of the first 10 positive odd integers?", "100", ()),
    # √50 = √(25·2) = 5√2
    ("Simplify $\\sqrt{50}$.", "5\\sqrt{2}", ()),
)


def demo_rows() -> list[dict[str, Any]]:
    """The `demo` benchmark as uniform rows (`demo-0` … `demo-7`), fresh copies on every call."""
    return [
        {
            "id": f"demo-{i}",
            "problem": problem,
            "answer": answer,
            "alt_answers": list(alt),
            "answer_upstream": answer,
            "flags": [],
        }
        for i, (problem, answer, alt) in enumerate(_PROBLEMS)
    ]
