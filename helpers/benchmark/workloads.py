"""The engine benchmark's two workloads, generated (no download), reproducible from a seed:

- **ShareGPT-like chat**: log-normal prompt and output lengths (σ = 1, an assumption: the paper gives
  histograms) whose expected means are ShareGPT's published ones (Kwon et al., SOSP 2023, Fig. 11a)
  × `scale` (a CPU serves the tiny model), clipped to the model's context;
- **agentic branching** (the talk's): helpers.serving.traces.agentic_trace, sized in tokens.

Tokens become words of the trace's word list at TOKENS_PER_WORD (Mistral's tokenizer; a test pins it).
"""
from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Sequence

from ..serving.traces import TraceRequest, agentic_trace, chat_trace

SHAREGPT_MEAN_PROMPT_TOKENS = 161.31    # Kwon et al. 2023, Fig. 11a (ShareGPT)
SHAREGPT_MEAN_OUTPUT_TOKENS = 337.99
SHAREGPT_SOURCE = "Kwon et al., vLLM/PagedAttention, SOSP 2023, Fig. 11a: ShareGPT means 161.31 / 337.99 tokens"
SHAREGPT_SIGMA = 1.0                    # log-normal spread: an assumption (the paper gives histograms only)
TOKENS_PER_WORD = 1.05                  # Mistral's tokenizer on helpers.serving.traces' word list


def words_for(tokens: float) -> int:
    return max(1, round(tokens / TOKENS_PER_WORD))


def sharegpt_trace(n: int, seed: int = 0, scale: float = 1.0, max_prompt_tokens: int = 1536,
                   max_output_tokens: int = 512, rate_per_s: float | None = None) -> list[TraceRequest]:
    shrink = math.exp(SHAREGPT_SIGMA ** 2 / 2)          # a log-normal's mean ÷ its median
    return chat_trace(n, seed=seed, prompt_words_median=words_for(SHAREGPT_MEAN_PROMPT_TOKENS * scale / shrink),
                      output_tokens_median=SHAREGPT_MEAN_OUTPUT_TOKENS * scale / shrink, sigma=SHAREGPT_SIGMA,
                      max_prompt_words=words_for(max_prompt_tokens), max_output_tokens=max_output_tokens,
                      rate_per_s=rate_per_s)


def sharegpt_summary(reqs: Sequence[TraceRequest], scale: float) -> dict:
    """What a ShareGPT-like trace holds against the published means (× scale)."""
    prompt = [len(r.prompt.split()) * TOKENS_PER_WORD for r in reqs]
    out = [r.max_new_tokens for r in reqs]
    return {"requests": len(reqs), "scale": scale, "source": SHAREGPT_SOURCE,
            "mean prompt tokens (about)": round(sum(prompt) / len(prompt), 1),
            "published mean prompt tokens × scale": round(SHAREGPT_MEAN_PROMPT_TOKENS * scale, 1),
            "mean output tokens asked": round(sum(out) / len(out), 1),
            "published mean output tokens × scale": round(SHAREGPT_MEAN_OUTPUT_TOKENS * scale, 1)}


def agentic(agents: int, review_rounds: int, system_tokens: int, proposal_tokens: int, review_tokens: int,
            seed: int = 0) -> list[TraceRequest]:
    """The talk's agentic branching workload with its shared system prompt given in tokens."""
    return agentic_trace(agents=agents, review_rounds=review_rounds, seed=seed,
                         system_words=words_for(system_tokens), proposal_tokens=proposal_tokens,
                         review_tokens=review_tokens)


def poisson(reqs: Sequence[TraceRequest], rate_per_s: float, seed: int = 0) -> list[TraceRequest]:
    """The same requests arriving as a Poisson process of `rate_per_s` (open loop)."""
    rng, t, out = random.Random(seed), 0.0, []
    for r in reqs:
        out.append(replace(r, arrival_s=t))
        t += rng.expovariate(rate_per_s)
    return out
