"""A stand-in OpenAI-compatible server for the fault tests (standard library only): it streams
`/v1/completions` like `transformers serve` (one token per SSE chunk, `usage` in the last chunk, no
[DONE]) at a fixed pace, and misbehaves on demand.

    python tests/fake_openai_server.py --port N [--token-s 0.01] [--ttft-s 0.02]
        [--fail-every K --fail-status 500]   every K-th request answers with that status
        [--hang-every K]                     every K-th request never answers
        [--die-after K]                      the process exits when the K-th request arrives
        [--exit-delay-s S]                   ... S seconds after dropping that request's connection, as a
                                             server that takes a moment to exit does
        [--never-ready]                      /health always answers 503
        [--strict-fields]                    unknown request fields get 422, as transformers serve does
        [--exit-at-start]                    exits at once with code 3
        [--reply KIND]                       the last chunk is malformed: usage-number, usage-string,
                                             usage-nan, usage-huge (100,000 tokens), chunk-list,
                                             choices-string, no-usage (neither usage nor finish_reason:
                                             a stream that just stops), not-json
        [--cut-after K]                      closes the connection after K tokens, mid-stream
        [--empty-first]                      a first chunk with a choice but empty text, at once (before TTFT)
        [--no-text]                          every chunk's text empty (a 200 stream with no text at all)
        [--vllm-end --tail-s S]              ends as vLLM does: the last text chunk carries finish_reason,
                                             then (S seconds later) a usage chunk with no choices, [DONE]
        [--spawn-child group|session]        starts a sleeping child (in its process group, or in a session
                                             of its own) and logs its pid: "child pid N"; on SIGTERM it ends
                                             that child, then itself, as a server ends its workers (vLLM its
                                             engine core)
        [--child-exit-s S]                   that child takes S seconds to exit on SIGTERM
        [--ignore-sigterm]                   ignores SIGTERM (as vLLM does while it starts)

Imported by the tests (standard library only at import time, so the server starts fast): COMMAND, the
command line for servebench.process.ServerProcess; start(*flags); trace(n); left(processes).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMAND = [sys.executable, os.path.abspath(__file__), "--port", "{port}"]


def start(*flags: str, **kw):
    """A ServerProcess for this stand-in (not started yet), with `flags` of the list above."""
    from servebench import process

    return process.ServerProcess(COMMAND + list(flags), name="fake", ready_timeout_s=kw.pop("ready_timeout_s", 20),
                                 **kw)


def trace(n: int, tokens: int = 4) -> list[dict]:
    """n short requests asking for `tokens` tokens each (servebench.client's form)."""
    return [{"prompt": f"prompt {i}", "max_tokens": tokens} for i in range(n)]


def left(procs, within_s: float = 60.0) -> list:
    """The psutil.Process objects of `procs` still running after up to `within_s` seconds (polled; a zombie,
    dead and not yet reaped, is not running unless threads of it still run; psutil tells a reused pid from
    the process it had)."""
    import psutil

    t0 = time.time()
    while True:
        running = []
        for p in procs:
            try:
                if p.is_running() and (p.status() != psutil.STATUS_ZOMBIE or p.num_threads() > 1):
                    running.append(p)
            except psutil.Error:
                pass
        if not running or time.time() - t0 > within_s:
            return running
        time.sleep(0.1)


ARGS = None
KNOWN_FIELDS = {"model", "prompt", "max_tokens", "stream", "stream_options", "temperature", "top_p", "seed", "stop"}
COUNT = 0
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def do_GET(self):
        code = 503 if ARGS.never_ready else 200
        body = b'{"status": "ok"}'
        if self.path.startswith("/v1/models"):
            body = b'{"object": "list", "data": [{"id": "m", "object": "model"}]}'
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        global COUNT
        n = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(n) or b"{}")
        with LOCK:
            COUNT += 1
            k = COUNT
        if ARGS.die_after and k >= ARGS.die_after:
            if ARGS.exit_delay_s:
                self.connection.shutdown(socket.SHUT_RDWR)   # the client sees the connection drop ...
                time.sleep(ARGS.exit_delay_s)                # ... before the process is gone
            os._exit(1)
        if ARGS.hang_every and k % ARGS.hang_every == 0:
            time.sleep(3600)
        if ARGS.fail_every and k % ARGS.fail_every == 0:
            msg = json.dumps({"detail": "injected fault"}).encode()
            self.send_response(ARGS.fail_status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        unknown = set(body) - KNOWN_FIELDS
        if ARGS.strict_fields and unknown:
            msg = json.dumps({"detail": f"Unexpected fields in the request: {unknown}"}).encode()
            self.send_response(422)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        tokens = int(body.get("max_tokens", 8))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")       # a close-delimited body: no length, no chunks
        self.end_headers()
        if ARGS.empty_first:
            self.wfile.write(f"data: {json.dumps({'choices': [{'index': 0, 'text': '', 'finish_reason': None}]})}\n\n"
                             .encode())
            self.wfile.flush()
        time.sleep(ARGS.ttft_s)
        for i in range(tokens):
            if i:
                time.sleep(ARGS.token_s)
            if ARGS.cut_after and i == ARGS.cut_after:
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            chunk = {"choices": [{"index": 0, "text": "" if ARGS.no_text else f" t{i}", "finish_reason": None}]}
            usage = {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + tokens}
            if i == tokens - 1:
                chunk["choices"][0]["finish_reason"] = "length"
                if not ARGS.vllm_end:
                    chunk["usage"] = usage
                chunk = malformed(chunk) if ARGS.reply else chunk
            line = chunk if isinstance(chunk, str) else json.dumps(chunk)
            self.wfile.write(f"data: {line}\n\n".encode())
            self.wfile.flush()
        if ARGS.vllm_end:
            time.sleep(ARGS.tail_s)
            self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
        self.close_connection = True


def malformed(chunk: dict):
    """The last chunk as --reply asks: valid JSON that is no completion chunk, or a count no server makes."""
    kind = ARGS.reply
    if kind == "not-json":
        return "{not json"
    if kind == "chunk-list":
        return [chunk]
    if kind == "choices-string":
        return dict(chunk, choices="oops")
    if kind == "no-usage":
        return {"choices": [{"index": 0, "text": chunk["choices"][0]["text"], "finish_reason": None}]}
    usage = {"usage-number": 7, "usage-string": "seven", "usage-nan": {"completion_tokens": float("nan")},
             "usage-huge": {"prompt_tokens": 5, "completion_tokens": 100_000, "total_tokens": 100_005}}[kind]
    return dict(chunk, usage=usage)


_ENDING = False


def _end_with(child: subprocess.Popen) -> None:
    """SIGTERM: end the child, then this process. Once: a parent's death signal comes once for every thread
    of the parent that the server is handed to as that parent's threads exit (Linux reparents a child to a
    living thread of its parent's process first), so a second SIGTERM can arrive while this handler waits
    on the child; run again there, its `child.wait()` would wait forever on the lock the first one holds."""
    global _ENDING
    if _ENDING:
        return
    _ENDING = True
    child.terminate()
    child.wait()
    os._exit(0)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--token-s", type=float, default=0.01)
    p.add_argument("--ttft-s", type=float, default=0.02)
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--fail-status", type=int, default=500)
    p.add_argument("--hang-every", type=int, default=0)
    p.add_argument("--die-after", type=int, default=0)
    p.add_argument("--exit-delay-s", type=float, default=0.0)
    p.add_argument("--never-ready", action="store_true")
    p.add_argument("--strict-fields", action="store_true")
    p.add_argument("--exit-at-start", action="store_true")
    p.add_argument("--reply", default=None, choices=("usage-number", "usage-string", "usage-nan", "usage-huge",
                                                    "chunk-list", "choices-string", "no-usage", "not-json"))
    p.add_argument("--cut-after", type=int, default=0)
    p.add_argument("--empty-first", action="store_true")
    p.add_argument("--no-text", action="store_true")
    p.add_argument("--vllm-end", action="store_true")
    p.add_argument("--tail-s", type=float, default=0.0)
    p.add_argument("--spawn-child", default=None, choices=("group", "session"))
    p.add_argument("--child-exit-s", type=float, default=0.0)
    p.add_argument("--ignore-sigterm", action="store_true")
    ARGS = p.parse_args()
    if ARGS.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if ARGS.spawn_child:
        slow_end = f"signal.signal(signal.SIGTERM, lambda *_: (time.sleep({ARGS.child_exit_s}), sys.exit(0))); "
        child = subprocess.Popen([sys.executable, "-c", "import signal, sys, time; "
                                  f"{slow_end if ARGS.child_exit_s else ''}time.sleep(600)"],
                                 start_new_session=ARGS.spawn_child == "session")
        print(f"child pid {child.pid}", flush=True)
        if not ARGS.ignore_sigterm:
            signal.signal(signal.SIGTERM, lambda *_: _end_with(child))
    if ARGS.exit_at_start:
        print("fake server: exiting at start as asked", flush=True)
        raise SystemExit(3)
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    srv.daemon_threads = True
    print(f"fake server on 127.0.0.1:{ARGS.port}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
