"""One policy (Coach or Player) on verl 0.9.1: generate, log-probs, update, save/load, (de)activate.

Everything engine-side in this project goes through `Policy`; the loop outside it sees token
tensors in verl's padded `DataProto` layout and plain metrics dicts. Per policy:

- a worker group of `PolicyWorker` (verl's `ActorRolloutRefWorker`: FSDP actor, frozen reference
  for the KL loss, rollout adapter) on the resource pool both policies share;
- its rollout replicas through verl's `LLMServerManager` (HF or vLLM by ``rollout.name``), whose
  server actors carry the policy's name (`cpmobius.engine.naming`);
- verl's `CheckpointEngineManager` for weight sync and sleep/wake;
- verl's `AgentLoopManager` with no reward workers (rewards are computed by the loop).
How the policies share the devices (one awake rollout engine, the start-up order): `cpmobius.engine.sharing`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

import ray
import torch
from omegaconf import DictConfig, OmegaConf

from cpmobius.clock import OpLog
from cpmobius.engine.agent_loop import GREEDY_KEY
from cpmobius.engine.batches import pad_rows, prompt_batch, row_divisor, sampling_used, scalar, worker_input
from cpmobius.engine.prompt_tokens import PromptTokens
from cpmobius.engine.varlen_attention import write_standard_attention
from cpmobius.prompts import Messages

if TYPE_CHECKING:
    from cpmobius.engine.sharing import EngineGuard

logger = logging.getLogger(__name__)


class Policy:
    """One trained policy on verl.

    Args:
        name: "coach" or "player"; prefixes its Ray actors and metrics.
        config: the policy's full verl config (`cpmobius.engine.config.policy_config`).
        resource_pool: the shared `RayResourcePool` (`make_resource_pool`).
        guard: the `EngineGuard` shared by all policies of the run.
    """

    def __init__(self, name: str, config: DictConfig, resource_pool: Any, guard: "EngineGuard") -> None:
        self.name = name
        self.config = config
        self.resource_pool = resource_pool
        self.guard = guard
        self.global_steps = 0
        self.generation_calls = 0  # names requests deterministically (rollout.full_determinism)
        self.worker_group = None
        self._model_init: Optional[tuple[float, list[Any]]] = None  # (start, Ray refs) until wait_models
        self.server_manager = None
        self.checkpoint_manager = None
        self.agent_loop = None
        self._prompt_tokens: Optional[PromptTokens] = None

    @property
    def ops(self) -> OpLog:
        """Wall-clock intervals of this policy's operations (`cpmobius.engine.timing`)."""
        if getattr(self, "_ops", None) is None:
            self._ops = OpLog()
        return self._ops

    # ------------------------------------------------------------------ tokenizer

    @property
    def model_config(self) -> Any:
        """verl's `HFModelConfig` of this policy (tokenizer, HF config, generation config)."""
        if getattr(self, "_model_config", None) is None:
            from verl.utils.config import omega_conf_to_dataclass

            self._model_config = omega_conf_to_dataclass(self.config.actor_rollout_ref.model)
        return self._model_config

    @property
    def tokenizer(self) -> Any:
        return self.model_config.tokenizer

    @property
    def stop_token_ids(self) -> set[int]:
        """Token ids that end a response (`cpmobius.engine.stop_tokens.stop_token_ids`)."""
        from cpmobius.engine.stop_tokens import stop_token_ids

        return set(stop_token_ids(self.tokenizer, self.model_config.generation_config))

    def decode_responses(self, batch: Any) -> tuple[list[str], list[bool]]:
        """Response texts (special tokens removed) and, per row, whether it stopped at the length limit.

        Returns:
            ``(texts, truncated)``, each of length B.
        """
        texts, truncated = [], []
        stop = self.stop_token_ids
        for row in range(len(batch)):
            ids = batch.batch["responses"][row][batch.batch["response_mask"][row].bool()].tolist()
            texts.append(self.tokenizer.decode(ids, skip_special_tokens=True))
            truncated.append(not ids or ids[-1] not in stop)
        return texts, truncated

    # ------------------------------------------------------------------ lifecycle

    @property
    def uses_reference(self) -> bool:
        return bool(self.config.actor_rollout_ref.actor.use_kl_loss)

    @property
    def profiles_memory_at_start(self) -> bool:
        """Whether this policy's rollout engine sizes its KV cache from a device-memory profile at start-up
        (vLLM unless ``rollout.engine_kwargs.vllm.kv_cache_memory_bytes`` fixes it), so that no other
        engine may start beside it (`cpmobius.engine.sharing.start_policies`)."""
        rollout = self.config.actor_rollout_ref.rollout
        fixed = OmegaConf.select(rollout, "engine_kwargs.vllm.kv_cache_memory_bytes", default=None)
        return rollout.name == "vllm" and not fixed

    def start(self) -> "Policy":
        """Start the worker group, build the models, launch the rollout servers, then sleep them."""
        return self.start_models().start_rollout()

    def start_models(self) -> "Policy":
        """Start the worker group and begin building its models (FSDP actor and reference) in the background.

        `start_rollout` waits for them. Several policies' models can build at once (`start_policies`).
        """
        from verl.single_controller.ray import RayClassWithInitArgs, RayWorkerGroup
        from verl.utils.device import get_device_name

        from cpmobius.engine.worker import PolicyWorker

        role = "actor_rollout_ref" if self.uses_reference else "actor_rollout"
        worker_cls = RayClassWithInitArgs(cls=ray.remote(PolicyWorker), config=self.config.actor_rollout_ref, role=role)
        with self.ops.timed("startup/worker_group"):  # Ray actors up (imports, device and process group set-up)
            self.worker_group = RayWorkerGroup(
                resource_pool=self.resource_pool,
                ray_cls_with_init=worker_cls,
                name_prefix=f"{self.name}_",
                device_name=get_device_name(),
            )
        # init_model is dispatched ONE_TO_ALL without arguments: the same call on every worker, not awaited here.
        self._model_init = (time.perf_counter(), self.worker_group.execute_all_async("init_model"))
        return self

    def wait_models(self) -> "Policy":
        """Wait until the models `start_models` began building are built (nothing when they are).

        Raises:
            RuntimeError: when `start_models` was not called first.
        """
        if self._model_init is not None:
            started, refs = self._model_init
            ray.get(refs)
            self._model_init = None
            self.ops.add("startup/model_init", started)  # FSDP actor and reference: weights loaded and sharded
        elif self.worker_group is None:
            raise RuntimeError(f"{self.name}: start_models() must run before its models can be waited for")
        return self

    def start_rollout(self) -> "Policy":
        """Launch the rollout servers and the agent loop once the models are built (`wait_models`), then
        sleep the engine.

        Raises:
            RuntimeError: when `start_models` was not called first.
        """
        from verl.checkpoint_engine import CheckpointEngineManager
        from verl.experimental.agent_loop import AgentLoopManager
        from verl.utils.config import omega_conf_to_dataclass
        from verl.workers.rollout.llm_server import LLMServerManager

        self.wait_models()
        with self.ops.timed("startup/rollout_servers"):  # engines: weights (dummy), KV cache, CUDA graphs
            self.server_manager = LLMServerManager.create(config=self.config, worker_group=self.worker_group)
        with self.ops.timed("startup/agent_loop"):
            self.checkpoint_manager = CheckpointEngineManager(
                config=omega_conf_to_dataclass(self.config.actor_rollout_ref.rollout.checkpoint_engine),
                actor_wg=self.worker_group,
                replicas=self.server_manager.get_replicas(),
            )
            self.agent_loop = AgentLoopManager.create(
                config=self.config,
                llm_client=self.server_manager.get_client(),
                reward_loop_worker_handles=None,
            )
        with self.ops.timed("startup/first_sleep"):
            if self.config.actor_rollout_ref.rollout.name == "vllm":
                self._warm_up_servers()
            self.checkpoint_manager.sleep_replicas()
        return self

    def _warm_up_servers(self) -> None:
        """One 1-token greedy generation on each fresh rollout server, before its first sleep.

        vLLM's sleep mode crashes (``cumem_allocator.cpp ... invalid argument``) when an engine is
        put to sleep before its KV cache was ever mapped; a short generation maps it. The weights
        are still verl's dummy init here, so the output is meaningless and dropped.
        """
        prompt = [int(self.tokenizer.eos_token_id or 0)]
        params = {"max_tokens": 1, "temperature": 0.0}
        ray.get(
            [
                handle.generate.remote(
                    prompt_ids=prompt, sampling_params=dict(params), request_id=f"{self.name}-warmup-{i}"
                )
                for i, handle in enumerate(self.server_handles())
            ]
        )

    @property
    def is_active(self) -> bool:
        return self.guard.awake is self

    def activate(self) -> None:
        """Wake this policy's rollout engine with the trainer's current weights (others go to sleep)."""
        if self.is_active:
            return
        with self.ops.timed("wake"):
            self.guard.before_wake(self)
            self.checkpoint_manager.update_weights(global_steps=self.global_steps)
            self.guard.after_wake(self)

    def deactivate(self) -> None:
        """Put this policy's rollout engine to sleep (frees its device memory)."""
        self.checkpoint_manager.sleep_replicas()
        self.guard.after_sleep(self)

    def _release_engine(self) -> None:
        # Training-side work runs with this policy's rollout engine asleep: on a GPU the engine's
        # memory is needed, and after an update its weights are stale until the next activate().
        if self.is_active:
            with self.ops.timed("sleep"):
                self.deactivate()

    def server_handles(self) -> list[Any]:
        """The Ray actor handles of this policy's rollout servers (one per replica)."""
        return list(self.server_manager.server_handles)

    # ------------------------------------------------------------------ generation

    def generate(
        self,
        prompts: Sequence[Messages],
        n: int = 1,
        validate: bool = False,
        greedy: bool = False,
    ) -> Any:
        """Sample ``n`` responses for each chat prompt, built at run time (no dataset).

        Args:
            prompts: P chat-message lists (``[{"role": "user", "content": ...}]``); the chat
                template of the policy's tokenizer is applied by verl's agent loop.
            n: responses per prompt; the n responses of a prompt are contiguous (a group).
            validate: sample with ``rollout.val_kwargs`` instead of the training parameters.
            greedy: temperature 0 for every row.

        Returns:
            verl `DataProto` with B = P·n rows: ``prompts`` (B, prompt_length) left-padded,
            ``responses`` / ``response_mask`` (B, response_length), ``input_ids``,
            ``attention_mask``, ``position_ids`` (B, prompt_length + response_length); non-tensor
            ``uid`` (one per prompt, shared by its group) and ``index`` (prompt position).

        Raises:
            RuntimeError: when this policy's engine is not active.
        """
        from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto

        if not self.is_active:
            raise RuntimeError(f"{self.name}: activate() the policy before generating")
        if n < 1 or not prompts:
            raise ValueError(f"{self.name}.generate: need at least one prompt and n >= 1 (got {len(prompts)}, n={n})")
        self.prompt_tokens.check(prompts)
        self.generation_calls += 1
        with self.ops.timed("generate"):
            batch = prompt_batch(prompts, n, validate, greedy, self.global_steps, self.generation_calls)
            padded, pad_size = pad_dataproto_to_divisor(batch, len(self.agent_loop.agent_loop_workers))
            output = self.agent_loop.generate_sequences(padded)
            output = unpad_dataproto(output, pad_size=pad_size)
        output.non_tensor_batch.pop(GREEDY_KEY, None)
        output.meta_info["sampling"] = sampling_used(output, self.name)
        output.meta_info["temperature"] = output.meta_info["sampling"]["temperature"]
        return output

    @property
    def max_prompt_tokens(self) -> int:
        """``rollout.prompt_length``: the most tokens a rendered prompt may have."""
        return int(self.config.actor_rollout_ref.rollout.prompt_length)

    @property
    def prompt_tokens(self) -> PromptTokens:
        """This policy's prompt tokenisation (`cpmobius.engine.prompt_tokens`): ids, counts (each distinct
        prompt tokenised once) and the prompt-length check."""
        if self._prompt_tokens is None:
            kwargs = dict(self.config.data.get("apply_chat_template_kwargs") or {})
            self._prompt_tokens = PromptTokens(self.name, self.tokenizer, kwargs, self.max_prompt_tokens)
        return self._prompt_tokens

    def prompt_token_ids(self, prompts: Sequence[Messages]) -> list[list[int]]:
        """P chat prompts → P lists of token ids, as the agent loop renders them (chat template, generation prompt)."""
        return self.prompt_tokens.ids(prompts)

    def count_prompt_tokens(self, prompts: Sequence[Messages]) -> list[int]:
        """P chat prompts → P token counts, as the agent loop renders them."""
        return self.prompt_tokens.count(prompts)

    # ------------------------------------------------------------------ training

    def _pad_rows(self, batch: Any) -> tuple[Any, int]:
        """`pad_rows` to what the workers and their micro-batches divide (`row_divisor`)."""
        return pad_rows(batch, row_divisor(self.config.actor_rollout_ref, self.worker_group.world_size))

    def _to_worker_input(self, batch: Any, **metadata: Any) -> Any:
        return worker_input(batch, self.config.actor_rollout_ref.rollout.temperature, **metadata)

    def compute_log_probs(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Current-policy ("old") log-probs and entropies of the responses in ``batch``.

        Returns:
            ``(log_probs, entropy)``, each (B, response_length) float32, 0 on padding.
        """
        from verl.utils import tensordict_utils as tu
        from verl.workers.utils.padding import no_padding_2_padding

        self._release_engine()
        padded, pad_size = self._pad_rows(batch)
        td = self._to_worker_input(padded, calculate_entropy=True, compute_loss=False)
        with self.ops.timed("log_prob"):
            output = self.worker_group.compute_log_prob(td)
        log_probs = no_padding_2_padding(tu.get(output, "log_probs"), td).float()
        entropy = no_padding_2_padding(tu.get(output, "entropy"), td).float()
        rows = len(batch)
        return log_probs[:rows], entropy[:rows]

    def compute_ref_log_probs(self, batch: Any) -> torch.Tensor:
        """Log-probs of the responses under the frozen initial policy, (B, response_length) float32.

        Raises:
            RuntimeError: when the policy has no reference model (``actor.use_kl_loss`` false).
        """
        from verl.utils import tensordict_utils as tu
        from verl.workers.utils.padding import no_padding_2_padding

        if not self.uses_reference:
            raise RuntimeError(f"{self.name}: no reference model (actor.use_kl_loss is false)")
        self._release_engine()
        padded, _ = self._pad_rows(batch)
        td = self._to_worker_input(padded, calculate_entropy=False, compute_loss=False)
        with self.ops.timed("ref_log_prob"):
            output = self.worker_group.compute_ref_log_prob(td)
        return no_padding_2_padding(tu.get(output, "log_probs"), td).float()[: len(batch)]

    def update(self, batch: Any) -> dict[str, float]:
        """One policy-gradient update on ``batch`` through verl's ``update_actor``.

        The whole batch is one mini-batch (one optimizer step per epoch, ``actor.ppo_epochs``
        epochs); loss aggregation, clipping, KL loss and entropy coefficient come from the
        policy's ``actor`` config (verl's ``ppo_loss``).

        Args:
            batch: `DataProto` with the rollout tensors of `generate` plus ``advantages``,
                ``old_log_probs`` and (with a reference) ``ref_log_prob``, each
                (B, response_length) float32. Any B: rows are padded with loss-free copies to split
                evenly over the workers and micro-batches.

        Returns:
            verl's actor metrics renamed ``actor/*`` (``actor/pg_loss``, ``actor/kl_loss``,
            ``actor/entropy``, ``actor/grad_norm``, ``actor/lr``, ...), scalars.

        Raises:
            KeyError: when a required tensor is missing.
        """
        from verl.utils import tensordict_utils as tu

        required = ["advantages", "old_log_probs"] + (["ref_log_prob"] if self.uses_reference else [])
        missing = [k for k in required if k not in batch.batch.keys()]
        if missing:
            raise KeyError(f"{self.name}.update: batch lacks {missing}")
        self._release_engine()
        padded, _ = self._pad_rows(batch)
        rows = len(padded)
        actor = self.config.actor_rollout_ref.actor
        calculate_entropy = bool(actor.calculate_entropy) or float(actor.entropy_coeff) != 0.0
        td = self._to_worker_input(
            padded,
            calculate_entropy=calculate_entropy,
            # CPMöbius: verl divides seq-mean losses by global_batch_size (token-mean by the masked token
            # count); the loss-free padding rows must not count as sequences.
            global_batch_size=len(batch),
            mini_batch_size=rows,
            epochs=int(actor.ppo_epochs),
            seed=int(actor.data_loader_seed),
            dataloader_kwargs={"shuffle": False},
            compute_loss=True,
            distillation_use_topk=False,
            distillation_only=False,
        )
        with self.ops.timed("update"):
            output = self.worker_group.update_actor(td)
        metrics = tu.get(output, "metrics")
        self.global_steps += 1
        return {(k if k.startswith("actor/") else f"actor/{k}"): scalar(v) for k, v in metrics.items()}

    # ------------------------------------------------------------------ checkpoints

    def save(self, path: str) -> None:
        """Save model, optimizer and extra state (LR scheduler, RNG) of every rank under ``path``."""
        with self.ops.timed("save"):
            self.worker_group.save_checkpoint(str(path), global_step=self.global_steps)
        write_standard_attention(Path(path) / "huggingface")  # readable without our attention's registration

    def load(self, path: str, global_steps: Optional[int] = None) -> None:
        """Load what `save` wrote; the rollout engine gets the weights at the next `activate`."""
        with self.ops.timed("load"):
            self.worker_group.load_checkpoint(str(path))
        if global_steps is not None:
            self.global_steps = global_steps
        if self.is_active:
            self.deactivate()
