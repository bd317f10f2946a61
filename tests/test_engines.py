"""helpers.benchmark without a model: the metric definitions on recorded timestamps (worked by hand, and
guidellm's own figures), and every fault against a stand-in server process (tests/fake_openai_server.py)
— a server that dies mid-run, a request that times out, 4xx/5xx answers, a port already taken, a
server that never becomes ready — and that no server process outlives a test."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import fake_openai_server
import pytest

import psutil

from helpers.benchmark import harness, client, guidellm_runner, metrics, plans, process
from helpers.benchmark.metrics import SLO, RequestRecord, summarize
from helpers.benchmark.servers import EngineConfig
from helpers.serving.traces import chat_trace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import engines  # noqa: E402 - scripts/engines.py: make engines' command line

HERE = Path(__file__).resolve().parent
FAKE = fake_openai_server.COMMAND
fake, trace, left = fake_openai_server.start, fake_openai_server.trace, fake_openai_server.left


@pytest.fixture(autouse=True)
def no_server_left_behind():
    yield
    left = process.live_servers()
    process.stop_all()
    assert left == [], f"servers still running after the test: {left}"


# ------------------------------------------------------------------ metric definitions, by hand

def _hand_records():
    a = RequestRecord(0, sent_s=10.0, end_s=10.55, token_times=[10.2, 10.3, 10.5], output_tokens=3)
    b = RequestRecord(1, sent_s=10.0, end_s=10.5, token_times=[10.4, 10.45], output_tokens=2)
    c = RequestRecord(2, sent_s=10.05, end_s=10.1, status=500, error="http 500")
    return [a, b, c]


def test_request_metrics_worked_by_hand():
    a, b, c = _hand_records()
    assert a.ttft_s == pytest.approx(0.2) and a.e2e_s == pytest.approx(0.55)
    assert a.itl_s == pytest.approx((10.5 - 10.2) / 2)          # (last − first) / (tokens − 1) = 0.15
    assert a.gaps_s == pytest.approx([0.1, 0.2])
    assert b.ttft_s == pytest.approx(0.4) and b.itl_s == pytest.approx(0.05)
    assert not c.ok and c.ttft_s is None and c.itl_s is None
    one = RequestRecord(3, 0.0, 1.0, [0.5], 1)
    assert one.ok and one.itl_s is None                           # one token: no inter-token gap


def test_run_summary_worked_by_hand():
    s = summarize(_hand_records(), "hand", 2, SLO(ttft_s=0.3, tpot_s=0.1))
    assert (s.requests, s.ok, s.failed, s.errors) == (3, 2, 1, {"http 500": 1})
    assert s.duration_s == pytest.approx(0.55)                    # first sent 10.0 → last end 10.55
    assert s.output_tokens == 5 and s.output_tok_per_s == pytest.approx(5 / 0.55)
    assert s.ttft_s["ttft_mean"] == pytest.approx(0.3) and s.itl_s["itl_mean"] == pytest.approx(0.1)
    assert s.goodput_rps == 0.0                                   # a: TPOT 0.15 > 0.1; b: TTFT 0.4 > 0.3
    loose = summarize(_hand_records(), "hand", 2, SLO(ttft_s=0.5, tpot_s=0.2))
    assert loose.goodput_rps == pytest.approx(2 / 0.55)
    assert metrics.goodput(_hand_records(), SLO(0.25, 0.2), 0.55) == pytest.approx(1 / 0.55)  # only a
    assert not s.run_failed


def test_a_run_whose_requests_all_failed_is_a_failed_run():
    recs = [RequestRecord(i, 0.0, 0.1, status=422, error="http 422") for i in range(3)]
    s = summarize(recs, "x", 1)
    assert s.run_failed and s.ok == 0 and s.errors == {"http 422": 3} and s.output_tok_per_s == 0
    assert s.to_dict()["run_failed"] is True


def test_bad_inputs_say_what_is_allowed():
    with pytest.raises(ValueError, match="at least one"):
        summarize([], "x")
    with pytest.raises(ValueError, match="one output length"):
        guidellm_runner.run("http://x", "tok", chat_trace(4, sigma=0.6), [1], "/tmp")


def test_our_definitions_reproduce_guidellms_figures_from_its_own_timestamps():
    """guidellm computes TTFT and ITL itself; recomputed by `metrics` from the per-request timestamps it
    recorded (a real run against transformers serve), the means and medians are the same numbers."""
    raw = json.loads((HERE / "data" / "guidellm_run.json").read_text())
    for bench_ in raw["benchmarks"]:
        theirs = guidellm_runner.reported(bench_, "recorded")
        ours = summarize(guidellm_runner.records(bench_), "recorded", theirs.concurrency)
        assert ours.requests == theirs.requests == bench_["metrics"]["request_totals"]["total"]
        g = bench_["metrics"]
        assert ours.ttft_s["ttft_mean"] * 1e3 == pytest.approx(g["time_to_first_token_ms"]["successful"]["mean"], rel=1e-9)
        # medians: ours interpolates (numpy's default), guidellm takes a sample; both lie between the middle two
        ttfts = sorted(r.ttft_s * 1e3 for r in guidellm_runner.records(bench_))
        mid = ttfts[(len(ttfts) - 1) // 2], ttfts[len(ttfts) // 2]
        assert mid[0] - 1e-6 <= g["time_to_first_token_ms"]["successful"]["median"] <= mid[1] + 1e-6
        assert mid[0] <= ours.ttft_s["ttft_median"] * 1e3 <= mid[1]
        # guidellm weights each request's ITL by its tokens − 1; every request here made the same count
        assert ours.itl_s["itl_mean"] * 1e3 == pytest.approx(g["inter_token_latency_ms"]["successful"]["mean"], rel=1e-9)
        assert theirs.output_tokens == ours.output_tokens == g["output_token_count"]["successful"]["total_sum"]
        assert not theirs.run_failed
    assert [b["config"]["strategy"]["streams"] for b in raw["benchmarks"]] == [1, 4]


def test_guidellm_command_never_asks_for_output_tokens(tmp_path):
    if guidellm_runner.guidellm_bin() is None:
        pytest.skip("guidellm not installed")
    cmd = guidellm_runner.command("http://127.0.0.1:1", "tok", tmp_path / "p.jsonl", 32, [1, 8], 16, tmp_path / "o.json")
    line = " ".join(cmd)
    assert "max_tokens=32" in line and "output_tokens" not in line and "profile.streams 1,8" in line
    guidellm_runner.write_prompts(trace(2), tmp_path / "p.jsonl")
    assert [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()] == [{"prompt": "prompt 0"},
                                                                                          {"prompt": "prompt 1"}]


# ------------------------------------------------------------------ the server process

def test_server_starts_on_a_free_local_port_and_stops(tmp_path):
    with fake(log_dir=tmp_path) as srv:
        assert srv.alive() and srv.base_url.startswith("http://127.0.0.1:") and srv.ready_s is not None
        me = psutil.Process(srv.pid)
        assert process.live_servers() == [srv] and srv.tree() == [srv.pid]
        assert os.getsid(srv.pid) == srv.pid                        # a session of its own: signalled as one
        recs = client.run_load(srv.base_url, "m", trace(3, 5), concurrency=2)
        assert [r.ok for r in recs] == [True] * 3 and {r.output_tokens for r in recs} == {5}
    assert not srv.alive() and left([me]) == []
    assert "fake server on 127.0.0.1" in srv.log_tail()            # the log was captured
    assert srv.stop() is not None                                   # stopping twice is harmless


def test_a_port_already_taken_is_reported(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        with pytest.raises(process.PortInUse, match=f"port {taken} .* already taken"):
            fake(port=taken).start()


def test_a_free_port_lost_to_a_race_is_retried(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        ports = iter([taken])
        real = process.free_port
        monkeypatch.setattr(process, "free_port", lambda: next(ports, None) or real())
        with fake() as srv:
            assert srv.port != taken and srv.alive()


def test_a_server_that_never_becomes_ready_is_stopped_and_reported():
    srv = fake("--never-ready", ready_timeout_s=2)
    t0 = time.time()
    with pytest.raises(process.ServerNotReady, match="within 2 s"):
        srv.start()
    assert time.time() - t0 < 30 and not srv.alive() and left([srv.proc]) == []


def test_a_server_that_exits_at_start_is_reported_with_its_log():
    with pytest.raises(process.ServerDied, match="exited with code 3(.|\n)*exiting at start"):
        fake("--exit-at-start").start()


# ------------------------------------------------------------------ faults during a run

def test_http_errors_are_counted_and_the_run_goes_on():
    with fake("--fail-every", "3", "--fail-status", "500") as srv:
        s = summarize(client.run_load(srv.base_url, "m", trace(9), concurrency=3), "fake", 3)
    assert (s.requests, s.ok, s.failed, s.errors) == (9, 6, 3, {"http 500": 3}) and not s.run_failed


def test_a_rejected_request_4xx_is_counted_and_all_rejected_is_a_failed_run():
    with fake("--fail-every", "1", "--fail-status", "422") as srv:
        recs = client.run_load(srv.base_url, "m", trace(4), concurrency=2)
    s = summarize(recs, "fake", 2)
    assert s.run_failed and s.errors == {"http 422": 4}
    assert all(r.status == 422 and "injected fault" in r.detail for r in recs)


def test_a_request_that_times_out_is_counted():
    with fake("--hang-every", "4") as srv:
        t0 = time.time()
        s = summarize(client.run_load(srv.base_url, "m", trace(8), concurrency=4, timeout_s=1.5), "fake", 4)
    assert s.errors == {"timeout": 2} and s.ok == 6 and time.time() - t0 < 20


def test_a_server_that_dies_mid_run_leaves_counted_failures():
    with fake("--die-after", "4") as srv:
        recs = client.run_load(srv.base_url, "m", trace(8), concurrency=1, timeout_s=5)
        s = summarize(recs, "fake", 1)
        assert not srv.alive(grace_s=3)
    assert s.ok == 3 and s.failed == 5 and set(s.errors) == {"connection"}


def test_alive_waits_out_a_server_that_is_still_exiting():
    with fake("--die-after", "1", "--exit-delay-s", "2.0") as srv:
        recs = client.run_load(srv.base_url, "m", trace(1), concurrency=1, timeout_s=5)
        assert recs[0].error == "connection"
        assert srv.alive()                               # the connection dropped; the process not yet gone
        t0 = time.time()
        assert not srv.alive(grace_s=10) and time.time() - t0 < 5


def _cfg(*flags, timeout=20.0):
    return EngineConfig("fake" + "".join(flags), "fake", FAKE + list(flags), "m", "stand-in", ready_timeout_s=timeout)


def test_the_benchmark_reports_a_server_dying_mid_run_and_goes_on(tmp_path):
    plan = plans.Plan({"w": trace(4)}, (1, 2), SLO(1.0, 0.5), guidellm_workload=None, timeout_s=5)
    # warm-ups 1 + 2, example, 4; dies in the 2nd level, its connections dropped half a second before it exits
    died = harness.run_config(_cfg("--die-after", "9", "--exit-delay-s", "0.5"), plan)
    assert [r["concurrency"] for r in died["runs"]] == [1, 2]
    assert died["runs"][0]["ok"] == 4 and died["runs"][1]["errors"] == {"connection": 4}
    assert died["runs"][1]["run_failed"] and any(f["kind"] == "ServerDied" for f in died["faults"])
    never = harness.run_config(_cfg("--never-ready", timeout=1.5), plan)
    assert never["runs"] == [] and never["faults"][0]["kind"] == "ServerNotReady"
    fine = harness.run_config(_cfg(), plan)
    assert [r["ok"] for r in fine["runs"]] == [4, 4] and fine["faults"] == []
    assert fine["runs"][1]["goodput_rps"] > 0


def test_the_gpu_quick_plan_is_the_talks_workload_at_two_levels():
    full, quick = plans.plan_for("cuda"), plans.plan_for("cuda", quick=True)
    asked = lambda plan: sum(r.max_new_tokens for w in plan.workloads for r in plan.trace(w)) * len(plan.concurrencies)
    assert list(quick.workloads) == ["talk"] and quick.concurrencies == (1, 10)
    assert [r.max_new_tokens for r in quick.workloads["talk"]] == [r.max_new_tokens for r in full.workloads["talk"]]
    assert asked(quick) == 2 * 10 * 50 and asked(full) > 30 * asked(quick)   # ~36,000 tokens against 1,000
    assert quick.guidellm_workload is None and quick.slo == full.slo
    assert plans.plan_for("cpu", quick=True).concurrencies == (1, 4)


def test_the_command_line_runs_only_the_workloads_asked_for(tmp_path, monkeypatch, capsys):
    main = engines.main

    seen = {}

    def run_all(profile, out, quick, include, guidellm, plan, deadline_s=None, crosscheck=None):
        seen.update(cpu=plan("cpu"), cuda=plan("cuda"))
        return {"configs": [], "skipped": [], "seconds": 0.0}

    monkeypatch.setattr(engines, "run_all", run_all)
    assert main(["--quick", "--workloads", "fixed", "--out", str(tmp_path / "e.json")]) == 1   # no configuration ran
    assert list(seen["cpu"].workloads) == ["fixed"] and seen["cpu"].concurrencies == (1, 4)
    assert list(seen["cuda"].workloads) == ["talk"]          # the GPU's quick plan has no "fixed": all of it
    assert main(["--workloads", "fixd", "--out", str(tmp_path / "e.json")]) == 2
    assert "error: unknown workload(s) ['fixd']; allowed: agentic, chat, crosscheck, fixed, talk" in capsys.readouterr().err


def test_the_benchmark_writes_its_file_as_each_level_ends(tmp_path, monkeypatch):
    from helpers.benchmark import servers

    plan = plans.Plan({"w": trace(3)}, (1, 2), SLO(1.0, 0.5), guidellm_workload=None, timeout_s=5)
    monkeypatch.setattr(servers, "available", lambda profile, include: ([_cfg(), _cfg("--token-s", "0.001")], []))
    written, real = [], harness.write_json_atomic

    def spy(data, path):
        written.append([len(c["runs"]) for c in data["configs"]])
        return real(data, path)

    monkeypatch.setattr(harness, "write_json_atomic", spy)
    data = harness.run_all(out=tmp_path / "engines.json", use_guidellm=False, plan=plan)
    # each level of each configuration, then each configuration's end, then the end
    assert written == [[1], [2], [2], [2, 1], [2, 2], [2, 2], [2, 2]]
    assert data["complete"] and json.loads((tmp_path / "engines.json").read_text())["complete"]


def test_a_configuration_no_workload_runs_on_is_said_and_not_started(tmp_path, monkeypatch):
    """`--workloads fixed` keeps only the workload the tools measure, which runs on some configurations:
    the others are listed as skipped with the reason, and the run goes on (it used to stop in a
    StopIteration before any server ran; the GPU dry run met it with `--engines transformers`)."""
    from helpers.benchmark import servers

    one, other = _cfg(), _cfg("--token-s", "0.001")
    plan = plans.Plan({"w": trace(2)}, (1,), SLO(1.0, 0.5), guidellm_workload=None, timeout_s=5,
                        only={"w": (one.name,)})
    monkeypatch.setattr(servers, "available", lambda profile, include: ([one, other], []))
    data = harness.run_all(out=tmp_path / "engines.json", use_guidellm=False, plan=plan)
    assert data["complete"] and [c["config"]["name"] for c in data["configs"]] == [one.name]
    assert data["configs"][0]["runs"][0]["ok"] == 2
    assert {"name": other.name, "why": f"runs none of this plan's workloads (w only on {one.name})"} in data["skipped"]
    assert not plans.runs_some_workload(plan, other.name) and plans.runs_some_workload(plan, one.name)


def test_results_are_written_atomically(tmp_path):
    path = harness.write_json_atomic({"a": 1}, tmp_path / "r" / "engines.json")
    assert json.loads(path.read_text()) == {"record_format": 1, "kind": "engines", "a": 1}
    assert [p.name for p in path.parent.iterdir()] == ["engines.json"]

    class Boom:
        pass

    with pytest.raises(TypeError, match="cannot hold"):
        harness.write_json_atomic({"a": 2, "b": Boom()}, path)
    assert json.loads(path.read_text())["a"] == 1 and len(list(path.parent.iterdir())) == 1   # old file intact


def _sse_server(close_each: bool, chunks: int = 3, cut: bool = False, done: bool = True):
    """A bare HTTP/1.1 server on a thread: each POST answered with `chunks` SSE events (chunked coding);
    `close_each`: the connection closed after each answer, with no `Connection: close` said; `cut`: closed
    before the chunked coding's end, after the events (`done`: they end with [DONE]) or before them."""
    import socket as sk
    import threading

    srv = sk.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    accepted = []
    events = b"".join(b'data: {"choices": [{"text": "t%d"}]}\n\n' % i for i in range(chunks))
    if done:
        events += (b'data: {"choices": [{"text": "", "finish_reason": "length"}], "usage": {"completion_tokens": %d}}'
                   b"\n\ndata: [DONE]\n\n" % chunks)
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"%x\r\n%s\r\n" % (len(events), events)) + (b"" if cut else b"0\r\n\r\n")

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            accepted.append(conn)
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        break
                    buf += data
                if b"\r\n\r\n" not in buf:
                    break
                head, _, buf = buf.partition(b"\r\n\r\n")
                n = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
                while len(buf) < n:
                    buf += conn.recv(65536)
                buf = buf[n:]
                conn.sendall(answer)
                if close_each or cut:
                    break
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, accepted


