"""One request as the engine sees it, and how its next token is chosen.

A request is its token list (prompt, then what it generated) and one number that says how far the
KV cache has caught up: `computed`, the tokens whose keys and values are stored. Everything the
scheduler does moves `computed` forward (a prefill chunk, a decode step) or back to 0 (a preemption:
its blocks are freed and its tokens recomputed later). `tokens[computed:]` is what the next forward
must run; for a request that is decoding that is exactly one token, the one it sampled last."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum


class Status(Enum):
    WAITING = "waiting"      # queued, or preempted: no blocks
    RUNNING = "running"      # has blocks; prefilling (computed < prompt) or decoding
    FINISHED = "finished"


@dataclass(frozen=True)
class SamplingParams:
    """`temperature` 0 is greedy (argmax); above 0 the softmax of logits ÷ temperature, cut to the top-p
    nucleus (Holtzman et al., ICLR 2020), drawn with the request's own generator (`seed`)."""

    max_tokens: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    ignore_eos: bool = False
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(eq=False)
class Request:
    rid: int
    prompt: list[int]
    params: SamplingParams
    tokens: list[int] = field(default_factory=list)     # prompt + generated
    computed: int = 0             # tokens whose K/V is in the cache
    status: Status = Status.WAITING
    cached_tokens: int = 0        # prompt tokens found in the prefix cache at its (last) admission
    lost_tokens: int = 0          # K/V computed, then freed by preemptions (recomputed later)
    finish_reason: str | None = None   # "length" or "stop", as OpenAI's API says
    arrival_s: float = field(default_factory=time.perf_counter)
    admitted_s: float | None = None     # when it first got a slot
    token_times: list[float] = field(default_factory=list)   # when each generated token was made
    generator: object = None      # torch.Generator for sampled requests

    def __post_init__(self):
        self.tokens = list(self.prompt)

    @property
    def output(self) -> list[int]:
        return self.tokens[len(self.prompt):]

    @property
    def to_compute(self) -> int:
        """Tokens the next forward must run for this request (1 when decoding)."""
        return len(self.tokens) - self.computed

    @property
    def decoding(self) -> bool:
        """It has generated before and needs only its newest token run (not a prefill or a recompute)."""
        return bool(self.output) and self.to_compute == 1

    def done(self, eos: int | None) -> str | None:
        """Why the request is finished after its latest token, or None."""
        if len(self.output) >= self.params.max_tokens:
            return "length"
        if eos is not None and not self.params.ignore_eos and self.output and self.output[-1] == eos:
            return "stop"
        return None


def probabilities(logits, params: SamplingParams):
    """The distribution a sampled request draws from: softmax(logits / T), then top-p (rows: tokens)."""
    import torch

    probs = torch.softmax(logits.float() / params.temperature, dim=-1)
    if params.top_p < 1:
        p, order = probs.sort(dim=-1, descending=True)
        drop = p.cumsum(-1) - p >= params.top_p          # tokens after the nucleus is already full
        p[drop] = 0
        probs = torch.zeros_like(probs).scatter_(-1, order, p)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample(logits, requests: list[Request]) -> list[int]:
    """One token per row of `logits` (rows, vocab), row i for requests[i]: greedy rows by one argmax over
    the batch, sampled rows each from its own generator."""
    import torch

    out = logits.argmax(-1).tolist()
    for i, req in enumerate(requests):
        if not req.params.greedy:
            if req.generator is None:     # seed None: a fresh, unpredictable seed
                g = req.generator = torch.Generator(logits.device.type)
                g.seed() if req.params.seed is None else g.manual_seed(req.params.seed)
            probs = probabilities(logits[i], req.params)
            out[i] = int(torch.multinomial(probs, 1, generator=req.generator))
    return out
