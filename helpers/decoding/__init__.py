"""Decoding at the roof: greedy decode four ways (`impls`), each implementation against its memory floor,
the models measured side by side (`regimes`), notebook 03's tables and figures (`views`).
"""
