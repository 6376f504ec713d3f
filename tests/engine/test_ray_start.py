"""`start_ray`: a Ray that cannot start is one clear error; the driver's SIGTERM handler survives ray.init."""

from __future__ import annotations

import signal

import pytest
import ray

from cpmobius.config import compose_config
from cpmobius.engine.sharing import RayStartError, start_ray


@pytest.fixture
def cfg():
    return compose_config([])


def test_a_ray_start_timeout_is_one_line_naming_rays_error(cfg, monkeypatch):
    def init(**kwargs):
        raise TimeoutError("The current node timed out during startup.\n  (raylet log: ...)")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(RayStartError) as raised:
        start_ray(cfg)
    message = str(raised.value)
    assert "\n" not in message and "TimeoutError: The current node timed out during startup." in message
    assert isinstance(raised.value.__cause__, TimeoutError)


def test_the_callers_sigterm_handler_is_put_back_after_ray_init(cfg, monkeypatch):
    def ours(signum, frame):
        pass

    def init(**kwargs):
        assert "runtime_env" in kwargs  # verl's runtime env, from ray_init_kwargs
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as Ray's driver does: it installs its own handler

    previous = signal.signal(signal.SIGTERM, ours)
    try:
        monkeypatch.setattr(ray, "is_initialized", lambda: False)
        monkeypatch.setattr(ray, "init", init)
        start_ray(cfg)
        assert signal.getsignal(signal.SIGTERM) is ours
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_running_ray_is_used_as_it_is(cfg, monkeypatch):
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "init", lambda **kwargs: pytest.fail("ray.init called although Ray is up"))
    start_ray(cfg)


# What ray 2.x's `ray.init` raises when a start-up wait runs out (ray/_private/node.py and services.py), and the
# line its GCS client logs before giving up.
RAY_TIMEOUTS = [
    Exception("The current node timed out during startup. This could happen because some of the raylet failed"),
    TimeoutError("Timed out after 60 seconds while waiting for node to startup. Did not find socket name ..."),
    RuntimeError("Failed to start GCS.  Last 0 lines of error files:\n\n.Please check gcs_server.out"),
    RuntimeError("Failed to connect to GCS within 60 seconds. GCS may have been killed."),
]


@pytest.mark.parametrize("error", RAY_TIMEOUTS, ids=["node", "driver", "gcs_start", "gcs_connect"])
def test_a_ray_start_that_times_out_names_the_cause_and_how_to_give_it_longer(cfg, monkeypatch, error):
    def init(**kwargs):
        raise error

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(RayStartError) as raised:
        start_ray(cfg)
    message = str(raised.value)
    first_line = str(error).splitlines()[0]
    assert "\n" not in message and message.startswith("Ray did not start in time") and first_line in message
    assert "RAY_gcs_rpc_server_reconnect_timeout_s=" in message and "RAY_gcs_server_request_timeout_seconds=" in message


def test_a_ray_start_error_that_is_no_timeout_gives_no_timeout_advice(cfg, monkeypatch):
    def init(**kwargs):
        raise ValueError("When connecting to an existing cluster, num_cpus and num_gpus must not be provided.")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(RayStartError, match=r"^Ray did not start \(ValueError: When connecting") as raised:
        start_ray(cfg)
    assert "RAY_gcs" not in str(raised.value)
