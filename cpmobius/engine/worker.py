"""The verl worker each policy's worker group runs: verl's `ActorRolloutRefWorker`, CPU-ready.

The only additions: before verl builds the training engine, the CPU fixes of
`cpmobius.engine.cpu_platform.install_cpu_engine_fixes` are installed in the worker process
(a no-op on any other platform), and the library notices of `cpmobius.engine.quiet` are silenced.
With ``CPMOBIUS_PROFILE_DIR`` set (`benchmarks/bench_step_gpu.py --profile-startup` sets it), the model build is profiled
(cProfile) and its 40 costliest calls by cumulative time go to ``<dir>/init_model_<pid>.txt``.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats

from verl.single_controller.base.decorator import Dispatch, register
from verl.workers.engine_workers import ActorRolloutRefWorker

from cpmobius.engine.cpu_platform import install_cpu_engine_fixes
from cpmobius.engine.quiet import quiet_policy_worker


class PolicyWorker(ActorRolloutRefWorker):
    """`ActorRolloutRefWorker` that installs the CPU engine fixes before building its models."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self):
        install_cpu_engine_fixes()
        quiet_policy_worker()
        profile_dir = os.environ.get("CPMOBIUS_PROFILE_DIR")
        if not profile_dir:
            return super().init_model()
        profiler = cProfile.Profile()
        try:
            return profiler.runcall(super().init_model)
        finally:
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
            os.makedirs(profile_dir, exist_ok=True)
            with open(os.path.join(profile_dir, f"init_model_{os.getpid()}.txt"), "w") as f:
                f.write(text.getvalue())
