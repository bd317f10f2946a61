"""Beyond one GPU (notebook 09): links, collectives, tensor / pipeline / expert parallelism (plan),
disaggregation (disagg), KV offload (offload), a two-process tensor-parallel forward (tp_demo), tables (views)."""
