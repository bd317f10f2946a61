"""Serving engines as real server processes, and how to measure them (notebook 08, `make engines`).

- `process`  — a server as a child process: free port on 127.0.0.1, readiness, log, always stopped.
- `servers`  — the configurations: `transformers serve` (continuous batching off / on, bounded), the
  talk's vLLM steps and SGLang on a CUDA host; the model folder a server loads.
- `client`   — a small async streaming client: TTFT and ITL from the arrival times of streamed chunks.
- `metrics`  — TTFT, ITL, TPOT, end-to-end latency, throughput, goodput under an SLO; errors counted.
- `guidellm_runner` — guidellm, the established load generator, driven from Python; its figures.
- `tap`      — a relay that applies our definitions to guidellm's own requests (the same run).
- `bench`    — every configuration in turn, several concurrency levels, JSON written atomically.
- `guide`    — the decision guide: measured and published figures side by side, and the rule applied.
- `figures`  — throughput against latency as concurrency grows, one curve per configuration.
"""
from .metrics import SLO, RequestRecord, RunSummary, goodput, summarize  # noqa: F401
from .process import (PortInUse, ServerDied, ServerError, ServerNotReady, ServerProcess,  # noqa: F401
                      free_port, live_servers, stop_all)