@pytest.mark.parametrize("close_each", [False, True])
def test_the_client_keeps_its_connection_and_replaces_one_the_server_closed(close_each):
    """Our client keeps its connections (aiohttp's pool): one connection carries every request of a closed
    loop at concurrency 1, and one the server closed after its answer is not used again, never a fault."""
    srv, accepted = _sse_server(close_each)
    try:
        reqs = chat_trace(4, seed=0, prompt_words_median=5, output_tokens_median=3, sigma=0.0)
        recs = client.run_load(f"http://127.0.0.1:{srv.getsockname()[1]}", "m", reqs, 1, 10)
        assert [r.error for r in recs] == [None] * 4 and [r.output_tokens for r in recs] == [3] * 4
        assert all(len(r.token_times) == 3 and r.status == 200 for r in recs)
        assert len(accepted) == (4 if close_each else 1)
    finally:
        srv.close()


@pytest.mark.parametrize("done", [True, False])
def test_an_answer_cut_after_it_said_it_was_complete_is_not_a_fault(done):
    """A connection that closes after `data: [DONE]` but before the chunked coding's last bytes (a server
    that hangs up once the answer is out) leaves a whole answer; one that closes before it is cut."""
    srv, _ = _sse_server(True, cut=True, done=done)
    try:
        rec = client.run_load(f"http://127.0.0.1:{srv.getsockname()[1]}", "m", trace(1, 3), 1, 10)[0]
    finally:
        srv.close()
    if done:
        assert rec.error is None and rec.output_tokens == 3 and len(rec.token_times) == 3
    else:
        assert rec.error == "connection" and "ClientPayloadError" in rec.detail


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and two CPUs")
def test_load_generators_run_on_the_cores_a_server_leaves_free(tmp_path):
    """A server whose worker is pinned to one core (what vLLM's CPU build does): client_cpus gives the other
    cores; `pinned` moves only the calling thread and gives it its CPUs back; a server pinned nowhere: None."""
    mine = set(os.sched_getaffinity(0))
    first = min(mine)
    with open(tmp_path / "log", "w") as log:
        p = process.spawn([sys.executable, "-c", "import time; time.sleep(60)"], log, cpus={first})
        try:
            assert os.sched_getaffinity(p.pid) == {first}                # pinned between fork and exec
            assert process.client_cpus(p.pid) == mine - {first}
        finally:
            process.end_tree(p, 1.0)
    with fake("--token-s", "0.001") as srv:
        assert process.client_cpus(srv.pid) is None
    with process.pinned(mine - {first}):
        assert os.sched_getaffinity(0) == mine - {first}
    assert os.sched_getaffinity(0) == mine


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_a_servers_busy_waiting_process_gives_way_to_the_load(tmp_path):
    """yield_spinners lowers the priority of the server tree's processes with the given title (their
    command line's first word: what vLLM's setproctitle shows), every thread of them, and no other."""
    script = ("import subprocess, time; subprocess.Popen(['bash', '-c', 'exec -a VLLM::EngineCore sleep 60']); "
              "subprocess.Popen(['bash', '-c', 'exec -a VLLM::Worker sleep 60']); time.sleep(60)")
    with open(tmp_path / "log", "w") as log:
        p = process.spawn([sys.executable, "-c", script], log)
        try:
            deadline = time.monotonic() + 60
            titles = {}
            while len(titles) < 2 and time.monotonic() < deadline:     # the two children, once they exec'd
                titles = {c.pid: c.cmdline()[:1] for c in p.children() if c.cmdline()[:1] in (["VLLM::EngineCore"],
                                                                                             ["VLLM::Worker"])}
                time.sleep(0.05)
            spinner = next(pid for pid, t in titles.items() if t == ["VLLM::EngineCore"])
            others = [p.pid] + [pid for pid in titles if pid != spinner]
            assert process.yield_spinners(p.pid, ("VLLM::EngineCore",)) == [spinner]
            assert os.getpriority(os.PRIO_PROCESS, spinner) == process.SPINNER_NICE == 10
            assert all(os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0) for pid in others)
            assert process.yield_spinners(p.pid, ()) == [] and process.yield_spinners(p.pid, ("nothing",)) == []
        finally:
            process.end_tree(p, 1.0)


