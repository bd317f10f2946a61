"""An OpenAI-compatible HTTP server over the engine, so the same client and benchmark that measure
`transformers serve` and vLLM (helpers.benchmark) measure it too.

    python -m helpers.engine.server MODEL_FOLDER --port 8000 [--prefix-cache radix|hash|off]

Endpoints: GET /health, GET /v1/models, POST /v1/completions and /v1/chat/completions, answered whole
or streamed as Server-Sent Events (`data: {json}` per chunk, `data: [DONE]` last; with
`stream_options.include_usage`, a final chunk carrying `usage`), as OpenAI's API does. The engine runs in
one background thread (`EngineLoop`): requests reach it through a queue, each new token goes back to
its request's asyncio queue. Fields this engine does not implement are refused with 400, never ignored.
"""

import argparse
import asyncio
import json
import queue
import sys
import threading
import time

from .llm import Engine, EngineArgs
from .openai_api import BadRequest, Reply, TextStream, parse
from .request import SamplingParams


class EngineLoop:
    """Runs engine.step() in a thread of its own while there is work; the only thread touching the engine."""

    def __init__(self, engine: Engine):
        self.engine, self.inbox, self.wake = engine, queue.Queue(), threading.Event()
        self.error: str | None = None          # set if a step raised: /health answers 500 from then on
        self.thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)
        self.thread.start()

    def submit(self, prompt: list[int], params: SamplingParams, on_token) -> dict:
        """Queue a request; on_token(req) is called from the engine thread after each of its tokens."""
        handle = {"prompt": prompt, "params": params, "on_token": on_token, "req": None, "abort": False}
        self.inbox.put(handle)
        self.wake.set()
        return handle

    def abort(self, handle: dict) -> None:
        handle["abort"] = True
        self.inbox.put(handle)
        self.wake.set()

    def _run(self) -> None:
        handles: dict[int, dict] = {}
        try:
            self._loop(handles)
        except Exception as exc:  # noqa: BLE001 - said on /health and to every waiting request, not lost
            import traceback

            traceback.print_exc()
            self.error = f"{type(exc).__name__}: {exc}"
            for h in handles.values():
                h["on_token"](None)

    def _loop(self, handles: dict) -> None:
        while True:
            while not self.inbox.empty():
                h = self.inbox.get()
                if h["abort"] and h["req"] is not None:
                    self.engine.abort(h["req"])
                elif not h["abort"]:
                    h["req"] = self.engine.add(h["prompt"], h["params"])
                    handles[h["req"].rid] = h
            if not self.engine.has_work():
                self.wake.wait(0.5)
                self.wake.clear()
                continue
            for req in self.engine.step():
                h = handles[req.rid] if req.finish_reason is None else handles.pop(req.rid)
                h["on_token"](req)


def _error(status: int, message: str, code: str | None = None):
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "code": code}},
                        status_code=status)


def create_app(engine: Engine, tokenizer, model_name: str):
    from fastapi import FastAPI, Request as HTTPRequest
    from fastapi.responses import StreamingResponse

    app, loop = FastAPI(title="readable engine"), EngineLoop(engine)
    created = int(time.time())

    @app.get("/health")
    def health():
        return _error(500, loop.error, "engine_failed") if loop.error else {"status": "ok"}

    @app.get("/v1/models")
    def list_models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": created,
                                             "owned_by": "helpers.engine"}]}

    async def serve(http: HTTPRequest, chat: bool):
        try:
            body = await http.json()
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object")
            ids, params, opts = parse(body, tokenizer, model_name, chat)
            engine.validate(ids, params)
        except LookupError as exc:
            return _error(404, str(exc), "model_not_found")
        except (BadRequest, ValueError) as exc:          # json.JSONDecodeError is a ValueError
            return _error(400, str(exc))
        aio, tokens = asyncio.get_running_loop(), asyncio.Queue()
        handle = loop.submit(ids, params, lambda r: aio.call_soon_threadsafe(
            tokens.put_nowait, (list(r.output), r.finish_reason) if r is not None else (None, "error")))
        reply, text, made = Reply(chat, model_name, len(ids)), TextStream(tokenizer, opts["stop"]), [0]

        async def pieces():
            """(new text, finish reason or None) as tokens arrive; a stop string ends the request."""
            reason = None
            try:
                while reason is None:
                    out, reason = await tokens.get()
                    if out is None:
                        raise RuntimeError(f"the engine failed: {loop.error}")
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

        if opts["stream"]:
            async def sse():
                try:
                    async for piece, reason in pieces():
                        yield f"data: {json.dumps(reply.chunk(piece, reason))}\n\n"
                    if opts["usage"]:
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
        return await serve(http, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(http: HTTPRequest):
        return await serve(http, chat=True)

    return app


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a model folder: weights, config and tokenizer files "
                                  "(helpers.benchmark.servers.serve_folder makes one)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--dtype", default=None, help="fp32, bf16 or fp16 (default: fp32 on a CPU, bf16 on a GPU)")
    ap.add_argument("--prefix-cache", default="radix", choices=("radix", "hash", "off"))
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--num-blocks", type=int, default=None)
    ap.add_argument("--max-num-seqs", type=int, default=8)
    ap.add_argument("--max-batch-tokens", type=int, default=256)
    ap.add_argument("--log-level", default="info")
    a = ap.parse_args(argv)
    try:
        args = EngineArgs(a.block_size, a.num_blocks, a.max_num_seqs, a.max_batch_tokens,
                          prefix_cache=None if a.prefix_cache == "off" else a.prefix_cache)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import torch
    import uvicorn
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..formulas.units import normalize_dtype
    from ..measure.dtypes import torch_dtype

    dtype = torch_dtype(normalize_dtype(a.dtype or ("fp32" if a.device == "cpu" else "bf16"),
                                        ("fp32", "bf16", "fp16")))
    try:
        model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype).to(a.device).eval()
        tokenizer = AutoTokenizer.from_pretrained(a.model)
    except (OSError, ValueError) as exc:
        print(f"error: cannot load {a.model}: {exc}", file=sys.stderr)
        return 1
    torch.set_grad_enabled(False)
    app = create_app(Engine(model, args, tokenizer.eos_token_id), tokenizer, a.model)
    uvicorn.run(app, host=a.host, port=a.port, log_level=a.log_level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
