"""The engine room: everything that touches verl (and Ray, vLLM, the HF rollout servers).

What it holds:

- `policy`: one policy (Coach or Player) on verl: generate, log-probs, update, save/load,
  (de)activate; `batches`: the `DataProto` / `TensorDict` plumbing it uses;
- `config`: the composed Hydra config → one full, validated verl config per policy; `ConfigError`;
  `config_sections`: the method keys' defaults, and one group of the composed config read into its dataclass;
  `value_ranges`: the types and ranges of the verl values each policy passes, and the seed;
  `run_folders`: a run folder this user can create, checked before Hydra makes its log folder in it;
  `model_context`: a policy's model's context (its ``config.json``, RoPE scaling applied) against its lengths;
- what verl 0.9.1 lacks, registered by importing `extensions` (verl imports it in every Ray worker
  through ``VERL_USE_EXTERNAL_MODULES``): the CPU platform (`cpu_platform`), the HF rollout
  (`hf_replica` on the driver, `hf_server` the generation actor with `hf_sampling`, `hf_adapter`
  the in-worker weight sync), verl's vLLM rollout with per-policy names (`vllm_rollout`,
  `naming`), stop tokens (`stop_tokens`), the single-turn agent loop (`agent_loop`) and the policy
  worker (`worker`);
- `known_keys`: command-line keys checked against the config tree (the nearest valid key named);
  `sharing`: the shared devices, Ray's start and what a killed launch left running;
  `quiet`: library notices a healthy run does not need, each silenced with the reason.

Engine objects (worker groups, `DataProto`, rollout servers) appear only here; the method's stages
see token tensors and plain dicts.

What it may import of cpmobius: itself, `cpmobius.config` (the composed config, `ConfigError`), `cpmobius.prompts`
(the chat-prompt type), `cpmobius.cpu_kernels` (a leaf: the portable CPU kernels every process of a CPU run gets),
`cpmobius.error_text` (a leaf: the one line quoting an error) and `cpmobius.clock` (a leaf: the stage clock each
policy times its operations on), nothing of the method's stages (`loop`, `coach`, `settings`, ...), nor `eval`,
`warmup`, `toy` or `grading`. This ``__init__`` imports nothing: ``import cpmobius.engine.config`` or
``.stop_tokens`` must not load verl, Ray or torch.
"""
