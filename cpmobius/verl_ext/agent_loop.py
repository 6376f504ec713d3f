"""verl's single-turn agent loop, honouring ``rollout.repetition_penalty``.

verl 0.9.1's `AgentLoopWorker` sends every request with ``repetition_penalty=1.0`` whatever the
rollout config says, so the released scripts' 1.05 (7B-Instruct, OctoThinker) would silently be
1.0. This loop, registered with verl's agent-loop registry as ``cpmobius_single_turn`` and selected
by ``rollout.agent.default_agent_loop``, puts the configured value back; nothing else changes.
"""

from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.agent_loop import register
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

AGENT_LOOP_NAME = "cpmobius_single_turn"


@register(AGENT_LOOP_NAME)
class ConfiguredSingleTurnAgentLoop(SingleTurnAgentLoop):
    """`SingleTurnAgentLoop` with the rollout config's repetition penalty."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any):
        sampling_params = dict(sampling_params)
        sampling_params["repetition_penalty"] = float(self.rollout_config.repetition_penalty)
        return await super().run(sampling_params, **kwargs)
