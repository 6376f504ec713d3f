"""verl's batch formats for one policy (`cpmobius.engine.policy`): prompts in, worker inputs out.

- `prompt_batch`: chat prompts → the `DataProto` verl's agent loop generates from (one row per
  response, the n rows of a prompt contiguous, request ids reproducible);
- `row_divisor`, `pad_rows`: a batch padded with loss-free rows to what the workers and their
  micro-batches divide;
- `worker_input`: a padded `DataProto` → the no-padding `TensorDict` verl's engine workers take;
- `scalar`: one of verl's metric values (list, tensor, number) as a float;
- `token_rollouts`: given prompts and responses (token ids) laid out as `generate` returns its rollouts,
  for log-probs of responses the policy did not sample (the expected validation accuracy);
- `synthetic_rollouts`: a batch of random token rollouts of given lengths, laid out the same way
  (tests and benchmarks of the log-prob and update passes, no rollout engine needed).
"""

from __future__ import annotations

import uuid
from typing import Any, Sequence

import numpy as np
import torch

from cpmobius.engine.agent_loop import AGENT_LOOP_NAME, GREEDY_KEY, SAMPLING_KEYS
from cpmobius.prompts import Messages

# Request ids of one generate call: call number × REQUESTS_PER_CALL + row.
REQUESTS_PER_CALL = 1_000_000


def object_array(items: Sequence[Any]) -> np.ndarray:
    """A 1-D object array of ``items``, (len(items),)."""
    # np.array(list_of_message_lists, dtype=object) silently builds a 2-D array; assign one by one.
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def prompt_batch(
    prompts: Sequence[Messages], n: int, validate: bool, greedy: bool, global_steps: int, call: int
) -> Any:
    """The `DataProto` of one generate call: P prompts, each repeated ``n`` times (B = P·n rows).

    Args:
        prompts: P chat-message lists.
        n: responses per prompt; a prompt's rows are contiguous.
        validate: sample with ``rollout.val_kwargs`` (``meta_info["validate"]``).
        greedy: temperature 0, top-p 1, top-k off for every row, in training and validation passes
            alike (non-tensor ``GREEDY_KEY``, read by `cpmobius.engine.agent_loop`).
        global_steps: the policy's update count (``meta_info["global_steps"]``).
        call: this policy's generate-call number, for the request ids.

    Returns:
        `DataProto` with a (B, 1) dummy tensor and non-tensors ``raw_prompt``, ``uid`` (one per
        prompt, shared by its group), ``index`` (prompt position), ``priority`` (request id) and
        ``GREEDY_KEY``.
    """
    from verl import DataProto

    count = len(prompts)
    non_tensors = {
        "raw_prompt": object_array([list(p) for p in prompts]),
        "uid": object_array([uuid.uuid4().hex for _ in range(count)]),
        "index": np.arange(count, dtype=np.int64),
    }
    # CPMöbius: our own per-row flag, honoured in validation too (verl's __do_sample__ is not).
    non_tensors[GREEDY_KEY] = np.full(count, bool(greedy), dtype=bool)
    batch = DataProto.from_dict(
        tensors={"dummy_tensor": torch.zeros(count, 1, dtype=torch.uint8)},
        non_tensors=non_tensors,
        meta_info={"validate": validate, "global_steps": global_steps},
    )
    batch = batch.repeat(repeat_times=n, interleave=True)
    # Unique, reproducible request ids: verl's agent loop names a request "det-{priority}" under
    # rollout.full_determinism, and the rollout seeds that request's sampling from its name.
    batch.non_tensor_batch["priority"] = call * REQUESTS_PER_CALL + np.arange(len(batch), dtype=np.int64)
    return batch


def sampling_used(output: Any, name: str) -> dict[str, float]:
    """The sampling values (`SAMPLING_KEYS`) every row of one generate call was made with, as the agent loop
    reports them per row; the per-row columns are removed from ``output``.

    Args:
        output: the agent loop's `DataProto` (non-tensor ``sampling_<key>`` columns).
        name: the policy's name, for the errors.

    Raises:
        RuntimeError: when the rows of one call were sampled differently, or the agent loop did not
            report its values (``rollout.agent.default_agent_loop`` is not ours).
    """
    used = {}
    for key in SAMPLING_KEYS:
        values = output.non_tensor_batch.pop(f"sampling_{key}", None)
        if values is None:
            raise RuntimeError(
                f"{name}: the agent loop reported no sampling values; "
                f"set actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_LOOP_NAME}"
            )
        distinct = {float(v) for v in values}
        if len(distinct) != 1:
            raise RuntimeError(
                f"{name}: rows of one generate call were sampled with different {key}: {sorted(distinct)}"
            )
        used[key] = distinct.pop()
    return used


