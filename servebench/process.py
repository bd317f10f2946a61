"""A server as a child process on a free port of 127.0.0.1, ready when its health check answers, its log in a
file: `with ServerProcess(["transformers", "serve", folder, "--port", "{port}"]) as srv: srv.base_url`. Its
tree (every process below it, of its session, or seen in it: vLLM's API server, EngineCore, worker) is ended
with psutil (SIGTERM, GRACE_S, SIGKILL) at the end of the block, at exit, on SIGINT, SIGTERM or SIGHUP and
when this process's parent goes away (`on_signals`); when this process is killed the kernel sends the server
SIGTERM (Linux PR_SET_PDEATHSIG, fired when the *thread* that started it ends, one that never does, and again
for each thread it is handed to as they end: a server ends on the first and bears the next)."""
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
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Iterable, Sequence

import psutil

HOST = "127.0.0.1"
LOOPBACK = "127.0.0.1,localhost,::1"
GRACE_S = 3.0                     # SIGTERM, then this long, then SIGKILL
PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_SPAWNER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="child-spawner")   # never ends
_LIVE: set = set()                # servers and tools running now: ended at exit and on a signal


class ServerError(RuntimeError):
    """A server could not be started or died; the message carries the end of its log."""


PortInUse, ServerNotReady, ServerDied, ServerMissing = (type(n, (ServerError,), {}) for n in (
    "PortInUse", "ServerNotReady", "ServerDied", "ServerMissing"))


def check_executable(program: str, name: str = "server") -> str:
    found = shutil.which(program)
    if found:
        return found
    path = Path(program)
    why = ("is not executable (chmod +x it)" if path.is_file() else "is a folder, not a program" if path.is_dir()
           else "was not found" + ("" if os.sep in program else " on PATH"))
    raise ServerMissing(f"{name}: {program!r} {why}; install it (make setup) or give its full path")


def no_proxy_env(env: dict) -> dict:
    """`env` with the loopback names added to no_proxy / NO_PROXY."""
    out = dict(env)
    for key in ("no_proxy", "NO_PROXY"):
        have = [x for x in out.get(key, "").split(",") if x.strip()]
        out[key] = ",".join(have + [h for h in LOOPBACK.split(",") if h not in have])
    return out


def spawn(argv: Sequence[str], log, env: dict | None = None, cwd=None, cpus: set[int] | None = None) -> psutil.Popen:
    """Start `argv` in a session of its own, its output to `log`, on `cpus` (None: any)."""
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
    # a zombie whose other threads still run (a server shutting down its thread pools) is not gone yet
    try:
        return p.is_running() and (p.status() != psutil.STATUS_ZOMBIE or p.num_threads() > 1)
    except psutil.Error:
        return False


def tree(root: psutil.Process, seen: Iterable[psutil.Process] = ()) -> list[psutil.Process]:
    """`root`, its descendants, the processes of its session, and `seen`: those still running."""
    found = {root.pid: root}
    with contextlib.suppress(psutil.Error):
        found.update((p.pid, p) for p in root.children(recursive=True))
    for p in psutil.process_iter():
        with contextlib.suppress(OSError):
            if p.pid not in found and os.getsid(p.pid) == root.pid:
                found[p.pid] = p
    found.update((p.pid, p) for p in seen if p.pid not in found)
    return [p for p in found.values() if _running(p)]


def end_tree(proc: psutil.Popen, grace_s: float = GRACE_S, seen: Iterable[psutil.Process] = ()) -> int | None:
    """SIGTERM to `proc`'s tree, SIGKILL to what is left after `grace_s`; the root's exit code."""
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
    """A load generator (guidellm) run to its end like a server; None past `timeout_s`."""
    with open(log_path, "w") as log:
        tool = ServerProcess([], name="tool")
        tool.proc = spawn(argv, log, env, cwd, cpus)
        _LIVE.add(tool)
        try:
            return tool.proc.wait(timeout_s)
        except psutil.TimeoutExpired:
            return None
        finally:
            tool.stop(GRACE_S)


