"""The texts the models are read on, and a model's quality against a reference on them. *Persuasion* (helpers/data/)
trains ``tiny-trained``; the opening of its held-out last chapter is the tiny profiles' evaluation text, original
prose no published model has seen (eval_text.txt) every other profile's. Perplexity = exp(mean NLL of each next
token); KL(p_ref ‖ p_q) = Σ_v p_ref(v) (log p_ref(v) − log p_q(v)) per position; top-1 agreement."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .local_models import TINY_PROFILES

DATA = Path(__file__).parents[1] / "data"
TEXT_FILE = DATA / "persuasion.txt"
TEXT_SOURCE = "Jane Austen, Persuasion (1818), public domain"
HELDOUT_HEADING = "Chapter 24"   # the novel's last chapter: held out from training
EVAL_CHARS = 4000                # the tiny profiles' evaluation text: the held-out chapter's paragraphs up to this many characters
EVAL_TEXT = DATA / "eval_text.txt"


def training_text() -> str:
    return TEXT_FILE.read_text(encoding="utf-8")


def split(full: str | None = None) -> tuple[str, str]:
    """(training part, held-out part): the held-out part starts at the last chapter's heading."""
    full = training_text() if full is None else full
    cut = full.find(f"\n\n{HELDOUT_HEADING}\n\n")
    if cut < 0:
        raise ValueError(f"the training text has no '{HELDOUT_HEADING}' heading to hold out from")
    return full[:cut + 1], full[cut + 2:]


def heldout_eval_text() -> str:
    """The evaluation text of the tiny profiles: the held-out chapter's first paragraphs, EVAL_CHARS at least."""
    out: list[str] = []
    for p in split()[1].split("\n\n"):
        out.append(p)
        if sum(len(x) + 2 for x in out) >= EVAL_CHARS:
            break
    return "\n\n".join(out).strip() + "\n"


def eval_text(profile: str | None = None) -> str:
    """heldout_eval_text for the tiny profiles (the random and the trained model read the same), else eval_text.txt."""
    return heldout_eval_text() if profile in TINY_PROFILES else EVAL_TEXT.read_text(encoding="utf-8")


def eval_ids(tokenizer, max_tokens: int | None = None, profile: str | None = None) -> list[int]:
    """Token ids of a profile's evaluation text, BOS first."""
    ids = encode(tokenizer, eval_text(profile))
    return ids[:max_tokens] if max_tokens else ids


def encode(tokenizer, text: str) -> list[int]:
    """A text's token ids as a list (BOS first, as the tokenizer adds it), whatever the tokenizer returns."""
    ids = tokenizer.encode(text)
    return list(ids["input_ids"] if isinstance(ids, dict) else ids)


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
