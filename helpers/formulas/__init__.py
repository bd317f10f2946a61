"""Formulas: what things cost — bytes, FLOPs, seconds on a roofline, GPUs from the catalog.

Nothing here runs a model or draws: a module of this layer imports only the standard library, pydantic
and other formula modules (the parameter count asks transformers to build the architecture on the meta
device, inside the one function that needs it). Read, test and import these without torch or matplotlib.
"""
