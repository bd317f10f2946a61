"""The readable engine (helpers.engine) against independent oracles: transformers' `generate`
token for token (mixed prompt lengths, chunked prefill, forced preemption, prefix hits of both caches),
no block leaked or double-owned after any run (hypothesis), transformers' assisted generation for the
speculative loop (same tokens, same number of target passes), and the target's exact distribution for
sampled speculative decoding (an exact check on a small vocabulary and a seeded goodness-of-fit test)."""
import math
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.engine import speculative
from helpers.engine.llm import Engine, EngineArgs
from helpers.engine.request import SamplingParams

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import serving_bench  # noqa: E402  (scripts/serving_bench.py: make bench's check against generate)
from test_serving_blocks import check  # noqa: E402  (the allocator's invariants)

NEW = 12
GREEDY = SamplingParams(max_tokens=NEW, ignore_eos=True)


def reference(model, prompt, n=NEW):
    """transformers' greedy generate, never stopping early (no end-of-sequence token)."""
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()      # generate warns that -1 is not a real token id
    try:
        with torch.inference_mode():
            out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                 max_new_tokens=n, do_sample=False, eos_token_id=-1, pad_token_id=0)
    finally:
        logging.set_verbosity(level)
    return out[0, len(prompt):].tolist()


@pytest.fixture(scope="module")
def prompts():
    g = torch.Generator().manual_seed(0)
    shared = torch.randint(3, 32000, (40,), generator=g).tolist()
    first = [torch.randint(3, 32000, (n,), generator=g).tolist() for n in (3, 9, 17, 40, 70)] + [shared + [11, 12]]
    later = [shared + [13, 14, 15], shared + [11, 12], shared[:35]]      # arrive after the first ones finish
    return first, later


@pytest.fixture(scope="module")
def expected(tiny, prompts):
    first, later = prompts
    return [reference(tiny.model, p) for p in first + later]


CONFIGS = {
    "one step per prompt": EngineArgs(prefix_cache=None),
    "chunked prefill": EngineArgs(max_batch_tokens=16, prefix_cache=None),
    "forced preemption": EngineArgs(block_size=4, num_blocks=36, max_num_seqs=6, max_batch_tokens=24,
                                    prefix_cache=None),
    "prefix hits, radix": EngineArgs(block_size=4, prefix_cache="radix"),
    "prefix hits, hash": EngineArgs(block_size=4, prefix_cache="hash"),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_greedy_output_equals_generate_token_for_token(tiny, prompts, expected, name):
    first, later = prompts
    e = Engine(tiny.model, CONFIGS[name])
    got = e.generate(first, GREEDY)
    got += e.generate(later, GREEDY)               # queued after the first ones finished: prefix hits
    assert got == expected
    check(e.kv)
    prefill = [n for s in e.log for rid, n in s["prefill"].items()]
    if name == "chunked prefill":                  # a 70-token prompt in chunks of at most 16, mixed with decodes
        assert max(prefill) <= 16 and any(s["prefill"] and s["decode"] for s in e.log)
    if name == "forced preemption":
        assert sum(len(s["preempted"]) for s in e.log) > 0
    if name.startswith("prefix hits"):
        hits = [n for s in e.log for n in s["cache hits"].values() if n]
        assert hits and all(n % 4 == 0 for n in hits) == (name.endswith("hash"))
        if name.endswith("radix"):                 # a hit ending inside a block shares it: copy-on-write
            assert e.kv.copies > 0 and max(hits) == 41
    assert e.kv.used_blocks == len(e.kv.held)     # what is left is the prefix cache's


@pytest.fixture(scope="module")
def micro():
    """A Mistral-architecture model of 8 tokens (random weights, spread wide so the distributions differ
    between its first layer and both): cheap enough for hypothesis and thousands of samples."""
    from helpers.measure.local_models import tiny_model

    return tiny_model(vocab_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=8, max_position_embeddings=512, initializer_range=0.4)


request_st = st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=20), st.integers(1, 8), st.integers(0, 6))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(request_st, min_size=1, max_size=6), st.sampled_from([1, 2, 4]), st.integers(0, 12),
       st.integers(1, 32), st.integers(1, 4), st.sampled_from([None, "hash", "radix"]))
