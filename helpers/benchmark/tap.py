"""A tap: a byte relay between a load generator and a server that timestamps every streamed chunk as it
passes and reads it with the streaming client's own parsing (`stream.StreamReader`), on the wall clock
guidellm uses (time.time), so that our definitions and another tool's are compared **on the same run** —
the same requests, the same moment — instead of two runs one after the other (which differ by more than
their definitions when the machine is busy, or when a queue forms).

    with Tap(server.base_url) as tap:          # listens on a free port of 127.0.0.1
        guidellm_runner.run(tap.base_url, ...)
    summarize(tap.records)                     # our figures, for guidellm's requests

The relay forwards bytes as they come (no HTTP client or server in between: it only reads the HTTP/1.1
framing to find each request and its streamed answer), so what it adds to the other tool's figures is one
hop through a socket pair, a fraction of a millisecond. A request is timed from its first byte at the tap.
"""
from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from urllib.parse import urlsplit

from .metrics import RequestRecord
from .process import HOST, free_port, pinned
from .stream import Exchange
from .wire import Framing


class Tap:
    """Relay every connection to `upstream` (a server on this machine), recording one RequestRecord per
    POST to a /v1/completions or /v1/chat/completions path; other requests (GET /health, /metrics) pass
    unrecorded. `cpus`: the CPUs the relay's thread may run on (None: any)."""

    def __init__(self, upstream: str, port: int | None = None, cpus: set[int] | None = None):
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"upstream must look like http://127.0.0.1:8000, got {upstream!r}")
        self.upstream, self.cpus = (parts.hostname, parts.port), cpus
        self.port = port or free_port()
        self.records: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    # ------------------------------------------------------------ one connection
    async def _connection(self, down_r, down_w) -> None:
        now = [time.time()]
        pending: collections.deque = collections.deque()     # per request in flight: an Exchange or None
        request = {}

        def request_head(start, headers):
            method, _, rest = start.partition(" ")
            request.update(method=method, path=rest.split(" ")[0].split("?")[0], body=b"",
                           sent_s=request.get("first_byte_s", now[0]))

        def request_end():
            request.pop("first_byte_s", None)
            if request.get("method") == "POST" and request.get("path", "").endswith("completions"):
                try:
                    asked = json.loads(request["body"]).get("max_tokens")
                except (ValueError, AttributeError):
                    asked = None
                with self._lock:
                    rec = RequestRecord(rid=len(self.records), sent_s=request["sent_s"])
                    self.records.append(rec)
                pending.append(Exchange(rec, asked if isinstance(asked, int) else None, lambda: now[0]))
            else:
                pending.append(None)

        current: list = [None]

        def response_head(start, headers):
            current[0] = pending.popleft() if pending else None
            if current[0] is not None:
                code = start.split(" ")[1] if " " in start else ""
                current[0].rec.status = int(code) if code.isdigit() else None

        def response_end():
            if current[0] is not None:
                current[0].end(now[0])
            current[0] = None

        req = Framing(request_head, lambda b: request.__setitem__("body", request.get("body", b"") + b),
                       request_end, responses=False)
        resp = Framing(response_head, lambda b: current[0] is not None and current[0].body(b), response_end,
                        responses=True)
        try:
            up_r, up_w = await asyncio.wait_for(asyncio.open_connection(*self.upstream), 5.0)
        except (OSError, asyncio.TimeoutError) as exc:
            await self._refuse(down_r, down_w, req, pending, now, f"{type(exc).__name__}: {exc}")
            return

        async def pump(src, dst, framing, client_side: bool):
            try:
                while data := await src.read(1 << 16):
                    now[0] = time.time()
                    dst.write(data)
                    if client_side and not framing.mid_message:
                        request["first_byte_s"] = now[0]
                    framing.feed(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                if not client_side:
                    now[0] = time.time()
                    if resp.state == "close":
                        response_end()
                    for ex in [current[0], *pending]:
                        if ex is not None and ex.rec.end_s is None:
                            ex.end(now[0], "the server closed the connection mid-answer")
                    current[0] = None
                    pending.clear()
                try:
                    dst.close()
                except (ConnectionError, OSError, RuntimeError):
                    pass

        await asyncio.gather(pump(down_r, up_w, req, True), pump(up_r, down_w, resp, False))

    async def _refuse(self, down_r, down_w, req: Framing, pending, now, why: str) -> None:
        """The server could not be reached: each request read is answered 502 (a completion recorded with
        the error "connection"), and the connection closed."""
        try:
            while not pending and (data := await asyncio.wait_for(down_r.read(1 << 16), 10.0)):
                now[0] = time.time()
                req.feed(data)
            for ex in pending:
                if ex is not None:
                    ex.rec.end_s, ex.rec.error, ex.rec.detail = time.time(), "connection", why[:300]
            body = why.encode()
            down_w.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            await down_w.drain()
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            down_w.close()

    # ------------------------------------------------------------ life cycle
    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        with pinned(self.cpus):
            try:
                server = loop.run_until_complete(asyncio.start_server(self._connection, HOST, self.port))
            except OSError as exc:
                self._error = exc
                self._started.set()
                return
            self._started.set()
            try:
                loop.run_forever()
            finally:
                server.close()
                tasks = asyncio.all_tasks(loop)
                for task in tasks:
                    task.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.close()

    def start(self) -> "Tap":
        self._thread = threading.Thread(target=self._run, name="engines-tap", daemon=True)
        self._thread.start()
        if not self._started.wait(10) or self._error is not None:
            raise RuntimeError(f"the tap could not listen on {self.base_url}: {self._error}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
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
