"""Real vLLM (its CPU build, .venv-vllm) — the short check CI runs where it is installed: a server starts
on the tiny model, streams, hits its own prefix cache on a repeated prompt, stops, and leaves nothing
behind. vLLM bench's own request function, run on streams that expose where its definitions differ
from ours, agrees with metrics.vllm_bench_view (the replica the benchmark uses) on each difference. And
the `vllm bench serve` cross-check, run whole against the stand-in server (a known pace: 10 ms a token).
Skipped where .venv-vllm is not installed (`make setup-vllm`; `make test` installs it)."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import fake_openai_server
import psutil
import pytest

from helpers.benchmark import client, process, servers, vllm_env
from helpers.benchmark.metrics import vllm_bench_view
from helpers.serving.traces import TraceRequest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import engines  # noqa: E402 - scripts/engines.py: make engines' command line

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(vllm_env.cpu_unavailable() is not None,
                                                   reason=f"vLLM's CPU build: {vllm_env.cpu_unavailable()}")]


def test_vllm_starts_streams_hits_its_prefix_cache_and_leaves_nothing():
    folder = servers.serve_folder("tiny")
    cfg = next(c for c in servers.vllm_configs(folder, "cpu") if c.name == "vLLM default")
    srv = process.ServerProcess(cfg.command, name="vllm-ci", env=cfg.env, ready_timeout_s=600, stop_grace_s=10)
    try:
        srv.start()
        tree = [psutil.Process(p) for p in srv.tree()]
        assert len(tree) >= 2, tree          # the API server, its engine core (and their workers)
        one = client.run_load(srv.base_url, cfg.model, [TraceRequest(0, "Hello there, how are", 8)], 1, 300)[0]
        assert one.ok and one.output_tokens == 8 and len(one.token_times) >= 2, (one.error, one.detail)
        long = " ".join(f"word{i % 50}" for i in range(400))          # several of vLLM's 128-token blocks
        before = vllm_env.prefix_cache_counters(srv.base_url)
        first = client.run_load(srv.base_url, cfg.model, [TraceRequest(1, long, 4)], 1, 300)[0]
        middle = vllm_env.prefix_cache_counters(srv.base_url)
        again = client.run_load(srv.base_url, cfg.model, [TraceRequest(2, long, 4)], 1, 300)[0]
        after = vllm_env.prefix_cache_counters(srv.base_url)
        assert first.ok and again.ok
        cold, warm = vllm_env.counter_delta(before, middle), vllm_env.counter_delta(middle, after)
        assert cold["queried tokens"] == warm["queried tokens"] == first.prompt_tokens > 256
        assert cold["hit tokens"] == 0 and warm["hit tokens"] >= 256, (cold, warm)     # whole blocks reused
    finally:
        srv.stop()
    assert not srv.alive() and fake_openai_server.left(tree) == [], "part of vLLM outlived its stop"


VLLM_SIDE = """
import asyncio, json, sys
import aiohttp
from vllm.benchmarks.lib.endpoint_request_func import RequestFuncInput, async_request_openai_completions
async def main(url):
    async with aiohttp.ClientSession(trust_env=False) as s:
        out = await async_request_openai_completions(
            RequestFuncInput(prompt="x", api_url=url + "/v1/completions", prompt_len=1, output_len=4, model="m"), s)
    print(json.dumps({"success": out.success, "ttft": out.ttft, "latency": out.latency, "itl": out.itl,
                      "output_tokens": out.output_tokens}))
