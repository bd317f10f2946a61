"""A server as a child process: started on a free port of 127.0.0.1, waited for until it answers its
health check, its log captured to a file, and always stopped with everything it started.

    with ServerProcess(["transformers", "serve", folder, "--port", "{port}"], name="hf") as srv:
        ... srv.base_url ...                # http://127.0.0.1:PORT

A server is a tree of processes (vLLM: the API server, its EngineCore, a worker), ended as one (psutil):
SIGTERM to every process of it, a grace period, SIGKILL to what is left — when the `with` block ends
(on an exception or a Ctrl-C too), when `stop()` is called, and when this Python exits (atexit). Its
tree is every process below it, every process of the session it starts in (its own: a worker whose
parent died stays in it), and every process seen in it since it started (a worker that started a
session of its own and was then orphaned). When this process dies with no chance to clean up (SIGKILL),
the kernel sends the server SIGTERM (Linux: PR_SET_PDEATHSIG, set between fork and exec), and the
server ends its workers as it does on any SIGTERM. The kernel sends it when the *thread* that started
the child ends, so every child is started from one thread that lives as long as this process.
Requests to 127.0.0.1 never go through a proxy named in the environment.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import ctypes
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
from pathlib import Path
from typing import Iterable, Sequence

import psutil

from .. import checks

HOST = "127.0.0.1"
LOOPBACK_NO_PROXY = "127.0.0.1,localhost,::1"
PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_SPAWNER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="child-spawner")   # never ends
_LIVE: set = set()


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


# ----------------------------------------------------------------------------- a process tree

def spawn(argv: Sequence[str], log, env: dict | None = None, cwd=None, cpus: set[int] | None = None) -> psutil.Popen:
    """Start `argv` in a session of its own, its output to `log`, on `cpus` (None: any); on Linux the
    kernel sends it SIGTERM when this process dies, however it dies."""
    parent = os.getpid()

    def in_child():                                   # runs in the child, between fork and exec
        if cpus:
            os.sched_setaffinity(0, cpus)
        if _LIBC is not None:
            _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:                # this process died before the call
                os._exit(1)

    return _SPAWNER.submit(psutil.Popen, list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           env=no_proxy_env(os.environ if env is None else env), cwd=cwd, start_new_session=True,
                           preexec_fn=in_child).result()


def _running(p: psutil.Process) -> bool:
    """Alive: not gone, and not a zombie — a process whose main thread has exited shows as a zombie while
    its other threads still run (a server shutting down its thread pools), and is not gone yet."""
    try:
        return p.is_running() and (p.status() != psutil.STATUS_ZOMBIE or p.num_threads() > 1)
    except psutil.Error:
        return False


def tree(root: psutil.Process, seen: Iterable[psutil.Process] = ()) -> list[psutil.Process]:
    """The running processes of `root`'s tree: root, every process below it, every other process of its
    session (spawn starts one per child), and those of `seen` still running (psutil knows a reused pid)."""
    found = {root.pid: root}
    with contextlib.suppress(psutil.Error):
        found.update((p.pid, p) for p in root.children(recursive=True))
    for p in psutil.process_iter():
        with contextlib.suppress(OSError):
            if p.pid not in found and os.getsid(p.pid) == root.pid:
                found[p.pid] = p
    found.update((p.pid, p) for p in seen if p.pid not in found)
    return [p for p in found.values() if _running(p)]


def end_tree(proc: psutil.Popen, grace_s: float, seen: Iterable[psutil.Process] = ()) -> int | None:
    """SIGTERM to every process of `proc`'s tree, SIGKILL to what is left after `grace_s`; returns its exit
    code (the root is reaped as the child it is, so the code is its own)."""
    seen = list(seen)
    for sig, wait_s in (("terminate", grace_s), ("kill", 10.0)):
        procs = tree(proc, seen)
        for p in procs:
            with contextlib.suppress(psutil.Error):
                getattr(p, sig)()
        end = time.monotonic() + wait_s
        while procs and time.monotonic() < end:
            time.sleep(0.05)
            proc.poll()                                # reaps the root once it exits
            procs = [p for p in procs if _running(p)]
        if not tree(proc, seen):
            break
    proc.poll()
    return proc.returncode


def run_tool(argv: Sequence[str], log_path: Path, timeout_s: float, env: dict | None = None, cwd=None,
             cpus: set[int] | None = None) -> int | None:
    """Run a load generator (guidellm, vllm bench serve) to its end as a child like a server: on `cpus`,
    its output to `log_path`; its whole tree ended when it exits, on an exception or a Ctrl-C. Returns its
    exit code, None when it ran past `timeout_s`."""
    with open(log_path, "w") as log:
        proc = spawn(argv, log, env, cwd, cpus)
        try:
            return proc.wait(timeout_s)
        except psutil.TimeoutExpired:
            return None
        finally:
            end_tree(proc, 5.0)


def client_cpus(server_pid: int) -> set[int] | None:
    """The CPUs a load generator should run on beside a server that pins its compute: this process's CPUs
    less those any process of the server's tree is pinned to (vLLM's CPU build binds its worker to cores
    and leaves the rest to its engine, its API server and the client). None — run anywhere — when nothing
    is pinned, when the pinned cores are all there is, or where affinity cannot be read (not Linux)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    mine, taken = set(os.sched_getaffinity(0)), set()
    for p in tree(psutil.Process(server_pid)):
        with contextlib.suppress(psutil.Error):
            cpus = set(p.cpu_affinity())
            taken |= cpus if cpus < mine else set()
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
    for p in tree(psutil.Process(server_pid)):
        try:
            if (p.cmdline() or [""])[0].strip() not in titles:
                continue
            tids = [t.id for t in p.threads()]
        except psutil.Error:
            continue
        for tid in tids:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, tid, max(nice, os.getpriority(os.PRIO_PROCESS, tid)))
        changed.append(p.pid)
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