def test_agentic_rounds_run_one_after_another_and_poisson_arrivals_are_honoured():
    from helpers.serving.traces import agentic_trace

    reqs = agentic_trace(agents=3, review_rounds=1, system_words=20, proposal_tokens=3, review_tokens=2)
    with fake("--token-s", "0.005") as srv:
        recs = {r.rid: r for r in client.run_load(srv.base_url, "m", reqs, concurrency=3)}
        assert len(recs) == 6 and all(r.ok for r in recs.values())
        round0 = [recs[q.rid] for q in reqs if q.round == 0]
        round1 = [recs[q.rid] for q in reqs if q.round == 1]
        assert min(r.sent_s for r in round1) >= max(r.end_s for r in round0)     # reviews read the proposals
        assert {r.output_tokens for r in round0} == {3} and {r.output_tokens for r in round1} == {2}
        timed = chat_trace(4, seed=3, rate_per_s=20.0, output_tokens_median=2, sigma=0.0)
        got = sorted(client.run_load(srv.base_url, "m", timed, concurrency=4, honour_arrivals=True),
                     key=lambda r: r.rid)
    t0 = got[0].sent_s
    for q, r in zip(timed, got):
        assert r.sent_s - t0 >= q.arrival_s - 0.02        # never sent before its arrival time


