"""Measurement: what runs on this machine — models loaded, timed, swept, quantized, trained.

A module of this layer may import the formulas (helpers.formulas) to compare what it measures with what
they predict; it never draws (figures are helpers.present's).
"""
