"""Bad values of the verl keys both policies pass, of the seed and of the run folder: one line naming the key,
exit 2, before Ray or any model starts. The command line runs in this process (``cpmobius.main.cli``) with Ray and
the model preparation replaced by failures; about 1-2 s a case on 2 cores, 0.5-1 s for a composed config."""

from __future__ import annotations

import logging
import os
import re
import signal

import pytest
import ray

import cpmobius.main
from cpmobius.config import ConfigError


def _must_not_run(*args, **kwargs):
    raise AssertionError("started although the config is bad")


def run_cli(argv: list[str], monkeypatch) -> int:
    """``cli(argv)``'s exit code (Hydra's task exits through SystemExit), with Ray and the models forbidden."""
    monkeypatch.setattr(ray, "init", _must_not_run)
    monkeypatch.setattr(cpmobius.main, "prepare_models", _must_not_run)
    monkeypatch.setattr(cpmobius.main, "build_loop", _must_not_run)
    cwd, sigterm = os.getcwd(), signal.getsignal(signal.SIGTERM)  # cli installs its own SIGTERM handler
    # Hydra configures logging for its task: handlers on this test's captured streams, which later tests'
    # log records would hit once pytest has closed them ("--- Logging error ---" in their stderr).
    loggers = [logging.getLogger()] + [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]
    saved = {logger: (logger.handlers[:], logger.level, logger.propagate) for logger in loggers}
    try:
        return cpmobius.main.cli(argv)
    except SystemExit as stop:
        return stop.code
    finally:
        os.chdir(cwd)
        signal.signal(signal.SIGTERM, sigterm)
        for name in list(logging.root.manager.loggerDict):
            logger = logging.getLogger(name)
            handlers, level, propagate = saved.get(logger, ([], logging.NOTSET, True))
            logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate
        root = logging.getLogger()
        root.handlers[:], root.level = saved[root][0], saved[root][1]


# Through the command line: values that were accepted, or failed only inside a Ray worker, and the run folders.
CLI_CASES = [
    ("seed=abc", "seed"),
    ("actor_rollout_ref.actor.optim.lr=fast", r"(coach|player)\.verl\.actor\.optim\.lr"),
    ("player.verl.rollout.temperature=-1", r"player\.verl\.rollout\.temperature"),
    # verl keys the loop does not read (its own GRPO, a shared key both policies set for themselves)
    ("algorithm.adv_estimator=rloo", r"algorithm\.adv_estimator"),
    ("actor_rollout_ref.rollout.temperature=0.7", r"actor_rollout_ref\.rollout\.temperature"),
    # an interpolation that does not resolve, a group chosen as null, a section given a value: tracebacks before
    ("seed=${oc.env:CPMOBIUS_NOT_SET_ANYWHERE}", "seed"),
    ("experiment=null", "experiment"),
    ("trainer=null", "trainer"),
    ("coach.verl.rollout=null", r"coach\.verl\.rollout"),
    ("coach.instruction=Write a problem, then stop", r"coach\.instruction"),  # unquoted comma: a sweep to Hydra
    # the run folder, and Hydra's log folder inside it (created before any check of ours used to run)
    ("trainer.default_local_dir=/proc/no/such/run", "trainer.default_local_dir"),
    ("hydra.run.dir=/proc/no/such/logs", "hydra.run.dir"),
]