def test_no_block_is_leaked_or_double_owned_after_any_run(micro, reqs, block, extra_blocks, budget, seqs, cache):
    """Requests from a 4-token alphabet (many shared prefixes) arriving at different steps, any block size,
    cache size (down to one request's need), token budget and cap: the allocator's invariants hold after
    every step, every request gets the tokens an unconstrained engine gives it, and once the prefix cache
    lets go every block is free."""
    need = max(-(-(len(p) + n) // block) for p, n, _ in reqs)
    e = Engine(micro, EngineArgs(block_size=block, num_blocks=need + extra_blocks, max_num_seqs=seqs,
                                 max_batch_tokens=budget, prefix_cache=cache))
    ref = Engine(micro, EngineArgs(block_size=block, max_num_seqs=8, max_batch_tokens=512, prefix_cache=None))
    pending, live, step = sorted(reqs, key=lambda r: r[2]), [], 0
    while pending or e.has_work():
        while pending and pending[0][2] <= step:
            p, n, _ = pending.pop(0)
            live.append((e.add(p, SamplingParams(max_tokens=n, ignore_eos=True)), p, n))
        if e.has_work():
            e.step()
            check(e.kv)
        step += 1
    for r, p, n in live:
        assert r.output == ref.generate([p], SamplingParams(max_tokens=n, ignore_eos=True))[0]
    assert not e.kv.tables and e.kv.used_blocks == len(e.kv.held)
    e.cache.evict(e.kv.num_blocks)
    assert e.kv.free_blocks == e.kv.num_blocks and not e.kv.held
    check(e.kv)


def test_radix_and_hash_caches_compared_on_the_agentic_trace(tiny):
    """The same rounds through both caches: the same tokens out; the radix tree reuses every shared token,
    the hashes only whole blocks (so never more), and both hit on most of the trace's prompt tokens."""
    from helpers.serving import traces

    trace = traces.agentic_trace(agents=3, review_rounds=1, system_words=60, proposal_tokens=8, review_tokens=4)
    ids = traces.token_ids(tiny.tokenizer, trace)
    outs, hits = {}, {}
    for kind in ("radix", "hash"):
        e = Engine(tiny.model, EngineArgs(block_size=16, prefix_cache=kind))
        outs[kind] = []
        for rnd in sorted({r.round for r in trace}):
            outs[kind] += e.generate([p for p, r in zip(ids, trace) if r.round == rnd],
                                     SamplingParams(max_tokens=4, ignore_eos=True))
        hits[kind] = e.cache.hit_tokens
    assert outs["radix"] == outs["hash"]
    assert hits["radix"] >= hits["hash"] > 0 and hits["hash"] % 16 == 0
    assert hits["radix"] > 0.5 * sum(len(p) for p, r in zip(ids, trace) if r.round > 0)


@pytest.mark.slow
def test_speculative_greedy_equals_generate_with_transformers_pass_counts(tiny):
    """Greedy speculative decoding keeps the target's tokens; with prompt lookup it takes as many target
    passes as transformers' assisted generation with the same rule; the early-exit draft proposes what
    transformers' own first two layers, final norm and head make, and a draft of all the layers has every
    draft kept."""
    from helpers.engine.request import Request
    from helpers.measure import quality
    from helpers.serving import speculative as assisted

    text = quality.eval_ids(tiny.tokenizer, 60)
    want = reference(tiny.model, text, 16)
    plain = speculative.generate(tiny.model, [text], SamplingParams(max_tokens=16, ignore_eos=True))
    assert plain.outputs == [want] and plain.target_passes == 16
    for drafter in (speculative.PromptLookup(3), speculative.DraftModel(tiny.model, num_layers=2)):
        res = speculative.generate(tiny.model, [text], SamplingParams(max_tokens=16, ignore_eos=True), k=4,
                                   drafter=drafter)
        assert res.outputs == [want], drafter.name
        if isinstance(drafter, speculative.PromptLookup):
            tokens, passes = assisted.speculate(tiny.model, text, 16, k=4, ngram=3)
            assert tokens == want and res.target_passes == passes
            assert sum(a for _, a in res.rounds) == 16 - passes           # every pass adds one token of its own
    # the early exit by hand: transformers' hidden state after 2 of the 4 layers, its final norm and head, greedy
    drafts, _ = speculative.DraftModel(tiny.model, num_layers=2).propose(
        [Request(0, list(text), SamplingParams(max_tokens=16, ignore_eos=True))], [4])[0]
    ids = list(text)
    for _ in range(4):
        with torch.inference_mode():
            h = tiny.model(torch.tensor([ids]), output_hidden_states=True).hidden_states[2]
            ids.append(int(tiny.model.lm_head(tiny.model.model.norm(h))[0, -1].argmax()))
    assert drafts == ids[len(text):]
    # all the layers: the draft is the target, every draft kept, k + 1 tokens a pass but the last (16 = 5 + 5 + 5 + 1)
    same = speculative.generate(tiny.model, [text], SamplingParams(max_tokens=16, ignore_eos=True), k=4,
                                drafter=speculative.DraftModel(tiny.model, num_layers=4))
    assert same.outputs == [want] and same.rounds == [(4, 4), (4, 4), (4, 4), (0, 0)] and same.target_passes == 4


def test_rejection_sampling_gives_the_target_distribution_exactly():
    """Enumerating the randomness of one step on a small vocabulary: draft x with probability q(x), kept
    with accept_probability, else the residual — the output distribution is p, for random pairs, for a
    deterministic draft (prompt lookup: q one-hot), for q = p and for disjoint supports."""
    g = torch.Generator().manual_seed(0)
    pairs = [(torch.rand(6, generator=g).softmax(0), torch.rand(6, generator=g).softmax(0)) for _ in range(20)]
    p = torch.tensor([0.5, 0.3, 0.2, 0, 0, 0])
    pairs += [(p, torch.nn.functional.one_hot(torch.tensor(1), 6).float()), (p, p.clone()),
              (p, torch.tensor([0, 0, 0, 0.5, 0.25, 0.25]))]
    for p, q in pairs:
        out = torch.zeros(6, dtype=torch.float64)
        for x in range(6):
            a = speculative.accept_probability(p, q, x) if q[x] > 0 else 0.0
            out[x] += q[x] * a
            out += q[x] * (1 - a) * speculative.residual(p, q).double()
        assert torch.allclose(out, p.double(), atol=1e-6), (p, q, out)


def _chi2_pvalue(counts, probs):
    """Pearson's χ² goodness of fit, cells with expected count < 5 pooled; p-value from the regularized
    upper incomplete gamma function (the χ² survival function)."""
    n = counts.sum()
    exp = probs * n
    big = exp >= 5
    obs = torch.cat([counts[big], counts[~big].sum().reshape(1)])
    exp = torch.cat([exp[big], exp[~big].sum().reshape(1)])
    keep = exp > 0
    stat = ((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum()
    df = int(keep.sum()) - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64), stat.double() / 2))


@pytest.mark.slow
@pytest.mark.parametrize("drafter", ["draft model", "prompt lookup"])
def test_sampled_speculative_decoding_reproduces_the_target_distribution(micro, drafter):
    """2,000 seeded samples after the same prompt, temperature 1, two drafted tokens: the first two tokens
    distribution fits the target's exact one (computed with transformers on all 64 continuations) —
    tolerance: χ² p-value above 0.001 — while the drafter's own distribution is rejected by the same
    test (p < 10⁻⁶): the test can tell them apart."""
    prompt = [1, 3, 5, 1, 3]                       # prompt lookup finds [1, 3] -> 5, 1, 3
    with torch.inference_mode():
        def joint(model_logits):
            first = model_logits(prompt).softmax(-1)
            second = torch.stack([model_logits(prompt + [t]).softmax(-1) for t in range(8)])
            return (first[:, None] * second).flatten().double()
        target = joint(lambda ids: micro(torch.tensor([ids])).logits[0, -1].float())
        early = lambda ids: micro.lm_head(micro.model.norm(  # noqa: E731 - the first layer's exit, as the draft
            micro.model(torch.tensor([ids]), output_hidden_states=True).hidden_states[1]))[0, -1].float()
        drafted = joint(early)
    d = speculative.DraftModel(micro, num_layers=1, num_blocks=2100) if drafter == "draft model" else \
        speculative.PromptLookup(2)
    res = speculative.generate(micro, [prompt] * 2000, SamplingParams(max_tokens=3, temperature=1.0, seed=7),
                               k=2, drafter=d)
    assert sum(a for _, a in res.rounds) > 0.3 * len(res.rounds)          # drafts were kept, and rejected
    assert any(a < n for n, a in res.rounds)
    counts = torch.zeros(64, dtype=torch.float64)
    for out in res.outputs:
        counts[out[0] * 8 + out[1]] += 1
    assert _chi2_pvalue(counts, target) > 1e-3
    if drafter == "draft model":
        assert _chi2_pvalue(counts, drafted) < 1e-6


def test_bad_settings_say_what_is_allowed(tiny):
    e = Engine(tiny.model, EngineArgs(num_blocks=4, block_size=4))
    with pytest.raises(ValueError, match="need 5 KV blocks of 4 tokens; the cache has 4"):
        e.add([5] * 10, SamplingParams(max_tokens=10))
    with pytest.raises(ValueError, match="token ids in 0..31999"):
        e.add([32000])


def test_measurements_report_what_the_engine_did(micro):
    """helpers.serving.engine_runs and engine_caches on the small model: chunked prefill takes the chunks the budget allows, a warm prefix
    is reused whole, an edit stops both caches where it should, the step log holds every request's prefill and
    decode rows, and the engine's tokens equal generate's."""
    from helpers.serving import engine_caches, engine_runs
    from helpers.serving.traces import TraceRequest

    rows = engine_runs.chunked_prefill(micro, [[1, 2, 3]] * 2, list(range(8)) * 8, 6, 2, [80, 18], repeats=1)
    assert [r.prefill_steps for r in rows] == [1, math.ceil(64 / 16)]     # 18 tokens a step, less 2 decodes
    assert all(r.same_tokens_as_first_budget for r in rows)
    ttft = engine_caches.prefix_ttft(micro, [3] * 40, [[1, 2], [2, 1], [4, 4]], block_size=4)
    assert ttft.cached_tokens_per_warm_request == [40, 40] and ttft.same_first_token
    edit = engine_caches.edit_hits(micro, [1, 2, 3, 4, 5, 6, 7] * 6, 22, block_size=4)
    assert list(edit["reused tokens"]) == [22, 20] and edit["reused = rule"].all()
    reqs = [TraceRequest(i, tuple([1 + i, 2, 3] * (i + 1)), 4) for i in range(5)]
    res, e = engine_runs.serve(micro, reqs, EngineArgs(block_size=4, max_num_seqs=2, max_batch_tokens=8))
    assert {r for s in e.log for r in s["prefill"]} == set(range(5)) and sum(len(s["decode"]) for s in e.log) == 5 * 3
    summary = engine_runs.log_summary(e, res).iloc[0]
    assert summary["steps"] == len(e.log) and summary["requests"] == 5 and summary["preemptions"] == 0
    same = serving_bench.identical_to_generate(micro, [list(r.prompt) for r in reqs], 5)
    assert same.identical and same.identical_requests == 5


def test_runner_logits_equal_transformers_on_a_mixed_batch(micro):
    """One forward over a mixed batch (the rest of one prompt after its first chunk, another prompt whole)
    gives transformers' logits at every row (GQA: 4 query heads over 2 K/V heads)."""
    from helpers.engine.kv import PagedKVCache
    from helpers.engine.runner import Chunk, Runner

    kv = PagedKVCache.for_model(micro, 16, 4)
    r = Runner(micro, kv)
    a, b = [1, 5, 2, 7, 3, 3, 0, 6, 4], [2, 2, 6]
    kv.allocate("a", len(a))
    kv.allocate("b", len(b))
    r.forward([Chunk(kv.tables["a"], a[:4], 0, 0)])
    got = r.forward([Chunk(kv.tables["a"], a[4:], 4, 5), Chunk(kv.tables["b"], b, 0, 3)])
    with torch.inference_mode():
        want = torch.cat([micro(torch.tensor([a])).logits[0, 4:], micro(torch.tensor([b])).logits[0]])
    assert torch.allclose(got, want.float(), atol=1e-5)


def test_verify_step_ratio_worked_by_hand():
    """Mistral 7B on an H100 (3.35 TB/s, 989 TFLOP/s bf16): at batch 1, 512 tokens, a decode step reads the
    weights less the input embedding table (7,241,732,096 − 32,000 × 4,096 parameters × 2 B) and 512 tokens
    of K/V (131,072 B each): 14.29 GB / 3.35 TB/s = 4.27 ms, and verifying 4 drafts reads the same: ratio 1.
    At batch 256 the 5-token pass does 5 × 256 × 2 × 7.24e9 ≈ 18.5 TFLOP (18.7 ms at peak): compute-bound."""
    from helpers.formulas.speculation import verify_step_ratio

    one = verify_step_ratio("mistral-7b-v0.1", 4, 512, 1)
    weights = (7_241_732_096 - 32_000 * 4_096) * 2
    assert one.decode_step_ms == pytest.approx(1e3 * (weights + 512 * 131_072) / 3.35e12, rel=0.01)
    assert one.verify_over_decode == pytest.approx(1.0, abs=0.01) and one.verify_bound == "memory"
    big = verify_step_ratio("mistral-7b-v0.1", 4, 512, 256)
    assert big.verify_bound == "compute" and 1.5 < big.verify_over_decode < 5
