"""The Coach SFT warm-up (paper §3) and the preparation of its data.

What it holds:

- `sft`: the warm-up itself, through verl's own SFT trainer under torchrun (``python -m
  cpmobius.warmup`` is that entry point, `__main__`), run by the driver before co-evolution
  (`run_warmup`); `measure_coach_validity`, the warm-up's effect on the Coach's output format;
- `data`: Eurus-2-RL-Data rows → the 4K-problem SFT set and its manifest (filters, selection,
  parquet), the pipeline behind ``scripts/prepare_warmup_data.py``;
- `sources`: reading the source rows and the benchmarks, one row → a bare problem, and the
  benchmark decontamination index (`OVERLAP_RULE`).

What it may import of cpmobius: `cpmobius.config` (the composed config, `ConfigError`), `cpmobius.engine` (policy
configs, stop tokens, the CPU platform),
`cpmobius.coach` (the Coach-output validator it teaches to pass), `cpmobius.prompts`,
`cpmobius.settings`, `cpmobius.jsonl` and `cpmobius.cpu_kernels`; never `loop` or `main` (the driver
imports the warm-up, not the reverse). This ``__init__`` imports nothing.
"""
