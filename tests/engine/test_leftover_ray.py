"""What a killed launch left running is ended by the next start of the same run folder: the processes its record
names (same pid and start time) and any process naming its Ray session folder; nothing else. Dummy processes
stand in for Ray's (about 1 s)."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil
import pytest

from cpmobius.engine.sharing import RAY_PROCESSES_FILE, end_leftover_ray, leftover_ray_processes


def sleeper(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *args])


def identity(pid: int, shift_s: float = 0.0) -> dict:
    process = psutil.Process(pid)
    return {"pid": pid, "create_time": process.create_time() + shift_s, "name": process.name()}


@pytest.fixture
def processes():
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_a_killed_launchs_ray_processes_are_ended_and_nothing_else(tmp_path, processes):
    session = str(tmp_path / "ray" / "session_2026-01-01_00-00-00_000000_1")
    driver = sleeper()
    driver_identity = identity(driver.pid)
    driver.kill()  # the launch was killed
    driver.wait()
    agent = sleeper()  # recorded at start (Ray's agents rename themselves: no session folder in their title)
    raylet = sleeper(f"--session-dir={session}")  # not recorded, but names the session
    innocent = sleeper()  # a pid the record names, now another process (another start time)
    processes.extend([agent, raylet, innocent])
    record = {
        "session_dir": session,
        "driver": driver_identity,
        "processes": [identity(agent.pid), identity(innocent.pid, shift_s=-100.0)],
    }
    (tmp_path / RAY_PROCESSES_FILE).write_text(json.dumps(record))

    said = end_leftover_ray(tmp_path, grace_s=5.0)
    assert said is not None and "\n" not in said and "ended 2 Ray process(es)" in said
    assert agent.wait(timeout=10) is not None and raylet.wait(timeout=10) is not None
    assert innocent.poll() is None
    assert end_leftover_ray(tmp_path) is None  # the second start finds nothing left


def test_nothing_is_ended_while_the_launch_that_started_them_still_runs(tmp_path, processes):
    agent = sleeper()
    processes.append(agent)
    record = {"session_dir": "", "driver": identity(psutil.Process().pid), "processes": [identity(agent.pid)]}
    (tmp_path / RAY_PROCESSES_FILE).write_text(json.dumps(record))
    assert leftover_ray_processes(tmp_path) == [] and end_leftover_ray(tmp_path) is None
    assert agent.poll() is None


def test_a_run_folder_without_a_record_ends_nothing(tmp_path):
    assert end_leftover_ray(tmp_path) is None


def test_the_record_names_the_driver_its_session_and_only_what_ray_init_started(tmp_path, processes, monkeypatch):
    import ray

    from cpmobius.engine.sharing import record_ray_processes

    class Node:
        def get_session_dir_path(self):
            return "/tmp/ray/session_test"

    pretraining = sleeper()  # started before ray.init
    processes.append(pretraining)
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    gcs = sleeper()  # started by "ray.init"
    processes.append(gcs)
    monkeypatch.setattr(ray._private.worker, "_global_node", Node())
    record = json.loads(record_ray_processes(tmp_path, before).read_text())
    assert record["session_dir"] == "/tmp/ray/session_test" and record["driver"]["pid"] == psutil.Process().pid
    assert [entry["pid"] for entry in record["processes"]] == [gcs.pid]
