"""Against a real `transformers serve` process on the tiny model: our client and guidellm on the same
requests (guidellm's per-request times read by our definitions), the server's 422 for a field it does not
take (vLLM's `ignore_eos`, `repetition_penalty`: why guidellm gets one output length and `vllm bench serve`
would measure vLLM only), and the server gone afterwards. One server start, a few dozen short requests."""
import asyncio
from pathlib import Path

import fake_openai_server
import psutil
import pytest

from servebench import client, harness, process, servers, tools

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    tools.guidellm_bin() is None or not servers._installed("fastapi"),
    reason="needs transformers[serving] and guidellm (requirements.txt)")]


@pytest.fixture(scope="module")
def served(request):
    folder = servers.serve_folder("tiny")
    cfg = servers.transformers_serve(folder, continuous_batching=True)
    srv = process.ServerProcess(cfg.command, name="hf-test", env=cfg.env, ready_timeout_s=240)
    request.addfinalizer(srv.stop)          # stopped whatever happens in the tests
    srv.start()
    client.run(srv.base_url, cfg.model, [{"prompt": "Hello", "max_tokens": 2}], 1, 120)   # warm-up
    yield srv, cfg, folder
    procs = [psutil.Process(p) for p in srv.tree()]
    srv.stop()
    assert not srv.alive() and fake_openai_server.left(procs) == []


def test_our_client_and_guidellm_measure_the_same_requests(served, tmp_path):
    srv, cfg, folder = served
    plan = harness.Plan("t", (2,), (), requests=6, repeats=1, output_tokens=8)
    reqs, runs = harness.chat(plan), []
    tools.guidellm(srv.base_url, cfg.model, reqs, plan, tmp_path, None, 600, runs.append)
    mine = client.run(srv.base_url, cfg.model, reqs, 2, 120)
    assert len(runs) == 1 and runs[0]["concurrency"] == 2 and runs[0]["errors"] == {}
    assert [r[3] for r in runs[0]["requests_detail"]] == [8] * 6 == [r.tokens for r in mine]


@pytest.mark.parametrize("field", [{"ignore_eos": True}, {"repetition_penalty": 1.0}])
def test_a_field_transformers_serve_does_not_take_is_422(served, field):
    srv, cfg, _ = served

    async def one():
        import aiohttp

        async with aiohttp.ClientSession() as session:
            body = {"model": cfg.model, "prompt": "Hello", "max_tokens": 4, "stream": True, **field}
            return await client.stream_one(session, srv.base_url + "/v1/completions", body, 60)
    assert asyncio.run(one()).error == "http 422"
