"""The context of a policy's model (prompt + response tokens), known before anything loads the model.

Read from the model's ``config.json`` (or, before a preset's model is fetched, the ``model.context_tokens`` the
preset states), verl's ``model.override_config`` over it, a RoPE scaling factor applied as vLLM applies it. Checked
against each policy's prompt + response budget by `cpmobius.engine.config.check_context_fits`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig, OmegaConf

ROPE_KEY = "actor_rollout_ref.model.override_config.rope_scaling"


def read_model_context(model_path: str, override_config: Optional[dict] = None) -> Optional[tuple[int, str]]:
    """The context (prompt + response tokens) of the model at ``model_path``, and where it was read.

    Read from ``{model_path}/config.json``, or for a hub id from the local Hugging Face cache (never
    the network): ``max_position_embeddings`` (of ``text_config`` when nested), with
    ``override_config`` (verl's ``model.override_config``) over it. A RoPE scaling factor multiplies
    it as vLLM does (``yarn``: ``original_max_position_embeddings`` × factor; ``llama3``/``longrope``
    state the scaled length already).

    Returns:
        ``(tokens, source)``, or None when no config is found (e.g. before ``models fetch``).
    """
    folder = Path(str(model_path)).expanduser()
    source: Optional[Path] = folder / "config.json" if (folder / "config.json").is_file() else None
    if source is None and not folder.exists():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(str(model_path), "config.json")
            source = Path(cached) if isinstance(cached, str) else None
        except Exception:  # not a valid repo id: nothing cached under that name
            source = None
    if source is None:
        return None
    try:
        config = json.loads(source.read_text())
    except (OSError, ValueError):
        return None
    if "max_position_embeddings" not in config and isinstance(config.get("text_config"), dict):
        config = config["text_config"]
    context = scaled_context({**config, **dict(override_config or {})})
    return None if context is None else (context, str(source))


def scaled_context(config: dict) -> Optional[int]:
    """A model config's ``max_position_embeddings``, times its RoPE scaling factor as vLLM counts it (``yarn``:
    ``original_max_position_embeddings`` × factor; ``llama3``/``longrope`` state the scaled length already); None
    when it states none."""
    context = config.get("max_position_embeddings")
    if not isinstance(context, int) or context < 1:
        return None
    rope = config.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type"))
    if rope.get("factor") and rope_type not in ("su", "longrope", "llama3"):
        base = rope.get("original_max_position_embeddings", context) if rope_type == "yarn" else context
        context = int(base * float(rope["factor"]))
    return context


def context_problem(pcfg: DictConfig, name: str = "") -> Optional[str]:
    """Why the policy's prompt + response budget (or the Coach warm-up's length) does not fit its model's context,
    or None when it fits or the context is unknown.

    The context is the model's ``config.json`` (`read_model_context`); before the folder exists (a hub id not yet
    downloaded, a preset not yet fetched) it is ``model.context_tokens`` when the model group states one, with
    ``model.override_config`` applied as to a ``config.json``; else nothing is checked.

    Returns:
        One line naming the length keys, their sum and the context, then the ways out: lower them, or the
        override that extends RoPE far enough (YaRN, by a factor in steps of 0.5).
    """
    arr = pcfg.actor_rollout_ref
    override = OmegaConf.to_container(arr.model.get("override_config") or {}, resolve=True)
    found = read_model_context(str(arr.model.path), override)
    stated = (pcfg.get("model") or {}).get("context_tokens")
    if found is None and stated is not None:  # the stated length, extended as its config.json's would be
        context = scaled_context({"max_position_embeddings": int(stated), **override})
        found = None if context is None else (context, "model.context_tokens")
    if found is None:
        return None
    context, source = found
    prefix = f"{name}.verl" if name else "actor_rollout_ref"
    prompt, response = int(arr.rollout.prompt_length), int(arr.rollout.response_length)
    if prompt + response > context:
        factor = math.ceil(2 * (prompt + response) / context) / 2
        rope = f"{{rope_type:yarn,factor:{factor},original_max_position_embeddings:{context}}}"
        return (
            f"data.max_prompt_length + {prefix}.rollout.response_length (data.max_response_length unless set per "
            f"policy): {prompt} + {response} = {prompt + response} tokens exceed the context of the "
            f"{name or 'policy'}'s model, {context} tokens ({source}); lower them, or extend RoPE: ++{ROPE_KEY}={rope}"
        )
    warmup = pcfg.get("warmup")
    if name == "coach" and warmup is not None and warmup.get("enabled") and int(warmup.max_length) > context:
        length = f"warmup.max_length: {warmup.max_length} tokens"
        return f"{length} exceed the Coach model's context, {context} tokens ({source})"
    return None
