"""Real vLLM (its CPU build, .venv-vllm), where it is installed: a server starts on the tiny model, streams,
hits its own prefix cache on a repeated prompt of several 128-token blocks, stops, and leaves nothing
behind; vLLM bench's own request function reads the streams where its definitions differ from ours as
notebook 08 and engines.md say."""
import json
import os
import subprocess
import time

import fake_openai_server
import psutil
import pytest

from servebench import client, process, servers

def prefix_cache_counters(base_url: str) -> dict:
    """vLLM's prefix-cache counters since it started (GET /metrics), in tokens."""
    import urllib.request

    text = urllib.request.build_opener(urllib.request.ProxyHandler({})).open(base_url + "/metrics", timeout=30).read()
    out = {}
    for line in text.decode().splitlines():
        for key in ("queries", "hits"):
            if line.startswith((f"vllm:prefix_cache_{key}_total{{", f"vllm:prefix_cache_{key}_total ")):
                out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


pytestmark = [pytest.mark.vllm, pytest.mark.skipif(servers.vllm_unavailable() is not None,
                                                   reason=f"vLLM's CPU build: {servers.vllm_unavailable()}")]


def test_vllm_starts_streams_hits_its_prefix_cache_and_leaves_nothing():
    folder = servers.serve_folder("tiny")
    cfg = next(c for c in servers.vllm_configs(folder, "cpu") if c.name == "vLLM default")
    srv = process.ServerProcess(cfg.command, name="vllm-ci", env=cfg.env, ready_timeout_s=600, stop_grace_s=10)
    try:
        srv.start()
        tree = [psutil.Process(p) for p in srv.tree()]
        assert len(tree) >= 2, tree          # the API server, its engine core (and their workers)
        one = client.run(srv.base_url, cfg.model, [{"prompt": "Hello there, how are", "max_tokens": 8}], 1, 300)[0]
        assert one.error is None and one.tokens == 8 and len(one.chunks) >= 2
        long = " ".join(f"word{i % 50}" for i in range(400))          # several of vLLM's 128-token blocks
        counts = [prefix_cache_counters(srv.base_url)]
        for _ in range(2):
            assert client.run(srv.base_url, cfg.model, [{"prompt": long, "max_tokens": 4}], 1, 300)[0].error is None
            counts.append(prefix_cache_counters(srv.base_url))
        cold, warm = ({k: b[k] - a[k] for k in a} for a, b in zip(counts, counts[1:]))
        assert cold["queries"] == warm["queries"] > 256 and cold["hits"] == 0 and warm["hits"] >= 256
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
    print(json.dumps({"success": out.success, "ttft": out.ttft, "latency": out.latency}))
asyncio.run(main(sys.argv[1]))
"""


@pytest.mark.parametrize("flags", [["--empty-first", "--ttft-s", "1.0"], ["--vllm-end", "--tail-s", "1.0"]],
                         ids=["empty-first", "vllm-end"])
def test_vllm_bench_reads_the_edge_cases_as_documented(flags):
    """vLLM bench's TTFT is its first chunk with choices, even empty; its latency ends at the last such chunk,
    before the usage chunk and the stream's close. Ours waits for text and for the close (1 s margins)."""
    with fake_openai_server.start(*flags, "--token-s", "0.01") as srv:
        r = subprocess.run([str(servers.vllm_python()), "-c", VLLM_SIDE, srv.base_url], capture_output=True,
                           text=True, timeout=300, env=dict(os.environ, no_proxy="127.0.0.1"))
        ours = client.run(srv.base_url, "m", [{"prompt": "x", "max_tokens": 4}], 1, 60)[0]
    assert r.returncode == 0, r.stderr[-2000:]
    theirs = json.loads(r.stdout.strip().splitlines()[-1])
    ttft, _, e2e, _ = ours.row()
    assert theirs["success"]
    if flags[0] == "--empty-first":
        assert theirs["ttft"] < 0.5 <= 1.0 <= ttft
    else:
        assert e2e - theirs["latency"] > 0.5


def test_nothing_of_vllm_is_left_after_the_tests():
    time.sleep(0.5)
    assert [s for s in process._LIVE if s.proc.poll() is None] == []
