"""Quality of a model against a reference on a fixed text: perplexity, KL divergence of the
next-token distributions, top-1 agreement. Used for weight quantization (helpers.measure.quant) and for
anything else that approximates a model (KV-cache quantization, …).

- perplexity = exp(mean negative log-likelihood of each next token of the text);
- KL(p_ref ‖ p_q) = Σ_v p_ref(v) (log p_ref(v) − log p_q(v)), per position, averaged over positions;
- top-1 agreement = share of positions where both models put the same token first.
"""
from __future__ import annotations

import math
from typing import Any

from .texts import eval_text


# ----------------------------------------------------------------------------- the text

def eval_ids(tokenizer, max_tokens: int | None = None, profile: str | None = None) -> list[int]:
    """Token ids of a profile's evaluation text (helpers.measure.texts.eval_text; a beginning-of-sequence
    token first, as the tokenizer adds it)."""
    ids = encode(tokenizer, eval_text(profile))
    return ids[:max_tokens] if max_tokens else ids


def encode(tokenizer, text: str) -> list[int]:
    """A text's token ids as a list (BOS first, as the tokenizer adds it), whatever the tokenizer returns."""
    ids = tokenizer.encode(text)
    return list(ids["input_ids"] if isinstance(ids, dict) else ids)


# ----------------------------------------------------------------------------- quality

def next_token_logprobs(model, ids) -> Any:
    """Log-probabilities of the next token at every position of one sequence: (positions, vocab), fp32 on CPU."""
    import torch

    device = next(model.parameters()).device
    x = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1).to(device)
    with torch.inference_mode():
        logits = model(input_ids=x, use_cache=False).logits[0]
    return torch.log_softmax(logits.float(), dim=-1).cpu()


def perplexity(logprobs, ids) -> float:
    """exp(mean NLL): position t predicts token t+1. A uniform distribution over V tokens gives exactly V."""
    import torch

    target = torch.as_tensor(ids, dtype=torch.long)[1:]
    nll = -logprobs[:-1].double().gather(-1, target[:, None]).squeeze(-1)
    return math.exp(nll.mean().item())


def kl_per_position(ref_logprobs, logprobs):
    """KL(p_ref ‖ p) at each position, in nats (float64)."""
    ref = ref_logprobs.double()
    return (ref.exp() * (ref - logprobs.double())).sum(-1)


def top1_agreement(ref_logprobs, logprobs) -> float:
    """Share of positions where both distributions rank the same token first."""
    return (ref_logprobs.argmax(-1) == logprobs.argmax(-1)).double().mean().item()


def quality(ref_logprobs, logprobs, ids) -> dict[str, float]:
    """Perplexity of both, mean and max KL(p_ref ‖ p_q) over positions, top-1 agreement."""
    kl = kl_per_position(ref_logprobs, logprobs)
    return {"perplexity": perplexity(logprobs, ids), "reference_perplexity": perplexity(ref_logprobs, ids),
            "kl_mean": kl.mean().item(), "kl_max": kl.max().item(),
            "top1_agreement": top1_agreement(ref_logprobs, logprobs), "positions": int(kl.numel())}
