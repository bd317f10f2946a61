"""A small asynchronous streaming client for OpenAI-compatible servers: it shows where TTFT and ITL
come from. Each request is sent with `"stream": true`; the server answers with Server-Sent Events, one
`data: {json}` line per chunk; the client notes the clock when each chunk that carries text arrives.
The first such time minus the send time is the TTFT; the gaps between the next ones are the ITL
(`metrics.RequestRecord`). The last chunk of `transformers serve` (and of vLLM when asked with
`stream_options.include_usage`) carries `usage`, the server's own token count. Over plain http with no
proxy between, the client writes each request as bytes on connections of its own and reads the answer
as it comes (`DirectConnections`, framed by `wire.Framing`, read by `stream.Exchange` as the tap reads):
light enough not to slow a server it shares a core with. https, or a proxy, goes through httpx.

Load is closed-loop: `concurrency` requests in flight at once, the next one sent when one finishes
(what guidellm's `concurrent` profile does). Requests with an `arrival_s` (a Poisson trace) are not
sent before their time; the agentic trace's rounds run one after another.

Faults are results: an HTTP error (4xx/5xx), a request that takes longer than `timeout_s`, a
connection refused or cut (a server that died), a reply that is valid JSON but no completion chunk, a
stream that stops before it says it is complete, a token count the stream contradicts — each request
keeps its error, the run goes on. A whole load can be bounded too (`deadline_s`).
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import os
import time
import urllib.parse
from typing import Sequence

from .. import checks
from ..serving.traces import TraceRequest
from .metrics import RequestRecord
from .process import pinned
from .stream import Exchange
from .wire import Framing

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


def check_base_url(url: str) -> str:
    """`url` if it is a usable base URL (http or https, a host, a port in 1..65535 when given), else a
    ValueError that says what is wrong: `http://[::1` and `:99999` are refused here, not deep in httpx."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"a server URL such as http://127.0.0.1:8000 is needed, got {url!r}")
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{url[:80]!r} is not a valid URL ({exc}); e.g. http://127.0.0.1:8000 or "
                         "http://[::1]:8000") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"the server URL must be http(s)://HOST[:PORT] such as http://HOST:8000, got {url[:80]!r}")
    if port == 0:
        raise ValueError(f"port 0 in {url[:80]!r}: a port is a whole number in 1..65535")
    return url.strip()


def is_loopback(url: str) -> bool:
    """Whether `url` names this machine (127.0.0.0/8, ::1, localhost): such requests never go through a
    proxy (an http_proxy in the environment would otherwise send them to the proxy, which cannot reach them)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def proxy_in_environment() -> str | None:
    """The first proxy variable set in the environment, for error messages ("through the proxy in ...")."""
    return next((v for v in PROXY_VARIABLES if os.environ.get(v)), None)


def completion_body(model: str, prompt: str, max_tokens: int, extra: dict | None = None) -> dict:
    """The body of a streamed /v1/completions request: the fields guidellm sends (so both clients put the
    same load on a server), the usage asked for in the last chunk. Only standard fields: `transformers
    serve` answers 422 to a field it does not know (e.g. vLLM's `ignore_eos`)."""
    body = {"model": model, "prompt": prompt, "max_tokens": int(max_tokens), "stream": True,
            "stream_options": {"include_usage": True}}
    body.update(extra or {})
    return body


class DirectConnections:
    """Plain HTTP/1.1 connections to one server, kept open between requests: each request is written in
    one piece and its answer read off the socket as it comes (wire.Framing finds where it ends) into an
    Exchange. An HTTP library's Python per chunk (httpx: h11, anyio, line decoding) took 0.15 s of CPU
    for 32 answers at concurrency 8, this 0.08 s; beside vLLM's CPU build that is time its API server,
    on the same core, waits for (mean TTFT 40–43 ms through httpx, 30–37 this way, vllm bench 29–36)."""

    trust_env = False                  # no proxy: used only where none applies (see _run)

    def __init__(self, url: str, connect_timeout_s: float = 5.0):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port, self.netloc = parts.hostname, parts.port or 80, parts.netloc
        self.connect_timeout_s = connect_timeout_s
        self.idle: list = []

    async def post(self, path: str, body: bytes, ex: Exchange) -> None:
        """POST `body` to `path`, the answer fed to `ex`; a connection the server closed while idle is
        replaced once. Raises ConnectionError when the server cannot be reached or cuts the answer."""
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.netloc}\r\nUser-Agent: llm-inference-workshop\r\n"
                f"Accept: */*\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        for attempt in (0, 1):
            reused = bool(self.idle) and attempt == 0
            r, w = self.idle.pop() if reused else await self._open()
            keep, got = False, [False]
            try:
                w.write(head + body)
                await w.drain()
                keep = await self._read(r, ex, got)
                return
            except OSError:                       # ConnectionError included
                if reused and not got[0]:
                    continue                      # closed while idle: once more, on a new connection
                raise
            finally:
                if keep:
                    self.idle.append((r, w))
                else:
                    w.close()

    async def _open(self):
        try:
            return await asyncio.wait_for(asyncio.open_connection(self.host, self.port), self.connect_timeout_s)
        except asyncio.TimeoutError:
            raise ConnectionError(f"no connection to {self.netloc} within {self.connect_timeout_s:g} s") from None

    @staticmethod
    async def _read(r, ex: Exchange, got: list) -> bool:
        """Read one answer into `ex`; whether the connection may carry the next request."""
        state = {"end": False, "keep": True}

        def head(start: str, headers: dict) -> None:
            code = start.split(" ")[1] if " " in start else ""
            ex.rec.status = int(code) if code.isdigit() else None
            state["keep"] = start.startswith("HTTP/1.1") and headers.get("connection", "").lower() != "close"

        framing = Framing(head, ex.body, lambda: state.update(end=True), responses=True)
        while not state["end"]:
            data = await r.read(1 << 16)
            if not data:
                if framing.state != "close":
                    raise ConnectionError("the server closed the connection mid-answer")
                return False                      # a body that runs to the close has ended
            got[0] = True
            framing.feed(data)
        return state["keep"] and not framing.buf

    async def __aenter__(self) -> "DirectConnections":
        return self

    async def __aexit__(self, *exc) -> None:
        for _, w in self.idle:
            w.close()
        self.idle.clear()


