"""No process of a server's tree outlives it (each checked with psutil): at the end of a run, on an
exception, on a Ctrl-C of the benchmark (its signal handler ends every server within seconds, whatever it
was doing, and the record keeps what finished), on a Ctrl-C of a plain parent (atexit), when the parent is
SIGKILLed (PR_SET_PDEATHSIG, from its main thread or from a thread that has ended), when the benchmark's own
parent goes away (its watchdog), a child in a session of its own, a worker whose server was killed, a
server that ignores SIGTERM. Against the stand-in server (tests/fake_openai_server.py); the one real server
is `transformers serve` under the command line's Ctrl-C (slow)."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import fake_openai_server
import psutil
import pytest

from helpers import records
from servebench import harness, process, servers

ROOT = Path(__file__).resolve().parent.parent
FAKE = fake_openai_server.COMMAND
fake, left = fake_openai_server.start, fake_openai_server.left
EXIT_S = 30          # "within seconds", with room for a loaded 2-core laptop

from test_engines import no_server_left_behind  # noqa: E402,F401  (autouse: no server outlives a test)


def _child_pid(srv: process.ServerProcess, within_s: float = 30.0) -> int:
    t0 = time.time()
    while time.time() - t0 < within_s:
        m = re.search(r"child pid (\d+)", srv.log_tail(50))
        if m:
            return int(m.group(1))
        time.sleep(0.1)
    raise AssertionError(f"no child pid in the log:\n{srv.log_tail()}")


def _tree(srv, size: int):
    t0 = time.time()
    while len(srv.tree()) < size and time.time() - t0 < 60:
        time.sleep(0.1)
    assert len(srv.tree()) == size, srv.tree()
    return [psutil.Process(p) for p in srv.tree()]


def test_nothing_of_a_server_is_left_when_its_run_ends():
    with fake("--spawn-child", "session") as srv:
        procs = _tree(srv, 2)                       # the server and its child, in a session of its own
        assert {os.getsid(p.pid) for p in procs} == {srv.pid, procs[1].pid}
    assert left(procs) == []


def test_nothing_of_a_server_is_left_after_an_exception():
    with pytest.raises(RuntimeError, match="a cell failed"):
        with fake("--spawn-child", "group") as srv:
            procs = _tree(srv, 2)
            raise RuntimeError("a cell failed")
    assert left(procs) == []


def _parent(tmp_path, started: str = "main thread", handlers: bool = True, grandparent: bool = False):
    """A Python process that starts the stand-in server (with a child in a session of its own) — from its
    main thread or from a thread that then ends; with the command line's signal handling (`handlers`) or
    none — writes the server's tree and waits. `grandparent`: started by another Python process, which
    waits. Returns (the process the test holds, the tree, the parent's pid)."""
    out = tmp_path / "tree.json"
    start = 'ServerProcess(FAKE + ["--spawn-child", "session"], name="fake", ready_timeout_s=60).start()'
    body = f"srv = {start}" if started == "main thread" else (
        f"box = []\nt = threading.Thread(target=lambda: box.append({start}))\nt.start(); t.join()\nsrv = box[0]")
    script = tmp_path / "parent.py"
    script.write_text(f"""
import json, os, sys, threading, time
sys.path.insert(0, {str(ROOT)!r})
from servebench.process import ServerProcess, on_signals
FAKE = {FAKE!r}
{"on_signals()" if handlers else ""}
{body}
while len(srv.tree()) < 2 and srv.alive():
    time.sleep(0.1)
open({str(out) + ".tmp"!r}, "w").write(json.dumps({{"tree": srv.tree(), "pid": os.getpid()}}))
os.replace({str(out) + ".tmp"!r}, {str(out)!r})
time.sleep(600)
""")
    argv = [sys.executable, str(script)]
    if grandparent:
        argv = [sys.executable, "-c", f"import subprocess, sys, time; subprocess.Popen({argv!r}); time.sleep(600)"]
    holder = subprocess.Popen(argv)
    try:
        t0 = time.time()
        while not out.exists() and holder.poll() is None and time.time() - t0 < 120:
            time.sleep(0.1)
        assert out.exists(), f"the parent ended ({holder.poll()}) before it wrote its server's tree"
        info = json.loads(out.read_text())
        return holder, [psutil.Process(p) for p in info["tree"]], info["pid"]
    except BaseException:
        holder.kill()
        raise


@pytest.mark.parametrize("handlers", [True, False], ids=["the command line's handler", "a plain parent (atexit)"])
def test_a_ctrl_c_of_the_parent_ends_the_servers_tree_within_seconds(tmp_path, handlers):
    parent, procs, _ = _parent(tmp_path, handlers=handlers)
    try:
        assert len(procs) == 2
        t0 = time.time()
        parent.send_signal(signal.SIGINT)
        parent.wait(EXIT_S)
        assert left(procs, within_s=EXIT_S) == [], "part of the server's tree outlived a Ctrl-C of its parent"
        assert time.time() - t0 < EXIT_S
        if handlers:
            assert parent.returncode == 128 + signal.SIGINT
    finally:
        parent.kill()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("started", ["main thread", "a thread that has ended"])
def test_nothing_of_a_server_is_left_when_its_parent_is_killed(tmp_path, started):
    """SIGKILL: the parent runs no cleanup; the kernel sends the server SIGTERM (PR_SET_PDEATHSIG), which
    ends its child and itself, also when the thread that started it had ended long before."""
    parent, procs, _ = _parent(tmp_path, started, handlers=False)
    try:
        parent.kill()
        parent.wait(60)
        assert left(procs) == [], "part of the server's tree outlived its killed parent"
    finally:
        parent.kill()


def test_a_second_sigterm_while_the_server_ends_its_child_still_ends_both():
    """A parent's death signal comes again for each of the parent's threads the server is handed to as they
    exit (two SIGTERMs in a third of the runs on a loaded machine): the second arrives while the server
    waits for its child to stop, and must not stall that ending."""
    with fake("--spawn-child", "session", "--child-exit-s", "1") as srv:
        procs = _tree(srv, 2)
        os.kill(srv.pid, signal.SIGTERM)
        time.sleep(0.3)                             # the server is now waiting for its child
        os.kill(srv.pid, signal.SIGTERM)
        assert left(procs, within_s=EXIT_S) == []


def test_the_benchmark_ends_its_servers_when_its_own_parent_goes_away(tmp_path):
    """A notebook kernel killed: the benchmark (here the parent script, with the command line's handling)
    sees its parent gone, ends its servers and exits."""
    holder, procs, pid = _parent(tmp_path, grandparent=True)
    try:
        holder.kill()
        holder.wait(60)
        assert left(procs + [psutil.Process(pid)], within_s=EXIT_S) == []
    finally:
        holder.kill()
        if psutil.pid_exists(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("where", ["group", "session"])
def test_a_servers_child_is_stopped_with_it_even_in_a_session_of_its_own(where):
    with fake("--spawn-child", where) as srv:
        child = psutil.Process(_child_pid(srv))
        assert child.pid in srv.tree()
    assert left([child]) == [], f"the server's child ({where}) outlived it"


def test_a_servers_worker_is_ended_when_the_server_itself_is_killed():
    """SIGKILL to the server: its worker, in a session of its own, is orphaned; it was seen in the server's
    tree, so stopping the server ends it too."""
    srv = fake("--spawn-child", "session").start()
    child = psutil.Process(_child_pid(srv))
    srv.tree()
    os.kill(srv.pid, signal.SIGKILL)
    assert not srv.alive(grace_s=30) and left([child], within_s=0) == [child]     # orphaned, still running
    srv.stop()
    assert left([child]) == []


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace_period():
    srv = fake("--ignore-sigterm", stop_grace_s=1.0).start()
    procs = [psutil.Process(p) for p in srv.tree()]
    t0 = time.time()
    srv.stop()
    assert time.time() - t0 < EXIT_S and left(procs) == []


def test_a_missing_or_non_executable_binary_is_a_recorded_fault(tmp_path):
    plain = tmp_path / "server.sh"
    plain.write_text("#!/bin/sh\nexit 0\n")
    plan = harness.Plan("t", (1,), (), requests=1, repeats=1)
    for program, says in (("no-such-server-binary", "was not found on PATH"), (str(plain), "is not executable"),
                          (str(tmp_path), "is a folder")):
        with pytest.raises(process.ServerMissing, match=says):
            process.ServerProcess([program, "--port", "{port}"]).start()
        cfg = servers.EngineConfig("missing", "fake", [program, "--port", "{port}"], "m", "absent", ready_timeout_s=5)
        result = {"runs": [], "faults": []}
        harness.run_config(cfg, plan, result, tmp_path / "w", lambda: None)
        assert result["runs"] == [] and result["faults"][0]["kind"] == "ServerMissing"


def test_a_server_dying_mid_run_is_a_fault_and_the_runs_before_it_stay(tmp_path):
    plan = harness.Plan("t", (1,), (), requests=3, repeats=4, output_tokens=2)
    cfg = servers.EngineConfig("dies", "fake", FAKE + ["--die-after", "8"], "m", "", ready_timeout_s=30)
    result = {"runs": [], "faults": []}
    harness.run_config(cfg, plan, result, tmp_path / "w", lambda: None)
    assert 1 <= len(result["runs"]) < 4 and result["faults"][0]["kind"] == "ServerDied"


@pytest.mark.slow
@pytest.mark.skipif(not servers._installed("fastapi"), reason="needs transformers[serving]")
def test_a_ctrl_c_of_the_command_line_stops_a_real_server_and_keeps_what_finished(tmp_path):
    """`python -m servebench run` on the live plan, interrupted while `transformers serve` runs: it exits
    with 130 within seconds, nothing of the server is left, and the record says it was interrupted."""
    out = tmp_path / "live.json"
    proc = subprocess.Popen([sys.executable, "-m", "servebench", "run", "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        t0, tree = time.time(), []
        while time.time() - t0 < 300 and not (out.exists() and tree):
            tree = [p for p in psutil.Process(proc.pid).children(recursive=True) if "serve" in " ".join(p.cmdline())]
            time.sleep(0.5)
        assert tree and out.exists(), "no server ran, or no run finished, within 300 s"
        t0 = time.time()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(EXIT_S) == 130 and time.time() - t0 < EXIT_S
        assert left(tree, within_s=EXIT_S) == []
        data = records.load(out, "engines", roots=(tmp_path,))
        assert data["interrupted"] and data["configs"][0]["runs"]
    finally:
        proc.kill()
