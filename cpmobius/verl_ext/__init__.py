"""What verl 0.9.1 lacks, added through its own extension points (never by editing verl).

Importing this package registers, in the importing process:

- a CPU platform with `verl.plugin.platform.PlatformRegistry` (`cpu_platform`), selected with
  ``VERL_PLATFORM=cpu``;
- an HF-transformers rollout (`hf_rollout`): the replica with `RolloutReplicaRegistry` under the name
  ``hf``, the in-worker adapter in verl's rollout-class registry under ``("hf", "async")``;
- verl's vLLM rollout with per-policy server names (`vllm_rollout`), in place of verl's entries;
- a single-turn agent loop that honours ``rollout.repetition_penalty`` (`agent_loop`).

verl imports it in every Ray worker when ``VERL_USE_EXTERNAL_MODULES=cpmobius.verl_ext`` is set in
the workers' environment (`cpmobius.config.ray_runtime_env` sets it).
"""

from verl.workers.rollout import base as _rollout_base
from verl.workers.rollout.replica import RolloutReplicaRegistry

from cpmobius.verl_ext.cpu_platform import PlatformCPU, install_cpu_engine_fixes, is_cpu_platform
from cpmobius.verl_ext.hf_rollout import HFGenerationServer, HFRolloutReplica, HFServerAdapter, load_hf_replica
from cpmobius.verl_ext.vllm_rollout import load_policy_vllm_replica
from cpmobius.verl_ext import agent_loop as _agent_loop  # noqa: F401  (registers cpmobius_single_turn)

EXTERNAL_MODULE = "cpmobius.verl_ext"

RolloutReplicaRegistry.register("hf", load_hf_replica)
_rollout_base._ROLLOUT_REGISTRY[("hf", "async")] = "cpmobius.verl_ext.hf_rollout.HFServerAdapter"
# verl's vLLM rollout, with per-policy server names (same behaviour when no policy is named).
RolloutReplicaRegistry.register("vllm", load_policy_vllm_replica)
_rollout_base._ROLLOUT_REGISTRY[("vllm", "async")] = "cpmobius.verl_ext.vllm_rollout.PolicyvLLMServerAdapter"

__all__ = [
    "EXTERNAL_MODULE",
    "HFGenerationServer",
    "HFRolloutReplica",
    "HFServerAdapter",
    "PlatformCPU",
    "install_cpu_engine_fixes",
    "is_cpu_platform",
]