async def stream_one(client, url: str, body: dict, rid: int, timeout_s: float) -> RequestRecord:
    """Send one streamed request through `client` (DirectConnections, or an httpx.AsyncClient); return
    what was seen, an error included (never raises for a fault: an HTTP error, a timeout, a lost
    connection, a malformed or cut reply each become the record's error)."""
    import httpx

    rec = RequestRecord(rid=rid, sent_s=time.perf_counter())
    ex = Exchange(rec, body.get("max_tokens"))

    async def consume():
        if isinstance(client, DirectConnections):
            parts = urllib.parse.urlsplit(url)
            await client.post(parts.path + (f"?{parts.query}" if parts.query else ""), json.dumps(body).encode(), ex)
            return
        async with client.stream("POST", url, json=body) as resp:
            rec.status = resp.status_code
            async for data in resp.aiter_bytes():
                ex.body(data)
                if rec.error:
                    return

    try:
        await asyncio.wait_for(consume(), timeout_s)
    except asyncio.TimeoutError:
        rec.error, rec.detail = "timeout", f"no complete answer within {timeout_s:g} s"
    except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError,
            httpx.ConnectTimeout, httpx.ProxyError, OSError) as exc:       # OSError: ConnectionError too
        proxy = proxy_in_environment() if getattr(client, "trust_env", False) else None
        via = f" (through the proxy in {proxy}: set no_proxy for this host if it should be reached directly)" \
            if proxy else ""
        rec.error, rec.detail = "connection", f"{type(exc).__name__}: {exc}{via}"[:400]
    except httpx.HTTPError as exc:
        rec.error, rec.detail = "http error", f"{type(exc).__name__}: {exc}"[:300]
    except Exception as exc:  # noqa: BLE001 - any other reply a server can send is a counted fault, not a crash
        rec.error, rec.detail = "client error", f"{type(exc).__name__}: {exc}"[:300]
    ex.end(time.perf_counter())
    return rec


def _unsent(req: TraceRequest, why: str) -> RequestRecord:
    now = time.perf_counter()
    return RequestRecord(rid=req.rid, sent_s=now, end_s=now, error="deadline", detail=why)


