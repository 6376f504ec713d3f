"""`start_ray`: a Ray that cannot start is one clear error; the driver's SIGTERM handler survives ray.init."""

from __future__ import annotations

import signal

import pytest
import ray

from cpmobius.engine.config import compose_config
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
