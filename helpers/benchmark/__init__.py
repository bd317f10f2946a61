"""Serving engines as real server processes, and how to measure them (notebook 08, `make engines`).

- `process`  — a server as a child process: free port on 127.0.0.1, readiness, log, always stopped.
- `supervise` — the process between us and a server: the subreaper that ends its whole tree.
- `servers`  — the configurations: `transformers serve` (continuous batching off / on, bounded), the
  talk's vLLM steps (its CPU build here, bf16 on a GPU) and SGLang on a CUDA host; the model folder.
- `vllm_env` — vLLM's CPU build in .venv-vllm: why it cannot run here, its metrics, `vllm bench serve`.
- `workloads` — ShareGPT-like chat from the published means, the agentic trace in tokens, Poisson arrivals.
- `client`   — a small async streaming client: TTFT and ITL from the arrival times of streamed chunks;
  every reply a server can send is a counted fault.
- `metrics`  — TTFT, ITL, TPOT, end-to-end latency, throughput, SLO attainment, normalized latency,
  DistServe's goodput and vLLM bench's, vLLM bench's definitions on our records; errors counted.
- `guidellm_runner` — guidellm, the established load generator, driven from Python; its figures.
- `tap`      — a relay that applies our definitions to guidellm's own requests (the same run).
- `bench`    — every configuration in turn, closed and open loop, JSON written atomically as each level ends.
- `guide`    — the headline figures and the decision guide rebuilt from a run, published figures cited,
  and the rule applied to each comparison.
- `figures`  — throughput against latency, open loop, prefix caching, one streamed request.
"""
from .metrics import SLO, RequestRecord, RunSummary, goodput, summarize  # noqa: F401
from .process import (PortInUse, ServerDied, ServerError, ServerNotReady, ServerProcess,  # noqa: F401
                      free_port, live_servers, stop_all)
