"""Each policy's verl config: one verl base plus per-policy deltas, validated before any worker starts.

The main config (`configs/cpmobius.yaml`, composed by `cpmobius.config.compose_config`) holds verl 0.9.1's
own ``ppo_trainer`` tree, overrides verl's unsafe defaults, and holds one delta per policy (``coach.verl``,
``player.verl``) shaped like ``actor_rollout_ref``. Each policy's full verl config is the base with its delta
merged over ``actor_rollout_ref`` (`policy_config`), because verl's actor/rollout nodes interpolate absolute
paths (``actor_rollout_ref.rollout.n``): a grafted second copy of them would silently read the other policy's
values.

Checked before Ray or any worker starts (`validate_policy_config`; the run's own ``trainer``/``data`` keys:
`cpmobius.config.validate_run_config`): verl's dataclasses per policy, and that each policy's prompt + response
budget fits its model's context (Qwen2.5-Math has 4,096 tokens; read from the model folder's ``config.json``
when it is there).
"""

from __future__ import annotations

import copy
import importlib.util
import os
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from cpmobius.config import ConfigError, validate_run_config
from cpmobius.config.value_ranges import field_type_problem, range_problem
from cpmobius.engine.model_context import context_problem
from cpmobius.engine.naming import POLICY_NAME_KEY, validate_policy_name

POLICY_NAMES = ("coach", "player")
EXTERNAL_MODULE = "cpmobius.engine.extensions"
SHARED_LIGER_KEY = "actor_rollout_ref.model.use_liger"  # the GPU backends set it (configs/cuda_fast_path.yaml)


def policy_config(cfg: DictConfig, name: str) -> DictConfig:
    """The full, resolved verl config of one policy: base with ``cfg[name].verl`` over ``actor_rollout_ref``.

    Args:
        cfg: the composed main config.
        name: "coach" or "player" (any key of ``cfg`` that has a ``verl`` delta).

    Returns:
        A resolved DictConfig shaped like verl's ``ppo_trainer`` (what `LLMServerManager`, the agent
        loop and the workers read), with ``actor_rollout_ref.rollout.custom.policy_name = name`` so
        its rollout servers get their own names.

    Raises:
        ConfigError: when ``cfg`` has no ``{name}.verl`` delta.
    """
    validate_policy_name(name)
    if name not in cfg or "verl" not in cfg[name]:
        raise ConfigError(f"{name}.verl: missing; every policy needs a delta over actor_rollout_ref")
    # The delta's interpolations (``lr: ${actor_rollout_ref.actor.optim.lr}``) are resolved against
    # the shared base first: merged unresolved, they would point at themselves.
    delta = OmegaConf.to_container(cfg[name].verl, resolve=True)
    full = copy.deepcopy(cfg)
    OmegaConf.set_struct(full, False)
    full.actor_rollout_ref = OmegaConf.merge(full.actor_rollout_ref, delta)
    custom = dict(full.actor_rollout_ref.rollout.get("custom", None) or {})
    custom[POLICY_NAME_KEY] = name
    full.actor_rollout_ref.rollout.custom = custom
    full.trainer.experiment_name = f"{cfg.trainer.experiment_name}/{name}"
    OmegaConf.resolve(full)
    for other in POLICY_NAMES:
        full.pop(other, None)
    return full


def check_context_fits(pcfg: DictConfig, name: str = "") -> None:
    """The policy's prompt + response budget (and the Coach warm-up's length) must fit its model's context
    (`cpmobius.engine.model_context.context_problem`).

    Raises:
        ConfigError: naming the length keys, their sum, the model's context and the overrides that make it fit.
    """
    problem = context_problem(pcfg, name)
    if problem:
        raise ConfigError(problem)