async def _run(base_url: str, model: str, requests: Sequence[TraceRequest], concurrency: int,
               timeout_s: float, honour_arrivals: bool, endpoint: str, deadline: float) -> list[RequestRecord]:
    import httpx

    url = base_url.rstrip("/") + endpoint
    records: list[RequestRecord] = []
    # this machine's servers are reached directly, whatever proxy the environment names; plain http with
    # no proxy to go through over our own connections, https and proxies through httpx
    direct = url.startswith("http://") and (is_loopback(url) or not proxy_in_environment())
    async with (DirectConnections(url) if direct else
                httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=5.0), trust_env=not is_loopback(url),
                                  limits=httpx.Limits(max_connections=concurrency,
                                                      max_keepalive_connections=concurrency))) as client:
        rounds = sorted({r.round for r in requests})
        for rnd in rounds:
            batch = [r for r in requests if r.round == rnd]
            sem = asyncio.Semaphore(concurrency)
            t0 = time.perf_counter()

            async def one(req: TraceRequest):
                if honour_arrivals and req.arrival_s > 0 and len(rounds) == 1:
                    wait = t0 + req.arrival_s - time.perf_counter()
                    if time.perf_counter() + max(wait, 0.0) >= deadline:
                        return _unsent(req, "not sent: its arrival time is past the run's deadline")
                    await asyncio.sleep(max(0.0, wait))
                async with sem:
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        return _unsent(req, "not sent: the run's deadline had passed")
                    return await stream_one(client, url, completion_body(model, req.prompt, req.max_new_tokens),
                                            req.rid, min(timeout_s, left))

            records += await asyncio.gather(*(one(r) for r in batch))
    return records


def run_load(base_url: str, model: str, requests: Sequence[TraceRequest], concurrency: int = 1,
             timeout_s: float = 60.0, honour_arrivals: bool = False,
             endpoint: str = "/v1/completions", deadline_s: float | None = None,
             cpus: set[int] | None = None) -> list[RequestRecord]:
    """Send `requests` to a server, `concurrency` at a time, streaming each; one record per request in
    the order they finished. Each request may take `timeout_s`; the whole load at most `deadline_s`
    (requests not sent by then are recorded with the error "deadline", in-flight ones cut short).
    Works from a plain script, a test and a running notebook kernel (where an event loop already runs:
    the load then runs in a worker thread with its own loop). `cpus`: the CPUs the load runs on (in a
    worker thread of its own; `process.client_cpus` says which, beside a server that pins its compute)."""
    concurrency = checks.count(concurrency, "concurrency")
    if not requests:
        raise ValueError("requests is empty: give at least one TraceRequest (helpers.serving.traces)")
    timeout_s = checks.number(timeout_s, "timeout_s", positive=True, unit="seconds")
    if deadline_s is not None:
        deadline_s = checks.number(deadline_s, "deadline_s", positive=True, unit="seconds (or None)")
    check_base_url(base_url)
    deadline = time.perf_counter() + (deadline_s if deadline_s is not None else math.inf)
    coro = lambda: _run(base_url, model, requests, concurrency, timeout_s, honour_arrivals, endpoint,  # noqa: E731
                        deadline)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        if not cpus:
            return asyncio.run(coro())
    import concurrent.futures

    def pinned_run():
        with pinned(cpus):
            return asyncio.run(coro())

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(pinned_run).result()


def stream_with_openai(base_url: str, model: str, request: TraceRequest, timeout_s: float = 60.0) -> RequestRecord:
    """The same streamed request through the `openai` package's client, timed the same way: its send
    time, then the arrival of each chunk whose text is not empty. What the hand-written parser above
    does line by line, the SDK does inside `for chunk in stream` — the TTFT it gives is the same
    figure, to the scheduling of one Python thread. One request, no concurrency: a check, not a load."""
    import openai

    check_base_url(base_url)
    timeout_s = checks.number(timeout_s, "timeout_s", positive=True, unit="seconds")
    sdk = openai.OpenAI(base_url=base_url.rstrip("/") + "/v1", api_key="unused", timeout=timeout_s, max_retries=0)
    rec = RequestRecord(request.rid, time.perf_counter())       # sent now: the client is built before
    try:
        stream = sdk.completions.create(model=model, prompt=request.prompt, max_tokens=request.max_new_tokens,
                                        stream=True, stream_options={"include_usage": True})
        for chunk in stream:
            now = time.perf_counter()
            if chunk.choices:
                rec.chunk_times.append(now)
                if chunk.choices[0].text:
                    rec.token_times.append(now)
            if chunk.usage is not None:
                rec.output_tokens = chunk.usage.completion_tokens
                rec.prompt_tokens = chunk.usage.prompt_tokens
        rec.status = 200
        rec.output_tokens = rec.output_tokens or len(rec.token_times)
    except openai.APIStatusError as exc:
        rec.status, rec.error, rec.detail = exc.status_code, f"http {exc.status_code}", str(exc)[:200]
    except openai.APITimeoutError:
        rec.error = "timeout"
    except openai.APIConnectionError as exc:
        rec.error, rec.detail = "connection", str(exc)[:200]
    rec.end_s = time.perf_counter()
    return rec
