"""A per-seed gate for the toy world's learned-against-frozen-Coach measurement: can a seed's pretrained Player
tell the frontier's problems from the world's natural spread, as the difficulty filter sees them, before its
Coach runs are spent?

A learning Coach can move towards the Player's frontier only if the filter keeps frontier problems, with right
pseudo-labels, more often than the problems an untrained Coach writes. For each seed this script takes the
pretrained Player of the run's config (the embedded default unless Hydra overrides say otherwise; the models
are built and cached as a run would), draws ``--problems`` problems from two sources — the oracle frontier
(every problem of level ``--frontier-level``) and the natural spread (levels drawn as
`cpmobius.toy.world.natural_level` draws them) — rolls each out ``player.n`` times at the Player's rollout
temperature and length limit (plain transformers, no Ray, about 10 s a seed on 2 cores), and votes and filters
each group exactly as a run does (`cpmobius.difficulty_filter.assign_pseudo_labels` with the run's filter
settings). Per source it reports the share of problems kept, and kept with the right label (the toy world
knows the answer). A seed passes when the frontier's kept-and-right share exceeds the natural spread's by at
least ``--margin``; seeds that fail are reported, not dropped.

Usage:
    python benchmarks/toy_seed_gate.py --seeds 0 1 2 --out /tmp/gate                 # the default toy world
    python benchmarks/toy_seed_gate.py --seeds 0 --problems 8 experiment=toy_gentle   # any Hydra overrides
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SOURCES = ("frontier", "natural")


def draw_problems(source: str, count: int, frontier_level: int, seed: int) -> list[Any]:
    """``count`` toy problems of ``source``: all of level ``frontier_level`` ("frontier"), or levels drawn from the
    world's natural spread ("natural"); the same seed gives the same problems.

    Raises:
        ValueError: an unknown source.
    """
    from cpmobius.toy.world import make_problem

    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    rng = random.Random(f"gate:{source}:{seed}")
    return [make_problem(rng, frontier_level if source == "frontier" else None) for _ in range(count)]


def summarize(outcomes: list[Any], problems: list[Any]) -> dict[str, float]:
    """Shares over one source's groups: kept, kept with the right pseudo-label, and the mean pass rate.

    Args:
        outcomes: G `cpmobius.difficulty_filter.GroupOutcome`s.
        problems: the G toy problems they vote on (their ``answer`` is the truth).
    """
    from cpmobius.grading import answers_equivalent

    right = [
        o.pseudo_label is not None and answers_equivalent(o.pseudo_label, p.answer) for o, p in zip(outcomes, problems)
    ]
    count = len(outcomes)
    return {
        "kept": sum(o.kept for o in outcomes) / count,
        "kept_right": sum(o.kept and r for o, r in zip(outcomes, right)) / count,
        "pass_rate": sum(o.pass_rate for o in outcomes) / count,
    }


def passes(figures: dict[str, dict[str, float]], margin: float) -> bool:
    """The gate: the frontier's kept-and-right share beats the natural spread's by at least ``margin``."""
    return figures["frontier"]["kept_right"] - figures["natural"]["kept_right"] >= margin


def roll_out(model: Any, tokenizer: Any, prompts: list[list[int]], n: int, temperature: float, max_new: int) -> tuple:
    """``n`` sampled responses per prompt (groups contiguous): (texts, truncated flags)."""
    import torch

    texts, truncated = [], []
    for ids in prompts:
        inputs = torch.tensor([ids] * n)
        with torch.no_grad():
            out = model.generate(
                inputs,
                attention_mask=torch.ones_like(inputs),
                do_sample=True,
                temperature=temperature,
                top_p=1.0,
                top_k=0,
                max_new_tokens=max_new,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
        for row in out[:, len(ids) :].tolist():
            stop = row.index(tokenizer.eos_token_id) if tokenizer.eos_token_id in row else None
            texts.append(tokenizer.decode(row[:stop], skip_special_tokens=True))
            truncated.append(stop is None)
    return texts, truncated


def gate_seed(seed: int, overrides: list[str], problems: int, frontier_level: int) -> dict[str, Any]:
    """The gate's figures for one seed: ``{"seed", "frontier": {...}, "natural": {...}}`` (`summarize`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cpmobius.config import compose_config
    from cpmobius.difficulty_filter import assign_pseudo_labels
    from cpmobius.engine.config import build_policy_configs
    from cpmobius.main import hold_kernels, prepare_models
    from cpmobius.prompts import PlayerPrompt, resolve_answer_instruction
    from cpmobius.settings import load_settings

    cfg = compose_config([f"seed={seed}", *overrides])
    hold_kernels(cfg)  # the runs' kernels, for the models and the gate's figures alike
    settings = load_settings(cfg)
    prepare_models(cfg, settings)
    rollout = build_policy_configs(cfg)["player"].actor_rollout_ref.rollout
    tokenizer = AutoTokenizer.from_pretrained(cfg.model.player_path)
    model = AutoModelForCausalLM.from_pretrained(cfg.model.player_path).eval()
    instruction = resolve_answer_instruction(settings.player.answer_format, tokenizer, settings.player.system_prompt)
    prompt = PlayerPrompt(settings.player.system_prompt, instruction)
    torch.manual_seed(seed)
    figures: dict[str, Any] = {"seed": seed}
    for source in SOURCES:
        drawn = draw_problems(source, problems, frontier_level, seed)
        ids = [
            list(tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=True, return_dict=False))
            for m in prompt.render([p.text for p in drawn])
        ]
        n = settings.player.n
        texts, truncated = roll_out(model, tokenizer, ids, n, float(rollout.temperature), int(rollout.response_length))
        outcomes = assign_pseudo_labels(texts, truncated, n, settings.filter, settings.player.vote)
        figures[source] = summarize(outcomes, drawn)
    return figures


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--problems", type=int, default=64, help="problems per source and seed")
    parser.add_argument("--frontier-level", type=int, default=1, help="the oracle frontier's level")
    parser.add_argument("--margin", type=float, default=0.15, help="frontier − natural kept-and-right share to pass")
    parser.add_argument("--out", type=Path, default=None, help="write gate.json here")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the run's config (default: none)")
    argv = sys.argv[1:] if argv is None else argv
    overrides = [arg for arg in argv if "=" in arg and not arg.startswith("-")]
    args = parser.parse_args([arg for arg in argv if arg not in overrides])

    rows = []
    print("| seed | frontier kept | frontier kept, right label | natural kept | natural kept, right label | gate |")
    print("|---|---|---|---|---|---|")
    for seed in args.seeds:
        figures = gate_seed(seed, overrides, args.problems, args.frontier_level)
        figures["passes"] = passes(figures, args.margin)
        rows.append(figures)
        f, n = figures["frontier"], figures["natural"]
        verdict = "passes" if figures["passes"] else "FAILS"
        cells = [f"{x:.2f}" for x in (f["kept"], f["kept_right"], n["kept"], n["kept_right"])]
        print(f"| {seed} | {' | '.join(cells)} | {verdict} |", flush=True)
    failed = [r["seed"] for r in rows if not r["passes"]]
    print(f"seeds failing the gate (margin {args.margin}): {failed or 'none'}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gate.json").write_text(json.dumps({"overrides": overrides, "margin": args.margin, "seeds": rows}))


if __name__ == "__main__":
    main()
