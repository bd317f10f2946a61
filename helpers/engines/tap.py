"""A tap: a small relay between a load generator and a server that timestamps every streamed chunk with
the streaming client's own parsing (`client.StreamReader`), on the wall clock
guidellm uses (time.time), so that our
definitions and guidellm's are compared **on the same run** — the same requests, the same moment —
instead of two runs one after the other (which differ by more than their definitions when the machine
is busy, or when a queue forms: a load generator that is slower to send its next request keeps a
shorter queue at the server).

    with Tap(server.base_url) as tap:          # listens on a free port of 127.0.0.1
        guidellm_runner.run(tap.base_url, ...)
    summarize(tap.records)                     # our figures, for guidellm's requests

The relay adds its own forwarding time (well under a millisecond per chunk on a quiet machine) to
what guidellm sees, not to what the tap records.
"""
from __future__ import annotations

import json
import threading
import time

from .client import MalformedReply, StreamReader, is_loopback
from .metrics import RequestRecord
from .process import HOST, free_port


class Tap:
    """Relay POST /v1/completions (and /v1/chat/completions) to `upstream`, streaming, recording one
    RequestRecord per request; GET /health and other paths are relayed without recording."""

    def __init__(self, upstream: str, port: int | None = None, timeout_s: float = 600.0):
        self.upstream = upstream.rstrip("/")
        self.port = port or free_port()
        self.timeout_s = timeout_s
        self.records: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def _app(self):
        import httpx
        from starlette.applications import Starlette
        from starlette.responses import Response, StreamingResponse
        from starlette.routing import Route

        http = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s, connect=5.0),
                                 limits=httpx.Limits(max_connections=256, max_keepalive_connections=256),
                                 trust_env=not is_loopback(self.upstream))

        async def relay(request):
            body = await request.body()
            url = self.upstream + request.url.path
            headers = {"content-type": request.headers.get("content-type", "application/json")}
            if request.method != "POST" or not request.url.path.endswith("completions"):
                r = await http.request(request.method, url, content=body or None, headers=headers)
                return Response(r.content, r.status_code, media_type=r.headers.get("content-type"))
            with self._lock:
                rec = RequestRecord(rid=len(self.records), sent_s=time.time())
                self.records.append(rec)
            try:
                upstream = await http.send(http.build_request("POST", url, content=body, headers=headers), stream=True)
            except Exception as exc:  # noqa: BLE001 - the server is unreachable: recorded, and a 502 for the caller
                rec.end_s, rec.error, rec.detail = time.time(), "connection", f"{type(exc).__name__}: {exc}"[:300]
                return Response(rec.detail, 502)
            rec.status = upstream.status_code
            if upstream.status_code >= 400:
                content = await upstream.aread()
                await upstream.aclose()
                rec.end_s, rec.error, rec.detail = time.time(), f"http {upstream.status_code}", content.decode(
                    errors="replace")[:300]
                return Response(content, upstream.status_code, media_type=upstream.headers.get("content-type"))

            try:
                asked = json.loads(body).get("max_tokens")
            except (ValueError, AttributeError):
                asked = None
            reader = StreamReader(rec, asked if isinstance(asked, int) else None, clock=time.time)

            async def chunks():
                try:
                    async for line in upstream.aiter_lines():
                        if not rec.error:
                            try:
                                reader.feed(line)
                            except MalformedReply as exc:
                                rec.error, rec.detail = "malformed reply", str(exc)[:300]
                        yield line + "\n"
                except Exception as exc:  # noqa: BLE001 - the upstream failed mid-stream: recorded
                    rec.error, rec.detail = "connection", f"{type(exc).__name__}: {exc}"[:300]
                finally:
                    await upstream.aclose()
                    rec.end_s = time.time()
                    reader.finish()

            return StreamingResponse(chunks(), upstream.status_code, media_type="text/event-stream")

        return Starlette(routes=[Route("/{path:path}", relay, methods=["GET", "POST"])])

    def start(self) -> "Tap":
        import uvicorn

        config = uvicorn.Config(self._app(), host=HOST, port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None   # a thread: leave the process's signals alone
        self._thread = threading.Thread(target=self._server.run, name="engines-tap", daemon=True)
        self._thread.start()
        t0 = time.perf_counter()
        while not self._server.started:
            if not self._thread.is_alive() or time.perf_counter() - t0 > 10:
                raise RuntimeError(f"the tap could not listen on {self.base_url}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> "Tap":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def split_by_benchmark(records: list[RequestRecord], raw: dict) -> list[list[RequestRecord]]:
    """The tap's records of one guidellm run, split by guidellm's benchmarks (one per concurrency level)
    using their start and end times (both clocks are time.time())."""
    out = []
    for b in raw.get("benchmarks", []):
        t0, t1 = float(b["start_time"]), float(b["end_time"])
        out.append([r for r in records if t0 - 0.5 <= r.sent_s <= t1 + 0.5])
    return out
