"""The capacity planner: will a model fit a GPU, how fast is a decode step, what does a million tokens cost.

One package, one job per module:
- `planner`  — the plan for one GPU (memory, decode and prefill step, throughput, $ per million tokens);
- `slo`      — the largest batch a latency SLO allows (bisection, and the formula for a memory-bound step);
- `ranking`  — every catalogued GPU ranked under a latency SLO or a minimum batch;
- `triangle` — the quality–latency–throughput triangle on one GPU;
- `views`    — the planner's tables and figures for notebook 04 and the command line;
- `measured` — the planner's decode step against one measured on this machine;
- `cli`      — `python -m helpers capacity` and `python -m helpers gpus`.

`from helpers import capacity; capacity.plan(...)` reaches the planner's functions directly.
"""
from .planner import *  # noqa: F401,F403  (the planner's public names: plan, max_batch, usable_bytes, …)
from .planner import GPU_COUNTS, GPU_MEMORY_UTILIZATION, RUNTIME_OVERHEAD_BYTES  # noqa: F401
