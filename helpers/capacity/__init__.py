"""The capacity planner: will a model fit a GPU, how fast is a decode step, what does a million tokens cost.
`planner` plans one GPU; `slo` the largest batch a latency SLO allows, and the quality–latency–throughput triangle;
`ranking` every catalogued GPU ranked; `views` their tables and figures; `measured` the
planner's step against one measured here; `inputs` the planner web app's controls.
"""
from .planner import *  # noqa: F401,F403  (the planner's public names: plan, max_batch, …)