# The same checks on the composed config (what the command line calls after Hydra composed it).
VALUE_CASES = [
    ("seed=-1", "seed"),
    ("seed=1.5", "seed"),
    ("algorithm.kl_ctrl.kl_coef=-0.1", "algorithm.kl_ctrl.kl_coef"),
    ("player.verl.actor.optim.lr=-0.1", r"player\.verl\.actor\.optim\.lr"),
    ("coach.verl.actor.optim.lr=-1e-6", r"coach\.verl\.actor\.optim\.lr"),
    ("+player.verl.actor.optim.betas=[0.9,1.5]", r"player\.verl\.actor\.optim\.betas"),
    ("+coach.verl.actor.optim.weight_decay=-0.01", r"coach\.verl\.actor\.optim\.weight_decay"),
    ("+player.verl.actor.clip_ratio_low=-0.2", r"player\.verl\.actor\.clip_ratio_low"),
    ("+player.verl.actor.clip_ratio_high=abc", r"player\.verl\.actor\.clip_ratio_high"),
    ("player.verl.actor.kl_loss_coef=-1", r"player\.verl\.actor\.kl_loss_coef"),
    ("coach.verl.actor.entropy_coeff=lots", r"coach\.verl\.actor\.entropy_coeff"),
    ("coach.verl.rollout.temperature=hot", r"coach\.verl\.rollout\.temperature"),
    ("player.verl.rollout.top_p=1.5", r"player\.verl\.rollout\.top_p"),
    ("+coach.verl.rollout.top_k=-5", r"coach\.verl\.rollout\.top_k"),
    ("+player.verl.rollout.val_kwargs.top_p=0", r"player\.verl\.rollout\.val_kwargs\.top_p"),
    # null where verl's own default is a number: its dataclasses take it, the optimizer raised in a worker
    ("player.verl.actor.optim.lr=null", r"player\.verl\.actor\.optim\.lr"),
    ("player.verl.rollout.temperature=null", r"player\.verl\.rollout\.temperature"),
    ("coach.verl.actor.kl_loss_coef=null", r"coach\.verl\.actor\.kl_loss_coef"),
    ("backend.platform=tpu", r"backend\.platform"),
    ("trainer.experiment_name=null", r"trainer\.experiment_name"),
    ("trainer.default_local_dir=null", r"trainer\.default_local_dir"),
    # a whole group set to a value: a traceback from OmegaConf before
    ("filter=null", "filter"),
    ("validation=3", "validation"),
    # method floats: inf passed their ">= x" checks, nan the ones without a range
    ("warmup.lr=inf", r"warmup\.lr"),
    ("filter.coach_reserve=inf", r"filter\.coach_reserve"),
    ("filter.adaptive_margin=inf", r"filter\.adaptive_margin"),
    ("filter.oversample=inf filter.oversample_max=inf", r"filter\.oversample"),
    ("method=rent method.no_box_entropy=nan", r"method\.no_box_entropy"),
    ("method=rent method.no_box_entropy=-inf", r"method\.no_box_entropy"),
]


@pytest.mark.parametrize(("override", "key"), CLI_CASES, ids=[case[0] for case in CLI_CASES])
def test_a_bad_value_is_one_line_naming_its_key_and_exit_2_before_ray(override, key, tmp_path, monkeypatch, capsys):
    argv = [f"trainer.default_local_dir={tmp_path / 'run'}", override]
    assert run_cli(argv, monkeypatch) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and re.match(rf"config error: {key}[ :]", lines[0]), captured.err
    assert "Traceback" not in captured.out + captured.err


@pytest.mark.parametrize(("override", "key"), VALUE_CASES, ids=[case[0] for case in VALUE_CASES])
def test_a_bad_value_is_refused_naming_its_key(override, key):
    from cpmobius.config import compose_config
    from cpmobius.engine.config import build_policy_configs
    from cpmobius.methods import check_settings
    from cpmobius.settings import load_settings

    cfg = compose_config(override.split())
    with pytest.raises(ConfigError, match=rf"^{key}[ :]") as raised:
        check_settings(load_settings(cfg))  # a method's own keys: its settings class (`cpmobius.methods`)
        build_policy_configs(cfg)
    assert "\n" not in str(raised.value)


def test_the_run_folder_being_a_file_is_named(tmp_path):
    from cpmobius.engine.run_folders import check_output_dir

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match=r"^trainer\.default_local_dir: cannot create .*a_file is a file"):
        check_output_dir(str(blocker / "run"))


def test_an_unwritable_run_folder_is_named(tmp_path):
    from cpmobius.engine.run_folders import check_output_dir

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK) and os.geteuid() == 0:
            pytest.skip("root writes into a read-only folder")
        with pytest.raises(ConfigError, match=r"^trainer\.default_local_dir: cannot create"):
            check_output_dir(str(locked / "run"))
    finally:
        locked.chmod(0o700)


def test_a_good_run_folder_is_left_as_it_was(tmp_path):
    from cpmobius.engine.run_folders import check_output_dir

    check_output_dir(str(tmp_path / "new" / "run"))
    assert list(tmp_path.iterdir()) == []  # nothing created, the write probe removed


@pytest.mark.parametrize("below", ["", "run"])
def test_a_run_folder_behind_a_dangling_link_is_named(tmp_path, below):
    from cpmobius.engine.run_folders import check_output_dir

    (tmp_path / "link").symlink_to(tmp_path / "unmounted" / "disk")
    folder = tmp_path / "link" / below if below else tmp_path / "link"
    with pytest.raises(
        ConfigError, match=r"^trainer\.default_local_dir: cannot create .* is a link to .*unmounted/disk"
    ):
        check_output_dir(str(folder))
