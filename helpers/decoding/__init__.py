"""Decoding at the roof: implementations side by side, where a step's time goes, the planner's check.

- `impls`     — greedy decode five ways (eager loop over a DynamicCache, Hugging Face generate, the eager
                loop on oneDNN-prepacked weights (CPU), a static cache, a static cache compiled with
                torch.compile), each step timed, same tokens;
- `packed`    — every nn.Linear swapped, for a `with` block, for oneDNN on a prepacked weight;
- `breakdown` — one decode step profiled (torch.profiler) and split into matmuls, attention, other
                operators and the time outside operators (Python, dispatch, launches);
- `regimes`   — the tiny and small models side by side: each implementation against its memory floor,
                the planner's predicted step against the measured one, and the bench's figures;
- `views`     — the tables and figures of notebook 03's last section.
"""
