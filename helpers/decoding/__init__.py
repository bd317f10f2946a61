"""Decoding at the roof: implementations side by side, where a step's time goes, the planner's check.

- `impls`     — greedy decode five ways (eager loop over a DynamicCache, Hugging Face generate, the eager
                loop on oneDNN-prepacked weights (CPU), a static cache, a static cache compiled with
                torch.compile), each step timed, same tokens;
- `packed`    — every nn.Linear swapped, for a `with` block, for oneDNN on a prepacked weight;
- `breakdown` — one decode step profiled (torch.profiler) and split into matmuls, attention, other
                operators and the time outside operators (Python, dispatch, launches); the tiny and small
                models measured side by side (measure_regimes);
- `regimes`   — one model's implementations against its memory floor, the planner's predicted step
                against the measured one;
- `views`     — the tables and figures of notebook 03's last section.
"""
