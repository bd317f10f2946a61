"""servebench without a model, against a stand-in server process (tests/fake_openai_server.py): the client
times each chunk and counts every fault (an HTTP error, a timeout, a server that dies, a malformed or cut
stream, an impossible token count); a server that is never ready, exits at start or loses its port is
reported; the harness runs every level on the same requests, repeated, notes the load, and writes the record
after every run; the command line's bad input is one line and exit 2. No server outlives a test."""
import json
import math
import socket
import subprocess
import sys
import time
from pathlib import Path

import fake_openai_server
import pytest

from helpers import records as helper_records
from helpers.benchmark import guide, metrics, records
from servebench import __main__ as cli
from servebench import client, harness, process, servers, tools

ROOT = Path(__file__).resolve().parent.parent
fake, trace, left = fake_openai_server.start, fake_openai_server.trace, fake_openai_server.left


@pytest.fixture(autouse=True)
def no_server_left_behind():
    yield
    running = [s for s in list(process._LIVE) if s.proc.poll() is None]
    process.stop_all()
    assert running == [], f"servers still running after the test: {running}"


def _errors(replies) -> dict:
    out = {}
    for r in replies:
        out[r.error] = out.get(r.error, 0) + 1
    return out


# ------------------------------------------------------------------ the client

def test_a_reply_row_worked_by_hand():
    r = client.Reply(sent=10.0, chunks=[10.2, 10.3, 10.5], end=10.55, tokens=3)
    ttft, itl, e2e, n = r.row()
    assert (ttft, itl, e2e, n) == (pytest.approx(0.2), pytest.approx(0.15), pytest.approx(0.55), 3)
    assert client.Reply(10.0, [10.2], 10.3, tokens=1).row()[1] is None           # one token: no gap
    assert client.Reply(10.0, [], 10.1, error="http 500").row() is None


def test_the_client_times_every_chunk_of_a_paced_stream():
    with fake("--token-s", "0.02", "--ttft-s", "0.1") as srv:
        r = client.run(srv.base_url, "m", trace(1, tokens=6), 1, 60)[0]
    assert r.error is None and r.tokens == 6 and len(r.chunks) == 6
    ttft, itl, _, _ = r.row()
    assert 0.1 <= ttft < 5 and 0.015 <= itl < 2          # the server's pace, with room for a loaded machine


@pytest.mark.parametrize("flags, error", [
    (["--fail-every", "2", "--fail-status", "500"], "http 500"),
    (["--strict-fields", "--fail-every", "2", "--fail-status", "422"], "http 422"),
    (["--reply", "not-json"], "malformed reply: JSONDecodeError"),
    (["--reply", "chunk-list"], "malformed reply: AttributeError"),
    (["--reply", "choices-string"], "malformed reply: AttributeError"),
    (["--reply", "usage-number"], "malformed reply: TypeError"),
    (["--reply", "usage-string"], "malformed reply: TypeError"),
    (["--reply", "usage-nan"], "implausible usage"),
    (["--reply", "usage-huge"], "implausible usage"),
    (["--reply", "no-usage"], "cut"),
    (["--cut-after", "2"], "cut"),
    (["--no-text"], "no text"),
])
def test_every_reply_a_server_can_send_is_a_counted_fault(flags, error):
    with fake(*flags) as srv:
        replies = client.run(srv.base_url, "m", trace(4), 2, 30)
    assert len(replies) == 4 and error in _errors(replies), _errors(replies)
    assert all((r.row() is None) == (r.error is not None) for r in replies)


def test_a_vllm_like_end_and_an_empty_first_chunk_are_whole_answers():
    """[DONE] after a usage chunk with no choices (vLLM); a first chunk with empty text: not the TTFT."""
    with fake("--vllm-end", "--tail-s", "0.2") as srv:
        done = client.run(srv.base_url, "m", trace(2), 2, 30)
    with fake("--empty-first", "--ttft-s", "0.5") as srv:
        empty = client.run(srv.base_url, "m", trace(1), 1, 30)[0]
    assert all(r.error is None and r.tokens == 4 for r in done)
    assert empty.error is None and empty.row()[0] >= 0.5


