"""Request workloads ("traces"), reproducible from a seed, shared by notebook 07 and the engine benchmark (08):
`chat_trace`, independent ShareGPT-like requests with log-normal (long-tailed) prompt and output lengths, and
`agentic_trace`, one long system prompt, a proposal round, then review rounds that each read the whole
transcript so far: later requests share ever longer prefixes, the case a radix-tree prefix cache is built
for. Prompts are text from a fixed English word list; `token_ids` tokenizes them."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Sequence


# Common English words (no punctuation): enough variety that the tokenizer sees ordinary text.
_WORDS = (
    "the of and to in is that for it as with was on be by this are or from at have an not they which one you "
    "were all we can her has there been if more when will would who so no out up into do only new some could "
    "time these two may first then any like other than its also now our made after many over such where most "
    "people year work between back system program data model memory token cache server request user answer "
    "question review plan code test design value result step fast slow large small long short simple clear "
    "write read build check measure compare improve explain describe summary detail reason choice option "
    "number table figure graph text word line page list group order state change start end "
    "because while before under again still each every both few same different important possible good best"
).split()

SYSTEM_PROMPT_HEAD = "You are the best software engineer in the world."
REVIEW_INSTRUCTION = "Review the proposals above and rate each one from 1 to 10 with one reason."


@dataclass(frozen=True)
class TraceRequest:
    """One request, the one type every workload outside the engine takes: its prompt (text for a server, token
    ids for a model here), tokens to generate, arrival (s) and, for the agentic trace, its round and agent."""

    rid: int
    prompt: str | tuple[int, ...]
    max_new_tokens: int
    arrival_s: float = 0.0
    round: int = 0          # agentic: 0 = proposal round, 1.. = review rounds; chat: always 0
    agent: int = 0          # agentic: which agent; chat: the request's index


def _random_text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(max(1, n)))


def _lognormal_int(rng: random.Random, median: float, sigma: float, lo: int, hi: int) -> int:
    return int(min(hi, max(lo, round(median * math.exp(sigma * rng.gauss(0.0, 1.0))))))


def chat_trace(n: int, seed: int = 0, prompt_words_median: float = 60, output_tokens_median: float = 48,
               sigma: float = 0.6, max_prompt_words: int = 400, max_output_tokens: int = 256) -> list[TraceRequest]:
    """n independent chat requests with long-tailed prompt and output lengths (log-normal, `sigma` the
    spread of the underlying normal), the same for the same seed."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = _lognormal_int(rng, prompt_words_median, sigma, 4, max_prompt_words)
        new = _lognormal_int(rng, output_tokens_median, sigma, 1, max_output_tokens)
        out.append(TraceRequest(i, f"User: {_random_text(rng, words)}\nAssistant:", new, agent=i))
    return out


def agentic_trace(agents: int = 4, review_rounds: int = 1, seed: int = 0, system_words: int = 600,
                  task_words: int = 40, proposal_tokens: int = 32, review_tokens: int = 16) -> list[TraceRequest]:
    """The branching agent workload: `agents` proposals, then `review_rounds` rounds in which every agent
    reviews the transcript so far (seeded stand-in text, so the trace is fixed); arrival_s is the round."""
    rng = random.Random(seed)
    system = f"{SYSTEM_PROMPT_HEAD} {_random_text(rng, system_words)}"
    task = f"Task: {_random_text(rng, task_words)}"
    out: list[TraceRequest] = []
    transcript: list[str] = []
    for a in range(agents):
        prompt = f"{system}\n{task}\nYou are agent {a + 1} of {agents}. Propose a solution.\n"
        out.append(TraceRequest(len(out), prompt, proposal_tokens, 0.0, 0, a))
    for a in range(agents):
        transcript.append(f"Proposal {a + 1}: {_random_text(rng, proposal_tokens)}")
    for r in range(1, review_rounds + 1):
        shared = f"{system}\n{task}\n" + "\n".join(transcript) + "\n"
        for a in range(agents):
            out.append(TraceRequest(len(out), f"{shared}{REVIEW_INSTRUCTION} You are reviewer {a + 1}.\n",
                                    review_tokens, float(r), r, a))
        for a in range(agents):
            transcript.append(f"Review {r}.{a + 1}: {_random_text(rng, review_tokens)}")
    return out


def token_ids(tokenizer, requests: Sequence[TraceRequest]) -> list[list[int]]:
    """Each request's prompt as token ids (a Hugging Face tokenizer's input_ids)."""
    return [list(tokenizer(r.prompt).input_ids) for r in requests]
