"""servebench: the benchmark of real serving processes, a tool beside `helpers` that nothing in helpers imports
(notebook 08 starts it as a subprocess and reads its record through helpers.benchmark.records). Modules:
`process` (server process trees), `servers` (the configurations; `server`, `protocol`: the readable engine's
OpenAI-compatible server), `client` (the short client shown in 08), `tools` (guidellm), `harness` (plans, runs).
"""
