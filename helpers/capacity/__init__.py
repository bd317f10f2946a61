"""The capacity planner: will a model fit a GPU, how fast is a decode step, what does a million tokens cost.
`planner` plans one GPU; `slo` the largest batch a latency SLO allows; `ranking` every catalogued GPU ranked;
`triangle` quality, latency and throughput on one GPU; `views` their tables and figures; `measured` the
planner's step against one measured here; `inputs` the planner web app's controls.
"""
from .planner import *  # noqa: F401,F403  (the planner's public names: plan, max_batch, …)
from .planner import GPU_COUNTS, GPU_MEMORY_UTILIZATION, RUNTIME_OVERHEAD_BYTES  # noqa: F401
