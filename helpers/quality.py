"""Quality of a model against a reference on a fixed text: perplexity, KL divergence of the
next-token distributions, top-1 agreement. Used for weight quantization (helpers.quant) and for
anything else that approximates a model (KV-cache quantization, …).

- perplexity = exp(mean negative log-likelihood of each next token of the text);
- KL(p_ref ‖ p_q) = Σ_v p_ref(v) (log p_ref(v) − log p_q(v)), per position, averaged over positions;
- top-1 agreement = share of positions where both models put the same token first.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

EVAL_TEXT = Path(__file__).parent / "data" / "eval_text.txt"


# ----------------------------------------------------------------------------- the text

def eval_text(profile: str | None = None) -> str:
    """The fixed evaluation text: for the tiny profiles the held-out chapter of the novel
    ``tiny-trained`` learns from (helpers.training.eval_text), so that the random and the trained model
    are measured on the same text; for every other profile the text shipped with helpers (original
    prose written for this repository, public domain), which no published model has seen."""
    from .models import TINY_PROFILES

    if profile in TINY_PROFILES:
        from .training import eval_text as heldout

        return heldout()
    return EVAL_TEXT.read_text(encoding="utf-8")


def eval_ids(tokenizer, max_tokens: int | None = None, profile: str | None = None) -> list[int]:
    """Token ids of the evaluation text (a beginning-of-sequence token first, as the tokenizer adds it)."""
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


# ----------------------------------------------------------------------------- a draft against its target

def draft_acceptance(target, draft, prompt_ids, new_tokens: int = 64, draft_tokens: int = 4) -> dict[str, Any]:
    """Greedy speculative decoding with transformers' assisted generation (``assistant_model=draft``):
    how many of the tokens the draft proposed did the target accept?

    The draft proposes ``draft_tokens`` tokens each round (a constant schedule, no confidence cut-off, so
    every round drafts the same number); the target checks them in one forward pass and keeps the
    longest agreeing prefix plus one token of its own. Counted from the candidate generator itself:
    ``drafted`` (tokens it proposed), ``accepted`` (its ``num_matches`` each round), ``rounds``; and,
    independently, ``target_calls`` — forward passes of the target, counted by a hook — and the
    tokens generated, which must equal accepted + target_calls (one token of its own per round).
    Also returns the output ids and whether they equal plain greedy decoding's (they must: greedy
    assisted generation changes the speed, never the text).
    """
    import copy

    import torch
    from transformers.utils import logging as hf_logging

    if new_tokens < 1 or draft_tokens < 1:
        raise ValueError(f"new_tokens and draft_tokens must be at least 1, got {new_tokens} and {draft_tokens}")
    if draft is target:
        raise ValueError("the draft must be a model object of its own (for an identical draft, load the profile "
                         "twice): the target's forward calls are counted by a hook, which would count the draft's too")
    device = next(target.parameters()).device
    x = torch.as_tensor(prompt_ids, dtype=torch.long).reshape(1, -1).to(device)
    counts = {"drafted": 0, "accepted": 0, "rounds": 0, "target_calls": 0}
    original = target._get_candidate_generator

    def counted_generator(*args, **kwargs):
        gen = original(*args, **kwargs)
        get, update = gen.get_candidates, gen.update_candidate_strategy

        def get_candidates(input_ids, **kw):
            cand, logits = get(input_ids, **kw)
            counts["drafted"] += cand.shape[1] - input_ids.shape[1]
            return cand, logits

        def update_candidate_strategy(input_ids, scores, num_matches):
            counts["accepted"] += int(num_matches)
            counts["rounds"] += 1
            return update(input_ids, scores, num_matches)

        gen.get_candidates, gen.update_candidate_strategy = get_candidates, update_candidate_strategy
        return gen

    def count_call(*_):
        counts["target_calls"] += 1

    gen_config = copy.deepcopy(draft.generation_config)
    saved = draft.generation_config
    gen_config.num_assistant_tokens, gen_config.num_assistant_tokens_schedule = draft_tokens, "constant"
    gen_config.assistant_confidence_threshold = 0.0
    draft.generation_config = gen_config
    hook = target.register_forward_hook(count_call)
    target._get_candidate_generator = counted_generator
    common = {"max_new_tokens": new_tokens, "do_sample": False, "pad_token_id": target.config.eos_token_id}
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the draft's generate() call warns about its own arguments every round
    try:
        with torch.inference_mode():
            out = target.generate(x, assistant_model=draft, **common)
    finally:
        del target._get_candidate_generator  # back to the class's method
        hook.remove()
        draft.generation_config = saved
        hf_logging.set_verbosity(verbosity)
    with torch.inference_mode():
        plain = target.generate(x, **common)
    generated = out.shape[1] - x.shape[1]
    return {**counts, "new_tokens": generated, "draft_tokens": draft_tokens,
            "acceptance": counts["accepted"] / counts["drafted"] if counts["drafted"] else float("nan"),
            "tokens_per_target_call": generated / counts["target_calls"] if counts["target_calls"] else float("nan"),
            "same_as_greedy": bool(torch.equal(out, plain)), "output_ids": out[0, x.shape[1]:].tolist()}
