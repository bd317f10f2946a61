"""A serving engine you can read: continuous batching, paged KV cache, prefix cache and speculative
decoding as short files, on the workshop's Mistral-architecture models (after nano-vllm and gpt-fast).

One request, from arrival to its last token:

1. `Engine.add` (llm.py) makes a `Request` (request.py): its prompt's token ids and how it samples.
   It waits in the scheduler's queue.
2. `Scheduler.schedule` (scheduler.py) admits it when a slot, the step's token budget and free KV
   blocks allow. It first asks the prefix cache (prefix_cache.py, over the radix tree of radix.py) for
   blocks earlier requests left with the same leading tokens; its block table starts with those (kv.py,
   over the block allocator of blocks.py). Its prompt is computed in chunks of at most the budget, in
   steps shared with other requests' decode rows.
3. `Runner.forward` (runner.py) runs one step: every scheduled request's tokens in one flat batch
   through the transformers model's own weights; attention reads each request's K/V through its block
   table. The chunk that reaches the prompt's end gives the first token (`sample`, request.py).
4. From then on it decodes one token per step. When blocks run out the newest request is preempted:
   its blocks freed, its tokens recomputed later. It finishes at max_tokens or end-of-sequence; its
   blocks stay in the prefix cache until evicted, and its slot goes to the next request in line.

Speculative decoding (speculative.py) is its own loop over the same runner and cache; servebench.server
puts an OpenAI-compatible HTTP API in front of the engine (servebench.protocol: its requests and answers).
The engine's measurements (make bench, notebook 07) live outside it, in helpers.serving: engine_runs,
engine_caches and speculative.
"""
from __future__ import annotations

# the mechanism files, in the order a request meets them
CORE = (("request", "a request and how its next token is sampled"),
        ("scheduler", "waiting/running queues, token budget, chunked prefill, preemption, admission"),
        ("blocks", "the block allocator: free list, block tables, reference counts, copy-on-write"),
        ("kv", "the paged KV cache: a tensor of blocks and the allocator's block tables"),
        ("radix", "the radix tree over token ids: longest cached prefix, LRU eviction"),
        ("prefix_cache", "reuse of earlier requests' blocks: radix tree or chained block hashes"),
        ("runner", "one forward pass over the mixed batch, K/V read through block tables"),
        ("llm", "the engine: schedule → forward → sample → book, and the step log"),
        ("speculative", "draft → verify → accept, greedy and rejection sampling"))


def code_lines(obj) -> int:
    """Lines of code in a module, class or function: not blank, not a comment, not a docstring."""
    import ast
    import inspect
    import io
    import tokenize

    src = inspect.getsource(obj)
    docs: set[int] = set()
    for node in ast.walk(ast.parse(src)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            docs.update(range(body[0].lineno, body[0].end_lineno + 1))
    code: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type not in skip:
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - docs)


def core_files() -> list[dict]:
    """Each mechanism file of the engine with what it holds and its lines of code."""
    import importlib

    return [{"file": f"helpers/engine/{name}.py", "what": what,
             "code lines": code_lines(importlib.import_module(f"{__name__}.{name}"))} for name, what in CORE]
