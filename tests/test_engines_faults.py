"""The engines benchmark tried as a hostile user would (issue 20, "Engines benchmark" and "Server
processes"): every reply a server can send becomes a counted fault, a run ends by its deadline and keeps
what finished, bad input is one line and exit 2, and no process of a server's tree outlives it (each
checked with psutil) — at the end of a run, on an exception, on a Ctrl-C of the parent, on a SIGKILL of
the parent (from its main thread or from a thread that has ended), a child in a session of its own, a
worker whose server was killed. Against the stand-in server (tests/fake_openai_server.py); no model."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import fake_openai_server
import pytest

import psutil

from helpers.benchmark import harness, client, guidellm_runner, plans, process
from helpers.benchmark.metrics import SLO, summarize
from helpers.benchmark.servers import EngineConfig

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import engines  # noqa: E402 - scripts/engines.py: make engines' command line
main = engines.main

HERE = Path(__file__).resolve().parent
FAKE = fake_openai_server.COMMAND
fake, trace, left = fake_openai_server.start, fake_openai_server.trace, fake_openai_server.left


from test_engines import no_server_left_behind  # noqa: E402,F401  (autouse: no server outlives a test)


def _child_pid(srv: process.ServerProcess, within_s: float = 15.0) -> int:
    t0 = time.time()
    while time.time() - t0 < within_s:
        m = re.search(r"child pid (\d+)", srv.log_tail(50))
        if m:
            return int(m.group(1))
        time.sleep(0.1)
    raise AssertionError(f"no child pid in the log:\n{srv.log_tail()}")


# ------------------------------------------------------------------ every reply a counted fault

@pytest.mark.parametrize("kind", ["usage-number", "usage-string", "usage-nan", "chunk-list", "choices-string",
                                  "not-json"])
def test_a_malformed_reply_is_a_counted_fault_not_a_crash(kind):
    with fake("--reply", kind, "--token-s", "0.002") as srv:
        recs = client.run_load(srv.base_url, "m", trace(3), concurrency=2, timeout_s=10)
    s = summarize(recs, "fake", 2)
    assert s.errors == {"malformed reply": 3} and s.run_failed, [r.detail for r in recs]
    assert all(r.ttft_s is None and r.itl_s is None for r in recs)


def test_a_malformed_reply_leaves_the_benchmark_running_and_writing(tmp_path):
    plan = plans.Plan({"w": trace(2)}, (1, 2), SLO(1.0, 0.5), guidellm_workload=None, timeout_s=10)
    cfg = EngineConfig("fake", "fake", FAKE + ["--reply", "chunk-list"], "m", "stand-in", ready_timeout_s=20)
    result = harness.run_config(cfg, plan)
    assert [r["errors"] for r in result["runs"]] == [{"malformed reply": 2}] * 2


def test_a_close_delimited_stream_cut_mid_way_is_a_failure():
    with fake("--cut-after", "2", "--token-s", "0.002") as srv:
        recs = client.run_load(srv.base_url, "m", trace(2, tokens=6), concurrency=1, timeout_s=10)
    assert {r.error for r in recs} == {"cut"} and all(len(r.token_times) == 2 for r in recs)
    assert "without a finish_reason, a usage chunk or [DONE]" in recs[0].detail
    with fake("--reply", "no-usage", "--token-s", "0.002") as srv:          # a stream that just stops
        assert {r.error for r in client.run_load(srv.base_url, "m", trace(1), 1, 10)} == {"cut"}


def test_absurd_usage_counts_are_refused_not_turned_into_an_itl():
    with fake("--reply", "usage-huge", "--token-s", "0.002") as srv:
        recs = client.run_load(srv.base_url, "m", trace(2, tokens=4), concurrency=1, timeout_s=10)
    assert {r.error for r in recs} == {"implausible usage"} and all(r.itl_s is None for r in recs)
    assert "usage.completion_tokens = 100000 for 4 text chunks and max_tokens = 4" in recs[0].detail


def test_stream_reader_rules_worked_by_hand():
    from helpers.benchmark.metrics import RequestRecord

    def read(lines, max_tokens=8):
        rec = RequestRecord(0, 0.0)
        r = client.StreamReader(rec, max_tokens)
        for now, line in enumerate(lines, 1):
            r.feed(line, now)
        r.finish()
        return rec

    text = 'data: {"choices": [{"text": "a"}]}'
    vllm_end = ['data: {"choices": [{"text": "", "finish_reason": "length"}]}',
                'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}', "data: [DONE]"]
    ok = read([text, text] + vllm_end)
    assert ok.ok and ok.output_tokens == 2 and ok.prompt_tokens == 3 and ok.token_times == [1, 2]
    assert read([text, text, "data: [DONE]"]).output_tokens == 2            # no usage: one token per chunk
    assert read([text, text]).error == "cut"
    assert read([text, 'data: {"choices": [{"text": "b"}], "usage": {"completion_tokens": 1}}']).error == \
        "implausible usage"                                                 # 2 chunks cannot be 1 token
    assert read([text, 'data: {"choices": [{"text": "b"}], "usage": {"completion_tokens": 9}}']).error == \
        "implausible usage"                                                 # more than max_tokens = 8
    assert read(['data: {"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]}']).ok   # chat
    for bad in ('data: {"choices": [{"text": 5}]}', 'data: {"choices": [1]}', 'data: {"usage": {"completion_tokens": true}}',
                'data: {"usage": {"completion_tokens": 2.0}}', 'data: {"choices": [{"delta": "x"}]}'):
        with pytest.raises(client.MalformedReply):
            read([bad])


def test_guidellm_rows_add_up_and_goodput_is_unknown_without_token_counts():
    raw = json.loads((HERE / "data" / "guidellm_run.json").read_text())
    b = raw["benchmarks"][0]
    s = guidellm_runner.reported(b, "x", SLO(10.0, 10.0))
    assert s.ok + s.failed == s.requests and sum(s.errors.values()) == s.failed and s.goodput_rps > 0
    for r in b["requests"]["successful"]:                 # a server that sent no usage
        r["output_metrics"]["text_tokens"] = None
    s = guidellm_runner.reported(b, "x", SLO(10.0, 10.0))
    assert (s.ok, s.failed, s.errors) == (0, s.requests, {guidellm_runner.NO_COUNT: s.requests})
    assert s.goodput_rps is None and s.run_failed


# ------------------------------------------------------------------ deadlines, interrupts, results kept

def test_a_stalling_target_ends_by_the_runs_deadline(tmp_path, monkeypatch):
    """Every request hangs: per-request timeouts alone would take levels × requests × 60 s; the run's
    deadline ends it in seconds, each level recorded (failed requests) or recorded as not run."""
    small = plans.Plan({"fixed": trace(4)}, (1, 2, 4), SLO(1.0, 0.1), timeout_s=60, deadline_s=3.0)
    monkeypatch.setattr(engines, "plan_for", lambda device, quick=False: small)
    out = tmp_path / "t.json"
    with fake("--hang-every", "1") as srv:
        t0 = time.time()
        data = engines.run_target(srv.base_url, "m", out)
        took = time.time() - t0
    assert took < 20, f"took {took:.0f} s"
    res = data["configs"][0]
    kinds = {f["kind"] for f in res["faults"]}
    assert "Deadline" in kinds or all(set(r["errors"]) <= {"deadline", "timeout"} for r in res["runs"])
    assert len(res["runs"]) + sum(f["kind"] == "Deadline" for f in res["faults"]) == 3
    assert json.loads(out.read_text())["complete"] is True


def test_ctrl_c_keeps_the_levels_that_finished(tmp_path, monkeypatch):
    small = plans.Plan({"fixed": trace(3)}, (1, 2, 3), SLO(1.0, 0.1), timeout_s=10)
    monkeypatch.setattr(engines, "plan_for", lambda device, quick=False: small)
    real, calls = client.run_load, []

    def interrupt_on_the_fourth(*a, **kw):       # two warm-ups, level 1, then Ctrl-C in level 2
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(harness.client, "run_load", interrupt_on_the_fourth)
    out = tmp_path / "t.json"
    with fake("--token-s", "0.002") as srv:
        assert main(["--target", srv.base_url, "--model", "m", "--out", str(out)]) == 130
    saved = json.loads(out.read_text())
    assert saved["interrupted"] is True and saved["complete"] is False
    assert [r["concurrency"] for r in saved["configs"][0]["runs"]] == [1]        # level 1 kept
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]                   # no temporary file left


def test_run_all_writes_the_result_as_each_level_ends(tmp_path, monkeypatch):
    from helpers.benchmark import servers

    cfg = EngineConfig("fake", "fake", FAKE + ["--token-s", "0.002"], "m", "stand-in", ready_timeout_s=20)
    monkeypatch.setattr(servers, "available", lambda profile, include: ([cfg], []))
    out = tmp_path / "e.json"
    seen = []
    real = harness.write_json_atomic
    monkeypatch.setattr(harness, "write_json_atomic",
                        lambda data, path: (seen.append(len(data["configs"][0]["runs"]) if data["configs"] else 0),
                                            real(data, path))[1])
    plan = plans.Plan({"w": trace(2)}, (1, 2), SLO(1.0, 0.5), guidellm_workload=None, timeout_s=10)
    data = harness.run_all("tiny", out, plan=plan, use_guidellm=False)
    assert seen[:2] == [1, 2] and data["complete"] and json.loads(out.read_text())["complete"]


# ------------------------------------------------------------------ bad input: one line, exit 2

@pytest.mark.parametrize("argv, says", [
    (["--profile", "bogus"], "unknown profile 'bogus'"),
    (["--target", "http://[::1", "--model", "m"], "is not a valid URL"),
    (["--target", "http://127.0.0.1:99999", "--model", "m"], "is not a valid URL"),
    (["--target", "ftp://x", "--model", "m"], "http(s)://HOST[:PORT]"),
    (["--target", "http://127.0.0.1:8000"], "--target needs --model"),
    (["--engines", "tgi"], "allowed: transformers, readable, vllm, sglang"),
    (["--deadline-s", "nan"], "finite number of seconds"),
    (["--deadline-s", "-1"], "finite number of seconds"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says, tmp_path, capsys):
    t0 = time.time()
    code = main(argv + ["--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and says in err, err
    assert time.time() - t0 < 30 and not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("out, says", [(".", "is a folder"), ("/proc/no/such/x.json", "cannot write the result")])
def test_a_bad_out_path_is_refused_before_anything_runs(out, says, capsys, monkeypatch):
    from helpers.benchmark import servers

    monkeypatch.setattr(servers, "available", lambda *a: pytest.fail("a server was looked for before --out"))
    assert main(["--out", out, "--engines", "transformers"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and err.count("\n") == 1


def test_loopback_servers_are_reached_directly_whatever_proxy_the_environment_names(monkeypatch):
    """A dead proxy in http_proxy: the health check and the client still reach 127.0.0.1; a remote host
    through that proxy fails with a message that names the proxy."""
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    with fake("--token-s", "0.002") as srv:
        assert [r.ok for r in client.run_load(srv.base_url, "m", trace(2), 2, timeout_s=10)] == [True, True]
    far = client.run_load("http://example.invalid:8000", "m", trace(1), 1, timeout_s=10)[0]
    assert far.error == "connection" and "through the proxy in http_proxy" in far.detail
    assert client.is_loopback("http://[::1]:8000") and client.is_loopback("http://localhost:1")
    assert not client.is_loopback("http://10.0.0.1:8000")
    env = process.no_proxy_env({"no_proxy": "corp.example"})
    assert env["no_proxy"] == "corp.example,127.0.0.1,localhost,::1" and "127.0.0.1" in env["NO_PROXY"]


# ------------------------------------------------------------------ server processes: nothing survives

def _tree(srv: process.ServerProcess, size: int) -> list[psutil.Process]:
    """The server's tree once it has `size` processes (its child starts before it serves), as psutil
    processes, polled with a generous deadline."""
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


def _parent(tmp_path, started: str = "main thread") -> tuple[subprocess.Popen, list[psutil.Process]]:
    """A Python process that starts the stand-in server (with a child in a session of its own) from its
    main thread, or from a thread that then ends, writes the server's tree and whether it still answers
    once that thread is gone, and waits; returns it and that tree."""
    out = tmp_path / "tree.json"
    start = 'ServerProcess(FAKE + ["--spawn-child", "session"], name="fake", ready_timeout_s=60).start()'
    body = f"srv = {start}" if started == "main thread" else (
        f"box = []\nt = threading.Thread(target=lambda: box.append({start}))\nt.start(); t.join()\nsrv = box[0]")
    script = tmp_path / "parent.py"
    script.write_text(f"""
