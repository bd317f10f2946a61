"""A tap: a byte relay between a load generator and a server that timestamps every streamed chunk as it
passes and reads it with the streaming client's own parsing (`client.StreamReader`), on the wall clock
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

from .client import MalformedReply, StreamReader
from .metrics import RequestRecord
from .process import HOST, free_port, pinned


class _Framing:
    """The HTTP/1.1 messages of one direction of a connection, fed bytes as they pass: `on_head(start
    line, headers)`, `on_body(bytes)`, `on_end()` per message. A body is framed by Content-Length or the
    chunked transfer coding; a response with neither runs to the connection's close."""

    def __init__(self, on_head, on_body, on_end, responses: bool):
        self.on_head, self.on_body, self.on_end, self.responses = on_head, on_body, on_end, responses
        self.buf, self.state, self.left = b"", "head", 0

    def feed(self, data: bytes) -> None:
        self.buf += data
        while self.buf or self.state == "end":
            if self.state == "head":
                i = self.buf.find(b"\r\n\r\n")
                if i < 0:
                    return
                start, *lines = self.buf[:i].decode("latin-1").split("\r\n")
                self.buf = self.buf[i + 4:]
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
                self.on_head(start, headers)
                status = start.split(" ")[1] if self.responses and " " in start else ""
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    self.state = "size"
                elif int(headers.get("content-length") or 0) > 0:
                    self.state, self.left = "fixed", int(headers["content-length"])
                elif "content-length" in headers:
                    self.state = "end"
                else:
                    self.state = "close" if self.responses and status not in ("204", "304") else "end"
            elif self.state == "fixed":
                self._take("end")
            elif self.state == "size":
                i = self.buf.find(b"\r\n")
                if i < 0:
                    return
                size = int(self.buf[:i].split(b";")[0], 16)
                self.buf = self.buf[i + 2:]
                self.state, self.left = ("trailer", 0) if size == 0 else ("chunk", size + 2)   # + its CRLF
            elif self.state == "chunk":
                self._take("size", crlf=True)
            elif self.state == "trailer":
                i = self.buf.find(b"\r\n")
                if i < 0:
                    return
                self.buf, self.state = self.buf[i + 2:], ("end" if i == 0 else "trailer")
            elif self.state == "end":
                self.state = "head"
                self.on_end()
            else:                                    # "close": everything until the connection closes
                self.on_body(self.buf)
                self.buf = b""

    def _take(self, then: str, crlf: bool = False) -> None:
        part, self.buf = self.buf[:self.left], self.buf[self.left:]
        self.left -= len(part)
        body = part[:max(0, len(part) - max(0, 2 - self.left))] if crlf else part   # not the chunk's CRLF
        if body:
            self.on_body(body)
        if self.left == 0:
            self.state = then

    @property
    def mid_message(self) -> bool:
        return self.state != "head" or bool(self.buf)


class _Exchange:
    """One recorded request: its record, its stream's reader, the partial line between chunks."""

    def __init__(self, rec: RequestRecord, max_tokens, clock):
        self.rec, self.reader, self.line, self.error_body = rec, StreamReader(rec, max_tokens, clock=clock), b"", b""

    def body(self, data: bytes) -> None:
        rec = self.rec
        if rec.status is not None and rec.status >= 400:
            self.error_body += data
            return
        *lines, self.line = (self.line + data).split(b"\n")
        for line in lines:
            if not rec.error:
                try:
                    self.reader.feed(line.decode("utf-8", errors="replace"))
                except MalformedReply as exc:
                    rec.error, rec.detail = "malformed reply", str(exc)[:300]

    def end(self, now: float, cut: str | None = None) -> None:
        rec = self.rec
        rec.end_s = now
        if rec.status is not None and rec.status >= 400:
            rec.error, rec.detail = f"http {rec.status}", self.error_body.decode(errors="replace")[:300]
            return
        if cut and not rec.error:
            rec.error, rec.detail = "connection", cut
        if self.line:
            self.body(b"\n")
        self.reader.finish()


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
        pending: collections.deque = collections.deque()     # per request in flight: an _Exchange or None
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
                pending.append(_Exchange(rec, asked if isinstance(asked, int) else None, lambda: now[0]))
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

        req = _Framing(request_head, lambda b: request.__setitem__("body", request.get("body", b"") + b),
                       request_end, responses=False)
        resp = _Framing(response_head, lambda b: current[0] is not None and current[0].body(b), response_end,
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

    async def _refuse(self, down_r, down_w, req: _Framing, pending, now, why: str) -> None:
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