# ------------------------------------------------------------------ an external server (the multi-GPU case)

def test_the_benchmark_measures_a_server_that_is_already_running(tmp_path, monkeypatch):
    """`python scripts/engines.py --target URL --model NAME`: the same workloads and levels against a
    server started elsewhere; nothing is started or stopped, faults are counted, the JSON is written."""
    from helpers.benchmark import harness
    main = engines.main

    small = plans.Plan({"fixed": trace(4, tokens=3)}, (1, 2), metrics.SLO(ttft_s=1.0, tpot_s=0.1), timeout_s=10)
    monkeypatch.setattr(engines, "plan_for", lambda device, quick=False: small)
    with fake("--token-s", "0.005", "--fail-every", "5", "--fail-status", "503") as srv:
        out = tmp_path / "target.json"
        data = engines.run_target(srv.base_url, "m", out)
        assert srv.alive()                                    # measured, not stopped
    saved = json.loads(out.read_text())
    runs = saved["configs"][0]["runs"]
    assert [r["concurrency"] for r in runs] == [1, 2] and saved["configs"][0]["config"]["engine"] == "external"
    # 3 warm-up requests (one, then two together), then 4 + 4 measured: the 5th and 10th answer 503 → one each
    assert [r["failed"] for r in runs] == [1, 1] and [r["ok"] for r in runs] == [3, 3]
    assert data["complete"] is True
    assert main(["--target", "http://127.0.0.1:9", "--out", str(tmp_path / "x.json")]) == 2      # no --model
    assert main(["--target", "ftp://x", "--model", "m", "--out", str(tmp_path / "x.json")]) == 2  # not http


