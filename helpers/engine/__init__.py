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

CORE = ("request", "scheduler", "kv", "radix", "prefix_cache", "runner", "llm", "speculative")   # as a request meets them


def core_files() -> list[dict]:
    """Each mechanism file of the engine: the first paragraph of its docstring and its lines of code (not blank,
    not a comment, not a docstring)."""
    import ast
    import importlib
    import inspect

    rows = []
    for name in CORE:
        module = importlib.import_module(f"{__name__}.{name}")
        src = inspect.getsource(module)
        docs = {i for node in ast.walk(ast.parse(src)) if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                and ast.get_docstring(node) is not None for i in range(node.body[0].lineno, node.body[0].end_lineno + 1)}
        code = sum(1 for i, line in enumerate(src.splitlines(), 1) if line.strip() and not line.strip().startswith("#")
                   and i not in docs)
        rows.append({"file": f"helpers/engine/{name}.py", "what": " ".join(module.__doc__.split("\n\n")[0].split()),
                     "code lines": code})
    return rows
