"""Process isolation: the persistent grading worker pool with hard deadlines (stage: grading).

Slow comparisons run in a small pool of worker processes (`worker.py`); a batch (or a single call)
has one deadline, `timeout_s` after the pool is ready, and any worker still busy at the deadline is
killed (SIGKILL) and replaced in the background. This holds in the main thread, worker threads,
subprocesses and Ray actors alike ("Statuses and timeouts" in the package docstring). Callers reach
the pool through `isolation.get_pool()`, looked up on this module at call time.

Departures from the paper / released code: hard per-batch wall-clock limits through process
isolation; a timeout is a status, never a silent 0.
"""

from __future__ import annotations

import atexit
import collections
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from typing import Any

_LOG = logging.getLogger(__name__)

# The worker imports this package's modules under a private name from this folder, so that it
# needs neither `cpmobius` on its sys.path nor `cpmobius/__init__.py` (nor this package's own).
_WORKER_BOOT = (
    "import sys,types\n"
    "if sys.path and sys.path[0] in ('', '.'): del sys.path[0]\n"
    "p=types.ModuleType('_cpmobius_grading_worker'); p.__path__=[sys.argv[1]]; sys.modules[p.__name__]=p\n"
    "import _cpmobius_grading_worker.worker as w\n"
    "w.main()\n"
)