def client_cpus(server_pid: int) -> set[int] | None:
    """This process's CPUs less those the server's tree is pinned to (vLLM's CPU build pins its worker);
    None (anywhere) when nothing is pinned, nothing is left, or off Linux."""
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
    """The server's processes titled one of `titles` (they busy-wait with sched_yield() on a core the load
    shares) at `nice`, every thread; the pids changed."""
    changed = []
    for p in tree(psutil.Process(server_pid)) if titles and hasattr(os, "setpriority") else []:
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
    """The calling thread on `cpus` (None: as it is) for the block; affinity is per thread on Linux."""
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
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class ServerProcess:
    """One server child process: "{port}" and "{host}" in `command` filled in with a free port of 127.0.0.1
    (another when the server loses a race for it). Ready: GET `health_path` answers 200."""

    def __init__(self, command: Sequence[str], name: str = "server", health_path: str = "/health",
                 ready_timeout_s: float = 60.0, env: dict | None = None, log_dir: str | Path | None = None,
                 stop_grace_s: float = 5.0):
        self.ready_timeout_s, self.stop_grace_s = ready_timeout_s, stop_grace_s
        self.command, self.name, self.health_path, self.env = [str(a) for a in command], name, health_path, env
        self.port: int | None = None
        self.log_path = Path(log_dir) / f"{name}.log" if log_dir else None
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
        self.seen.update((p.pid, p) for p in (tree(self.proc, self.seen.values()) if self.proc else []))
        return [p.pid for p in tree(self.proc, self.seen.values())] if self.proc else []

    def alive(self, grace_s: float = 0.0) -> bool:
        """Whether it runs; `grace_s`: wait that long for one on its way out."""
        if self.proc is None:
            return False
        if grace_s > 0:
            with contextlib.suppress(psutil.TimeoutExpired):
                self.proc.wait(timeout=grace_s)
        return self.proc.poll() is None

    def start(self) -> "ServerProcess":
        """Start it and wait until ready; on a failure it is stopped and a ServerError says why, with its log."""
        if self.alive():
            return self
        for attempt in range(3):
            self.port = free_port()
            argv = [a.replace("{port}", str(self.port)).replace("{host}", HOST) for a in self.command]
            self.argv = [check_executable(argv[0], self.name), *argv[1:]]
            self.log_path = self.log_path or Path(tempfile.mkdtemp(prefix=f"workshop-{self.name}-")) / f"{self.name}.log"
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
                if "address already in use" not in str(exc).lower():
                    raise
                if attempt == 2:       # another process took the free port between our check and the bind
                    raise PortInUse(str(exc)) from None
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

    def stop(self, grace_s: float | None = None) -> int | None:
        """End the server's whole tree; its exit code (None: never started). Safe to call twice."""
        if self.proc is not None:
            end_tree(self.proc, self.stop_grace_s if grace_s is None else grace_s, self.seen.values())
        if self._log is not None:
            self._log.close()
        self._log = None
        _LIVE.discard(self)
        return self.proc and self.proc.returncode

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except (FileNotFoundError, AttributeError):
            return "(no log)"

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def stop_all(grace_s: float | None = None) -> int:
    """End every server and tool still running; how many there were."""
    live = list(_LIVE)
    for s in live:
        s.stop(grace_s)
    return len(live)


def on_signals(cleanup: Callable[[], None] = lambda: None, poll_s: float = 1.0) -> None:
    """The command line's exit, whatever it was doing: on SIGINT, SIGTERM or SIGHUP, and when its parent
    goes away (a notebook kernel killed), every server and tool is ended (GRACE_S, then SIGKILL),
    `cleanup()` runs (the record marked interrupted), and the process exits (130 for Ctrl-C)."""
    parent, done = os.getppid(), threading.Lock()

    def leave(code: int):
        if not done.acquire(blocking=False):
            return
        stop_all(GRACE_S)
        with contextlib.suppress(Exception):
            cleanup()
        os._exit(code)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: leave(128 + signum))

    def watch():
        while os.getppid() == parent:
            time.sleep(poll_s)
        leave(129)
    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


atexit.register(stop_all)
