"""What a run prints besides its step table: the toy models say whether they are pretrained (with a
progress bar) or loaded from the cache; library notices a healthy run does not need are dropped,
and only those."""

from __future__ import annotations

import logging

import pytest

from cpmobius.engine.quiet import (
    RAY_TOKEN_AUTH_LOGGER,
    TORCH_FX_LOGGER,
    VERL_PLATFORM_LOGGER,
    DropMessages,
    quiet_driver,
    quiet_every_process,
)


def test_driver_drops_only_the_named_notices(caplog):
    quiet_every_process()
    quiet_driver()
    quiet_driver()  # idempotent: one filter per logger
    assert sum(isinstance(f, DropMessages) for f in logging.getLogger(TORCH_FX_LOGGER).filters) == 1
    with caplog.at_level(logging.INFO):
        logging.getLogger(RAY_TOKEN_AUTH_LOGGER).warning(
            "Token authentication is enabled for this Ray cluster. Set ..."
        )
        logging.getLogger(RAY_TOKEN_AUTH_LOGGER).warning(
            "Token authentication is disabled for this Ray cluster. Anyone ..."
        )
        logging.getLogger(TORCH_FX_LOGGER).warning(
            "is_fx_tracing will return true for both fx.symbolic_trace and torch.export."
        )
        logging.getLogger(TORCH_FX_LOGGER).warning("another torch.fx warning")
        logging.getLogger(VERL_PLATFORM_LOGGER).info("Platform override from VERL_PLATFORM: %s", "cpu")
        logging.getLogger(VERL_PLATFORM_LOGGER).warning("Platform 'cpu' detection failed")
    assert [r.getMessage().split(".")[0] for r in caplog.records] == [
        "Token authentication is disabled for this Ray cluster",
        "another torch",
        "Platform 'cpu' detection failed",
    ]


def test_policy_worker_silences_verl_checkpoint_info_but_not_its_warnings():
    from verl.utils.checkpoint import fsdp_checkpoint_manager

    from cpmobius.engine.quiet import quiet_policy_worker

    quiet_policy_worker()
    logger = logging.getLogger(fsdp_checkpoint_manager.__file__)
    assert logger is fsdp_checkpoint_manager.logger
    assert not logger.isEnabledFor(logging.INFO) and logger.isEnabledFor(logging.WARNING)


def test_cpu_platform_skips_numa_pinning(monkeypatch):
    import verl.workers.engine_workers as engine_workers
    from verl.workers.engine.fsdp import transformer_impl

    from cpmobius.engine import cpu_platform

    monkeypatch.setattr(cpu_platform, "is_cpu_platform", lambda: True)
    for module, name in (
        (engine_workers, "initialize_global_process_group_ray"),
        (engine_workers, "set_numa_affinity"),
        (transformer_impl, "CPUOffloadPolicy"),
    ):
        monkeypatch.setattr(module, name, getattr(module, name))  # the fixes' rebindings are undone after the test
    assert cpu_platform.install_cpu_engine_fixes()
    assert engine_workers.set_numa_affinity() is None  # no libnuma / NVML call, no "Failed to set NUMA affinity"


def test_toy_models_show_pretraining_progress_then_load_from_cache(tmp_path, capfd):
    # capfd: the Player pretrains in a second process (side by side with the Player), writing to the same stderr.
    from cpmobius.toy.cache import materialize_toy_models, toy_models_cached
    from cpmobius.toy.world import PretrainSpec

    spec = PretrainSpec(player_steps=3, coach_steps=2, batch_size=2)
    paths = (tmp_path / "coach", tmp_path / "player", "Generate a valid math problem.")
    assert not toy_models_cached(*paths, pretrain_spec=spec)
    materialize_toy_models(*paths, pretrain_spec=spec, progress=True)
    err = capfd.readouterr().err
    assert "pretraining the tiny Coach" in err and "pretraining the tiny Player" in err and "3/3" in err
    assert "Writing model shards" not in err
    assert toy_models_cached(*paths, pretrain_spec=spec)
    assert not toy_models_cached(*paths, pretrain_spec=PretrainSpec(player_steps=4, coach_steps=2, batch_size=2))
    materialize_toy_models(*paths, pretrain_spec=spec, progress=True)
    assert "pretraining" not in capfd.readouterr().err  # loaded, not trained again


def test_coach_ready_runs_once_the_coach_is_saved_while_the_player_may_still_pretrain(tmp_path):
    from cpmobius.toy.cache import _is_cached, _toy_record, materialize_toy_models
    from cpmobius.toy.world import PretrainSpec

    instruction = "Generate a valid math problem."
    spec = PretrainSpec(player_steps=300, coach_steps=2, batch_size=2)
    coach, player = tmp_path / "coach", tmp_path / "player"
    seen = []

    def ready():  # what the driver does here: start the Coach warm-up from the saved Coach
        record = _toy_record(instruction, None, spec)
        seen.append((_is_cached(coach, record), _is_cached(player, record)))

    materialize_toy_models(coach, player, instruction, pretrain_spec=spec, coach_ready=ready)
    assert seen == [(True, False)]  # the Coach was in place, the Player (300 steps against 2) not yet
    seen.clear()
    materialize_toy_models(coach, player, instruction, pretrain_spec=spec, coach_ready=ready)
    assert seen == [(True, True)]  # both cached: called once all the same


def test_a_failing_coach_ready_stops_the_players_pretraining(tmp_path):
    import time

    from cpmobius.toy.cache import materialize_toy_models
    from cpmobius.toy.world import PretrainSpec

    spec = PretrainSpec(player_steps=100_000, coach_steps=2, batch_size=2)  # hours, if nothing stopped it

    def ready():
        raise OSError("warm-up data missing")

    start = time.monotonic()
    with pytest.raises(OSError, match="warm-up data missing"):
        materialize_toy_models(
            tmp_path / "coach",
            tmp_path / "player",
            "Generate a valid math problem.",
            pretrain_spec=spec,
            coach_ready=ready,
        )
    assert time.monotonic() - start < 120
    assert not (tmp_path / "player").exists()
