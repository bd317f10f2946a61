"""The time of each part of a real forward pass, measured on the loaded model: forward hooks around the
embedding, every layer's attention and MLP, the final norm and the head (synchronising the device at each
boundary), plus the tokenizer (text → tokens) and the greedy pick of the next token (notebook 10).

Beside the FLOPs of the same parts (helpers.formulas.compute_share), on the parts both have: compare_parts;
worded by parts_verdicts (which part is largest, by the change margin; each share's band).
"""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

from ..formulas import verdicts
from ..formulas.compute_share import GroupShares, flop_terms, phase_args

# GroupShares's fields as sentences name them
PART_NAMES = {"embedding": "the embedding", "attention": "attention", "mlp": "the MLP", "head": "the head",
              "everything_else": "everything that is not a matmul"}


@dataclass(frozen=True)
class PartTimes:
    """Median seconds of each part of the pipeline: text → tokens → one forward pass → next token."""

    tokenize: float             # text → tokens
    embedding: float
    attention: float            # every layer's attention block
    mlp: float                  # every layer's MLP
    norms_and_residuals: float  # the rest of the layers
    final_norm: float
    head: float                 # the logits
    other: float                # inside the forward but outside the hooks: rotary, masks, Python
    next_token: float           # the argmax

    @property
    def total(self) -> float:
        return (self.tokenize + self.embedding + self.attention + self.mlp + self.norms_and_residuals
                + self.final_norm + self.head + self.other + self.next_token)

    def groups(self) -> GroupShares:
        """The shares of the time on the parts the FLOPs are counted by (helpers.formulas.compute_share)."""
        t = self.total
        rest = self.tokenize + self.norms_and_residuals + self.final_norm + self.other + self.next_token
        return GroupShares(self.embedding / t, self.attention / t, self.mlp / t, self.head / t, rest / t)


@dataclass(frozen=True)
class PartsCompared:
    """One phase's FLOP shares (computed) beside its time shares (measured), on common parts."""

    phase: str
    tokens: int
    flops: GroupShares
    time: GroupShares


def compare_parts(model, times: PartTimes, phase: str, tokens: int) -> PartsCompared:
    """The FLOP shares of `model` for `phase` at `tokens` beside the measured `times` of the same pass."""
    return PartsCompared(phase, tokens, flop_terms(model, *phase_args(phase, tokens)).groups(), times.groups())


