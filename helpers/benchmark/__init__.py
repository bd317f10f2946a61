"""Serving engines as real server processes, and how to measure them (notebook 08; `make engines`:
scripts/engines.py, its command line and the `vllm bench serve` cross-check).

- `process`  — a server as a child process: free port on 127.0.0.1, readiness, log; its whole tree ended.
- `servers`  — the configurations: `transformers serve` (continuous batching off / on, bounded), the
  talk's vLLM steps (its CPU build here, bf16 on a GPU), the workshop's engine, SGLang on a CUDA host.
- `vllm_env` — vLLM's CPU build in .venv-vllm: why it cannot run here, its command line, its metrics.
- `workloads`, `plans` — ShareGPT-like chat, the agentic trace, Poisson arrivals; what a run measures.
- `client`   — a small streaming client on aiohttp: TTFT and ITL from the arrival times of streamed
  chunks; every reply a server can send is a counted fault.
- `metrics`  — TTFT, ITL, TPOT, end-to-end latency, throughput, SLO attainment, normalized latency,
  DistServe's goodput and vLLM bench's, vLLM bench's definitions on our records; errors counted.
- `guidellm_runner` — guidellm, the established load generator; its figures, and ours on its requests.
- `harness`  — every configuration in turn, closed and open loop, the record written as each level ends.
- `findings`, `guide` — the rules that read a run, the decision guide rebuilt from it, published figures.
- `agreement`, `prefix` — the rules that read the cross-checks and prefix caching (findings gathers them).
- `records`, `figures` — the record shown beside a live run (and a live run, in a process of its own); the figures.
"""
