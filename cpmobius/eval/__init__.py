"""The benchmark evaluation: a checkpoint's avg@k / pass@k / maj@k on the paper's benchmarks.

What it holds, in the order a run goes through it (``python -m cpmobius.eval``, `cli`):

- `data`: the benchmarks (local JSONL / parquet copies or the hub), their answer keys (corrected
  and released) and the evaluation prompt; `records`: a file's records → uniform rows (schemas, the
  empty-gold and duplicate-id checks); `demo`: the built-in eight-problem benchmark (no files);
- `generation`: k responses per prompt through vLLM or HF transformers, the released sampling
  protocol;
- `completions`: a run's ``completions.jsonl``: generation with resume, read back for scoring;
- `scoring`: per-problem verdicts from the one grader; avg@k, pass@k, maj@k of one problem;
- `summary`: per-benchmark numbers with bootstrap CIs, coverage, Avg and OOD Avg (`score_run`);
- `report`: the paper-order tables with the published rows, the grader-disagreement report.

What it may import of cpmobius: `cpmobius.grading` (every verdict), `cpmobius.jsonl` and
`cpmobius.prompts` (the Player's prompt for validation rows); never the training loop, the
engine (it generates on its own, without verl or Ray) or the toy world. This ``__init__`` imports
nothing, so ``import cpmobius.eval`` loads neither verl nor Ray nor torch.
"""
