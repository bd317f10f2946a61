"""Decoding at the roof: greedy decode five ways (`impls`, on oneDNN-prepacked weights: `packed`), one step's
time split by the profiler and the models measured side by side (`breakdown`), each implementation against its
memory floor (`regimes`), notebook 03's tables and figures (`views`).
"""