# ------------------------------------------------------------------ the openai client beside ours

def test_the_openai_client_sees_the_same_stream_as_ours():
    """One request each way to a server that waits 0.3 s for its first token and 0.05 s between tokens:
    both see every token; both TTFTs include the server's wait; the two agree on it (they read the same
    stream, so a gap between them is the clients' own overhead, never the server's)."""
    with fake("--ttft-s", "0.3", "--token-s", "0.05", "--strict-fields") as srv:
        ours = client.run_load(srv.base_url, "m", trace(1, 6))[0]
        sdk = client.stream_with_openai(srv.base_url, "m", trace(1, 6)[0])
    assert ours.ok and sdk.ok, (ours.error, sdk.error, sdk.detail)
    assert ours.output_tokens == sdk.output_tokens == 6 and len(sdk.token_times) == len(ours.token_times) == 6
    assert ours.ttft_s >= 0.3 and sdk.ttft_s >= 0.3
    # the same wait, whichever client reads it: within half a second, more on a loaded machine (a client
    # kept off the CPU that long reads several chunks at once)
    assert abs(sdk.ttft_s - ours.ttft_s) < 0.5 * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    assert sdk.token_times[-1] - sdk.token_times[0] >= 5 * 0.05 * 0.9   # streamed as made, not all at the end


