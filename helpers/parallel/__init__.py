"""Beyond one GPU (notebook 09): links, collectives, tensor / pipeline / expert parallelism (plan),
disaggregation and KV offload (disagg), a two-process tensor-parallel forward (tp_demo), tables (views)."""
