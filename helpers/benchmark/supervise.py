"""A server's supervisor: the process `ServerProcess` starts, which starts the server and makes sure that
nothing the server started outlives it. Standard library only (it runs as a file, not as the package).

    python helpers/benchmark/supervise.py --grace-s 5 [--parent-fd N] -- COMMAND ...

Why a process in between: a server is a tree of processes (vLLM: the API server, its EngineCore and a
Worker; guidellm: its worker processes), and signalling the server's process group misses the ones that
leave it — a child that starts a session of its own (setsid), a worker orphaned when its parent is
killed with SIGKILL (re-parented to init, out of anyone's reach). The supervisor:
- is a child subreaper (Linux: PR_SET_CHILD_SUBREAPER), so every orphan of the server's tree is
  re-parented to it rather than to init: all of them stay its descendants, found in /proc;
- ends the whole tree — SIGTERM to every descendant, SIGKILL to those left after the grace period (a
  process that ignores SIGTERM, as vLLM does while it starts, included) — when it is told to stop
  (SIGTERM, SIGINT, SIGHUP), when the server exits by itself (a worker it left is ended too), or when
  the process that started it is gone. That last it learns from a pipe: the parent holds the write
  end, and the read end (`--parent-fd`) reaches end-of-file when the parent dies, however it dies
  (SIGKILL included) and from whichever thread it started the server;
- exits with the server's exit code (128 + N when a signal N ended it), so the caller reads the server's.
"""
from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import time

POLL_S = 0.1
PR_SET_CHILD_SUBREAPER = 36


def process_table() -> list[tuple[int, int, str]]:
    """(pid, parent pid, state) of every process: /proc on Linux, `ps` elsewhere. State "Z": a zombie."""
    rows = []
    if os.path.isdir("/proc"):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    stat = f.read()
            except OSError:          # gone meanwhile
                continue
            fields = stat.rsplit(")", 1)[1].split()   # the command name, in parentheses, may hold anything
            rows.append((int(name), int(fields[1]), fields[0]))
        return rows
    out = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,state="], capture_output=True, text=True).stdout
    for line in out.splitlines():
        pid, ppid, state = line.split()[:3]
        rows.append((int(pid), int(ppid), state[0]))
    return rows


def descendants(pid: int) -> list[int]:
    """The live (not zombie) descendants of `pid`, parents before their children."""
    children: dict[int, list[tuple[int, str]]] = {}
    for p, ppid, state in process_table():
        children.setdefault(ppid, []).append((p, state))
    out, todo = [], [pid]
    while todo:
        for child, state in children.get(todo.pop(0), []):
            todo.append(child)
            if state != "Z":
                out.append(child)
    return out


def _signal_all(pids, sig) -> None:
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


class Supervisor:
    def __init__(self, command: list[str], grace_s: float, parent_fd: int | None):
        self.command, self.grace_s, self.parent_fd = command, grace_s, parent_fd
        self.server: int | None = None
        self.status: int | None = None     # the server's wait status, once reaped
        self.stop_asked = False

    def reap(self) -> None:
        """Collect every exited child (orphans re-parented here included); note the server's status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.server:
                self.status = status

    def parent_gone(self) -> bool:
        if self.parent_fd is None:
            return False
        ready, _, _ = select.select([self.parent_fd], [], [], 0)
        return bool(ready) and os.read(self.parent_fd, 1) == b""

    def end_tree(self) -> None:
        """SIGTERM to every descendant (again to any that appear), SIGKILL after the grace period."""
        me = os.getpid()
        deadline = time.monotonic() + self.grace_s
        while True:
            self.reap()
            left = descendants(me)
            if not left:
                return
            if time.monotonic() >= deadline:
                break
            _signal_all(left, signal.SIGTERM)
            time.sleep(0.05)
        for _ in range(100):                  # at most 5 s for the kernel to take them away
            _signal_all(left, signal.SIGKILL)
            self.reap()
            left = descendants(me)
            if not left:
                return
            time.sleep(0.05)

    def run(self) -> int:
        if sys.platform.startswith("linux"):
            import ctypes

            try:
                ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            except (OSError, AttributeError):  # pragma: no cover - the process group remains
                pass
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda *_: setattr(self, "stop_asked", True))
        try:
            self.server = os.posix_spawnp(self.command[0], self.command, os.environ)
        except OSError as exc:
            print(f"supervise: cannot start {self.command[0]!r}: {exc}", file=sys.stderr, flush=True)
            return 127
        print(f"supervise: server pid {self.server}", file=sys.stderr, flush=True)
        while self.status is None and not self.stop_asked and not self.parent_gone():
            self.reap()
            time.sleep(POLL_S)
        why = ("the server exited" if self.status is not None else
               "asked to stop" if self.stop_asked else "the process that started it is gone")
        print(f"supervise: {why}; ending what is left of its process tree", file=sys.stderr, flush=True)
        self.end_tree()
        if self.status is None:
            return 128 + signal.SIGKILL
        code = os.waitstatus_to_exitcode(self.status)
        return code if code >= 0 else 128 - code


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grace-s", type=float, default=5.0)
    p.add_argument("--parent-fd", type=int, default=None)
    p.add_argument("--cpus", default=None, help="CPUs the command (and what it starts) may run on: 1,3")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    if a.cpus:
        os.sched_setaffinity(0, {int(c) for c in a.cpus.split(",")})
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        p.error("a command to supervise is needed after --")
    return Supervisor(command, a.grace_s, a.parent_fd).run()


if __name__ == "__main__":
    sys.exit(main())
