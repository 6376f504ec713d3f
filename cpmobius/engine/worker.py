"""The verl worker each policy's worker group runs: verl's `ActorRolloutRefWorker`, CPU-ready.

The only additions: before verl builds the training engine, the CPU fixes of
`cpmobius.engine.cpu_platform.install_cpu_engine_fixes` are installed in the worker process
(a no-op on any other platform), the output layer stays in the root FSDP2 unit when verl's fused
output kernels are on (`keep_fused_output_layer_in_root_unit`), ``attn_implementation=sdpa_varlen`` is
known (`cpmobius.engine.varlen_attention`), and the library notices of
`cpmobius.engine.quiet` are silenced.
With ``CPMOBIUS_PROFILE_DIR`` set (`benchmarks/bench_step_gpu.py --profile-startup` sets it), the model build
is profiled (cProfile) and its 40 costliest calls by cumulative time go to ``<dir>/init_model_<pid>.txt``;
with ``CPMOBIUS_PROFILE_PASSES`` set, one call of each model pass is (`cpmobius.engine.pass_profile`).
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats

from verl.single_controller.base.decorator import Dispatch, register
from verl.utils import fsdp_utils
from verl.workers.engine_workers import ActorRolloutRefWorker

from cpmobius.engine.cpu_platform import install_cpu_engine_fixes
from cpmobius.engine.pass_profile import profile_passes
from cpmobius.engine.quiet import quiet_policy_worker
from cpmobius.engine.varlen_attention import register as register_varlen_attention


def keep_fused_output_layer_in_root_unit() -> None:
    """Leave the output layer to the model's root FSDP2 unit when verl's fused output kernels are on.

    verl wraps an untied ``lm_head`` (Qwen2.5-Math-1.5B's, Qwen2.5-7B's) as its own FSDP2 unit, which
    gathers its weight only when ``lm_head`` itself is called. verl's fused output layer
    (``model.use_fused_kernels``: log-probs and entropy from the hidden states in chunks) never calls it:
    it multiplies the hidden states by ``lm_head.weight`` directly, which is then still a shard (a
    DTensor) and the pass fails with "aten.mm.default got mixed torch.Tensor and DTensor". Kept in the
    root unit, the weight is gathered for the whole forward and its gradient reduced with the root's.
    Models without the fused forward (verl marks them with ``_verl_fused_kernels_backend``) keep verl's
    wrapping. Idempotent; patches `verl.utils.fsdp_utils` in the calling process only.
    """
    select = fsdp_utils._select_fsdp2_wrap_targets
    if getattr(select, "keeps_fused_output_layer", False):
        return

    def select_wrap_targets(model, layer_classes):
        targets = select(model, layer_classes)
        if getattr(model, "_verl_fused_kernels_backend", None) is None:
            return targets
        head = model.get_output_embeddings()
        return [module for module in targets if module is not head]

    select_wrap_targets.keeps_fused_output_layer = True
    fsdp_utils._select_fsdp2_wrap_targets = select_wrap_targets


class PolicyWorker(ActorRolloutRefWorker):
    """`ActorRolloutRefWorker` that installs the CPU engine fixes before building its models."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self):
        install_cpu_engine_fixes()
        keep_fused_output_layer_in_root_unit()
        register_varlen_attention()
        quiet_policy_worker()
        profile_dir = os.environ.get("CPMOBIUS_PROFILE_DIR")
        if not profile_dir:
            super().init_model()
            profile_passes(self)
            return
        profiler = cProfile.Profile()
        try:
            profiler.runcall(super().init_model)
            profile_passes(self)
        finally:
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
            os.makedirs(profile_dir, exist_ok=True)
            with open(os.path.join(profile_dir, f"init_model_{os.getpid()}.txt"), "w") as f:
                f.write(text.getvalue())
