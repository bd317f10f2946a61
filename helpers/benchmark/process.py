"""A server as a child process: started on a free port of 127.0.0.1, waited for until it answers its
health check, its log captured to a file, and always stopped.

    with ServerProcess(["transformers", "serve", folder, "--port", "{port}"], name="hf") as srv:
        ... srv.base_url ...                # http://127.0.0.1:PORT

Stopping is guaranteed four ways, from the most to the least orderly: leaving the `with` block (also
on an exception or a KeyboardInterrupt — a failed notebook cell, an interrupted kernel, a failed
test), an `atexit` hook when the Python process ends, a finalizer when the object is collected, and
the supervisor (`supervise.py`), the process actually started: it runs the server in a session of
its own, is the subreaper of the server's whole tree (a worker in a session of its own or orphaned by
a SIGKILL stays within reach), and ends that tree — SIGTERM, then SIGKILL after a grace period — when
it is asked to stop, when the server exits, and when this process is gone (a pipe it watches reaches
end-of-file: even a kernel killed with SIGKILL, from whichever thread it started the server, leaves no
server behind). Requests to 127.0.0.1 never go through a proxy named in the environment.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import Sequence

from .. import checks

HOST = "127.0.0.1"
SUPERVISOR = Path(__file__).with_name("supervise.py")
LOOPBACK_NO_PROXY = "127.0.0.1,localhost,::1"
_LIVE: "weakref.WeakSet[ServerProcess]" = weakref.WeakSet()


class ServerError(RuntimeError):
    """A server could not be started or died; the message carries the end of its log."""


class PortInUse(ServerError):
    """The port asked for is already taken on 127.0.0.1."""


class ServerNotReady(ServerError):
    """The server did not answer its health check within the time allowed."""


class ServerDied(ServerError):
    """The server process exited while it was expected to run."""


class ServerMissing(ServerError):
    """The server's program is not installed here, or is not executable."""


def check_executable(program: str, name: str = "server") -> str:
    """The path of `program` (a name on PATH or a path), or ServerMissing saying why it cannot run."""
    found = shutil.which(program)
    if found:
        return found
    path = Path(program)
    why = ("is not executable (chmod +x it)" if path.is_file() else
           "is a folder, not a program" if path.is_dir() else
           "was not found" + ("" if os.sep in program else " on PATH"))
    raise ServerMissing(f"{name}: {program!r} {why}; install it (make setup) or give its full path")


def no_proxy_env(env: dict) -> dict:
    """`env` with 127.0.0.1, localhost and ::1 added to no_proxy / NO_PROXY: a server's own requests to
    itself and a load generator's to this machine's servers never go to a proxy the environment names."""
    out = dict(env)
    for key in ("no_proxy", "NO_PROXY"):
        have = [x for x in out.get(key, "").split(",") if x.strip()]
        out[key] = ",".join(have + [h for h in LOOPBACK_NO_PROXY.split(",") if h not in have])
    return out


def descendants(pid: int) -> list[int]:
    """The live processes below `pid` in the process tree (the supervisor's own function)."""
    from .supervise import descendants as tree

    return tree(pid)


def spawn_supervised(argv: Sequence[str], log, env: dict, grace_s: float, cwd: str | Path | None = None,
                     cpus: set[int] | None = None) -> tuple[subprocess.Popen, int]:
    """Start `argv` under the supervisor, in a session of its own, output to `log`, on `cpus` (None: any).
    Returns (the supervisor's Popen, the write end of the pipe it watches: close it, or die, and the tree
    is ended)."""
    read_fd, write_fd = os.pipe()
    on = ["--cpus", ",".join(map(str, sorted(cpus)))] if cpus else []
    try:
        proc = subprocess.Popen([sys.executable, str(SUPERVISOR), "--grace-s", f"{grace_s:g}", "--parent-fd",
                                 str(read_fd), *on, "--", *argv], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=no_proxy_env(env), cwd=cwd, pass_fds=(read_fd,),
                                start_new_session=True)
    except BaseException:
        os.close(write_fd)
        raise
    finally:
        os.close(read_fd)
    return proc, write_fd