def test_the_openai_client_reports_a_refused_connection_as_a_fault():
    from helpers.benchmark import process

    port = process.free_port()
    rec = client.stream_with_openai(f"http://127.0.0.1:{port}", "m", trace(1)[0], timeout_s=5)
    assert not rec.ok and rec.error == "connection" and rec.end_s is not None


def test_side_by_side_compares_the_steps_both_clients_streamed():
    """engines.shared_steps, worked by hand: ours streams a chunk every 10 ms from 0 to 100 ms; theirs
    reads the same steps 1 ms later from 51 ms, and has a request alone (faster: 5 ms a step) that shares
    no step with ours. Their overlap, cut half a step (5 ms) inside: 56–95 ms, ours 60…90, theirs 61…91 —
    three gaps of 10 ms each. A second overlap in which theirs got two tokens in one chunk (a chunk
    fewer) is left out: not the same steps."""
    from engines import shared_steps

    rec = lambda times: RequestRecord(0, times[0] - 0.02, times[-1], list(times), len(times), chunk_times=list(times))  # noqa: E731
    ours = [rec([i * 0.010 for i in range(11)]), rec([1.0 + i * 0.010 for i in range(11)])]
    theirs = [rec([0.051 + i * 0.010 for i in range(11)]), rec([0.5 + i * 0.005 for i in range(20)]),
              rec([1.051 + i * 0.010 for i in range(11) if i != 2])]           # 1.071 s: two tokens in one chunk
    got = shared_steps(ours, theirs)
    assert got["ours"] == pytest.approx(10.0) and got["vllm bench"] == pytest.approx(10.0)
    assert got["gaps"] == 3 and got["gaps left out"] == 3
    assert summarize(theirs).itl_pooled_s < summarize(ours).itl_pooled_s      # over all requests they differ


def test_the_servers_this_machine_can_run_are_listed_in_a_process_of_their_own(monkeypatch):
    from helpers.benchmark import records, servers

    configs, skipped = records.available()
    here, not_here = servers.available()
    assert [c["name"] for c in configs] == [c.name for c in here]
    assert [s["name"] for s in skipped] == [s["name"] for s in not_here]

    def fails(*args, capture):
        raise records.subprocess.CalledProcessError(1, "harness", stderr="Traceback …\nImportError: no aiohttp\n")
    monkeypatch.setattr(records, "_benchmark", fails)
    assert records.available() == ([], [{"name": "every configuration",
                                          "why": "listing the servers failed: ImportError: no aiohttp"}])
