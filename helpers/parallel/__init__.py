"""Beyond one GPU (notebook 09): the links between GPUs and what collectives cost over them
(links, collectives), tensor / pipeline / expert parallelism on top of the capacity planner (plan),
their tables (views),
a tensor-parallel forward of the tiny model in two real processes (tp_demo), a discrete-event
simulation of disaggregated prefill and decode (sim) and KV offload and eviction (kv_offload)."""
