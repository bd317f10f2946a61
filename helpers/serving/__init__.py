"""How a server makes one device serve many users — one module per mechanism.

- `naive`  — N requests one after another, then together in one static batch (notebook 01's third
  pain point): the baseline every optimization is measured against.
- `traces` — request workloads reproducible from a seed (independent chat, agentic branching), shared
  by the serving notebook (07) and the engine benchmark (08).
- `kv_cache` — greedy decoding with the KV cache on and off: time per token and the quadratic work.
- `paging` — contiguous reservation against the engine's block allocator, step by step on a trace.
- `batching` — one after another, static batches and transformers' continuous-batching manager (its
  paged cache bounded from the model), slot timelines, padding.
- `kv_quant` — KV-cache quantization (fp8, 4, 2 bits): bytes against the formula, speed, KL and top-1
  (notebook 05).
- `speculative`, `engine_runs`, `engine_caches` — the readable engine (helpers.engine, a package of its own)
  measured: speculative decoding on prompts with and without something to copy, also against transformers'
  prompt lookup; serving, its step log, chunked prefill; its prefix caches (the engine's OpenAI-compatible
  server: servebench.server).
- `figures` — notebook 07's figures; `tables` — the labelled tables of notebooks 01 and 07, built from
  the results (frozen dataclasses) the modules above return; `measured` — `make bench`'s serving section.
"""
