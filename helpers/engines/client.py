"""A small asynchronous streaming client for OpenAI-compatible servers: it shows where TTFT and ITL
come from. Each request is sent with `"stream": true`; the server answers with Server-Sent Events, one
`data: {json}` line per chunk; the client notes the clock when each chunk that carries text arrives.
The first such time minus the send time is the TTFT; the gaps between the next ones are the ITL
(`metrics.RequestRecord`). The last chunk of `transformers serve` (and of vLLM when asked with
`stream_options.include_usage`) carries `usage`, the server's own token count.

Load is closed-loop: `concurrency` requests in flight at once, the next one sent when one finishes
(what guidellm's `concurrent` profile does). Requests with an `arrival_s` (a Poisson trace) are not
sent before their time; the agentic trace's rounds run one after another.

Faults are results: an HTTP error (4xx/5xx), a request that takes longer than `timeout_s`, a
connection refused or cut (a server that died) — each request keeps its error, the run goes on.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Sequence

from ..serving.traces import TraceRequest
from .metrics import RequestRecord


def completion_body(model: str, prompt: str, max_tokens: int, extra: dict | None = None) -> dict:
    """The body of a streamed /v1/completions request: the fields guidellm sends (so both clients put the
    same load on a server), the usage asked for in the last chunk. Only standard fields: `transformers
    serve` answers 422 to a field it does not know (e.g. vLLM's `ignore_eos`)."""
    body = {"model": model, "prompt": prompt, "max_tokens": int(max_tokens), "stream": True,
            "stream_options": {"include_usage": True}}
    body.update(extra or {})
    return body


def _parse_sse_line(line: str) -> dict | None:
    line = line.strip()
    if not line.startswith("data:"):
        return None
    payload = line[5:].strip()
    if not payload or payload == "[DONE]":
        return None
    try:
        return json.loads(payload)
    except json.JSONDecodeError:
        return None


def _chunk_text(chunk: dict) -> str:
    out = []
    for c in chunk.get("choices") or []:
        out.append(c.get("text") or (c.get("delta") or {}).get("content") or "")
    return "".join(out)


async def stream_one(client, url: str, body: dict, rid: int, timeout_s: float) -> RequestRecord:
    """Send one streamed request; return what was seen, an error included (never raises for a fault)."""
    import httpx

    rec = RequestRecord(rid=rid, sent_s=time.perf_counter())
    chunks = 0

    async def consume():
        nonlocal chunks
        async with client.stream("POST", url, json=body) as resp:
            rec.status = resp.status_code
            if resp.status_code >= 400:
                text = (await resp.aread()).decode(errors="replace")
                rec.error, rec.detail = f"http {resp.status_code}", text[:300]
                return
            async for line in resp.aiter_lines():
                chunk = _parse_sse_line(line)
                if chunk is None:
                    continue
                now = time.perf_counter()
                if "error" in chunk and not chunk.get("choices"):
                    rec.error, rec.detail = "stream error", str(chunk["error"])[:300]
                    return
                if _chunk_text(chunk):
                    rec.token_times.append(now)
                    chunks += 1
                usage = chunk.get("usage")
                if usage:
                    rec.output_tokens = int(usage.get("completion_tokens") or 0)
                    rec.prompt_tokens = usage.get("prompt_tokens")

    try:
        await asyncio.wait_for(consume(), timeout_s)
    except asyncio.TimeoutError:
        rec.error, rec.detail = "timeout", f"no complete answer within {timeout_s:g} s"
    except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError,
            httpx.ConnectTimeout, ConnectionError) as exc:
        rec.error, rec.detail = "connection", f"{type(exc).__name__}: {exc}"[:300]
    except httpx.HTTPError as exc:
        rec.error, rec.detail = "http error", f"{type(exc).__name__}: {exc}"[:300]
    rec.end_s = time.perf_counter()
    if not rec.error:
        if not rec.output_tokens:
            rec.output_tokens = chunks
        if not rec.token_times:
            rec.error, rec.detail = "no tokens", "the stream ended without any text"
    return rec


async def _run(base_url: str, model: str, requests: Sequence[TraceRequest], concurrency: int,
               timeout_s: float, honour_arrivals: bool, endpoint: str) -> list[RequestRecord]:
    import httpx

    url = base_url.rstrip("/") + endpoint
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    records: list[RequestRecord] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=5.0), limits=limits) as client:
        rounds = sorted({r.round for r in requests})
        for rnd in rounds:
            batch = [r for r in requests if r.round == rnd]
            sem = asyncio.Semaphore(concurrency)
            t0 = time.perf_counter()

            async def one(req: TraceRequest):
                if honour_arrivals and req.arrival_s > 0 and len(rounds) == 1:
                    await asyncio.sleep(max(0.0, t0 + req.arrival_s - time.perf_counter()))
                async with sem:
                    return await stream_one(client, url, completion_body(model, req.prompt, req.max_new_tokens),
                                            req.rid, timeout_s)

            records += await asyncio.gather(*(one(r) for r in batch))
    return records


def run_load(base_url: str, model: str, requests: Sequence[TraceRequest], concurrency: int = 1,
             timeout_s: float = 60.0, honour_arrivals: bool = False,
             endpoint: str = "/v1/completions") -> list[RequestRecord]:
    """Send `requests` to a server, `concurrency` at a time, streaming each; one record per request in
    the order they finished. Works from a plain script, a test and a running notebook kernel (where an
    event loop already runs: the load then runs in a worker thread with its own loop)."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a whole number ≥ 1, got {concurrency!r}")
    if not requests:
        raise ValueError("requests is empty: give at least one TraceRequest (helpers.serving.traces)")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive seconds, got {timeout_s}")
    coro = lambda: _run(base_url, model, requests, concurrency, timeout_s, honour_arrivals, endpoint)  # noqa: E731
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro())
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(coro())).result()
