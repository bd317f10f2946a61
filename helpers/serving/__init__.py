"""How a server makes one device serve many users — one module per mechanism.

- `naive`  — N requests one after another, then together in one static batch (notebook 01's third
  pain point): the baseline every optimization is measured against.
- `traces` — request workloads reproducible from a seed (independent chat, agentic branching), shared
  by the serving notebook (07) and the engine benchmark (08).
- `kv_cache` — greedy decoding with the KV cache on and off: time per token and the quadratic work.
- `paging` — contiguous reservation against the engine's block allocator, step by step on a trace.
- `batching` — one after another, static batches and transformers' continuous-batching manager (its
  paged cache bounded from the model), slot timelines, padding.
- `kv_quant` — KV-cache quantization (fp8, 4, 2 bits): bytes against the formula, speed, KL and top-1.
- `speculative`, `engine_runs`, `engine_caches` — the readable engine measured (speculative decoding, also
  against transformers' prompt lookup; serving, chunked prefill; its prefix caches).
- `engine` — a serving engine you can read (sub-package): scheduler with a token budget, chunked prefill
  and preemption, a block allocator and the paged KV cache tensor over it, a radix or block-hash prefix cache, one
  forward over the mixed batch, speculative decoding (its OpenAI-compatible server: servebench.server).
- `figures` — notebook 07's figures; `tables` — the labelled tables of notebooks 01 and 07, built from
  the results (frozen dataclasses) the modules above return; `measured` — `make bench`'s serving section.
"""
