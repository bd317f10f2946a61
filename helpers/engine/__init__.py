"""A serving engine you can read: continuous batching, paged KV cache, prefix cache and speculative
decoding as short files, on the workshop's Mistral-architecture models (after nano-vllm and gpt-fast).

One request, from arrival to its last token: `Engine.add` (llm.py) queues a `Request` (request.py).
`Scheduler.schedule` (scheduler.py) admits it when a slot, the step's token budget and free KV blocks
allow, its block table (kv.py) starting with the blocks the prefix cache (prefix_cache.py, radix.py)
holds for its first tokens; its prompt is computed in chunks beside other requests' decode rows.
`Runner.forward` (runner.py) runs each step as one flat batch, attention reading each request's K/V
through its block table; the chunk that reaches the prompt's end gives the first token. When blocks
run out the newest request is preempted and recomputed later. Speculative decoding (speculative.py) is
its own loop over the same runner and cache; servebench.server puts an OpenAI-compatible API in front.
"""
from __future__ import annotations

# the mechanism files, in the order a request meets them
CORE = (("request", "a request and how its next token is sampled"),
        ("scheduler", "waiting/running queues, token budget, chunked prefill, preemption, admission"),
        ("kv", "the paged KV cache: block allocator (free list, block tables, reference counts, copy-on-write) and its tensor"),
        ("radix", "the radix tree over token ids: longest cached prefix, LRU eviction"),
        ("prefix_cache", "reuse of earlier requests' blocks: radix tree or chained block hashes"),
        ("runner", "one forward pass over the mixed batch, K/V read through block tables"),
        ("llm", "the engine: schedule → forward → sample → book, and the step log"),
        ("speculative", "draft → verify → accept, greedy and rejection sampling"))


def code_lines(obj) -> int:
    """Lines of code in a module, class or function: not blank, not a comment, not a docstring."""
    import ast
    import inspect

    src = inspect.getsource(obj)
    docs = {i for node in ast.walk(ast.parse(src)) if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
            and node.body and isinstance(d := node.body[0], ast.Expr) and isinstance(d.value, ast.Constant)
            and isinstance(d.value.value, str) for i in range(d.lineno, d.end_lineno + 1)}
    return sum(1 for i, line in enumerate(src.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in docs)


def core_files() -> list[dict]:
    """Each mechanism file of the engine with what it holds and its lines of code."""
    import importlib

    return [{"file": f"helpers/engine/{name}.py", "what": what,
             "code lines": code_lines(importlib.import_module(f"{__name__}.{name}"))} for name, what in CORE]
