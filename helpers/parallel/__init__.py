"""Beyond one GPU (notebook 09): the links between GPUs and what collectives cost over them
(links, collectives), tensor / pipeline / expert parallelism on top of the capacity planner (plan),
a discrete-event simulation of disaggregated prefill and decode (sim), what offloading the KV cache
costs (offload) — and, measured, a tensor-parallel forward of the tiny model in two real processes
(tp_demo) and KV offload and eviction run for real (kv_offload); the notebook's tables (views)."""
