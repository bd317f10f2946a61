"""An OpenAI-compatible HTTP server over the workshop's readable engine (helpers.engine), so the same
load generators that measure `transformers serve` and vLLM measure it too.

    python -m servebench.server MODEL_FOLDER --port 8000 [--prefix-cache radix|hash|off]

Endpoints: GET /health (and what the requests hold), GET /v1/models, POST /v1/completions and
/v1/chat/completions (protocol.py), answered whole or streamed as Server-Sent Events, as OpenAI's API
does. The engine runs in a thread of its own (`EngineLoop`): requests reach it through a queue, each
new token goes back to its request's asyncio queue. A client that goes away cancels its request;
SIGTERM ends the requests in flight, stops the engine thread and exits.
"""
import argparse
import asyncio
import json
import queue
import sys
import threading
import time
import traceback
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from helpers import command
from helpers.engine.llm import Engine, EngineArgs
from helpers.engine.request import Request, SamplingParams

from .protocol import ChatCompletionRequest, CompletionRequest, Reply, StreamOptions, TextStream, explain

MAX_BODY_BYTES = 1 << 20     # a larger body is refused (413)
BODY_TIMEOUT_S = 5.0         # a body not all there by then (shorter than its Content-Length) is refused (408)
POLL_S = 0.25                # how often a request waiting for tokens checks that its client is still there
SHUTDOWN_S = 2               # after SIGTERM, connections still open this long are cancelled (uvicorn)


@dataclass(eq=False)
class Handle:       # one HTTP request in the engine thread: on_token(req) after each token, None if it stopped
    prompt: list[int]
    params: SamplingParams
    on_token: Callable
    req: Request | None = None
    aborted: bool = False


class EngineLoop:
    """Runs engine.step() in a thread of its own while there is work; the only thread touching the engine."""

    def __init__(self, engine: Engine):
        self.engine, self.inbox, self.wake = engine, queue.Queue(), threading.Event()
        self.error: str | None = None      # why it stopped (a step raised, or shutdown): /health answers 500
        self.held = {"requests": 0, "blocks_in_use": 0}   # after the last step; idle prefix-cache blocks not counted
        self.thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)   # daemon: a last resort
        self.thread.start()

    def submit(self, h: Handle) -> None:
        self.inbox.put(h)
        self.wake.set()

    def abort(self, h: Handle) -> None:
        h.aborted = True
        self.submit(h)

    def stop(self) -> None:
        """Finish the current step, end every request (their clients are told), and leave the thread."""
        self.error = self.error or "the server is shutting down"
        self.wake.set()

    def _run(self) -> None:
        handles: dict[int, Handle] = {}
        try:
            self._loop(handles)
        except Exception as exc:  # noqa: BLE001 - said on /health and to every waiting request, not lost
            traceback.print_exc()
            self.error = f"{type(exc).__name__}: {exc}"
        for h in handles.values():
            h.on_token(None)

    def _loop(self, handles: dict) -> None:
        while self.error is None:
            self.wake.clear()
            while not self.inbox.empty():
                h = self.inbox.get()
                if h.aborted:
                    if h.req is not None and handles.pop(h.req.rid, None):
                        self.engine.abort(h.req)
                elif h.req is None:
                    h.req = self.engine.add(h.prompt, h.params)
                    handles[h.req.rid] = h
            if self.engine.has_work():
                for req in self.engine.step():
                    (handles[req.rid] if req.finish_reason is None else handles.pop(req.rid)).on_token(req)
            else:
                self.wake.wait(0.5)
            tables = self.engine.kv.tables.values()
            self.held = {"requests": len(handles), "blocks_in_use": len({b for t in tables for b in t})}


class Refused(Exception):
    """(HTTP status, message, code), answered as OpenAI's error object."""


def _error(status: int, message: str, code: str | None = None):
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "code": code}},
                        status_code=status, headers={"Connection": "close"} if status in (408, 413) else None)


async def read_body(http) -> bytes:
    """The body, at most MAX_BODY_BYTES, all of it within BODY_TIMEOUT_S."""
    async def read(body=b""):
        async for part in http.stream():
            body += part
            if len(body) > MAX_BODY_BYTES:
                raise Refused(413, f"the body is larger than {MAX_BODY_BYTES:,} bytes", "body_too_large")
        return body
    try:
        return await asyncio.wait_for(read(), BODY_TIMEOUT_S)
    except TimeoutError:
        raise Refused(408, f"the body did not arrive whole within {BODY_TIMEOUT_S:g} s", "body_timeout") from None


