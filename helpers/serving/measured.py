"""The serving workloads notebook 07 and `make bench` (scripts/serving_bench.py) share, sized per profile."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    # More requests than slots, as a server has: the queue is where continuous batching pays (a freed
    # slot is refilled at once) and where static batching waits for each batch's slowest request.
    requests: int = 64            # chat trace requests for batching
    slots: int = 16               # batch slots: static batch size = continuous batching's concurrency
    prompt_words: int = 40        # chat trace median prompt words
    output_tokens: int = 32       # chat trace median output tokens
    max_output: int = 96
    prefix_tokens: int = 1000     # shared prefix for the prefix-reuse TTFT
    suffix_tokens: int = 32
    decode_tokens: int = 48       # KV cache on/off and speculative decoding
    spec_k: int = 4
    draft_layers: int = 2
    long_prompt: int = 512        # chunked prefill
    chunk_budget: int = 64


def workload(profile: str, device: str = "cpu") -> Workload:
    """The tiny sizes for the tiny profiles anywhere and for every locally built profile on a CPU (the
    small model too: the GPU sizes would take it an hour there); on a 7B profile or a CUDA GPU, batches
    and prompts grow."""
    from ..measure.local_models import LOCAL_PROFILES, TINY_PROFILES

    if profile in TINY_PROFILES or (profile in LOCAL_PROFILES and not str(device).startswith("cuda")):
        return Workload()
    # twice the CPU's slots and a queue as long, outputs kept short enough that serving the 64 one after
    # another stays under two minutes for Mistral 7B (64 × 64 tokens at ~20 ms a step)
    return Workload(requests=64, slots=32, prompt_words=200, output_tokens=64, max_output=256,
                    prefix_tokens=4000, suffix_tokens=64, decode_tokens=128, spec_k=5, draft_layers=8,
                    long_prompt=4096, chunk_budget=512)


def chat_requests(tokenizer, w: Workload, seed: int = 1):
    """The seeded chat trace at the workload's sizes, its prompts as token ids."""
    from .traces import TraceRequest, chat_trace, token_ids

    reqs = chat_trace(w.requests, seed=seed, prompt_words_median=w.prompt_words, output_tokens_median=w.output_tokens,
                      max_output_tokens=w.max_output)
    return [TraceRequest(r.rid, tuple(ids), r.max_new_tokens) for r, ids in zip(reqs, token_ids(tokenizer, reqs))]


PAGED_REQUESTS = 64         # the chat trace the paged-attention comparison replays
PAGED_CAPACITY_LONGEST = 6  # its KV memory: room for this many of the longest possible requests at once


def paged_trace(tokenizer, w: Workload) -> tuple[list, int]:
    """The paged-attention comparison's input (notebook 07 and the bench): the seeded chat trace's requests and
    the KV capacity both schemes share, PAGED_CAPACITY_LONGEST × (max_output + longest prompt) slots."""
    from dataclasses import replace

    reqs = chat_requests(tokenizer, replace(w, requests=PAGED_REQUESTS))
    return reqs, PAGED_CAPACITY_LONGEST * (w.max_output + max(len(r.prompt) for r in reqs))

