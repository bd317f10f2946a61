"""Decoding at the roof: implementations side by side, where a step's time goes, the planner's check.

- `impls`     — greedy decode four ways (eager loop over a DynamicCache, Hugging Face generate, a static
                cache, a static cache compiled with torch.compile), each step timed, same tokens;
- `breakdown` — one decode step profiled (torch.profiler) and split into matmuls, attention, other
                operators and the time outside operators (Python, dispatch, launches);
- `regimes`   — the tiny and small models side by side: each implementation against its memory floor,
                the planner's predicted step against the measured one, and the bench's figures;
- `views`     — the tables and figures of notebook 03's last section.
"""
from .impls import IMPLEMENTATIONS, DecodeRun, decode  # noqa: F401
