"""How a server makes one device serve many users, one module per mechanism (notebooks 01, 05 and 07; the engine
they measure is helpers.engine), with their tables, figures and workloads."""


def trained_profile(current: str | None = None) -> str:
    """The current profile when its weights are trained, else tiny-trained: KV-cache quantization's quality and
    speculative decoding's kept drafts mean something on trained weights only (random ones keep a draft by chance)."""
    return current if current in ("mistral-7b", "tiny-trained") else "tiny-trained"