def validate_policy_config(pcfg: DictConfig, name: str = "", cfg: Optional[DictConfig] = None) -> None:
    """Build verl's dataclasses for the policy's actor, reference and rollout (their checks run).

    ``cfg``: the run's composed config (``pcfg`` is resolved), where verl's copies of one key into another live
    (``actor.rollout_n: ${oc.select:actor_rollout_ref.rollout.n,1}``): a wrong value is then named with the key
    the user set, not only the key that copies it.

    Also checks the run's ``trainer``/``data`` keys (`validate_run_config`), and what verl only
    checks inside a worker: micro-batch sizes when dynamic batch size is off, positive prompt and
    response lengths, and that the rollout's parallel sizes divide the policy's device count.

    Raises:
        ConfigError: naming the key and, through the chained cause, verl's own message.
    """
    from verl.utils.config import omega_conf_to_dataclass

    validate_run_config(pcfg)

    prefix = f"{name}.verl" if name else "actor_rollout_ref"
    arr = pcfg.actor_rollout_ref
    for part in ("actor", "rollout"):
        try:
            built = omega_conf_to_dataclass(arr[part])
        except Exception as error:  # verl raises ValueError/AssertionError/TypeError
            raise ConfigError(f"{prefix}.{part}: {error}") from error
        problem = field_type_problem(built, part, prefix, cfg)  # verl keeps "fast" for a float until a worker fails
        if problem:
            raise ConfigError(problem)
    problem = range_problem(arr, prefix)
    if problem:
        raise ConfigError(problem)
    if not arr.actor.use_dynamic_bsz:
        for key, value in (
            ("actor.ppo_micro_batch_size_per_gpu", arr.actor.ppo_micro_batch_size_per_gpu),
            ("rollout.log_prob_micro_batch_size_per_gpu", arr.rollout.log_prob_micro_batch_size_per_gpu),
            ("ref.log_prob_micro_batch_size_per_gpu", arr.ref.log_prob_micro_batch_size_per_gpu),
        ):
            if value is None or int(value) < 1:
                raise ConfigError(f"{prefix}.{key}: must be a positive integer when use_dynamic_bsz is false")
    for key in ("prompt_length", "response_length"):
        value = arr.rollout[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{prefix}.rollout.{key}: must be a positive number of tokens, got {value!r}")
    devices = int(pcfg.trainer.n_gpus_per_node) * int(pcfg.trainer.nnodes)
    rollout_world = (
        int(arr.rollout.tensor_model_parallel_size)
        * int(arr.rollout.data_parallel_size)
        * int(arr.rollout.pipeline_model_parallel_size)
    )
    if devices % rollout_world:
        raise ConfigError(
            f"{prefix}.rollout.tensor_model_parallel_size: the rollout world size {rollout_world} must divide "
            f"trainer.n_gpus_per_node * trainer.nnodes = {devices}"
        )
    if arr.rollout.name == "vllm" and not (
        arr.rollout.free_cache_engine and arr.rollout.get("enable_sleep_mode", True)
    ):
        # CPMöbius: two vLLM engines share every GPU; the one not in use must give its memory back.
        raise ConfigError(
            f"{prefix}.rollout.free_cache_engine: the Coach's and the Player's vLLM engines share the GPUs, "
            "so each must sleep when the other runs (free_cache_engine=true, enable_sleep_mode=true)"
        )
    if arr.rollout.name == "hf" and rollout_world != 1:
        raise ConfigError(f"{prefix}.rollout.tensor_model_parallel_size: rollout.name=hf needs parallel sizes of 1")


def check_kernel_packages(cfg: DictConfig, configs: dict[str, DictConfig]) -> None:
    """Check that the packages the policies' model kernels import are installed on this machine: verl
    imports Liger (``model.use_liger``) only inside a worker's model build, minutes into a run. Called at a
    run's start, not when a config is composed (``--cfg job`` on a login node without the GPU stack works).

    Args:
        cfg: the composed main config (which key turns Liger on: a policy's delta or the shared one).
        configs: the policies' verl configs (`build_policy_configs`).

    Raises:
        ConfigError: naming the key, the missing packages and the overrides that turn Liger off, as typed.
    """
    missing = [package for package in ("liger_kernel", "triton") if importlib.util.find_spec(package) is None]
    using = [name for name, pcfg in configs.items() if pcfg.actor_rollout_ref.model.get("use_liger", False)]
    if not missing or not using:
        return
    fixes = []
    for name in using:  # a policy's delta that sets it wins over the shared actor_rollout_ref key
        delta = OmegaConf.select(cfg, f"{name}.verl.model")
        key = f"{name}.verl.model.use_liger" if delta is not None and "use_liger" in delta else SHARED_LIGER_KEY
        fixes += [] if f"{key}=false" in fixes else [f"{key}=false"]
    raise ConfigError(
        f"{using[0]}.verl.model.use_liger: Liger's kernels need {' and '.join(missing)}, not installed here "
        f"(`pip install -e '.[gpu]'` brings both on a CUDA machine; without them pass {' '.join(fixes)})"
    )


def build_policy_configs(cfg: DictConfig) -> dict[str, DictConfig]:
    """`policy_config` for the Coach and the Player, each validated (`validate_policy_config`) and
    checked against its model's context (`check_context_fits`).

    Raises:
        ConfigError: naming the first bad key.
    """
    configs = {name: policy_config(cfg, name) for name in POLICY_NAMES}
    for name, pcfg in configs.items():
        validate_policy_config(pcfg, name, cfg)
        check_context_fits(pcfg, name)
    return configs


def worker_env_vars(cfg: DictConfig) -> dict[str, str]:
    """Environment every Ray worker needs: our verl extensions, the platform, quiet tokenizers, and on a
    CPU run (``backend.portable_kernels``) the kernels that give the same figures on any x86-64 CPU."""
    env = {
        "VERL_USE_EXTERNAL_MODULES": EXTERNAL_MODULE,
        "TOKENIZERS_PARALLELISM": "false",
        "NCCL_DEBUG": "WARN",
        "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "WARN"),  # INFO shows vLLM's start-up phases
        # verl warns in every worker that engines it was not asked for (megatron, veomni, ...) are missing.
        "PYTHONWARNINGS": ",".join(
            filter(None, [os.environ.get("PYTHONWARNINGS"), "ignore::UserWarning:verl.workers.engine"])
        ),
    }
    for name in ("CPMOBIUS_PROFILE_DIR", "CPMOBIUS_PROFILE_PASSES"):  # profiles of the model build and passes
        if os.environ.get(name):
            env[name] = os.environ[name]
    platform = cfg.backend.platform
    if platform:
        env["VERL_PLATFORM"] = str(platform)
    env.update(determinism_env_vars(cfg))
    if cfg.backend.get("portable_kernels", False):
        from cpmobius.cpu_kernels import PORTABLE_KERNELS

        env.update(PORTABLE_KERNELS)  # CPMöbius: one set of figures on any x86-64 CPU (cpmobius/cpu_kernels.py)
    return env


def determinism_env_vars(cfg: DictConfig) -> dict[str, str]:
    """What verl's ``main_ppo.run_ppo`` sets before ``ray.init`` when a rollout asks for
    ``full_determinism``: ``VERL_FULL_DETERMINISM``, ``PYTHONHASHSEED`` and, for vLLM,
    ``VLLM_BATCH_INVARIANT`` (batch-invariant kernels). Empty when no policy asks for it."""
    rollouts = [policy_config(cfg, name).actor_rollout_ref.rollout for name in POLICY_NAMES]
    deterministic = [r for r in rollouts if r.get("full_determinism", False)]
    if not deterministic:
        return {}
    env = {"VERL_FULL_DETERMINISM": "1", "PYTHONHASHSEED": str(int(deterministic[0].get("seed", 0) or 0))}
    if any(r.name == "vllm" for r in deterministic):
        env["VLLM_BATCH_INVARIANT"] = "1"
    return env


def ray_init_kwargs(cfg: DictConfig) -> dict[str, Any]:
    """Arguments for `ray.init`, verl's runtime env plus ours (as verl's ``main_ppo.run_ppo`` does).

    With ``RAY_ADDRESS`` set (``auto`` or ``host:port``) the driver joins that cluster; without it, it starts
    its own, whatever other cluster runs on the machine.
    """
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    runtime_env = get_ppo_ray_runtime_env()
    env_vars = dict(runtime_env.get("env_vars", {}))
    env_vars.update(worker_env_vars(cfg))  # after verl's: its "0" defaults for the determinism flags are replaced
    runtime_env["env_vars"] = env_vars
    address = os.environ.get("RAY_ADDRESS")
    if address:
        # Join a running (multi-node) cluster: its resources are its own, not ours to declare.
        return {"address": address, "runtime_env": runtime_env}
    kwargs: dict[str, Any] = {
        # Without RAY_ADDRESS, a cluster of our own: a plain ray.init() would join whichever cluster
        # /tmp/ray/ray_current_cluster names (a `ray start` left running, another test's cluster) and then
        # refuse our num_cpus/num_gpus.
        "address": "local",
        "runtime_env": runtime_env,
        "include_dashboard": False,
        # Ray prestarts idle Python workers at start-up without the job's runtime env, so no actor of
        # ours can use them: on a small machine they only take CPU from the start (about 3 s on 2 cores).
        "_system_config": {"enable_worker_prestart": False, "prestart_worker_first_driver": False},
    }
    if cfg.backend.get("ray_num_cpus") is not None:
        kwargs["num_cpus"] = int(cfg.backend.ray_num_cpus)
    if cfg.backend.get("ray_num_gpus") is not None:
        kwargs["num_gpus"] = int(cfg.backend.ray_num_gpus)
    return kwargs


def apply_env_to_driver(cfg: DictConfig) -> None:
    """Set `worker_env_vars` in the driver process too, before verl picks its platform."""
    for key, value in worker_env_vars(cfg).items():
        os.environ.setdefault(key, value)
