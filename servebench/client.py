"""The short client that times each streamed chunk (notebook 08 shows `stream_one`): TTFT = the first chunk
with text − the send time; a request's ITL = (last − first) ÷ (tokens − 1). A stream counts when it says it
is complete (a `finish_reason`, the `usage` chunk or `[DONE]`); any other reply (an HTTP error, a timeout,
a lost connection, a malformed or cut stream, a token count the stream contradicts) is the request's
error. `run`: requests closed loop (`concurrency` in flight) or open loop (each at its `at`), round by round.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field


@dataclass
class Reply:
    sent: float                                        # time.perf_counter() when it was sent
    chunks: list[float] = field(default_factory=list)  # ... when each chunk with text arrived
    end: float | None = None
    tokens: int = 0                                    # the server's usage count, else one per chunk
    error: str | None = None

    def row(self) -> list | None:
        """[TTFT s, ITL s, E2E s, output tokens], or None for a failed request (what a record keeps)."""
        if self.error or not self.chunks:
            return None
        itl = (self.chunks[-1] - self.chunks[0]) / (self.tokens - 1) if self.tokens > 1 else None
        return [self.chunks[0] - self.sent, itl, self.end - self.sent, self.tokens]


async def stream_one(session, url: str, body: dict, timeout_s: float) -> Reply:
    """One streamed request, every chunk timed; a fault never raises, it becomes the reply's error."""
    import aiohttp

    reply, done, usage = Reply(time.perf_counter()), False, None

    async def read(retry: bool = True):
        nonlocal done, usage
        try:
            resp = await session.post(url, json=body)
        except aiohttp.ServerDisconnectedError:     # a pooled connection the server had closed: sent again
            if not retry:
                raise
            return await read(False)
        async with resp:
            if resp.status != 200:
                reply.error = f"http {resp.status}"
                return
            async for line in resp.content:                      # each SSE line as it arrives
                now, line = time.perf_counter(), line.decode(errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    continue
                chunk = json.loads(data)
                for choice in chunk.get("choices") or []:
                    if choice.get("text") or (choice.get("delta") or {}).get("content"):
                        reply.chunks.append(now)
                    done = done or choice.get("finish_reason") is not None
                if chunk.get("usage") is not None:
                    usage, done = chunk["usage"]["completion_tokens"], True
    try:
        await asyncio.wait_for(read(), timeout_s)
    except asyncio.TimeoutError:
        reply.error = "timeout"
    except (aiohttp.ClientError, OSError):
        reply.error = "connection" if not done else None           # a complete answer cut at its close is whole
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # JSON that is not a completion chunk
        reply.error = f"malformed reply: {type(exc).__name__}"
    reply.end, n = time.perf_counter(), len(reply.chunks)
    if reply.error is None:     # cut: it never said it was complete; a count below the chunks seen or above max_tokens
        reply.error = ("cut" if not done else "no text" if n == 0 else None if usage is None or
                       isinstance(usage, int) and n <= usage <= body["max_tokens"] else "implausible usage")
    reply.tokens = usage if reply.error is None and usage else n
    return reply


async def _run(base_url: str, model: str, requests: list[dict], concurrency: int | None, timeout_s: float,
               deadline: float) -> list[Reply]:
    import aiohttp

    url, replies = base_url.rstrip("/") + "/v1/completions", []
    limit = concurrency or len(requests)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit), trust_env=False,
                                     timeout=aiohttp.ClientTimeout(total=None, sock_connect=5.0)) as session:
        for rnd in sorted({r.get("round", 0) for r in requests}):          # a round starts when the last one ended
            sem, t0 = asyncio.Semaphore(limit), time.perf_counter()

            async def one(r: dict) -> Reply:
                if concurrency is None:                                    # open loop: sent at its time
                    await asyncio.sleep(max(0.0, t0 + r["at"] - time.perf_counter()))
                async with sem:
                    if time.perf_counter() >= deadline:
                        return Reply(time.perf_counter(), end=time.perf_counter(), error="deadline")
                    body = {"model": model, "prompt": r["prompt"], "max_tokens": r["max_tokens"], "stream": True,
                            "stream_options": {"include_usage": True}}
                    return await stream_one(session, url, body, min(timeout_s, deadline - time.perf_counter()))

            replies += await asyncio.gather(*(one(r) for r in requests if r.get("round", 0) == rnd))
    return replies


def run(base_url: str, model: str, requests: list[dict], concurrency: int | None = 1, timeout_s: float = 120.0,
        deadline_s: float = float("inf")) -> list[Reply]:
    """`requests` ({"prompt", "max_tokens", "at"?, "round"?}) against a server: `concurrency` in flight
    (None: open loop, each sent at its `at`); what is not sent within `deadline_s` is a "deadline" error."""
    return asyncio.run(_run(base_url, model, requests, concurrency, timeout_s, time.perf_counter() + deadline_s))
