"""verl's single-turn agent loop, honouring the rollout config's repetition penalty and the model's
end-of-turn tokens.

verl 0.9.1's `AgentLoopWorker` sends every request with ``repetition_penalty=1.0`` whatever the
rollout config says, so the released scripts' 1.05 (7B-Instruct, OctoThinker) would silently be
1.0; and it sends no stop tokens, so vLLM stops only at the generation config's EOS, which for a
base Qwen2.5-Math model under the chat template is not the token that ends its turn
(`cpmobius.engine.stop_tokens`). This loop, registered with verl's agent-loop registry as
``cpmobius_single_turn`` and selected by ``rollout.agent.default_agent_loop``, puts both back;
nothing else changes.
"""

from __future__ import annotations

import functools
from typing import Any

from verl.experimental.agent_loop.agent_loop import register
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

from cpmobius.engine.stop_tokens import stop_token_ids

AGENT_LOOP_NAME = "cpmobius_single_turn"


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
        stops = set(stop_token_ids(self.tokenizer, generation_config)) | set(sampling_params.get("stop_token_ids") or [])
        sampling_params["stop_token_ids"] = sorted(stops)
        return await super().run(sampling_params, **kwargs)
