"""The readable engine's OpenAI-compatible server as a real process on the tiny model: the endpoints
answer as OpenAI's API does (whole and streamed), its greedy text is the engine's, the project's own
load client measures it, bad requests get 400/404 with what is allowed, and the process is gone after."""
import json
import os

import httpx
import pytest

from helpers.benchmark import client, process, servers
from helpers.serving.traces import chat_trace

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not servers._installed("fastapi"), reason="needs fastapi")]


@pytest.fixture(scope="module")
def served(request):
    folder = servers.serve_folder("tiny")
    cfg = servers.readable_engine_config(folder, max_num_seqs=4)
    srv = process.ServerProcess(cfg.command, name="readable-test", env=cfg.env, ready_timeout_s=240)
    request.addfinalizer(srv.stop)
    srv.start()
    yield srv, cfg
    pid = srv.pid
    srv.stop()
    assert not srv.alive()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def _post(srv, path, body, timeout=120):
    return httpx.post(srv.base_url + path, json=body, timeout=timeout)


def test_models_health_and_a_greedy_completion_equal_to_the_engines(served, tiny):
    srv, cfg = served
    assert httpx.get(srv.base_url + "/health").json() == {"status": "ok"}
    assert [m["id"] for m in httpx.get(srv.base_url + "/v1/models").json()["data"]] == [cfg.model]
    body = {"model": cfg.model, "prompt": "It was a truth universally", "max_tokens": 6, "temperature": 0,
            "ignore_eos": True}
    r = _post(srv, "/v1/completions", body).json()
    from helpers.engine.llm import Engine
    from helpers.engine.request import SamplingParams

    ids = tiny.tokenizer("It was a truth universally").input_ids
    want = Engine(tiny.model).generate([ids], SamplingParams(max_tokens=6, ignore_eos=True))[0]
    assert r["object"] == "text_completion" and r["choices"][0]["finish_reason"] == "length"
    assert r["choices"][0]["text"] == tiny.tokenizer.decode(want, skip_special_tokens=True)
    assert r["usage"] == {"prompt_tokens": len(ids), "completion_tokens": 6, "total_tokens": len(ids) + 6}
    # streamed: the chunks add up to the same text, the last one carries usage, then [DONE]
    with httpx.stream("POST", srv.base_url + "/v1/completions", timeout=120,
                      json={**body, "stream": True, "stream_options": {"include_usage": True}}) as s:
        lines = [ln[5:].strip() for ln in s.iter_lines() if ln.startswith("data:")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(x) for x in lines[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == r["choices"][0]["text"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 6


def test_chat_completion_and_stop_string(served):
    srv, cfg = served
    r = _post(srv, "/v1/chat/completions", {"model": cfg.model, "messages": [{"role": "user", "content": "Hi"}],
                                            "max_completion_tokens": 5, "temperature": 0, "ignore_eos": True}).json()
    msg = r["choices"][0]["message"]
    assert r["object"] == "chat.completion" and msg["role"] == "assistant" and r["usage"]["completion_tokens"] == 5
    full = _post(srv, "/v1/completions", {"model": cfg.model, "prompt": "Anne", "max_tokens": 12, "temperature": 0,
                                          "ignore_eos": True}).json()["choices"][0]["text"]
    assert len(full) > 4
    stop = full[len(full) // 2:len(full) // 2 + 2]
    cut = _post(srv, "/v1/completions", {"model": cfg.model, "prompt": "Anne", "max_tokens": 12, "temperature": 0,
                                         "ignore_eos": True, "stop": stop}).json()["choices"][0]
    assert cut["finish_reason"] == "stop" and cut["text"] == full[:full.index(stop)]


def test_bad_requests_say_what_is_wrong(served):
    srv, cfg = served
    r = _post(srv, "/v1/completions", {"model": "not-served", "prompt": "a"})
    assert r.status_code == 404 and "not served here" in r.json()["error"]["message"]
    r = _post(srv, "/v1/completions", {"model": cfg.model, "prompt": "a", "logprobs": 2})
    assert r.status_code == 400 and "unsupported field(s) logprobs" in r.json()["error"]["message"]
    r = _post(srv, "/v1/completions", {"model": cfg.model, "prompt": "a", "max_tokens": 10 ** 6})
    assert r.status_code == 400 and "KV blocks" in r.json()["error"]["message"]
    r = _post(srv, "/v1/completions", {"model": cfg.model, "prompt": ""})
    assert r.status_code == 400 and "prompt must be" in r.json()["error"]["message"]
    r = httpx.post(srv.base_url + "/v1/completions", content=b"{not json", timeout=30)
    assert r.status_code == 400
    assert httpx.get(srv.base_url + "/health").status_code == 200      # still serving


def test_the_projects_load_client_measures_it(served):
    srv, cfg = served
    work = chat_trace(8, seed=1, prompt_words_median=32, output_tokens_median=8, sigma=0.0)
    recs = client.run_load(srv.base_url, cfg.model, work, concurrency=4, timeout_s=180)
    assert [r.error for r in recs] == [None] * 8
    assert all(r.prompt_tokens and r.output_tokens >= 1 and r.token_times for r in recs)
