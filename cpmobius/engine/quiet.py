"""Library output that a healthy run does not need, each line silenced with the reason.

What could be fixed at its cause was (the CPU platform no longer asks NVML for a NUMA node,
`cpu_platform`); what is left comes from inside a library and is filtered here, by logger and by
the message's first words, so that every other message of the same logger still shows:

- Ray (>= 2.5x) announces on every new local cluster that token authentication is on by default
  ("Token authentication is enabled for this Ray cluster ..."). On is what a run wants; the notice
  says nothing else. (Setting ``RAY_AUTH_MODE=token`` would silence it too, but would also impose
  token mode on a cluster the driver joins through ``RAY_ADDRESS``; the filter leaves Ray's choice alone.)
- torch 2.13's own nested-tensor constructor (``torch.nested.nested_tensor_from_jagged``, used by
  verl's batches) calls the deprecated ``torch.fx.is_fx_tracing``, which warns once per process
  ("is_fx_tracing will return true for both fx.symbolic_trace and torch.export ..."); no caller can avoid it.
- verl logs "Platform override from VERL_PLATFORM: cpu" in every process that picks its platform,
  Ray workers started mid-run included, so the line lands between rows of the step table; the
  platform is the one the backend group set (``backend.platform``), and the line says nothing more.
- verl's FSDP checkpoint manager logs four INFO lines per policy for every save ("[Rank 0] Saved
  model to ...", optimizer, extra state, HF config) and as many for every load: 8 lines a step
  between the rows of the step table. Its warnings still show; the loop's checkpoints are listed in
  the run's folder (`cpmobius.checkpoint`).
"""

from __future__ import annotations

import logging

RAY_TOKEN_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
RAY_TOKEN_AUTH_NOTICE = "Token authentication is enabled for this Ray cluster"
VERL_PLATFORM_LOGGER = "verl.plugin.platform.platform_manager"
VERL_PLATFORM_NOTICE = "Platform override from VERL_PLATFORM"
TORCH_FX_LOGGER = "torch.fx._symbolic_trace"
TORCH_FX_NOTICE = "is_fx_tracing will return true"


class DropMessages(logging.Filter):
    """A logging filter that drops the records whose message starts with one of ``prefixes``."""

    def __init__(self, *prefixes: str) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefixes)


def drop_messages(logger_name: str, *prefixes: str) -> None:
    """Add a `DropMessages` filter for ``prefixes`` to a logger, once."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, DropMessages) and f.prefixes == prefixes for f in logger.filters):
        logger.addFilter(DropMessages(*prefixes))


def quiet_every_process() -> None:
    """In every process that imports `cpmobius.engine.extensions` (the driver, every Ray worker): verl's
    platform notice."""
    drop_messages(VERL_PLATFORM_LOGGER, VERL_PLATFORM_NOTICE)


def quiet_driver() -> None:
    """In the driver, before ``ray.init``: Ray's token-auth notice and torch's ``is_fx_tracing`` notice."""
    drop_messages(RAY_TOKEN_AUTH_LOGGER, RAY_TOKEN_AUTH_NOTICE)
    drop_messages(TORCH_FX_LOGGER, TORCH_FX_NOTICE)


def quiet_policy_worker() -> None:
    """In a policy worker: torch's ``is_fx_tracing`` notice and verl's per-file checkpoint INFO lines."""
    from verl.utils.checkpoint import fsdp_checkpoint_manager

    drop_messages(TORCH_FX_LOGGER, TORCH_FX_NOTICE)
    # verl names this logger by the module's file path and sets its level from VERL_LOGGING_LEVEL at import.
    logging.getLogger(fsdp_checkpoint_manager.__file__).setLevel(logging.WARNING)
