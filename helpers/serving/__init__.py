"""How a server makes one device serve many users, one module per mechanism: `naive` (one after another,
then one static batch: notebook 01), `traces` (seeded workloads, shared with the benchmark), `kv_cache`,
`paging`, `batching`, the readable engine measured (`engine_runs`, `engine_caches`, `speculative`; the
engine is helpers.engine), `kv_quant` (notebook 05); `figures` and `tables` show their results, `measured`
holds the workloads notebook 07 and `make bench` share."""


def trained_profile(current: str | None = None) -> str:
    """The current profile when its weights are trained, else tiny-trained: KV-cache quantization's quality and
    speculative decoding's kept drafts mean something on trained weights only (random ones keep a draft by chance)."""
    return current if current in ("mistral-7b", "tiny-trained") else "tiny-trained"
