"""Measurement: what runs on this machine — models loaded, timed, swept, quantized, trained. It may import
helpers.formulas to compare with what they predict; it never draws (figures are helpers.present's)."""