def test_a_request_that_hangs_times_out_and_the_deadline_stops_the_load():
    with fake("--hang-every", "2") as srv:
        replies = client.run(srv.base_url, "m", trace(4), 1, timeout_s=2, deadline_s=60)
        cut = client.run(srv.base_url, "m", trace(6), 1, timeout_s=30, deadline_s=1.5)
    assert _errors(replies).get("timeout") == 2
    assert "deadline" in _errors(cut) or "timeout" in _errors(cut)


def test_a_server_that_dies_mid_run_leaves_counted_failures():
    with fake("--die-after", "3") as srv:
        replies = client.run(srv.base_url, "m", trace(6), 1, 30)
        assert not srv.alive(grace_s=30)
    assert sum(r.error is None for r in replies) == 2 and _errors(replies).get("connection", 0) >= 1


def test_open_loop_requests_are_sent_at_their_times_and_rounds_in_turn():
    reqs = harness.arrivals(trace(5), rate=10.0, seed=1)
    assert reqs[0]["at"] == 0 and reqs[-1]["at"] == pytest.approx(0.4)      # scaled: mean gap exactly 1 ÷ rate
    with fake("--token-s", "0.001", "--ttft-s", "0.001") as srv:
        replies = client.run(srv.base_url, "m", reqs, None, 30)
        sends = [r.sent - replies[0].sent for r in replies]
        rounds = client.run(srv.base_url, "m", [dict(r, round=i // 2) for i, r in enumerate(trace(4))], 4, 30)
    assert all(s >= r["at"] - 0.01 for s, r in zip(sends, reqs))
    assert min(r.sent for r in rounds[2:]) >= max(r.end for r in rounds[:2])   # round 1 waits for round 0


# ------------------------------------------------------------------ a server process

def test_a_server_starts_on_a_free_local_port_and_stops():
    with fake() as srv:
        assert srv.base_url.startswith("http://127.0.0.1:") and srv.alive() and srv.ready_s is not None
    assert not srv.alive()


def test_a_free_port_lost_to_a_race_is_retried(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken, free = s.getsockname()[1], process.free_port()
        ports = iter([taken, free])
        monkeypatch.setattr(process, "free_port", lambda: next(ports))
        with fake() as srv:
            assert srv.port == free


def test_a_server_that_never_becomes_ready_or_exits_at_start_is_stopped_and_reported():
    with pytest.raises(process.ServerNotReady, match="did not answer"):
        fake("--never-ready", ready_timeout_s=3).start()
    with pytest.raises(process.ServerDied, match="(?s)exited with code 3.*exiting at start"):
        fake("--exit-at-start").start()


# ------------------------------------------------------------------ the harness

PLAN = harness.Plan("test", (1, 2), (20.0,), requests=4, repeats=2, output_tokens=3, deadline_s=120)


def _config(*flags) -> servers.EngineConfig:
    return servers.EngineConfig("stand-in", "fake", fake_openai_server.COMMAND + list(flags), "m", "the stand-in",
                                ready_timeout_s=30)


def _record(tmp_path, plan=PLAN, flags=()) -> dict:
    data = harness.new_record(plan, "cpu", "tiny", "test", [])
    result = {"config": _config(*flags).to_dict(), "ready_s": None, "runs": [], "faults": [], "example": None}
    data["configs"].append(result)
    saves = []

    def save():
        harness.finish(data, 0.0)
        helper_records.dump(tmp_path / "engines.json", "engines", data)
        saves.append(len(result["runs"]))
    harness.run_config(_config(*flags), plan, result, tmp_path / "work", save)
    data["complete"] = True
    return data, saves


def test_every_level_runs_the_same_requests_repeated_and_the_record_is_written_after_each(tmp_path):
    data, saves = _record(tmp_path, flags=("--token-s", "0.002", "--ttft-s", "0.002"))
    runs = data["configs"][0]["runs"]
    assert saves == list(range(1, len(runs) + 1)) and len(runs) == 2 * (2 + 1)          # levels × repeats
    assert {r["trace"] for r in runs} == {data["plan"]["trace"]}                      # the same requests
    assert sorted((r["concurrency"], r["rate"], r["repeat"]) for r in runs if r["rate"] is None) == \
        [(1, None, 0), (1, None, 1), (2, None, 0), (2, None, 1)]
    for r in runs:
        assert len(r["requests_detail"]) == 4 and all(r["requests_detail"])
        assert len(r["load_average"]) == 2 and 0.0 <= r["others"] <= 1.0
    open_loop = [r for r in runs if r["rate"] is not None]
    assert all(r["achieved_rate"] == pytest.approx(20.0, rel=0.5) for r in open_loop)
    assert data["configs"][0]["example"]["token_s"] and data["idle"] in (True, False)
    written = helper_records.load(tmp_path / "engines.json", "engines", roots=(tmp_path,))
    assert len(written["configs"][0]["runs"]) == len(runs)


def test_a_run_under_load_is_never_called_idle():
    data = {"configs": [{"runs": [{"others": 0.1}, {"others": metrics.IDLE_OTHERS + 0.01}]}], "load_average": {}}
    harness.finish(data, 0.0)
    assert data["idle"] is False and data["others_max"] == pytest.approx(metrics.IDLE_OTHERS + 0.01)
    data["configs"][0]["runs"][1]["others"] = 0.2
    harness.finish(data, 0.0)
    assert data["idle"] is True
    assert "under load" in records.provenance({**data, "idle": False}) and "idle" in records.provenance(data)


def test_salts_differ_per_run_and_leave_the_fingerprint_alone():
    reqs = harness.chat(harness.PLANS["live"])
    a, b = harness.salted(reqs, "run-1"), harness.salted(reqs, "run-2")
    assert a[0]["prompt"] != b[0]["prompt"] and a[0]["prompt"].endswith(reqs[0]["prompt"])
    assert harness.fingerprint(reqs) == harness.fingerprint(harness.chat(harness.PLANS["live"]))
    assert {r["max_tokens"] for r in reqs} == {32} and len(reqs) == 16


def test_the_chat_trace_follows_sharegpts_mean_prompt_length_times_the_scale():
    """Log-normal prompt lengths (σ = 1) whose expected mean is ShareGPT's 161.31 tokens × scale (Kwon et al.,
    Fig. 11a); the trace's words × TOKENS_PER_WORD, over 2,000 requests, within 10 % of it."""
    plan = harness.Plan("x", (1,), (), requests=2000, scale=0.5)
    words = [len(r["prompt"].split()) - 2 for r in harness.chat(plan)]       # "User: ... Assistant:"
    mean_tokens = sum(words) / len(words) * harness.TOKENS_PER_WORD
    assert mean_tokens == pytest.approx(harness.SHAREGPT_MEAN_PROMPT_TOKENS * 0.5, rel=0.1)


def test_the_live_plan_fits_two_minutes_on_two_idle_cores():
    """The live run's arithmetic: 2 configurations × 3 repeats × (2 closed levels + 2 rates) of 16 requests;
    at the open-loop rates 16 requests take 7.5 s and 1.9 s to send."""
    p = harness.PLANS["live"]
    assert p.configs == (harness.HF, harness.HF_CB) and p.repeats == 3 and p.requests == 16
    send_s = sum((p.requests - 1) / r for r in p.rates) * p.repeats
    assert send_s == pytest.approx(28.125) and p.guidellm == p.agentic == ()


# ------------------------------------------------------------------ the load generators' outputs

def test_guidellm_gets_one_output_length_and_no_output_column(tmp_path):
    cmd = tools.guidellm_command("http://127.0.0.1:1", "/tok", tmp_path / "d.jsonl", 32, "concurrent", [1, 4, 1, 4],
                                 16, tmp_path / "o.json")
    assert "max_tokens=32" in cmd[cmd.index("--backend") + 1] and cmd[cmd.index("--override") + 2] == "1,4,1,4"
    assert "output_tokens" not in " ".join(cmd)


def test_guidellms_output_becomes_rows_by_our_definitions():
    report = {"benchmarks": [{"duration": 2.0, "requests": {
        "successful": [{"info": {"timings": {"request_start": 10.0, "first_token_iteration": 10.2,
                                             "last_token_iteration": 10.5, "request_end": 10.6}},
                        "output_metrics": {"text_tokens": 4}}],
        "errored": [{"info": {"timings": {"request_start": 10.1}}, "output_metrics": {}}]}}]}
    run = tools.guidellm_runs(report, [(2, None, 0)])[0]
    assert run["tool"] == "guidellm" and run["concurrency"] == 2 and run["errors"] == {"errored": 1}
    assert run["requests_detail"][0] == [pytest.approx(0.2), pytest.approx(0.1), pytest.approx(0.6), 4]
    assert run["requests_detail"][1] is None



# ------------------------------------------------------------------ the command line

@pytest.mark.parametrize("argv, says", [
    (["run", "--engines", "nope"], "unknown engine(s) in 'nope'; allowed: transformers, readable, vllm, sglang"),
    (["record", "--target", "http://127.0.0.1:1"], "--target http(s)://HOST:PORT and --model NAME go together"),
    (["record", "--target", "ftp://x", "--model", "m"], "go together"),
    (["run", "--plan", "nope"], "invalid choice"),
    (["run", "--deadline-s", "-3"], "--deadline-s"),
    (["run", "--profile", "nope"], "nope"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says, capsys, tmp_path):
    assert cli.main(argv + ["--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_a_bad_out_path_is_refused_before_anything_runs(tmp_path, capsys):
    assert cli.main(["run", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_the_configurations_are_listed_in_a_process_of_their_own():
    here, not_here = records.available()
    names = [c["name"] for c in here] + [s["name"] for s in not_here]
    assert "HF transformers serve" in names and all("why" in s for s in not_here)
    direct = subprocess.run([sys.executable, "-m", "servebench", "list"], capture_output=True, text=True, cwd=ROOT,
                            timeout=300)
    assert direct.returncode == 0 and json.loads(direct.stdout)["configs"] == here


def test_a_server_running_elsewhere_is_measured_and_nothing_is_started(tmp_path):
    plan = harness.Plan("t", (1,), (), requests=3, repeats=2, output_tokens=2)
    with fake("--token-s", "0.001") as srv:
        result = {"config": {"name": "target"}, "ready_s": None, "runs": [], "faults": [], "example": None}
        harness.run_config(servers.EngineConfig("target", "external", [], "m", ""), plan, result, tmp_path,
                           lambda: None, server=harness.Remote(srv.base_url))
        assert srv.alive()
    assert len(result["runs"]) == 2 and result["faults"] == []


def test_the_guide_rows_cite_the_run_they_read(tmp_path):
    """From a record the harness wrote: every level ran the same requests, each several times, the spread
    is a number, and each of the guide's CPU rows names the run it read."""
    data, _ = _record(tmp_path, flags=("--token-s", "0.002", "--ttft-s", "0.002"))
    levels = records.levels_table(data)
    assert set(levels["trace"]) == {data["plan"]["trace"]} and (levels["runs"] == 2).all()
    assert levels["output spread"].map(math.isfinite).all()
    rows = guide.cpu_rows(data, None, live_label="the live run")
    assert len(rows) and set(rows["from"]) == {"the live run"}
    rows = guide.cpu_rows(None, data)
    assert all(r.startswith("record: ") and "profile tiny" in r for r in rows["from"])
