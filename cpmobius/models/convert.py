"""GGUF file → a plain Hugging Face folder (bf16 safetensors, tokenizer, one EOS story).

`transformers` reads a GGUF file itself (with the `gguf` package) and dequantises its tensors to
dense ones; loading that way takes 30–75 s on 2 cores, the saved folder loads in seconds. The GGUF
loader attaches a quantizer that makes ``save_pretrained`` refuse; the weights are already dense,
so it is dropped before saving.

One EOS story (learnt on real models): the GGUF metadata leaves the tokenizer's EOS at ``<|endoftext|>``
(Qwen2.5-Coder) or even ``<|im_start|>`` (SmolLM2), while the chat template ends every turn with
``<|im_end|>``. The converted folder says the same thing everywhere, as the upstream instruct
releases do: tokenizer EOS = the template's end-of-turn token; padding = ``<|endoftext|>`` (never
the EOS); ``config.json`` ``eos_token_id`` = the end-of-turn id; ``generation_config.json``
``eos_token_id`` = [end-of-turn, end-of-text] and nothing else (no sampling defaults such as a
repetition penalty hidden in the folder). `cpmobius.engine.stop_tokens` then stops every engine at
the same ids.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

from cpmobius.models.registry import DownloadError, ModelError, ModelSpec, print_line

# What reading a GGUF file needs beyond the default install (the `models` extra pins the same).
CONVERTER_PACKAGES = {"gguf": "gguf==0.19.0", "accelerate": "accelerate>=1.0"}
# End-of-turn tokens of the chat templates these models use (ChatML); the first one the template writes wins.
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>")
END_OF_TEXT_TOKEN = "<|endoftext|>"
MARKER = "cpmobius_model.json"
# Checked after saving: the folder's tokenizer must encode these exactly as the GGUF one does.
PROBE_TEXTS = ("What is 12+35? Put the final answer in \\boxed{}.", "  x² − 3·x = 1\n\tdone<|im_end|>\n")


def ensure_converter_packages(say: Callable[[str], None] = print_line, wheel_dir: Optional[Path] = None) -> None:
    """Install ``gguf`` / ``accelerate`` into this environment when missing, saying so in one line.

    ``wheel_dir``: a folder that may hold their wheels (a machine without network); pip then installs
    from it alone.

    Raises:
        DownloadError: when pip cannot install them (no network: carry the wheels, see the message).
    """
    modules = [module for module in CONVERTER_PACKAGES if importlib.util.find_spec(module) is None]
    if not modules:
        return
    missing = [CONVERTER_PACKAGES[module] for module in modules]
    say(
        f"[cpmobius] installing {' '.join(missing)} to read GGUF files "
        "(once; `pip install -e '.[models]'` installs them up front)"
    )
    local = wheel_dir is not None and all(any(Path(wheel_dir).glob(f"{module}-*.whl")) for module in modules)
    offline = ["--no-index", "--find-links", str(wheel_dir)] if local else []
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", *offline, *missing], capture_output=True, text=True
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise DownloadError(
            f"cannot install {' '.join(missing)} ({last}); without a network, put their wheels "
            f"(`pip download --no-deps {shlex.join(missing)}`) in the --from-wheels folder or `pip install` them"
        )
    importlib.invalidate_caches()
    try:  # transformers caches "is gguf available" per process
        from transformers.utils import import_utils

        import_utils.is_gguf_available.cache_clear()
    except (ImportError, AttributeError):
        pass


def chat_tokens(tokenizer: Any) -> tuple[str, str]:
    """``(eos, pad)`` for chat use: the template's end-of-turn token and ``<|endoftext|>``.

    Raises:
        ModelError: when the chat template writes none of `END_OF_TURN_TOKENS`.
    """
    template = getattr(tokenizer, "chat_template", None) or ""
    vocab = tokenizer.get_vocab()
    eos = next((t for t in END_OF_TURN_TOKENS if t in template and t in vocab), None)
    if eos is None:
        raise ModelError(
            "the chat template writes no known end-of-turn token "
            f"({', '.join(END_OF_TURN_TOKENS)}); pass --name of a known model"
        )
    pad = END_OF_TEXT_TOKEN if END_OF_TEXT_TOKEN in vocab and END_OF_TEXT_TOKEN != eos else eos
    return eos, pad


def apply_chat_tokens(tokenizer: Any, model: Any, eos: str, pad: str) -> None:
    """Set the one EOS story on a loaded tokenizer and model (see the module docstring)."""
    from transformers import GenerationConfig

    tokenizer.eos_token = eos
    tokenizer.pad_token = pad
    eos_id, pad_id = tokenizer.convert_tokens_to_ids(eos), tokenizer.convert_tokens_to_ids(pad)
    model.config.eos_token_id = eos_id
    model.config.pad_token_id = pad_id
    bos_id = (
        model.config.bos_token_id if model.config.bos_token_id is not None else model.generation_config.bos_token_id
    )
    model.generation_config = GenerationConfig(
        bos_token_id=bos_id, eos_token_id=[eos_id] + ([pad_id] if pad_id != eos_id else []), pad_token_id=pad_id
    )


def convert_gguf(
    gguf: Path,
    out: Path,
    spec: Optional[ModelSpec] = None,
    say: Callable[[str], None] = print_line,
) -> Path:
    """Convert a GGUF file into a plain HF folder at ``out`` (written whole or not at all).

    Args:
        gguf: the assembled GGUF file (its checksum already checked by the caller when ``spec`` is known).
        out: the folder to create; it must not exist (an earlier complete one is never overwritten).
        spec: the registry entry, for the chat tokens and tokenizer class; None derives the chat
            tokens from the template (`chat_tokens`).

    Returns:
        ``out``, holding ``config.json``, ``generation_config.json``, ``model.safetensors`` (bf16),
        the tokenizer files and ``cpmobius_model.json`` (where it came from).

    Raises:
        ModelError: ``out`` exists, the file does not load, or the saved tokenizer encodes differently.
    """
    gguf, out = Path(gguf).resolve(), Path(out).expanduser().resolve()
    if out.exists():
        raise ModelError(f"{out} already exists; remove it to convert again")
    if not gguf.is_file():
        raise ModelError(f"no GGUF file at {gguf}")
    ensure_converter_packages(say)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    say(f"[cpmobius] converting {gguf.name} to bf16 safetensors (30-120 s on 2 cores)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    except Exception as error:  # a truncated or foreign file surfaces as many kinds of errors
        raise ModelError(f"transformers cannot load {gguf}: {type(error).__name__}: {error}") from error
    eos, pad = (spec.eos_token, spec.pad_token) if spec is not None else chat_tokens(tokenizer)
    apply_chat_tokens(tokenizer, model, eos, pad)
    tokenizer.model_max_length = int(getattr(model.config, "max_position_embeddings", 0) or tokenizer.model_max_length)
    # The weights are dense already; the GGUF quantizer only blocks save_pretrained ("not serializable").
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        if spec is not None:
            _set_tokenizer_class(staging, spec.tokenizer_class)
        _check_saved_tokenizer(staging, tokenizer, eos, pad)
        record = {"gguf_file": gguf.name, "eos_token": eos, "pad_token": pad, "dtype": "bfloat16"}
        if spec is not None:
            record.update(
                name=spec.name,
                title=spec.title,
                sha256=spec.sha256,
                packages=spec.requirements(),
                licence=spec.licence,
                caveat=spec.caveat,
            )
        (staging / MARKER).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        _make_readable(staging)  # mkdtemp made it private
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def _make_readable(folder: Path) -> None:
    os.chmod(folder, 0o755)
    for path in folder.iterdir():
        os.chmod(path, 0o644)


def _set_tokenizer_class(folder: Path, tokenizer_class: str) -> None:
    """Write the upstream tokenizer class (the GGUF loader saves a generic backend class name)."""
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = tokenizer_class
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _check_saved_tokenizer(folder: Path, original: Any, eos: str, pad: str) -> None:
    """Reload the saved tokenizer: same special tokens, chat template and encodings as the GGUF one.

    Raises:
        ModelError: on any difference (the folder is then not kept).
    """
    from transformers import AutoTokenizer

    saved = AutoTokenizer.from_pretrained(str(folder))
    chat = [{"role": "user", "content": PROBE_TEXTS[0]}]
    problems = []
    if (saved.eos_token, saved.pad_token) != (eos, pad):
        problems.append(f"eos/pad {saved.eos_token!r}/{saved.pad_token!r} instead of {eos!r}/{pad!r}")
    if saved.chat_template != original.chat_template:
        problems.append("the chat template changed")
    for text in PROBE_TEXTS:
        if saved(text)["input_ids"] != original(text)["input_ids"]:
            problems.append(f"{text!r} encodes differently")
    if saved.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) != original.apply_chat_template(
        chat, tokenize=False, add_generation_prompt=True
    ):
        problems.append("the chat prompt renders differently")
    if problems:
        raise ModelError(f"the saved tokenizer differs from the GGUF one: {'; '.join(problems)}")