def create_app(engine: Engine, tokenizer, model_name: str):
    from fastapi import FastAPI, Request as HTTPRequest
    from fastapi.responses import StreamingResponse
    from pydantic import ValidationError

    loop = EngineLoop(engine)

    @asynccontextmanager
    async def lifespan(app):
        yield
        loop.stop()
        await asyncio.to_thread(loop.thread.join, 5)

    app, created = FastAPI(title="readable engine", lifespan=lifespan), int(time.time())
    app.state.engine_loop = loop

    @app.get("/health")
    async def health():
        return _error(500, loop.error, "engine_failed") if loop.error else {"status": "ok", **loop.held}

    @app.get("/v1/models")
    async def list_models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": created,
                                             "owned_by": "helpers.engine"}]}

    def prepare(body):
        """Token ids and sampling parameters, in a worker thread: a long prompt takes a while to tokenize."""
        ids, params = body.prompt_ids(tokenizer), body.params()
        engine.validate(ids, params)
        return ids, params

    async def serve(http: HTTPRequest, kind: type[CompletionRequest | ChatCompletionRequest]):
        try:
            body = kind.model_validate_json(await read_body(http))
            if body.model != model_name:
                raise Refused(404, f"model {body.model!r} is not served here; the model is {model_name!r}",
                              "model_not_found")
            ids, params = await asyncio.to_thread(prepare, body)
        except Refused as exc:
            return _error(*exc.args)
        except ValueError as exc:       # pydantic's ValidationError is one; so are engine.validate's, the template's
            return _error(400, explain(exc, kind) if isinstance(exc, ValidationError) else str(exc))
        aio, tokens = asyncio.get_running_loop(), asyncio.Queue()
        handle = Handle(ids, params, lambda r: aio.call_soon_threadsafe(
            tokens.put_nowait, (list(r.output), r.finish_reason) if r is not None else (None, "error")))
        loop.submit(handle)
        chat = kind is ChatCompletionRequest
        reply, text, made = Reply(chat, model_name, len(ids)), TextStream(tokenizer, body.stops), [0]

        async def pieces():
            """(new text, finish reason or None) as tokens arrive; a stop string ends the request, and
            so does a client that went away."""
            reason = None
            try:
                while reason is None:
                    if await http.is_disconnected():     # (does not wait: a look at what uvicorn received)
                        return
                    try:
                        out, reason = await asyncio.wait_for(tokens.get(), POLL_S)
                    except TimeoutError:
                        if not loop.error:
                            continue
                        out = None                        # it came after the engine thread had stopped
                    if out is None:
                        raise RuntimeError(f"the engine stopped: {loop.error}")
                    made[0] = len(out)
                    piece, stopped = text.delta(out, reason is not None)
                    if stopped and reason is None:
                        loop.abort(handle)
                        reason = "stop"
                    if piece or reason:
                        yield piece, reason
            finally:
                if reason is None:
                    loop.abort(handle)                    # the client went away: free its blocks

        if body.stream:
            opts = body.stream_options or StreamOptions()

            async def sse():
                try:
                    async for piece, reason in pieces():
                        n = made[0] if opts.continuous_usage_stats else None
                        yield f"data: {json.dumps(reply.chunk(piece, reason, n))}\n\n"
                    if opts.include_usage:
                        yield f"data: {json.dumps(reply.last(made[0]))}\n\n"
                except RuntimeError as exc:
                    yield f"data: {json.dumps({'error': {'message': str(exc)}})}\n\n"
                yield "data: [DONE]\n\n"
            return StreamingResponse(sse(), media_type="text/event-stream")
        parts, last = [], None
        try:
            async for piece, last in pieces():
                parts.append(piece)
        except RuntimeError as exc:
            return _error(500, str(exc), "engine_failed")
        return reply.whole("".join(parts), last, made[0])

    @app.post("/v1/completions")
    async def completions(http: HTTPRequest):
        return await serve(http, CompletionRequest)

    @app.post("/v1/chat/completions")
    async def chat_completions(http: HTTPRequest):
        return await serve(http, ChatCompletionRequest)

    return app


def main(argv=None) -> int:
    ap = command.Parser(prog="servebench.server", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a model folder: weights, config and tokenizer files "
                                  "(servebench.servers.serve_folder makes one), or a Hub repository id")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=command.bounded_int(0, 65535), default=8000)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--dtype", type=command.dtype_type(("fp32", "bf16", "fp16")), default=None,
                    help="fp32, bf16 or fp16 (default: fp32 on a CPU, bf16 on a GPU)")
    ap.add_argument("--prefix-cache", default="radix", choices=("radix", "hash", "off"))
    ap.add_argument("--block-size", type=command.positive_int, default=16)
    ap.add_argument("--num-blocks", type=command.positive_int, default=None)
    ap.add_argument("--max-num-seqs", type=command.positive_int, default=8)
    ap.add_argument("--max-batch-tokens", type=command.positive_int, default=256)
    ap.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    try:
        a = ap.parse_args(argv)
        args = EngineArgs(a.block_size, a.num_blocks, a.max_num_seqs, a.max_batch_tokens,
                          prefix_cache=None if a.prefix_cache == "off" else a.prefix_cache)
        if not Path(a.model).is_dir() and (a.model.startswith((".", "/", "~")) or a.model.count("/") != 1):
            raise ValueError(f"no model folder at {a.model} (nor is it a Hub repository id, owner/name)")
    except (command.CliError, ValueError) as exc:
        return command.fail(exc)
    try:
        import torch
        import uvicorn
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from helpers.measure.dtypes import torch_dtype

        if a.device == "cuda" and not torch.cuda.is_available():
            return command.fail("--device cuda: no CUDA device here", command.ENVIRONMENT)
        dtype = torch_dtype(a.dtype or ("fp32" if a.device == "cpu" else "bf16"))
        model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype).to(a.device).eval()
        tokenizer = AutoTokenizer.from_pretrained(a.model)
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback
        line, status = command.classify(exc)
        return command.fail(f"cannot load {a.model}: {exc if isinstance(exc, OSError) else line}", status)
    torch.set_grad_enabled(False)
    app = create_app(Engine(model, args, tokenizer.eos_token_id), tokenizer, a.model)
    server = uvicorn.Server(uvicorn.Config(app, host=a.host, port=a.port, log_level=a.log_level,
                                           timeout_graceful_shutdown=SHUTDOWN_S))
    uvicorn_exit = server.handle_exit

    def handle_exit(sig, frame):        # SIGTERM, Ctrl-C: end the requests in flight, then uvicorn stops
        app.state.engine_loop.stop()
        uvicorn_exit(sig, frame)
    server.handle_exit = handle_exit
    server.run()
    return 0 if server.started else command.ENVIRONMENT


if __name__ == "__main__":
    sys.exit(main())
