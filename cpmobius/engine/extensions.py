"""What verl 0.9.1 lacks, added through its own extension points (never by editing verl).

Importing this module registers, in the importing process:

- a CPU platform with `verl.plugin.platform.PlatformRegistry` (`cpu_platform`), selected with
  ``VERL_PLATFORM=cpu``;
- an HF-transformers rollout: the replica (`hf_replica`) with `RolloutReplicaRegistry` under the
  name ``hf``, the in-worker adapter (`hf_adapter`) in verl's rollout-class registry under
  ``("hf", "async")``; both drive the generation server of `hf_server`;
- verl's vLLM rollout with per-policy server names (`vllm_rollout`), in place of verl's entries;
- a single-turn agent loop that honours ``rollout.repetition_penalty`` (`agent_loop`);
- a filter on verl's per-process "Platform override" notice (`quiet`).

verl imports it in every Ray worker when ``VERL_USE_EXTERNAL_MODULES=cpmobius.engine.extensions``
is set in the workers' environment (`cpmobius.engine.config.worker_env_vars` sets it), from inside
``import verl``: possibly while the module whose import started verl's is still half-initialised.
So it takes no names from a module that imports verl at its top (the registering imports are plain
``import`` statements), and the HF replica and adapter, which do, are found by verl through the
loader and the class path below, when it needs them.
"""

from verl.workers.rollout import base as _rollout_base
from verl.workers.rollout.replica import RolloutReplicaRegistry

import cpmobius.engine.agent_loop  # noqa: F401  (registers cpmobius_single_turn)
import cpmobius.engine.cpu_platform  # noqa: F401  (registers PlatformCPU)
from cpmobius.engine.quiet import quiet_every_process
from cpmobius.engine.vllm_rollout import load_policy_vllm_replica  # vllm_rollout imports verl only when asked

quiet_every_process()


def load_hf_replica() -> type:
    """Loader for `RolloutReplicaRegistry.register("hf", ...)`: `cpmobius.engine.hf_replica.HFRolloutReplica`."""
    from cpmobius.engine.hf_replica import HFRolloutReplica

    return HFRolloutReplica


RolloutReplicaRegistry.register("hf", load_hf_replica)
_rollout_base._ROLLOUT_REGISTRY[("hf", "async")] = "cpmobius.engine.hf_adapter.HFServerAdapter"
# verl's vLLM rollout, with per-policy server names (same behaviour when no policy is named).
RolloutReplicaRegistry.register("vllm", load_policy_vllm_replica)
_rollout_base._ROLLOUT_REGISTRY[("vllm", "async")] = "cpmobius.engine.vllm_rollout.PolicyvLLMServerAdapter"
