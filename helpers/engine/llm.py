"""The engine: a request's way from arrival to its last token, one `step` at a time.

    engine = Engine(model, EngineArgs(block_size=16, max_num_seqs=8, max_batch_tokens=256))
    engine.add([1, 415, 2936], SamplingParams(max_tokens=32))
    while engine.has_work():
        engine.step()

Each step: the scheduler picks the batch (scheduler.py), the runner computes it in one forward pass
(runner.py) over the paged KV cache (kv.py), one token is sampled per request whose chunk reached its
last token (request.py), and the scheduler books the results. Every step is written to `log` — who was
prefilling (and how many tokens), decoding, waiting, preempted; blocks in use — for the timeline."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from . import prefix_cache
from .kv import PagedKVCache
from .request import Request, SamplingParams, sample
from .runner import Chunk, Runner
from .scheduler import Scheduler


@dataclass(frozen=True)
class EngineArgs:
    block_size: int = 16            # token slots per KV block (vLLM's default on a GPU)
    num_blocks: int | None = None   # KV blocks; None: max_num_seqs requests of max_model_len tokens
    max_num_seqs: int = 8           # requests running at once
    max_batch_tokens: int = 256     # tokens computed per step, prefill chunks and decode rows together
    max_model_len: int = 2048       # prompt + output, for the default num_blocks
    prefix_cache: str | None = "radix"   # 'radix' (token-granular), 'hash' (whole blocks) or None

    @property
    def blocks(self) -> int:
        return self.num_blocks or self.max_num_seqs * -(-self.max_model_len // self.block_size)


class Engine:
    def __init__(self, model, args: EngineArgs = EngineArgs(), eos_token_id: int | None = None):
        self.args = args
        self.kv = PagedKVCache.for_model(model, args.blocks, args.block_size)
        self.runner = Runner(model, self.kv)
        self.cache = prefix_cache.CACHES[args.prefix_cache or "off"](self.kv)
        eos = model.config.eos_token_id if eos_token_id is None else eos_token_id
        self.scheduler = Scheduler(self.kv, self.cache, args.max_num_seqs, args.max_batch_tokens,
                                   eos[0] if isinstance(eos, list) else eos)
        self.log: list[dict] = []
        self._ids = itertools.count()

    def validate(self, prompt, params: SamplingParams) -> None:
        """ValueError unless the request can run: token ids in the vocabulary, and prompt + max_tokens
        within the cache (a request the cache cannot hold alone would never finish)."""
        vocab = self.runner.embed.shape[0]
        if not prompt or any(isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab for t in prompt):
            raise ValueError(f"a prompt is a non-empty list of token ids in 0..{vocab - 1}")
        need = self.kv.blocks_for(len(prompt) + params.max_tokens)
        if need > self.kv.num_blocks:
            raise ValueError(f"{len(prompt)} prompt + {params.max_tokens} new tokens need {need} KV blocks of "
                             f"{self.kv.block_size} tokens; the cache has {self.kv.num_blocks}")

    def add(self, prompt, params: SamplingParams = SamplingParams(), rid=None) -> Request:
        """Queue a request (token ids); it is admitted at the next step that has room for it."""
        prompt = [int(t) for t in prompt]
        self.validate(prompt, params)
        req = Request(next(self._ids) if rid is None else rid, prompt, params)
        self.scheduler.waiting.append(req)
        return req

    def has_work(self) -> bool:
        return self.scheduler.has_work()

    def abort(self, req: Request) -> None:
        self.scheduler.abort(req)

    def step(self) -> list[Request]:
        """One scheduling decision, one forward pass, one token for each request that reached its end."""
        plan = self.scheduler.schedule()
        chunks = [Chunk(self.kv.tables[r.rid], r.tokens[r.computed:r.computed + n], r.computed,
                        int(r.computed + n == len(r.tokens))) for r, n in plan.work]
        decoding = [r.rid for r, _ in plan.work if r.decoding]
        logits = self.runner.forward(chunks)
        ready = [r for (r, _), c in zip(plan.work, chunks) if c.logits]
        sampled = dict(zip((r.rid for r in ready), sample(logits, ready)))
        out = self.scheduler.finish_step(plan, sampled)
        self.log.append({"step": len(self.log), "prefill": {r.rid: n for r, n in plan.work if r.rid not in decoding},
                         "decode": decoding, "waiting": [r.rid for r in self.scheduler.waiting],
                         "preempted": [r.rid for r in plan.preempted],
                         "cache hits": {r.rid: r.cached_tokens for r in plan.admitted},
                         "blocks used": self.kv.used_blocks, "tokens held": self.kv.stored_tokens(),
                         "tokens": sum(n for _, n in plan.work)})
        return out

    def run(self) -> None:
        while self.has_work():
            self.step()

    def generate(self, prompts, params: SamplingParams = SamplingParams()) -> list[list[int]]:
        """Serve all prompts together (continuous batching) and return each one's generated tokens."""
        reqs = [self.add(p, params) for p in prompts]
        self.run()
        return [r.output for r in reqs]