def _readable(fds: list[int], timeout_s: float) -> list[int]:
    """File descriptors among `fds` that are readable (or closed) within timeout_s (poll, no FD_SETSIZE limit)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return [fd for fd, _ in poller.poll(max(0.0, timeout_s) * 1000.0)]


class _Worker:
    """One worker process (`worker.main`) and the unread part of its stdout."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER_BOOT, os.path.dirname(os.path.abspath(__file__))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
            close_fds=True,
            start_new_session=True,
        )
        self.fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        self.buf = b""

    def send(self, task: dict) -> None:
        self.proc.stdin.write(json.dumps(task).encode() + b"\n")  # type: ignore[union-attr]

    def read_line(self) -> bytes | None:
        """After poll() said readable: a full line, b"" on EOF, or None (partial)."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return b""
        self.buf += chunk
        if b"\n" not in self.buf:
            return None
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass


class _Pool:
    """Persistent worker processes; per-call deadlines; overrunning workers are killed and replaced."""

    STARTUP_TIMEOUT_S = 60.0

    def __init__(self, size: int) -> None:
        self.size = size
        self.pid = os.getpid()
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._alive = 0  # started or starting
        self._ready = 0  # started and ready (idle or busy)
        self._fatal: str | None = None
        self.kills = 0
        self._requests: collections.deque = collections.deque()
        self._wake = threading.Event()
        # Workers are started from this long-lived thread: their PR_SET_PDEATHSIG is tied to the
        # thread that forked them, so a short-lived caller thread must not be their parent.
        self._spawner = threading.Thread(target=self._spawn_loop, daemon=True, name="cpmobius-grading-pool")
        self._spawner.start()
        for _ in range(size):
            self._request(("spawn", None))

    def _request(self, req: tuple) -> None:
        if req[0] == "spawn":
            with self._cond:
                self._alive += 1
        self._requests.append(req)
        self._wake.set()

    def _spawn_loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            starting: list[tuple[_Worker, float]] = []
            while self._requests:
                kind, w = self._requests.popleft()
                if kind == "reap":
                    w.proc.wait()
                    continue
                try:
                    starting.append((_Worker(), time.monotonic() + self.STARTUP_TIMEOUT_S))
                except OSError as exc:
                    self._fail(f"cannot start a grading worker: {exc}")
            for w, deadline in starting:
                self._await_ready(w, deadline)

    def _await_ready(self, w: _Worker, deadline: float) -> None:
        line: bytes | None = None
        while line is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not _readable([w.fd], remaining):
                break
            line = w.read_line()
        msg = json.loads(line) if line else {}
        if msg.get("ready"):
            with self._cond:
                self._ready += 1
            self.release(w)
            return
        w.kill()
        w.proc.wait()
        self._fail(msg.get("fatal") or "grading worker did not start (is math-verify installed?)")

    def _fail(self, reason: str) -> None:
        _LOG.error("grading pool: %s", reason)
        with self._cond:
            self._alive -= 1
            self._fatal = reason
            self._cond.notify_all()

    def release(self, w: _Worker) -> None:
        with self._cond:
            self._idle.append(w)
            self._cond.notify_all()

    def discard(self, w: _Worker, *, replace: bool = True) -> None:
        w.kill()
        with self._cond:
            self._alive -= 1
            self._ready -= 1
        self._request(("reap", w))
        if replace:
            self._request(("spawn", None))

    def _acquire(self, until: float) -> _Worker | None:
        with self._cond:
            while not self._idle:
                remaining = until - time.monotonic()
                if remaining <= 0 or (self._fatal is not None and self._alive <= 0):
                    return None
                self._cond.wait(remaining)
            return self._idle.pop()

    def wait_ready(self) -> str | None:
        """Block while no worker is ready (start-up); returns the pool's failure reason or None.

        Waiting for workers that are still starting does not count against a call's deadline;
        waiting for workers busy with other callers does.
        """
        until = time.monotonic() + self.STARTUP_TIMEOUT_S
        with self._cond:
            while self._ready <= 0:
                if self._fatal is not None and self._alive <= 0:
                    return self._fatal
                remaining = until - time.monotonic()
                if remaining <= 0:
                    return "no grading worker became ready"
                self._cond.wait(remaining)
        return None

    def run(self, tasks: list[dict], timeout_s: float) -> list[tuple[str, Any]]:
        """Run tasks; returns (status, value) per task: ("ok", bool) / ("timeout"|"error", reason)."""
        out: list[tuple[str, Any]] = [("timeout", "deadline")] * len(tasks)
        if timeout_s <= 0:
            return out
        failure = self.wait_ready()
        if failure is not None:
            return [("error", failure)] * len(tasks)
        deadline = time.monotonic() + timeout_s
        pending = collections.deque(range(len(tasks)))
        inflight: dict[int, tuple[_Worker, int]] = {}
        while pending or inflight:
            while pending and time.monotonic() < deadline:
                w = self._acquire(deadline if not inflight else 0.0)
                if w is None:
                    break
                i = pending.popleft()
                try:
                    w.send(tasks[i])
                except OSError:
                    self.discard(w)
                    pending.appendleft(i)
                    continue
                inflight[w.fd] = (w, i)
            remaining = deadline - time.monotonic()
            if not inflight or remaining <= 0:
                if pending and not inflight and self._fatal is not None and self._alive <= 0:
                    for i in pending:
                        out[i] = ("error", self._fatal)
                break
            ready = _readable(list(inflight), min(remaining, 0.05) if pending else remaining)
            for fd in ready:
                w, i = inflight[fd]
                line = w.read_line()
                if line is None:
                    continue
                del inflight[fd]
                if not line:
                    out[i] = ("error", f"grading worker died (exit code {w.proc.poll()})")
                    self.discard(w)
                    continue
                self.release(w)
                msg = json.loads(line)
                if "r" in msg:
                    out[i] = ("ok", msg["r"])
                elif "resource" in msg:
                    out[i] = ("timeout", msg["resource"])
                else:
                    out[i] = ("error", msg.get("err", "unknown worker error"))
        for w, _ in inflight.values():  # still busy at the deadline: kill and replace
            self.kills += 1
            self.discard(w)
        return out

    def close(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
        for w in idle:
            w.kill()
            w.proc.wait()


_POOL: _Pool | None = None
_POOL_LOCK = threading.Lock()


def get_pool() -> _Pool:
    """The process's worker pool, started on first use (size: `CPMOBIUS_GRADING_WORKERS`)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.pid != os.getpid():  # a forked child builds its own pool
            size = int(os.environ.get("CPMOBIUS_GRADING_WORKERS", "0") or 0)
            _POOL = _Pool(size if size > 0 else min(8, max(2, os.cpu_count() or 2)))
        return _POOL


def shutdown_pool() -> None:
    """Stop the grading worker processes (they are restarted on demand). Safe to call twice."""
    global _POOL
    with _POOL_LOCK:
        pool, _POOL = _POOL, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()


atexit.register(shutdown_pool)
