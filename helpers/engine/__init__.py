"""A serving engine you can read (after nano-vllm and gpt-fast): continuous batching, a paged KV cache, prefix caching
and speculative decoding, one short file each, on the workshop's Mistral-architecture models. A request's way: `Engine.add`
(llm.py) queues it, `Scheduler.schedule` (scheduler.py) admits it with a block table (kv.py) that starts with the prefix
cache's blocks (prefix_cache.py, radix.py), `Runner.forward` (runner.py) computes each step as one flat batch.
speculative.py is its own loop over the same runner and cache; servebench.server puts an OpenAI-compatible API in front."""
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
