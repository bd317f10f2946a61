"""The engine benchmark's read side (notebook 08, `make engines`' summary, workshop/engines.md): the
benchmark itself is servebench, a tool beside helpers that nothing here imports; it writes a JSON record
(helpers.records, kind "engines") and these modules read it.

- `metrics` — one run's figures from its requests (TTFT, ITL, E2E, throughput, SLO attainment), the spread
  of repeated runs, whether an open-loop rate was held, DistServe's goodput; the idle threshold.
- `records` — the live run (servebench in a process of its own) and the record; tables by run and by level;
  a record's provenance (machine, date, load).
- `figures`, `guide` — the figures; the decision guide's rows, the talk's table and published figures.
"""
