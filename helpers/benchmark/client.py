"""A small asynchronous streaming client for OpenAI-compatible servers, on aiohttp (the HTTP stack of
`vllm bench serve`): it shows where TTFT and ITL come from. `stream_one` notes the clock as each
Server-Sent Events line arrives; the first chunk with text minus the send time is the TTFT, the gaps
between the next ones the ITL (`metrics.RequestRecord`). Load is closed-loop (`concurrency` in flight;
a Poisson trace's `arrival_s` honoured; the agentic trace's rounds in turn). Every fault a server can
send — HTTP error, timeout, lost connection, malformed or cut stream, impossible token count — is the
request's error, and the run goes on.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
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

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
DONE = "[DONE]"


class MalformedReply(ValueError):
    """A server's reply that is valid JSON but not an OpenAI completion chunk (or holds impossible counts)."""


def check_base_url(url: str) -> str:
    """`url` if it is http(s)://HOST[:PORT], else a ValueError that says what is wrong (the command line's check)."""
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
    """Whether `url` names this machine: such requests never go through the environment's proxy."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def completion_body(model: str, prompt: str, max_tokens: int, extra: dict | None = None) -> dict:
    """A streamed /v1/completions body: guidellm's fields, only standard ones (`transformers serve` answers
    422 to others, e.g. vLLM's `ignore_eos`)."""
    return {"model": model, "prompt": prompt, "max_tokens": int(max_tokens), "stream": True,
            "stream_options": {"include_usage": True}, **(extra or {})}


# ----------------------------------------------------------------------------- reading one streamed answer

def parse_sse_line(line: str) -> dict | str | None:
    """One SSE line: the chunk's JSON, DONE, or None (blank, comment, other field); MalformedReply if not JSON."""
    line = line.strip()
    payload = line[5:].strip() if line.startswith("data:") else ""
    if not payload or payload == DONE:
        return payload or None
    try:
        return json.loads(payload)
    except json.JSONDecodeError:
        raise MalformedReply(f"a data line that is not JSON: {payload[:80]!r}") from None


def _count(usage: dict, what: str) -> int:
    try:
        return checks.count(usage.get(what, 0), f"usage.{what}", minimum=0)
    except ValueError as exc:
        raise MalformedReply(str(exc)) from None


def _text(choices) -> tuple[str, bool]:
    """The text of a chunk's choices (`text` or `delta.content`) and whether one has a finish_reason."""
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise MalformedReply(f"'choices' must be a list of objects, got {str(choices)[:80]!r}")
    text, finished = "", False
    for c in choices:
        t = c.get("text")
        if t is None:
            delta = c.get("delta")
            if delta is not None and not isinstance(delta, dict):
                raise MalformedReply(f"'delta' must be an object, got {str(delta)[:80]!r}")
            t = (delta or {}).get("content")
        if t is not None and not isinstance(t, str):
            raise MalformedReply(f"a choice's text must be a string, got {str(t)[:80]!r}")
        text, finished = text + (t or ""), finished or c.get("finish_reason") is not None
    return text, finished


class StreamReader:
    """One streamed completion, fed line by line with each line's arrival time. Complete: `data: [DONE]`
    (vLLM), a `finish_reason` or the `usage` chunk (transformers serve); a stream that stops before any of
    them is cut. `usage.completion_tokens` must lie between the text chunks and `max_tokens`."""

    def __init__(self, rec: RequestRecord, max_tokens: int | None = None):
        self.rec, self.max_tokens = rec, max_tokens
        self.chunks, self.complete, self.usage_tokens = 0, False, None

    def feed(self, line: str, now: float) -> None:
        chunk = parse_sse_line(line)
        if chunk is None:
            return
        if chunk == DONE:
            self.complete = True
            return
        if not isinstance(chunk, dict):
            raise MalformedReply(f"a chunk that is a JSON {type(chunk).__name__}, not an object: {str(chunk)[:80]}")
        if "error" in chunk and not chunk.get("choices"):
            self.rec.error, self.rec.detail, self.complete = "stream error", str(chunk["error"])[:300], True
            return
        choices = chunk.get("choices") or []
        text, finished = _text(choices)
        if choices:
            self.rec.chunk_times.append(now)          # vLLM bench's events: any chunk with a choice
        if text:
            self.rec.token_times.append(now)          # ours: the chunks that carry text
            self.chunks += 1
        usage = chunk.get("usage")
        if usage is not None:
            if not isinstance(usage, dict):
                raise MalformedReply(f"'usage' must be an object, got {str(usage)[:80]!r}")
            self.usage_tokens = _count(usage, "completion_tokens")
            if usage.get("prompt_tokens") is not None:
                self.rec.prompt_tokens = _count(usage, "prompt_tokens")
        self.complete = self.complete or finished or usage is not None

    def finish(self) -> None:
        rec, n = self.rec, self.usage_tokens
        if rec.error:
            return
        if n is not None and not (self.chunks <= n and (self.max_tokens is None or n <= self.max_tokens)):
            rec.error, rec.detail = "implausible usage", (
                f"usage.completion_tokens = {n} for {self.chunks} text chunks and max_tokens = {self.max_tokens}: "
                "a count must be ≥ the chunks (each carries a token or more) and ≤ max_tokens")
            return
        rec.output_tokens = n if n else self.chunks
        if not self.complete:
            rec.error, rec.detail = "cut", (f"the stream stopped after {self.chunks} text chunks without a "
                                            "finish_reason, a usage chunk or [DONE]: cut mid-way")
        elif not rec.token_times:
            rec.error, rec.detail = "no tokens", "the stream ended without any text"


