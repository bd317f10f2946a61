"""How a server makes one device serve many users — one module per mechanism.

- `naive`  — N requests one after another, then together in one static batch (notebook 01's third
  pain point): the baseline every optimization is measured against.
- `traces` — request workloads reproducible from a seed (independent chat, agentic branching), shared
  by the serving notebook (07) and the engine benchmark (08).

`from helpers import serving; serving.compare_serving(...)` reaches the naive baseline directly.
"""
from .naive import (Request, RequestTiming, ServeResult, ServingComparison, compare_serving, latency_cost,  # noqa: F401
                    make_requests, serve_batched, serve_sequential)
