"""The toy world of the embedded default: a task with known answers and the tiny models that learn it.

A laptop CPU cannot run Qwen2.5-Math, so the default run (``python -m cpmobius.main``, the tests,
CI) shrinks the models and the task, never the method:

- `world`: integer arithmetic problems with known answers (the Coach's task, the Player's answers,
  the toy validation set, the toy warm-up data) and the in-process pretraining, cached on disk,
  that teaches the tiny models their formats;
- `ood`: the out-of-distribution set scored beside validation (the world's arithmetic in forms the validation
  set never holds), outside `world` so that the pretrained models' cache key does not change with it;
- `tiny_models`: a random-initialised tiny Qwen2 and a byte-level tokenizer with Qwen2.5's special
  tokens and chat template, written in the HF layout verl loads with ``model.path``.

What it may import of cpmobius: nothing outside `cpmobius.toy` but `cpmobius.cpu_kernels` (a leaf: the
CPU run's kernel settings, which name the toy cache), so the method's stages and the tests can use it
without a cycle.
"""
