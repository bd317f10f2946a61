"""Reading a streamed completion, one definition for the client and the tap: `parse_sse_line` turns a
Server-Sent Events line into a chunk, `StreamReader` turns chunks into a request's record (the arrival
time of each chunk with text, the server's token count, whether the stream said it was complete), and
`Exchange` turns an answer's bytes, as they arrive, into those lines (or an error answer's body)."""
from __future__ import annotations

import json
import time

from .. import checks
from .metrics import RequestRecord


class MalformedReply(ValueError):
    """A server's reply that is valid JSON but not an OpenAI completion chunk (or holds impossible counts)."""


DONE = "[DONE]"


def parse_sse_line(line: str) -> dict | str | None:
    """One line of a Server-Sent Events stream: the chunk's JSON, DONE for `data: [DONE]`, None for
    anything else (blank lines, comments, other fields). A `data:` line that is not JSON is malformed."""
    line = line.strip()
    if not line.startswith("data:"):
        return None
    payload = line[5:].strip()
    if not payload:
        return None
    if payload == DONE:
        return DONE
    try:
        return json.loads(payload)
    except json.JSONDecodeError:
        raise MalformedReply(f"a data line that is not JSON: {payload[:80]!r}") from None


def _usage_count(usage: dict, what: str) -> int:
    """A token count from the server's `usage`: a whole number ≥ 0 (not a bool, a float, a string or NaN);
    anything else is a malformed reply, not a bad argument."""
    try:
        return checks.count(usage.get(what, 0), f"usage.{what}", minimum=0)
    except ValueError as exc:
        raise MalformedReply(str(exc)) from None


class StreamReader:
    """The state of one streamed completion, fed line by line (the client and the tap share it, so both
    apply one definition): the arrival time of each chunk that carries text, the server's token count,
    and whether the stream said it was complete.

    A stream is complete when it sent `data: [DONE]` (vLLM), a choice with a `finish_reason`, or the
    `usage` chunk (transformers serve ends with both, without [DONE]). A stream that stops before any
    of them — a connection closed mid-way, which an HTTP client reading a close-delimited body cannot
    tell from an end — is cut, and counted as a failure. `usage.completion_tokens` must be at least the
    number of text chunks (each carries a token or more) and at most the `max_tokens` asked."""

    def __init__(self, rec: RequestRecord, max_tokens: int | None = None, clock=time.perf_counter):
        self.rec, self.max_tokens, self.clock = rec, max_tokens, clock
        self.chunks = 0
        self.complete = False
        self.usage_tokens: int | None = None

    def feed(self, line: str) -> None:
        """One line of the stream; raises MalformedReply for a reply no OpenAI server sends."""
        chunk = parse_sse_line(line)
        if chunk is None:
            return
        now = self.clock()
        if chunk == DONE:
            self.complete = True
            return
        if not isinstance(chunk, dict):
            raise MalformedReply(f"a chunk that is a JSON {type(chunk).__name__}, not an object: {str(chunk)[:80]}")
        if "error" in chunk and not chunk.get("choices"):
            self.rec.error, self.rec.detail = "stream error", str(chunk["error"])[:300]
            self.complete = True
            return
        choices = chunk.get("choices")
        if choices is None:
            choices = []
        if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
            raise MalformedReply(f"'choices' must be a list of objects, got {str(choices)[:80]!r}")
        text = []
        for c in choices:
            t = c.get("text")
            if t is None:
                delta = c.get("delta")
                if delta is not None and not isinstance(delta, dict):
                    raise MalformedReply(f"'delta' must be an object, got {str(delta)[:80]!r}")
                t = (delta or {}).get("content")
            if t is not None and not isinstance(t, str):
                raise MalformedReply(f"a choice's text must be a string, got {str(t)[:80]!r}")
            text.append(t or "")
            if c.get("finish_reason") is not None:
                self.complete = True
        if choices:
            self.rec.chunk_times.append(now)        # vLLM bench's events: any chunk with a choice
        if "".join(text):
            self.rec.token_times.append(now)
            self.chunks += 1
        usage = chunk.get("usage")
        if usage is not None:
            if not isinstance(usage, dict):
                raise MalformedReply(f"'usage' must be an object, got {str(usage)[:80]!r}")
            self.usage_tokens = _usage_count(usage, "completion_tokens")
            if usage.get("prompt_tokens") is not None:
                self.rec.prompt_tokens = _usage_count(usage, "prompt_tokens")
            self.complete = True

    def finish(self) -> None:
        """The stream ended (no exception): set the token count and, if it was not a good answer, why."""
        rec = self.rec
        if rec.error:
            return
        n = self.usage_tokens
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


class Exchange:
    """One request's answer read as bytes arrive (the client's and the tap's): its record, its stream's
    reader, the partial line between reads, the body of an error answer."""

    def __init__(self, rec: RequestRecord, max_tokens: int | None, clock=time.perf_counter):
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
        if cut and not rec.error and not self.reader.complete:    # cut after [DONE]: the answer was whole
            rec.error, rec.detail = "connection", cut
        if self.line:
            self.body(b"\n")
        self.reader.finish()
