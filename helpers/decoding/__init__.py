"""Decoding at the roof: greedy decode four ways (`impls`), against the memory floor (`regimes`), 03's `views`."""
