"""The readable engine's OpenAI-compatible server as a real process on the tiny model: the endpoints
answer as OpenAI's API does (whole and streamed), its greedy text is the engine's, the project's own
load client measures it, bad bodies get a 4xx naming the field (never a 500), a body too large or
shorter than its Content-Length is refused in seconds, a long prompt is tokenized off the event loop,
a client that goes away frees its blocks, SIGTERM ends it within 5 s, its command line refuses bad
options in one line, and the process is gone after."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import psutil
import pytest

from servebench import client, process, server, servers
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


def _post(srv, path, body, timeout=120):     # json.dumps: ASCII, a lone surrogate escaped as \\ud800
    return httpx.post(srv.base_url + path, content=json.dumps(body), timeout=timeout,
                      headers={"Content-Type": "application/json"})


def test_models_health_and_a_greedy_completion_equal_to_the_engines(served, tiny):
    srv, cfg = served
    assert httpx.get(srv.base_url + "/health").json() == {"status": "ok", "requests": 0, "blocks_in_use": 0}
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


def test_bad_bodies_are_4xx_naming_the_field(served):
    srv, cfg = served
    m = cfg.model
    cases = [({"model": "not-served", "prompt": "a"}, 404, "not served here"),
             ({"model": m, "prompt": "a", "logprobs": 2}, 400, "logprobs: unsupported field"),
             ({"model": m, "prompt": "a", "max_tokens": 10 ** 6}, 400, "KV blocks"),
             ({"model": m, "prompt": ""}, 400, "prompt: String should have at least 1 character"),
             ({"model": m, "prompt": "a", "stop": 5}, 400, "stop: Input should be a valid string, got 5"),
             ({"model": m, "prompt": "a", "stream_options": [1]}, 400, "stream_options: Input should be an object"),
             ({"model": m, "prompt": "a", "n": True}, 400, "n: Input should be a valid integer, got True"),
             ({"model": m, "prompt": "a", "stream": "false"}, 400, "stream: Input should be a valid boolean"),
             ({"model": m, "prompt": "a", "ignore_eos": "no"}, 400, "ignore_eos: Input should be a valid boolean"),
             ({"model": m, "prompt": [1, 10 ** 9]}, 400, "token ids in 0..31999"),
             ({"model": m, "prompt": "\ud800"}, 400, "body: Invalid JSON"),        # a lone surrogate, JSON-escaped
             ([1], 400, "body: Input should be an object")]
    for body, status, said in cases:
        r = _post(srv, "/v1/completions", body)
        assert r.status_code == status and said in r.json()["error"]["message"], (body, r.text)
    chat = [({"model": m, "messages": [{"role": "wizard", "content": "a"}]}, "messages.0.role: Input should be"),
            ({"model": m, "messages": [{"content": "a"}]}, "messages.0.role: Field required"),
            ({"model": m, "messages": [{"role": "system", "content": "a"}]}, "takes the roles user and assistant"),
            ({"model": m, "prompt": "a"}, "prompt: unsupported field")]
    for body, said in chat:
        r = _post(srv, "/v1/chat/completions", body)
        assert r.status_code == 400 and said in r.json()["error"]["message"], (body, r.text)
    for raw, said in [(b"{not json", "body: Invalid JSON"), (b"[" * 100_000 + b"]" * 100_000, "recursion limit"),
                      (b'{"model": "x", "prompt": "\\ud800"}', "Invalid JSON"), (b"\xff", "Invalid JSON")]:
        r = httpx.post(srv.base_url + "/v1/completions", content=raw, timeout=30)
        assert r.status_code == 400 and said in r.json()["error"]["message"], (raw[:40], r.text)
    assert httpx.get(srv.base_url + "/health").status_code == 200      # still serving


def test_a_large_body_is_413_and_a_short_one_is_answered_in_seconds(served):
    srv, cfg = served
    r = httpx.post(srv.base_url + "/v1/completions", content=b"a" * (server.MAX_BODY_BYTES + 1), timeout=30)
    assert r.status_code == 413 and "larger than 1,048,576 bytes" in r.json()["error"]["message"]
    # a body shorter than its Content-Length: answered 408 (and the connection closed) after BODY_TIMEOUT_S
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
        t0 = time.perf_counter()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{\"model\": ")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        waited = time.perf_counter() - t0
    assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive whole" in answer
    assert server.BODY_TIMEOUT_S <= waited < server.BODY_TIMEOUT_S + 3
    assert httpx.get(srv.base_url + "/health").status_code == 200


def test_health_answers_while_long_prompts_are_tokenized(served):
    """Four prompts of 900 kB (168,002 tokens each, refused after tokenizing: the cache holds 8,192):
    tokenized on the event loop they would hold /health for their whole time (1.4 s measured here)."""
    srv, cfg = served
    text = ("It was a truth universally acknowledged, that a single man in possession " * 12_000)[:900_000]
    answers, waits = [], []

    def send():
        answers.append(_post(srv, "/v1/completions", {"model": cfg.model, "prompt": text}))
    senders = [threading.Thread(target=send) for _ in range(4)]
    for t in senders:
        t.start()
    while any(t.is_alive() for t in senders):
        t0 = time.perf_counter()
        assert httpx.get(srv.base_url + "/health", timeout=30).status_code == 200
        waits.append(time.perf_counter() - t0)
        time.sleep(0.05)
    assert [r.status_code for r in answers] == [400] * 4 and all("KV blocks" in r.text for r in answers)
    assert len(waits) >= 3 and max(waits) < 1.0, waits


def _held(srv) -> dict:
    return httpx.get(srv.base_url + "/health").json()


def _until_idle(srv, within_s: float = 5.0) -> float:
    t0 = time.perf_counter()
    while _held(srv)["requests"] and time.perf_counter() - t0 < within_s:
        time.sleep(0.05)
    return time.perf_counter() - t0


def test_a_client_that_goes_away_frees_its_blocks(served):
    srv, cfg = served
    long = {"model": cfg.model, "prompt": "It was", "max_tokens": 4000, "ignore_eos": True}   # 20 s or more of decode here
    with pytest.raises(httpx.ReadTimeout):                 # not streamed: the client gives up after 1 s
        httpx.post(srv.base_url + "/v1/completions", json=long, timeout=1.0)
    assert _held(srv)["requests"] == 1 and _held(srv)["blocks_in_use"] > 0
    assert _until_idle(srv) < 2.0 and _held(srv) == {"status": "ok", "requests": 0, "blocks_in_use": 0}
    with httpx.stream("POST", srv.base_url + "/v1/completions", json={**long, "stream": True}, timeout=30) as s:
        for line in s.iter_lines():                        # streamed: the client leaves after the first chunk
            if line.startswith("data:"):
                break
        assert _held(srv)["requests"] == 1
    assert _until_idle(srv) < 2.0 and _held(srv) == {"status": "ok", "requests": 0, "blocks_in_use": 0}


def test_sigterm_ends_the_requests_in_flight_and_exits_within_5_s(tmp_path):
    folder = servers.serve_folder("tiny")
    port = process.free_port()
    cmd = [sys.executable, "-m", "servebench.server", str(folder), "--port", str(port), "--log-level", "warning"]
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.3)
        tree = [proc.pid] + [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        lines = []

        def stream():
            body = {"model": str(folder), "prompt": "It was", "max_tokens": 4000, "ignore_eos": True, "stream": True}
            with httpx.stream("POST", url + "/v1/completions", json=body, timeout=60) as s:
                lines.extend(ln for ln in s.iter_lines() if ln.startswith("data:"))
        reader = threading.Thread(target=stream)
        reader.start()
        time.sleep(1.0)
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=10)            # uvicorn re-raises SIGTERM once it has shut down: -15
        took = time.perf_counter() - t0
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    assert code in (0, -signal.SIGTERM) and took < 5.0, (took, (tmp_path / "server.log").read_text()[-2000:])
    assert lines[-2:] == ['data: {"error": {"message": "the engine stopped: the server is shutting down"}}',
                          "data: [DONE]"] and len(lines) > 3
    assert not [p for p in tree if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("args, said, status", [
    (["--port", "70000"], "argument --port: must be a whole number from 0 to 65,535, got '70000'", 2),
    (["--block-size", "0"], "argument --block-size: must be a positive whole number", 2),
    (["--dtype", "int3"], "argument --dtype: unknown dtype 'int3'", 2),
    (["--prefix-cache", "lru"], "argument --prefix-cache: invalid choice: 'lru'", 2),
])
def test_the_command_line_refuses_bad_options_in_one_line(args, said, status):
    r = subprocess.run([sys.executable, "-m", "servebench.server", str(servers.serve_folder("tiny")), *args],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert r.returncode == status and r.stderr.strip().splitlines() == [r.stderr.strip()], r.stderr
    assert r.stderr.startswith("error: ") and said in r.stderr, r.stderr


@pytest.mark.parametrize("folder, said, status", [
    ("/no/such/folder", "no model folder at /no/such/folder", 2),
    ("{empty}", "Unrecognized model in", 2),                 # a folder with no config.json in it
    ("owner/name", "cannot load owner/name: We couldn't connect to 'https://huggingface.co'", 1),  # offline
])
def test_a_model_that_cannot_be_loaded_is_one_line(tmp_path, folder, said, status):
    folder = folder.replace("{empty}", str(tmp_path))
    r = subprocess.run([sys.executable, "-m", "servebench.server", folder], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert r.returncode == status and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: ") and said in r.stderr, r.stderr


def test_the_projects_load_client_measures_it(served):
    srv, cfg = served
    work = chat_trace(8, seed=1, prompt_words_median=32, output_tokens_median=8, sigma=0.0)
    recs = client.run(srv.base_url, cfg.model, [{"prompt": r.prompt, "max_tokens": r.max_new_tokens} for r in work],
                      concurrency=4, timeout_s=180)
    assert [r.error for r in recs] == [None] * 8
    assert all(r.tokens >= 1 and r.chunks for r in recs)


def test_an_engine_that_fails_answers_500_and_never_hangs():
    """In process, an engine whose step raises: the request in flight, /health and every later request
    are told (500, engine_failed), none waits for tokens that will never come."""
    from types import SimpleNamespace

    from fastapi.testclient import TestClient

    from helpers.engine.request import Request

    class Failing:
        kv = SimpleNamespace(tables={})
        validate = abort = staticmethod(lambda *a: None)
        add = staticmethod(lambda ids, params: Request(0, ids, params))
        has_work = staticmethod(lambda: True)

        def step(self):
            raise RuntimeError("a step failed")
    tokenizer = SimpleNamespace(decode=lambda ids, **kw: "")
    app = server.create_app(Failing(), tokenizer, "m")
    with TestClient(app) as http:
        for _ in range(2):                      # the one in flight when it failed, then one after
            t0 = time.perf_counter()
            r = http.post("/v1/completions", json={"model": "m", "prompt": [1, 2]})
            assert r.status_code == 500 and time.perf_counter() - t0 < 2.0
            assert r.json()["error"] == {"message": "the engine stopped: RuntimeError: a step failed",
                                         "type": "invalid_request_error", "code": "engine_failed"}
        assert http.get("/health").status_code == 500
