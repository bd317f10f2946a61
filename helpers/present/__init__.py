"""Presentation: figures, tables and notebook text, the key figures the slides and guide quote, the
room's agenda and replay mode. The top layer: it may import formulas and measurements, never the reverse.
"""