def client_cpus(server_pid: int) -> set[int] | None:
    """The CPUs a load generator should run on beside a server that pins its compute: this process's CPUs
    less those any process of the server's tree is pinned to (vLLM's CPU build binds its worker to cores
    and leaves the rest to its engine, its API server and the client). None — run anywhere — when nothing
    is pinned, when the pinned cores are all there is, or where affinity cannot be read (not Linux)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    mine, taken = set(os.sched_getaffinity(0)), set()
    for pid in descendants(server_pid):
        try:
            cpus = set(os.sched_getaffinity(pid))
        except OSError:
            continue
        if cpus < mine:
            taken |= cpus
    free = mine - taken
    return free if taken and free else None


SPINNER_NICE = 10


def yield_spinners(server_pid: int, titles: Sequence[str], nice: int = SPINNER_NICE) -> list[int]:
    """Run the processes of the server's tree whose title (the first word of their command line) is one
    of `titles` at `nice` (every thread: on Linux a nice value belongs to a thread). A process that
    busy-waits with sched_yield() on a core a load generator shares can keep the generator off that
    core for as long as it spins; at a lower priority it gives way. Returns the pids changed ([] where
    none matches, or off Linux). Raising a nice value needs no privilege; one that cannot be set is left."""
    changed = []
    if not titles or not hasattr(os, "setpriority"):
        return changed
    for pid in descendants(server_pid):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace").strip()
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        if title not in titles:
            continue
        for tid in tids:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, max(nice, os.getpriority(os.PRIO_PROCESS, tid)))
            except OSError:
                continue
        changed.append(pid)
    return changed


@contextlib.contextmanager
def pinned(cpus: set[int] | None):
    """Run the calling thread on `cpus` (None: leave it be) and give it back its CPUs afterwards; other
    threads, and processes this one starts from other threads, keep theirs (Linux: affinity is per thread)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


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


def _kill_group(proc: subprocess.Popen, grace_s: float, parent_fd: int | None = None) -> None:
    """Stop a supervised process: SIGTERM to its group (the supervisor then ends the server's tree within
    its grace period), and — should it not be gone a few seconds after that — SIGKILL to it, its group
    and every process below it. Closes the pipe's write end."""
    try:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                proc.terminate()
            try:
                proc.wait(grace_s + 10)
            except subprocess.TimeoutExpired:
                left = descendants(proc.pid)
                for sig_target in left:
                    try:
                        os.kill(sig_target, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    proc.kill()
                proc.wait(10)
    finally:
        if parent_fd is not None:
            try:
                os.close(parent_fd)
            except OSError:
                pass


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
        ready_timeout_s = checks.number(ready_timeout_s, "ready_timeout_s", positive=True, unit="seconds")
        stop_grace_s = checks.number(stop_grace_s, "stop_grace_s", positive=True, unit="seconds")
        if port is not None:
            port = checks.count(port, "port (None picks a free one)", 1, 65535)
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
        self.proc: subprocess.Popen | None = None       # the supervisor (supervise.py), which runs the server
        self.argv: list[str] = []                       # the server's command line, as started
        self._parent_fd: int | None = None
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
        """The supervisor's process id (the server and its workers are below it: tree())."""
        return self.proc.pid if self.proc else None

    def tree(self) -> list[int]:
        """The live processes of this server: the supervisor, the server, every worker below them."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        return [self.proc.pid, *descendants(self.proc.pid)]

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
        argv[0] = check_executable(argv[0], self.name)
        self.argv = argv
        self._log_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab", buffering=0)
        env = dict(os.environ, **(self.env or {}))
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc, self._parent_fd = spawn_supervised(argv, self._log, env, self.stop_grace_s)
        _LIVE.add(self)
        self._finalizer = weakref.finalize(self, _kill_group, self.proc, 2.0, self._parent_fd)

    def _wait_ready(self) -> None:
        url = self.base_url + self.health_path
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # never through a proxy
        t0 = time.perf_counter()
        while True:
            if self.proc.poll() is not None:
                raise ServerDied(f"{self.name} exited with code {self.proc.returncode} before it was ready "
                                 f"(command: {' '.join(self.argv)}). End of its log:\n{self.log_tail()}")
            try:
                with direct.open(url, timeout=2) as r:
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
        _kill_group(self.proc, self.stop_grace_s, self._parent_fd)
        self._parent_fd = None
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