import json, os, sys, threading, time
sys.path.insert(0, {str(HERE.parent)!r})
from helpers.benchmark.process import ServerProcess
from helpers.benchmark.client import run_load
from helpers.serving.traces import TraceRequest
FAKE = {FAKE!r}
{body}
while len(srv.tree()) < 2 and srv.alive():
    time.sleep(0.1)
answered = run_load(srv.base_url, "m", [TraceRequest(0, "x", 2)], 1, 30)[0].ok
open({str(out) + ".tmp"!r}, "w").write(json.dumps({{"tree": srv.tree(), "answered": answered}}))
os.replace({str(out) + ".tmp"!r}, {str(out)!r})
time.sleep(600)
""")
    parent = subprocess.Popen([sys.executable, str(script)])
    try:
        t0 = time.time()
        while not out.exists() and parent.poll() is None and time.time() - t0 < 120:
            time.sleep(0.1)
        assert out.exists(), f"the parent ended ({parent.poll()}) before it wrote its server's tree"
        info = json.loads(out.read_text())
        assert info["answered"], "the server stopped when the thread that started it ended"
        return parent, [psutil.Process(p) for p in info["tree"]]
    except BaseException:
        parent.kill()           # the kernel then ends its server (PR_SET_PDEATHSIG)
        raise


def test_nothing_of_a_server_is_left_when_its_parent_gets_a_ctrl_c(tmp_path):
    parent, procs = _parent(tmp_path)
    try:
        assert len(procs) == 2
        parent.send_signal(signal.SIGINT)           # KeyboardInterrupt: the process's atexit stops its servers
        parent.wait(60)
        assert left(procs) == [], "part of the server's tree outlived a Ctrl-C of its parent"
    finally:
        parent.kill()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("started", ["main thread", "a thread that has ended"])
def test_nothing_of_a_server_is_left_when_its_parent_is_killed(tmp_path, started):
    """SIGKILL: the parent runs no cleanup; the kernel sends the server SIGTERM (PR_SET_PDEATHSIG), which
    ends its child and itself — also when the thread that started it had ended long before."""
    parent, procs = _parent(tmp_path, started)
    try:
        assert len(procs) == 2
        parent.kill()
        parent.wait(60)
        assert left(procs) == [], "part of the server's tree outlived its killed parent"
    finally:
        parent.kill()


@pytest.mark.parametrize("where", ["group", "session"])
def test_a_servers_child_is_stopped_with_it_even_in_a_session_of_its_own(where):
    with fake("--spawn-child", where) as srv:
        child = psutil.Process(_child_pid(srv))
        assert child.pid in srv.tree()
    assert left([child]) == [], f"the server's child ({where}) outlived it"


def test_a_servers_worker_is_ended_when_the_server_itself_is_killed():
    """SIGKILL to the server: its worker, in a session of its own, is orphaned; it was seen in the
    server's tree, so stopping the server ends it too."""
    srv = fake("--spawn-child", "session").start()
    child = psutil.Process(_child_pid(srv))
    os.kill(srv.pid, signal.SIGKILL)
    assert not srv.alive(grace_s=30) and left([child], within_s=0) == [child]     # orphaned, still running
    srv.stop()
    assert left([child]) == []


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace_period():
    srv = fake("--ignore-sigterm", stop_grace_s=1.0).start()
    procs = [psutil.Process(p) for p in srv.tree()]
    t0 = time.time()
    srv.stop()
    assert time.time() - t0 < 30 and left(procs) == []


def test_a_missing_or_non_executable_binary_is_a_recorded_fault(tmp_path):
    plain = tmp_path / "server.sh"
    plain.write_text("#!/bin/sh\nexit 0\n")
    plan = plans.Plan({"w": trace(1)}, (1,), SLO(1.0, 0.5), guidellm_workload=None, timeout_s=5)
    for program, says in (("no-such-server-binary", "was not found on PATH"), (str(plain), "is not executable"),
                          (str(tmp_path), "is a folder")):
        with pytest.raises(process.ServerMissing, match=says):
            process.ServerProcess([program, "--port", "{port}"]).start()
        cfg = EngineConfig("missing", "fake", [program, "--port", "{port}"], "m", "absent", ready_timeout_s=5)
        result = harness.run_config(cfg, plan)
        assert result["runs"] == [] and result["faults"][0]["kind"] == "ServerMissing"
