"""The verl worker each policy's worker group runs: verl's `ActorRolloutRefWorker`, CPU-ready.

The only additions: before verl builds the training engine, the CPU fixes of
`cpmobius.engine.cpu_platform.install_cpu_engine_fixes` are installed in the worker process
(a no-op on any other platform), and the library notices of `cpmobius.engine.quiet` are silenced.
"""

from __future__ import annotations

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
        return super().init_model()
