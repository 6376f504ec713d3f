"""verl's single-turn agent loop, honouring the rollout config's repetition penalty, the model's
end-of-turn tokens, a per-row greedy flag in validation, and the prompt length.

verl 0.9.1's `AgentLoopWorker` sends every request with ``repetition_penalty=1.0`` whatever the
rollout config says, so the released scripts' 1.05 (7B-Instruct, OctoThinker) would silently be
1.0; and it sends no stop tokens, so vLLM stops only at the generation config's EOS, which for a
base Qwen2.5-Math model under the chat template is not the token that ends its turn
(`cpmobius.engine.stop_tokens`). This loop, registered with verl's agent-loop registry as
``cpmobius_single_turn`` and selected by ``rollout.agent.default_agent_loop``, puts both back.

Two more faults of verl 0.9.1 fixed here:
- its per-row greedy override (``__do_sample__``) is ignored when ``validate=True``, so a "greedy"
  validation was sampled at ``val_kwargs.temperature``. Rows flagged ``GREEDY_KEY`` are decoded
  greedily (temperature 0, top-p 1, top-k off) whatever the pass, and every row reports the values
  it was sampled with (``SAMPLING_KEYS``), so what is logged is what was used;
- a prompt longer than ``rollout.prompt_length`` is cut from the left with a warning (the system
  turn and the start of the problem are lost); here it is a `PromptTooLongError`. The driver
  checks lengths before sending (`Policy.generate`), so this is the last line of defence.
"""

from __future__ import annotations

import functools
from typing import Any

from verl.experimental.agent_loop.agent_loop import register
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

from cpmobius.engine.stop_tokens import stop_token_ids

AGENT_LOOP_NAME = "cpmobius_single_turn"
GREEDY_KEY = "cpmobius_greedy"  # per-row bool in the batch's non-tensor fields
SAMPLING_KEYS = ("temperature", "top_p", "top_k")  # reported per row as f"sampling_{key}"


class PromptTooLongError(ValueError):
    """A rendered prompt has more tokens than ``rollout.prompt_length`` (verl would cut it silently)."""


@functools.lru_cache(maxsize=8)
def _generation_config(model_path: str) -> Any:
    from verl.utils.fs import copy_to_local
    from verl.utils.model import get_generation_config

    return get_generation_config(copy_to_local(model_path))


@register(AGENT_LOOP_NAME)
class ConfiguredSingleTurnAgentLoop(SingleTurnAgentLoop):
    """`SingleTurnAgentLoop` with the rollout config's repetition penalty and the model's stop tokens."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any):
        sampling_params = dict(sampling_params)
        # CPMöbius: verl sends 1.0 and no stop tokens (module docstring).
        sampling_params["repetition_penalty"] = float(self.rollout_config.repetition_penalty)
        generation_config = _generation_config(str(self.config.actor_rollout_ref.model.path))
        stops = set(stop_token_ids(self.tokenizer, generation_config)) | set(
            sampling_params.get("stop_token_ids") or []
        )
        sampling_params["stop_token_ids"] = sorted(stops)
        if bool(kwargs.pop(GREEDY_KEY, False)):
            # CPMöbius: greedy means greedy in validation too (verl ignores __do_sample__ there).
            sampling_params.update(temperature=0.0, top_p=1.0, top_k=-1)
        output = await super().run(sampling_params, **kwargs)
        for key in SAMPLING_KEYS:
            output.extra_fields[f"sampling_{key}"] = float(sampling_params[key])
        return output

    def _cap_text_prompt_length(self, prompt_ids: list[int]) -> list[int]:
        # CPMöbius: never cut a prompt (verl left-truncates with a warning).
        limit = int(self.rollout_config.prompt_length)
        if len(prompt_ids) > limit:
            raise PromptTooLongError(
                f"a prompt of {len(prompt_ids)} tokens exceeds rollout.prompt_length={limit} "
                "(data.max_prompt_length); verl would cut it from the left"
            )
        return prompt_ids