async def stream_one(session, url: str, body: dict, rid: int, timeout_s: float) -> RequestRecord:
    """One streamed request; a fault never raises, it becomes the record's error."""
    import aiohttp

    rec = RequestRecord(rid=rid, sent_s=time.perf_counter())
    reader = StreamReader(rec, body.get("max_tokens"))

    async def read():
        async with session.post(url, json=body) as resp:
            rec.status = resp.status
            if resp.status >= 400:
                rec.error, rec.detail = f"http {resp.status}", (await resp.text(errors="replace"))[:300]
                return
            async for line in resp.content:                              # each line as it arrives
                reader.feed(line.decode(errors="replace"), time.perf_counter())

    async def sent():
        try:
            await read()
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            # a pooled connection the server closed after its last answer without saying so: nothing came back,
            # so the request never reached it; sent once more, on a fresh connection (as urllib3 retries)
            if rec.status is not None or reader.chunks:
                raise
            await read()

    try:
        await asyncio.wait_for(sent(), timeout_s)
    except asyncio.TimeoutError:
        rec.error, rec.detail = "timeout", f"no complete answer within {timeout_s:g} s"
    except MalformedReply as exc:
        rec.error, rec.detail = "malformed reply", str(exc)[:300]
    except (aiohttp.ClientError, OSError) as exc:        # refused, reset, cut mid-body (a complete one is whole)
        if not (isinstance(exc, aiohttp.ClientPayloadError) and reader.complete):
            proxy = next((v for v in PROXY_VARIABLES if os.environ.get(v)), None) if session.trust_env else None
            via = f" (through the proxy in {proxy}: set no_proxy for this host if it should be reached directly)" \
                if proxy else ""
            rec.error, rec.detail = "connection", f"{type(exc).__name__}: {exc}{via}"[:400]
    except Exception as exc:  # noqa: BLE001 - any other reply a server can send is a counted fault, not a crash
        rec.error, rec.detail = "client error", f"{type(exc).__name__}: {exc}"[:300]
    rec.end_s = time.perf_counter()
    reader.finish()
    return rec


# ----------------------------------------------------------------------------- a load

def _unsent(req: TraceRequest, why: str) -> RequestRecord:
    now = time.perf_counter()
    return RequestRecord(rid=req.rid, sent_s=now, end_s=now, error="deadline", detail=why)


async def _run(base_url: str, model: str, requests: Sequence[TraceRequest], concurrency: int,
               timeout_s: float, honour_arrivals: bool, endpoint: str, deadline: float) -> list[RequestRecord]:
    import aiohttp

    url = base_url.rstrip("/") + endpoint
    records: list[RequestRecord] = []
    # this machine's servers are reached directly, whatever proxy the environment names
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency), trust_env=not is_loopback(url),
                                     timeout=aiohttp.ClientTimeout(total=None, sock_connect=5.0)) as session:
        rounds = sorted({r.round for r in requests})
        for rnd in rounds:
            sem, t0 = asyncio.Semaphore(concurrency), time.perf_counter()

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
                    return await stream_one(session, url, completion_body(model, req.prompt, req.max_new_tokens),
                                            req.rid, min(timeout_s, left))

            records += await asyncio.gather(*(one(r) for r in requests if r.round == rnd))
    return records


def run_load(base_url: str, model: str, requests: Sequence[TraceRequest], concurrency: int = 1,
             timeout_s: float = 60.0, honour_arrivals: bool = False,
             endpoint: str = "/v1/completions", deadline_s: float | None = None,
             cpus: set[int] | None = None) -> list[RequestRecord]:
    """`requests`, `concurrency` at a time, one record each; each may take `timeout_s`, the whole load
    `deadline_s` (what is not sent by then is a "deadline" error). Inside a running event loop (a notebook
    kernel), or on `cpus` (process.client_cpus), in a worker thread with its own loop."""
    deadline = time.perf_counter() + (deadline_s if deadline_s is not None else math.inf)

    def load():
        with pinned(cpus):
            return asyncio.run(_run(base_url, model, requests, concurrency, timeout_s, honour_arrivals, endpoint,
                                    deadline))
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        if not cpus:
            return load()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(load).result()


def stream_with_openai(base_url: str, model: str, request: TraceRequest, timeout_s: float = 60.0) -> RequestRecord:
    """One request through the `openai` package, timed the same way (`for chunk in stream`): a check of
    `stream_one`'s TTFT, not a load."""
    import openai

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
