"""HTTP/1.1 framing read from bytes as they pass, for the tap (which relays them) and the streaming
client (which reads its answers off a plain socket): where a message's head ends, and where its body ends
— by Content-Length, by the chunked transfer coding (extensions and trailers allowed), or, for a response
with neither, at the connection's close. Nothing else of HTTP: no client, no server."""
from __future__ import annotations


class Framing:
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
