"""A server as a child process: started on a free port of 127.0.0.1, waited for until it answers its
health check, its log captured to a file, and always stopped.

    with ServerProcess(["transformers", "serve", folder, "--port", "{port}"], name="hf") as srv:
        ... srv.base_url ...                # http://127.0.0.1:PORT

Stopping is guaranteed four ways, from the most to the least orderly: leaving the `with` block (also
on an exception or a KeyboardInterrupt — a failed notebook cell, an interrupted kernel, a failed
test), an `atexit` hook when the Python process ends, a finalizer when the object is collected, and
on Linux the kernel itself (PR_SET_PDEATHSIG: the child gets SIGTERM when the thread that started it
dies, so even a kernel killed with SIGKILL leaves no server behind). Each server runs in its own
process group, and stopping signals the whole group (SIGTERM, then SIGKILL after a grace period).
"""
from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import Sequence

HOST = "127.0.0.1"
_LIVE: "weakref.WeakSet[ServerProcess]" = weakref.WeakSet()


class ServerError(RuntimeError):
    """A server could not be started or died; the message carries the end of its log."""


class PortInUse(ServerError):
    """The port asked for is already taken on 127.0.0.1."""


class ServerNotReady(ServerError):
    """The server did not answer its health check within the time allowed."""


class ServerDied(ServerError):
    """The server process exited while it was expected to run."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    """Whether something already holds `port` on 127.0.0.1 (binding it fails)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return True
        return False


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    os.setsid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
        except Exception:  # noqa: BLE001 - best effort: the other three guards remain
            pass


def _kill_group(proc: subprocess.Popen, grace_s: float) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.wait(10)


class ServerProcess:
    """One server child process. `command` is a list of arguments in which "{port}" and "{host}" are
    replaced; `port=None` picks a free one (and retries with another when the server loses a race for
    it). Readiness: GET `health_path` answers 200 within `ready_timeout_s`."""

    def __init__(self, command: Sequence[str], name: str = "server", port: int | None = None,
                 health_path: str = "/health", ready_timeout_s: float = 60.0, env: dict | None = None,
                 log_dir: str | Path | None = None, stop_grace_s: float = 5.0):
        if not command:
            raise ValueError("command must be a non-empty list of arguments, e.g. ['transformers', 'serve', ...]")
        if not any("{port}" in str(a) for a in command):
            raise ValueError("command must contain '{port}' where the port goes, e.g. ['--port', '{port}']")
        if ready_timeout_s <= 0:
            raise ValueError(f"ready_timeout_s must be > 0 seconds, got {ready_timeout_s}")
        if port is not None and not (isinstance(port, int) and 1 <= port <= 65535):
            raise ValueError(f"port must be a whole number in 1..65535 or None (pick a free one), got {port!r}")
        self.command = [str(a) for a in command]
        self.name = name
        self.requested_port = port
        self.port: int | None = None
        self.health_path = health_path
        self.ready_timeout_s = ready_timeout_s
        self.env = env
        self.stop_grace_s = stop_grace_s
        self._log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix=f"workshop-{name}-"))
        self.log_path = self._log_dir / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.ready_s: float | None = None
        self._log = None
        self._finalizer = None

    # ---------------------------------------------------------------- life cycle
    @property
    def base_url(self) -> str:
        if self.port is None:
            raise ServerError(f"{self.name} is not started")
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self, grace_s: float = 0.0) -> bool:
        """Whether the process is running. With grace_s > 0, a process on its way out is waited for up to
        that long: a server that died closes its sockets (the client sees connection errors) a moment before
        the kernel reports it exited, and a check made in that moment would call it alive."""
        if self.proc is None:
            return False
        if grace_s > 0:
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        return self.proc.poll() is None

    def start(self) -> "ServerProcess":
        """Start the process and wait until it is ready; on any failure it is stopped and a ServerError
        (PortInUse, ServerNotReady, ServerDied) says why, with the end of the log."""
        if self.alive():
            return self
        if self.requested_port is not None and port_in_use(self.requested_port):
            raise PortInUse(f"port {self.requested_port} on {HOST} is already taken by another process; "
                            "pass port=None to pick a free one, or stop what holds it")
        attempts = 1 if self.requested_port is not None else 3
        for attempt in range(attempts):
            self.port = self.requested_port or free_port()
            self._spawn()
            try:
                self._wait_ready()
                return self
            except ServerDied as exc:
                self.stop()
                lost_race = "address already in use" in str(exc).lower()
                if lost_race and self.requested_port is None and attempt + 1 < attempts:
                    continue  # another process took the free port between our check and the bind
                if lost_race:
                    raise PortInUse(str(exc)) from None
                raise
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _spawn(self) -> None:
        argv = [a.replace("{port}", str(self.port)).replace("{host}", HOST) for a in self.command]
        self._log_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab", buffering=0)
        env = dict(os.environ, **(self.env or {}))
        env.setdefault("PYTHONUNBUFFERED", "1")
        main = threading.current_thread() is threading.main_thread()
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env, preexec_fn=_die_with_parent if main else os.setsid)
        _LIVE.add(self)
        self._finalizer = weakref.finalize(self, _kill_group, self.proc, 2.0)

    def _wait_ready(self) -> None:
        url = self.base_url + self.health_path
        t0 = time.perf_counter()
        while True:
            if self.proc.poll() is not None:
                raise ServerDied(f"{self.name} exited with code {self.proc.returncode} before it was ready "
                                 f"(command: {' '.join(self.proc.args)}). End of its log:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        self.ready_s = time.perf_counter() - t0
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.perf_counter() - t0 > self.ready_timeout_s:
                raise ServerNotReady(f"{self.name} did not answer {url} with 200 within {self.ready_timeout_s:g} s "
                                     f"(it was stopped). End of its log:\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self) -> int | None:
        """Stop the whole process group (SIGTERM, then SIGKILL after the grace period); returns the exit
        code, None if it never started. Safe to call twice."""
        if self.proc is None:
            return None
        _kill_group(self.proc, self.stop_grace_s)
        if self._finalizer is not None:
            self._finalizer.detach()
        if self._log is not None:
            self._log.close()
            self._log = None
        _LIVE.discard(self)
        return self.proc.returncode

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.alive() else "stopped"
        return f"ServerProcess({self.name!r}, port={self.port}, pid={self.pid}, {state})"


def live_servers() -> list[ServerProcess]:
    """Servers started by this Python process and not stopped yet."""
    return [s for s in list(_LIVE) if s.alive()]


def stop_all() -> int:
    """Stop every server this process started; returns how many were running."""
    live = live_servers()
    for s in live:
        s.stop()
    return len(live)


atexit.register(stop_all)
