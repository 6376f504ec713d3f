"""What the output layer's log-prob computation costs per token, by the path verl takes to it.

Under remove padding verl hands ``logprobs_from_logits`` the packed logits of a whole micro-batch,
shape (tokens, vocabulary). Without flash-attn's Triton cross-entropy (flash-attn has no binary wheel on
PyPI) verl falls back to ``logprobs_from_logits_v2``, which loops over the first dimension to save
memory: one ``log_softmax`` and one ``gather`` per *token*, forward and backward. This benchmark times,
on one micro-batch of Qwen2.5-Math-1.5B's output layer (hidden 1,536, vocabulary 151,936, bf16):

- ``verl_fallback``: the lm-head matmul, then verl's ``logprobs_from_logits`` as installed;
- ``vectorized``: the lm-head matmul, then one ``log_softmax`` in fp32 over the whole micro-batch;
- ``fused_torch``: verl's ``FusedLinearForPPO`` (``model.use_fused_kernels`` with the torch backend), which
  computes log-probs and entropy from the hidden states in chunks, never holding the whole logits.

Each path runs forward and backward (as the update does) and forward only (as the log-prob passes do),
and the table gives milliseconds per micro-batch, microseconds per token and the seconds 275,707 tokens
(the update benchmark's paper batch) would spend there.

Usage (one GPU, verl installed)::

    python benchmarks/bench_logprobs_gpu.py [--tokens 8192] [--out results.md]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Callable, Optional

HIDDEN, VOCAB = 1536, 151936
PAPER_BATCH_TOKENS = 275_707


def paths(hidden, weight, labels) -> dict[str, Callable[[], tuple]]:
    """The log-prob paths on one micro-batch: ``{name: fn() -> (log_probs, entropy or None)}``."""
    from verl.utils import torch_functional as verl_F

    def verl_fallback():
        logits = hidden @ weight.T
        return verl_F.logprobs_from_logits(logits, labels), None

    def vectorized():
        logits = (hidden @ weight.T).float()
        return logits.log_softmax(-1).gather(-1, labels[:, None]).squeeze(-1), None

    def fused(backend: str):
        from verl.utils.experimental.torch_functional import FusedLinearForPPO

        layer = FusedLinearForPPO(impl_backend=backend)

        def run():
            log_probs, entropy = layer.forward(
                hidden_states=hidden[None], vocab_weights=weight, input_ids=labels[None], temperature=1.0
            )
            return log_probs, entropy

        return run

    return {"verl_fallback": verl_fallback, "vectorized": vectorized, "fused_torch": fused("torch")}


def time_path(fn: Callable[[], tuple], hidden, weight, backward: bool, repeats: int) -> float:
    """Median seconds of ``repeats`` calls of ``fn`` (and a backward of the log-probs' sum when ``backward``)."""
    import torch

    times = []
    for _ in range(repeats + 1):  # the first call pays one-off costs (autotuning, compilation)
        hidden.grad = weight.grad = None
        torch.cuda.synchronize()
        started = time.perf_counter()
        if backward:
            log_probs, _ = fn()
            log_probs.float().sum().backward()
        else:
            with torch.no_grad():
                fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return sorted(times[1:])[len(times[1:]) // 2]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=8192, help="tokens in the micro-batch (a packed row)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="also write the table here (markdown)")
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU")
    torch.manual_seed(0)
    hidden = torch.randn(args.tokens, HIDDEN, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    weight = (torch.randn(VOCAB, HIDDEN, device="cuda", dtype=torch.bfloat16) * 0.02).requires_grad_(True)
    labels = torch.randint(0, VOCAB, (args.tokens,), device="cuda")
    lines = [
        f"## Output-layer log-probs, {args.tokens:,} tokens a micro-batch "
        f"(hidden {HIDDEN}, vocabulary {VOCAB:,}, bf16)",
        "",
        "| path | pass | ms per micro-batch | µs per token | s for the paper batch | max abs diff vs vectorized |",
        "|---|---|---|---|---|---|",
    ]
    from cpmobius.error_text import first_line

    table = paths(hidden, weight, labels)
    with torch.no_grad():
        reference = table["vectorized"]()[0].float()
    for name, fn in table.items():
        try:
            with torch.no_grad():
                diff = float((fn()[0].float().reshape(-1) - reference).abs().max())
            for backward in (False, True):
                seconds = time_path(fn, hidden, weight, backward, args.repeats)
                lines.append(
                    f"| {name} | {'forward + backward' if backward else 'forward'} | {1e3 * seconds:.1f} | "
                    f"{1e6 * seconds / args.tokens:.2f} | {seconds * PAPER_BATCH_TOKENS / args.tokens:.1f} | "
                    f"{diff:.2e} |"
                )
        except Exception as error:  # one path failing (a missing kernel) must not lose the others
            lines.append(f"| {name} | failed: {type(error).__name__}: {first_line(error, 120)} | | | | |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