def row_divisor(actor_rollout_ref: Any, world_size: int) -> int:
    """Rows must split evenly over the workers and then into micro-batches (verl asserts both).

    Returns:
        ``world_size`` × the least common multiple of the actor's, rollout's and reference's
        log-prob / update micro-batch sizes (1 when none is set); ``world_size`` alone with
        ``actor.use_dynamic_bsz`` (micro-batches are then cut by tokens, and a padding row would only
        cost a forward and backward of a copied sequence).
    """
    arr = actor_rollout_ref
    if arr.actor.get("use_dynamic_bsz", False):
        return world_size
    sizes = [
        arr.actor.ppo_micro_batch_size_per_gpu,
        arr.rollout.log_prob_micro_batch_size_per_gpu,
        arr.ref.log_prob_micro_batch_size_per_gpu,
    ]
    micro = int(np.lcm.reduce([int(s) for s in sizes if s])) if any(sizes) else 1
    return micro * world_size


def pad_rows(batch: Any, divisor: int) -> tuple[Any, int]:
    """Pad ``batch`` to a multiple of ``divisor`` with copies of its first rows that carry no loss.

    # CPMöbius: the Coach trains on as many rows as there are kept problems, rarely a multiple of
    # the micro-batch size; padded rows get response_mask 0 and advantage 0, so they add nothing
    # to the token-mean loss, the KL term or the entropy term, and their outputs are dropped.

    Returns:
        ``(padded, pad_size)``.
    """
    from verl.protocol import pad_dataproto_to_divisor

    padded, pad_size = pad_dataproto_to_divisor(batch, divisor)
    if pad_size:
        for key in ("response_mask", "advantages"):
            if key in padded.batch.keys():
                padded.batch[key][len(batch) :] = 0
    return padded, pad_size


def worker_input(batch: Any, default_temperature: float, **metadata: Any) -> Any:
    """The no-padding `TensorDict` of ``batch`` for verl's engine workers, with ``metadata``.

    Args:
        batch: `DataProto` with the rollout tensors (and ``old_log_probs``, ``ref_log_prob``,
            ``advantages`` when present).
        default_temperature: the rollout temperature, when ``batch.meta_info`` has none.
        metadata: non-tensor entries for the worker (``calculate_entropy``, ``compute_loss``, ...).
    """
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    keys = ["input_ids", "attention_mask", "position_ids", "prompts", "responses", "response_mask"]
    extra = [k for k in ("old_log_probs", "ref_log_prob", "advantages") if k in batch.batch.keys()]
    td = batch.select(batch_keys=keys + extra).to_tensordict()
    td = left_right_2_no_padding(td)
    # The logit temperature of log-prob and loss computations: the one the rollouts were sampled at.
    temperature = float(batch.meta_info.get("temperature", default_temperature))
    tu.assign_non_tensor(td, temperature=max(temperature, 1e-6) if temperature > 0 else 1.0, **metadata)
    return td


def scalar(value: Any) -> float:
    """One of verl's metric values as a float: the mean of a list or tensor (NaN for an empty list)."""
    if isinstance(value, (list, tuple)):
        values = [float(v) for v in value]
        return float(np.mean(values)) if values else float("nan")
    if isinstance(value, torch.Tensor):
        return float(value.float().mean().item())
    return float(value)


