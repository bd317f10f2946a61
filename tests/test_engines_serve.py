"""Against a real `transformers serve` process on the tiny model (continuous batching off): our streaming
client and guidellm agree on the same server and workload; the server's 4xx answers are counted; the
guidellm `ignore_eos` pitfall is caught; and the server is gone afterwards. Bounded: one server start
(≈ 10 s on 2 cores), a few dozen short requests, every subprocess with a timeout."""
import json
import os
import subprocess

import pytest

from helpers.engines import client, guide, guidellm_runner, process, servers
from helpers.engines.metrics import summarize
from helpers.serving.traces import TraceRequest, chat_trace

pytestmark = pytest.mark.skipif(
    guidellm_runner.guidellm_bin() is None or not servers._installed("fastapi"),
    reason="needs transformers[serving] and guidellm (requirements.txt)")

WORKLOAD = chat_trace(8, seed=1, prompt_words_median=48, output_tokens_median=16, sigma=0.0)


@pytest.fixture(scope="module")
def served(request):
    folder = servers.serve_folder("tiny")
    cfg = servers.transformers_serve(folder, continuous_batching=False)
    srv = process.ServerProcess(cfg.command, name="hf-test", env=cfg.env, ready_timeout_s=240)
    request.addfinalizer(srv.stop)          # stopped whatever happens in the tests
    srv.start()
    client.run_load(srv.base_url, cfg.model, [TraceRequest(0, "Hello", 2)], 1, 120)   # warm-up
    yield srv, cfg, folder
    pid = srv.pid
    srv.stop()
    assert not srv.alive()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_client_and_guidellm_agree_on_the_same_server(served, tmp_path):
    srv, cfg, folder = served
    ours = summarize(client.run_load(srv.base_url, cfg.model, WORKLOAD, 4, 240), cfg.name, 4)
    theirs, raw = guidellm_runner.run(srv.base_url, folder, WORKLOAD, [4], tmp_path, cfg.name, timeout_s=400)
    assert ours.ok == 8 and theirs[0].ok == 8 and theirs[0].concurrency == 4
    assert theirs[0].output_tokens == ours.output_tokens == 8 * 16
    for key, col in (("ttft_mean", "ttft_s"), ("itl_mean", "itl_s")):
        a, b = getattr(ours, col)[key], getattr(theirs[0], col)[key]
        assert guide.relative_gap(a, b) <= guide.AGREEMENT_TOLERANCE, f"{key}: client {a:.4f} s, guidellm {b:.4f} s"


def test_real_server_4xx_answers_are_counted(served):
    srv, cfg, _ = served
    wrong_model = summarize(client.run_load(srv.base_url, "not-the-pinned-model", WORKLOAD[:2], 2, 60), "x", 2)
    assert wrong_model.run_failed and wrong_model.errors == {"http 400": 2}
    body = client.completion_body(cfg.model, "Hello", 4, extra={"ignore_eos": True})
    import asyncio

    import httpx

    async def one():
        async with httpx.AsyncClient() as c:
            return await client.stream_one(c, srv.base_url + "/v1/completions", body, 0, 60)

    rec = asyncio.run(one())
    assert rec.error == "http 422" and "ignore_eos" in rec.detail


def test_guidellm_ignore_eos_pitfall_is_a_failed_run(served, tmp_path):
    """Synthetic data with output_tokens makes guidellm send ignore_eos: every request gets 422, guidellm
    exits 0 — and our reader calls the run failed."""
    srv, cfg, folder = served
    out = tmp_path / "pitfall.json"
    cmd = guidellm_runner.command(srv.base_url, folder, "x", 8, [1], 2, out)
    cmd[cmd.index("--data") + 1] = "kind=synthetic_text,prompt_tokens=16,output_tokens=8"
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert p.returncode == 0, p.stderr[-2000:]
    bench_ = json.loads(out.read_text())["benchmarks"][0]
    s = guidellm_runner.reported(bench_, "pitfall")
    assert s.run_failed and s.failed == s.requests >= 1
    assert any("ignore_eos" in (r.detail or "") or "422" in (r.detail or "") for r in guidellm_runner.records(bench_))