# ----------------------------------------------------------------------------- a server

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
        self.ready_timeout_s = checks.number(ready_timeout_s, "ready_timeout_s", positive=True, unit="seconds")
        self.stop_grace_s = checks.number(stop_grace_s, "stop_grace_s", positive=True, unit="seconds")
        if port is not None:
            port = checks.count(port, "port (None picks a free one)", 1, 65535)
        self.command, self.name, self.requested_port = [str(a) for a in command], name, port
        self.health_path, self.env = health_path, env
        self.port: int | None = None
        self.log_path = Path(log_dir or tempfile.mkdtemp(prefix=f"workshop-{name}-")) / f"{name}.log"
        self.proc: psutil.Popen | None = None
        self.argv: list[str] = []                      # the command line, as started
        self.seen: dict[int, psutil.Process] = {}      # every process seen in its tree
        self.ready_s: float | None = None
        self._log = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise ServerError(f"{self.name} is not started")
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def tree(self) -> list[int]:
        """The pids of this server's running tree (process.tree), each remembered for stop()."""
        if self.proc is None:
            return []
        self.seen.update((p.pid, p) for p in tree(self.proc, self.seen.values()))
        return [p.pid for p in tree(self.proc, self.seen.values())]

    def alive(self, grace_s: float = 0.0) -> bool:
        """Whether the server is running. With grace_s > 0, a server on its way out is waited for up to
        that long: one that died closes its sockets (the client sees connection errors) a moment before
        the kernel reports it exited, and a check made in that moment would call it alive."""
        if self.proc is None:
            return False
        if grace_s > 0:
            with contextlib.suppress(psutil.TimeoutExpired):
                self.proc.wait(timeout=grace_s)
        return self.proc.poll() is None

    def start(self) -> "ServerProcess":
        """Start the process and wait until it is ready; on any failure it is stopped and a ServerError
        (PortInUse, ServerNotReady, ServerDied, ServerMissing) says why, with the end of the log."""
        if self.alive():
            return self
        if self.requested_port is not None and port_in_use(self.requested_port):
            raise PortInUse(f"port {self.requested_port} on {HOST} is already taken by another process; "
                            "pass port=None to pick a free one, or stop what holds it")
        attempts = 1 if self.requested_port is not None else 3
        for attempt in range(attempts):
            self.port = self.requested_port or free_port()
            argv = [a.replace("{port}", str(self.port)).replace("{host}", HOST) for a in self.command]
            self.argv = [check_executable(argv[0], self.name), *argv[1:]]
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab", buffering=0)
            self.proc = spawn(self.argv, self._log, {**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})})
            _LIVE.add(self)
            try:
                self._wait_ready()
                self.tree()                            # its workers, remembered
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

    def _wait_ready(self) -> None:
        url = self.base_url + self.health_path
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # never through a proxy
        t0 = time.perf_counter()
        while True:
            if self.proc.poll() is not None:
                raise ServerDied(f"{self.name} exited with code {self.proc.returncode} before it was ready "
                                 f"(command: {' '.join(self.argv)}). End of its log:\n{self.log_tail()}")
            with contextlib.suppress(urllib.error.URLError, OSError):
                with direct.open(url, timeout=2) as r:
                    if r.status == 200:
                        self.ready_s = time.perf_counter() - t0
                        return
            if time.perf_counter() - t0 > self.ready_timeout_s:
                raise ServerNotReady(f"{self.name} did not answer {url} with 200 within {self.ready_timeout_s:g} s "
                                     f"(it was stopped). End of its log:\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self) -> int | None:
        """End the server's whole tree (process.end_tree); its exit code, None if it never started. Safe
        to call twice."""
        if self.proc is None:
            return None
        end_tree(self.proc, self.stop_grace_s, self.seen.values())
        if self._log is not None:
            self._log.close()
            self._log = None
        _LIVE.discard(self)
        return self.proc.returncode

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ServerProcess({self.name!r}, port={self.port}, pid={self.pid}, {'running' if self.alive() else 'stopped'})"


def live_servers() -> list[ServerProcess]:
    """Servers started by this Python process and not stopped yet."""
    return [s for s in list(_LIVE) if s.alive()]


def stop_all() -> int:
    """Stop every server this process started; returns how many were running."""
    live = live_servers()
    for s in list(_LIVE):
        s.stop()
    return len(live)


atexit.register(stop_all)