def synthetic_rollouts(
    prompt_lengths: Sequence[int],
    response_lengths: Sequence[int],
    vocab_size: int,
    prompt_width: int | None = None,
    response_width: int | None = None,
    pad_token_id: int = 0,
    seed: int = 0,
) -> Any:
    """Random-token rollouts in the layout `Policy.generate` returns, for the log-prob and update passes.

    Token ids are drawn uniformly from ``[1, vocab_size)`` (the model's output does not matter for
    timing or for comparing two ways of computing the same pass); each row's prompt is left-padded
    to ``prompt_width`` and its response right-padded to ``response_width``.

    Args:
        prompt_lengths: B prompt lengths, tokens, each >= 1.
        response_lengths: B response lengths, tokens, each >= 1.
        vocab_size: the model's vocabulary size.
        prompt_width: columns of ``prompts`` (default: the longest prompt).
        response_width: columns of ``responses`` (default: the longest response).
        pad_token_id: the id written into padding.
        seed: seed of the token draw.

    Returns:
        `DataProto` with ``prompts`` (B, P), ``responses`` / ``response_mask`` (B, R), ``input_ids``,
        ``attention_mask``, ``position_ids`` (B, P + R) (positions count from 0 at each row's first
        prompt token, as verl's agent loop writes them) and a non-tensor ``uid`` (one per row).

    Raises:
        ValueError: for mismatched lists, a length < 1, or a length over its width.
    """
    if len(prompt_lengths) != len(response_lengths) or not prompt_lengths:
        raise ValueError("synthetic_rollouts: need as many prompt lengths as response lengths, at least one")
    if min(prompt_lengths) < 1 or min(response_lengths) < 1:
        raise ValueError("synthetic_rollouts: every prompt and response needs at least one token")
    width_p = int(prompt_width or max(prompt_lengths))
    width_r = int(response_width or max(response_lengths))
    if max(prompt_lengths) > width_p or max(response_lengths) > width_r:
        raise ValueError(f"synthetic_rollouts: lengths exceed the widths ({width_p} prompt, {width_r} response tokens)")
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, vocab_size, (len(prompt_lengths), width_p + width_r), generator=generator).tolist()
    prompts = [row[width_p - int(n) : width_p] for row, n in zip(tokens, prompt_lengths)]
    responses = [row[width_p : width_p + int(n)] for row, n in zip(tokens, response_lengths)]
    return token_rollouts(prompts, responses, pad_token_id, width_p, width_r)


def token_rollouts(
    prompt_ids: Sequence[Sequence[int]],
    response_ids: Sequence[Sequence[int]],
    pad_token_id: int,
    prompt_width: int | None = None,
    response_width: int | None = None,
) -> Any:
    """Given prompts and responses as token ids, laid out as `Policy.generate` returns its rollouts, so that
    `Policy.compute_log_probs` scores responses the policy did not sample (teacher forcing).

    Args:
        prompt_ids: B prompts, token ids as the agent loop renders them (`Policy.prompt_token_ids`), each >= 1.
        response_ids: B responses, token ids (a stop token at the end, if the response ends there), each >= 1.
        pad_token_id: the id written into padding.
        prompt_width: columns of ``prompts`` (default: the longest prompt).
        response_width: columns of ``responses`` (default: the longest response).

    Returns:
        `DataProto` with ``prompts`` (B, P) left-padded, ``responses`` / ``response_mask`` (B, R)
        right-padded, ``input_ids``, ``attention_mask``, ``position_ids`` (B, P + R) (positions count from
        0 at each row's first prompt token, as verl's agent loop writes them) and a non-tensor ``uid``
        (one per row).

    Raises:
        ValueError: for mismatched lists, an empty prompt or response, or one longer than its width.
    """
    from verl import DataProto

    if len(prompt_ids) != len(response_ids) or not prompt_ids:
        raise ValueError("token_rollouts: need as many prompts as responses, at least one")
    if min(map(len, prompt_ids)) < 1 or min(map(len, response_ids)) < 1:
        raise ValueError("token_rollouts: every prompt and response needs at least one token")
    width_p = int(prompt_width or max(map(len, prompt_ids)))
    width_r = int(response_width or max(map(len, response_ids)))
    if max(map(len, prompt_ids)) > width_p or max(map(len, response_ids)) > width_r:
        raise ValueError(f"token_rollouts: lengths exceed the widths ({width_p} prompt, {width_r} response tokens)")
    rows = len(prompt_ids)
    input_ids = torch.full((rows, width_p + width_r), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros(rows, width_p + width_r, dtype=torch.long)  # (B, P + R)
    for i, (prompt, response) in enumerate(zip(prompt_ids, response_ids)):
        start, end = width_p - len(prompt), width_p + len(response)
        input_ids[i, start:end] = torch.tensor([*prompt, *response], dtype=torch.long)
        attention_mask[i, start:end] = 1
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return DataProto.from_dict(
        tensors={
            "prompts": input_ids[:, :width_p],
            "responses": input_ids[:, width_p:],
            "response_mask": attention_mask[:, width_p:],
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
        },
        non_tensors={"uid": object_array([f"row{i}" for i in range(rows)])},
    )