asyncio.run(main(sys.argv[1]))
"""


def _vllm_reads(url: str) -> dict:
    r = subprocess.run([str(vllm_env.venv_python()), "-c", VLLM_SIDE, url], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, no_proxy="127.0.0.1"))
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("flags", [["--empty-first", "--ttft-s", "1.0"], ["--no-text"],
                                   ["--vllm-end", "--tail-s", "1.0"]], ids=["empty-first", "no-text", "vllm-end"])
def test_vllm_bench_reads_the_edge_cases_as_our_replica_says(flags):
    """Each stream, read by vLLM bench's real request function and by our client: the replica
    (vllm_bench_view, applied to our record) gives vLLM's verdict, and the difference from ours is the
    documented one — a wide margin (1 s) so a loaded machine cannot blur it."""
    with fake_openai_server.start(*flags, "--token-s", "0.01") as srv:
        theirs = _vllm_reads(srv.base_url)
        ours = client.run_load(srv.base_url, "m", [TraceRequest(0, "x", 4)], 1, 60)[0]
    view = vllm_bench_view([ours])
    assert theirs["success"] == (view["completed"] == 1)
    if flags[0] == "--empty-first":        # vLLM: the empty chunk is the first token; ours waits for text
        assert theirs["ttft"] < 0.5 <= 1.0 <= ours.ttft_s
        assert view["ttft_mean"] < 0.5
    elif flags[0] == "--no-text":          # vLLM: a success; ours: a failure, no text
        assert theirs["success"] and ours.error == "no tokens" and not ours.ok
    else:                                  # vLLM: ends at the last chunk with choices, before the usage chunk
        assert ours.ok and ours.e2e_s - theirs["latency"] > 0.5
        assert view["e2el_mean"] < ours.e2e_s - 0.5
        assert theirs["output_tokens"] == ours.output_tokens == 4


def test_the_crosscheck_reads_vllm_bench_and_runs_beside_it(tmp_path):
    """`vllm bench serve` against the stand-in server, alternated with our client and then side by side:
    its per-request output read back as our records (every request, the server's own token count), our
    requests sent while it ran kept, and on a server that sends a token every 10 ms, both tools' ITL near
    10 ms; nothing of either tool is left behind."""
    from helpers.benchmark import agreement, plans
    from helpers.benchmark.metrics import SLO, summarize
    from helpers.serving.traces import chat_trace

    reqs = chat_trace(6, seed=2, prompt_words_median=8, output_tokens_median=12, sigma=0.0)
    plan = plans.Plan({"x": reqs}, (1,), SLO(1.0, 0.1), guidellm_workload=None, crosscheck_workload="x",
                      crosscheck_repeats=1, deadline_s=400)
    cfg = servers.EngineConfig("vLLM default", "vllm", [], "m", "the stand-in")
    result = {"faults": []}
    with fake_openai_server.start("--token-s", "0.01", "--ttft-s", "0.05", "--vllm-end") as srv:     # vLLM's stream
        rows = engines.crosscheck_vllm_bench(srv.base_url, cfg, plan, result, tmp_path, plans.Deadline(400),
                                                str(servers.serve_folder("tiny")))
    assert result["faults"] == [] and len(rows) == 1
    lv = rows[0]
    assert lv["completed (vllm bench)"] == 6 and len(lv["runs"]["vllm bench, direct"]) == 1
    side = lv["side by side"]
    assert side["its requests"] == 6 and side["our requests"] >= 1       # ours ran while vllm bench did
    assert set(side["shared steps"]) == {"ours", "vllm bench", "gaps", "gaps left out"}
    for reading in (lv["our client's own run"], lv["vllm bench, direct"], lv["ours on its requests"], side["ours"],
                    side["vllm bench"]):
        assert 9.0 <= reading["itl"] <= 30.0 and reading["ttft"] >= 50.0, reading     # 10 ms a token, 50 ms first
    # our definitions on its own requests: its TTFT (first chunk) and TPOT ((last chunk − first) ÷ (tokens − 1))
    assert lv["ours on its requests"]["ttft"] == pytest.approx(lv["vllm bench, direct"]["ttft"], rel=1e-6)
    assert lv["ours on its requests"]["tpot"] == pytest.approx(lv["vllm bench, direct"]["tpot"], rel=1e-6)
    row = agreement.crosscheck_gaps({"configs": [{"config": {"name": "vLLM default"}, "crosscheck": rows}]})[0]
    assert row.side_by_side is not None and row.verdict.startswith("not judged")     # one run: no spread
    bench = json.loads((tmp_path / "bench-c1.json").read_text())
    recs = engines.bench_records(bench)
    assert [r.output_tokens for r in recs] == [12] * 6 and all(r.ok for r in recs)
    assert summarize(recs).ttft_s["ttft_mean"] * 1e3 == pytest.approx(bench["mean_ttft_ms"], rel=1e-6)
    tools = [q for q in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(q.info["cmdline"] or [])]
    assert fake_openai_server.left(tools) == [], "a vllm bench process outlived its run"


def test_nothing_of_vllm_is_left_after_the_tests():
    time.sleep(0.5)
    assert process.live_servers() == []
