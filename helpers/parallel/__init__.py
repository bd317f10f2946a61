"""Beyond one GPU (notebook 09): the links between GPUs and what collectives cost over them
(links, collectives), tensor / pipeline / expert parallelism on top of the capacity planner (plan),
disaggregated prefill and decode from the planner's step times (disagg), what offloading the KV cache
costs (offload) — and, measured, a tensor-parallel forward of the tiny model in two real processes
(tp_demo); the notebook's tables (views)."""