def _blocks(model):
    """(embedding, decoder layers, final norm, head) of a transformers causal LM (Mistral/Llama layout)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or not hasattr(layers[0], "self_attn") or not hasattr(layers[0], "mlp"):
        raise ValueError(f"{type(model).__name__} has no model.layers[i].self_attn / .mlp; "
                         "per-part timing supports Mistral/Llama-style decoders")
    return model.get_input_embeddings(), layers, getattr(inner, "norm", None), model.get_output_embeddings()


def prompt_from_text(tokenizer, text: str, tokens: int) -> list[int]:
    """The text's token ids, repeated until there are `tokens` of them."""
    ids = list(tokenizer(text)["input_ids"])
    return (ids * (tokens // len(ids) + 1))[:tokens]


def _timed_forward(model, ids, device: str, cache=None):
    """One forward pass with hooks: seconds per part and the whole, and the logits of the last position."""
    import torch

    from .hardware import synchronize

    embed, layers, norm, head = _blocks(model)
    spent: dict[str, float] = defaultdict(float)   # PartTimes's fields
    started: dict[str, float] = {}
    handles = []

    def watch(module, part: str) -> None:
        key = f"{part}#{id(module)}"

        def pre(*_):
            synchronize(device)
            started[key] = time.perf_counter()

        def post(*_):
            synchronize(device)
            spent[part] += time.perf_counter() - started.pop(key)

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))

    watch(embed, "embedding")
    for layer in layers:
        watch(layer, "layer")
        watch(layer.self_attn, "attention")
        watch(layer.mlp, "mlp")
    if norm is not None:
        watch(norm, "final_norm")
    watch(head, "head")
    try:
        synchronize(device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model(input_ids=ids, cache=cache, use_cache=cache is not None, logits_to_keep=1)
        synchronize(device)
        spent["forward"] = time.perf_counter() - t0
    finally:
        for h in handles:
            h.remove()
    spent["norms_and_residuals"] = spent.pop("layer") - spent["attention"] - spent["mlp"]
    inside = sum(spent[p] for p in ("embedding", "attention", "mlp", "norms_and_residuals",
                                    "final_norm", "head"))
    spent["other"] = max(0.0, spent["forward"] - inside)
    return dict(spent), out.logits


def measure_parts(loaded, text: str, tokens: int, phase: str = "prefill", repeats: int = 5,
                  cpu_threads: int | None = 1) -> PartTimes:
    """Median seconds per part of the pipeline on the loaded model, over `repeats` runs after a warm-up.

    prefill: tokenize the text, one forward pass over `tokens` tokens, pick the next token.
    decode: the same text prefilled into a cache (untimed), then one step of one token at that context.
    On a CPU it runs on `cpu_threads` threads (helpers.measure.hierarchy.cpu_threads).
    """
    from .hierarchy import cpu_threads as _threads

    with _threads(cpu_threads, loaded.device):
        return _measure_parts(loaded, text, tokens, phase, repeats)


def _measure_parts(loaded, text: str, tokens: int, phase: str, repeats: int) -> PartTimes:
    import statistics

    import torch

    from .hardware import synchronize
    from .timing import new_cache

    _, past = phase_args(phase, tokens)
    model, device = loaded.model, loaded.device
    ids = torch.tensor([prompt_from_text(loaded.tokenizer, text, tokens + (1 if phase == "decode" else 0))],
                       device=device)
    samples: dict[str, list[float]] = defaultdict(list)
    for rep in range(repeats + 1):  # the first run warms up and is dropped
        t0 = time.perf_counter()
        loaded.tokenizer(text)
        tokenize_s = time.perf_counter() - t0
        cache = None
        if phase == "decode":
            cache = new_cache(model)
            with torch.inference_mode():
                model(input_ids=ids[:, :past], cache=cache, use_cache=True, logits_to_keep=1)
            step_ids = ids[:, past:past + 1]
        else:
            step_ids = ids
        spent, logits = _timed_forward(model, step_ids, device, cache)
        t0 = time.perf_counter()
        logits[:, -1].argmax(dim=-1).tolist()
        synchronize(device)
        spent["next_token"] = time.perf_counter() - t0
        spent["tokenize"] = tokenize_s
        if rep:
            for k, v in spent.items():
                samples[k].append(v)
    med = {k: statistics.median(v) for k, v in samples.items()}
    return PartTimes(**{f: med.get(f, 0.0) for f in PartTimes.__dataclass_fields__})


# ----------------------------------------------------------------------------- the rules that word them

def largest_part(shares: GroupShares, of: str) -> verdicts.Verdict:
    """The largest part of `shares` and its band; when the runner-up is within the change margin of it, both,
    as about equal."""
    ranked = sorted(((getattr(shares, f), f) for f in PART_NAMES), reverse=True)
    (a, fa), (b, fb) = ranked[0], ranked[1]
    if b > 0 and verdicts.change_verdict(a / b) == "about equal":
        words = (f"{PART_NAMES[fa]} and {PART_NAMES[fb]} take the largest shares of {of}, about equal "
                 f"({100 * a:.0f} % and {100 * b:.0f} %)")
    else:
        words = f"{PART_NAMES[fa]} takes the largest share of {of}: {verdicts.share(a, 1)}"
    return verdicts.Verdict(words, "largest_part", {fa: a, fb: b})


def parts_verdicts(c: PartsCompared) -> list[verdicts.Verdict]:
    """One phase's measured time shares against its computed FLOP shares, in words from their numbers: the
    largest part of each, the head's time share as a factor of its FLOP share, and the share of the time
    spent outside the matmuls."""
    what = "a prefill" if c.phase == "prefill" else "a decode step"
    head = verdicts.times_as(c.time.head, c.flops.head, "its share of the FLOPs") if c.flops.head else None
    rest = verdicts.share(c.time.everything_else, 1, "the time")
    return [largest_part(c.flops, f"{what}'s FLOPs (computed)"), largest_part(c.time, f"{what}'s time (measured)"),
            *([verdicts.Verdict(f"the head took {100 * c.time.head:.0f} % of {what}'s time, {head}", "times_as",
                                head.evidence)] if head else []),
            verdicts.Verdict(f"everything that is not a matmul — tokenizer, norms, rotary embeddings, masks, Python "
                             f"between kernels — took {rest}", "share", rest.evidence)]
