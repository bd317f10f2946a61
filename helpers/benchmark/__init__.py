"""The engine benchmark's read side (notebook 08, `make engines`): servebench, the tool beside helpers that
nothing here imports, writes a JSON record (helpers.records, kind "engines"); `metrics` reads a run's figures,
`records` the live run and the record's tables, `figures` and `guide` the figures and the decision guide.
"""
