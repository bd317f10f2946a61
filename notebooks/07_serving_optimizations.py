# /// script
# requires-python = ">=3.10"
# dependencies = [
#     "llm-inference-workshop-helpers @ git+https://github.com/YOUR-GITHUB-OWNER/llm-inference-at-scale@main",
#     "torch",
# ]
# ///

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import time

    import marimo as mo
    import pandas as pd
    import torch

    from helpers import memory, models, notebook, quality
    from helpers.glossary import term
    from helpers.serving import (batching, blocks, figures, kv_cache, kv_quant, prefix_reuse, radix,
                                 speculative, traces)
    from helpers.serving import bench as serving_bench
    from helpers.serving.bench import chat_requests, paged_fit, paged_trace, workload

    notebook.setup()
    started = time.perf_counter()
    return (batching, blocks, chat_requests, figures, kv_cache, kv_quant, memory, mo, models, notebook, paged_fit,
            paged_trace, pd, prefix_reuse, quality, radix, serving_bench, speculative, started, term, torch, traces,
            workload)


@app.cell
def _(mo, term):
    mo.md(f"""
    # 07 · Serving optimizations, measured

    **What you will learn**

    1. To say what each serving mechanism buys — throughput, memory or latency — by measuring it here,
       before and after, side by side.
    2. To read the {term("KV cache")}, {term("paged attention")} and {term("continuous batching")} as
       bookkeeping around the same forward passes: what they store, and what they stop recomputing or waiting for.
    3. To tell when a mechanism does not pay: {term("prefix caching")} without shared prefixes,
       {term("KV-cache quantization")} without fused kernels, {term("speculative decoding")} with a costly or
       often-wrong draft.

    **Run time**: about 1–2 minutes on a 2-core CPU (tiny profile); about 3 minutes on one GPU (Mistral 7B).

    How a server makes one device serve many users. Six mechanisms, each in code you can read in
    `helpers/serving/`, each with a before/after measured side by side **in this run**:

    - **KV cache** on and off — why every server keeps one;
    - **paged attention** — a block allocator against contiguous reservation;
    - **continuous batching** — one after another, static batches, and transformers' continuous-batching
      manager; then **chunked prefill**;
    - **prefix caching** — a radix tree over token ids, and the time to first token a cache hit saves;
    - **KV-cache quantization** — fp8, 4 and 2 bits: bytes, speed, quality;
    - **speculative decoding** — a draft model and prompt lookup.
    """)
    return


@app.cell
def _(models, workload):
    loaded = models.load()
    model, tok = loaded.model, loaded.tokenizer
    w = workload(loaded.profile, loaded.device)
    return loaded, model, tok, w


@app.cell
def _(loaded, mo, w):
    mo.md(f"""
    **Model:** {loaded.label}. Sizes for this profile (`helpers.serving.bench.workload`): {w.requests}
    chat requests on {w.slots} batch slots, a {w.prefix_tokens:,}-token shared prefix, {w.decode_tokens}
    generated tokens for the decoding experiments.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 1 · The KV cache, on and off

    Without a cache, generating each token runs the **whole sequence so far** through the model again;
    with it, only the newest token, attending to keys and values stored from earlier steps. Same greedy
    tokens either way — the cache is lossless.
    """)
    return


@app.cell
def _(kv_cache, model, quality, tok, torch, w):
    on_off = kv_cache.cache_on_off(model, torch.tensor([quality.eval_ids(tok, 64)]), w.decode_tokens)
    return (on_off,)


@app.cell
def _(loaded, on_off, pd):
    pd.DataFrame([{
        "way": way, "prompt tokens": on_off["prompt tokens"], "new tokens": on_off["new tokens"],
        "total s": on_off[f"total s {k}"], "tokens run through the model": on_off[f"tokens processed {k}"],
        "same greedy tokens": on_off["identical tokens"], "measured on": loaded.label}
        for way, k in (("no cache", "without cache"), ("KV cache", "with cache"))])
    return


@app.cell
def _(figures, loaded, on_off):
    figures.cache_on_off_figure(on_off, loaded)
    return


@app.cell
def _(mo, model, notebook, on_off):
    _ratio = on_off["total s without cache"] / on_off["total s with cache"]
    _work = on_off["tokens processed without cache"] / on_off["tokens processed with cache"]
    mo.md(f"""
    **Measured:** the cache did {_work:.0f}× less work and was {notebook.speedup_phrase(_ratio)} here; the work without
    it matches the formula n·p + n(n−1)/2 = {on_off["predicted tokens processed without cache"]:,} tokens
    ({"exactly" if on_off["predicted tokens processed without cache"] == on_off["tokens processed without cache"] else "NOT"}).
    Greedy tokens identical: **{on_off["identical tokens"]}**.

    **What you should see.** *CPU, tiny:* the no-cache step time climbs with position while the cached step
    stays flat; the speed-up is smaller than the work ratio because a tiny model's step is dominated by fixed
    overhead (the {model.config.vocab_size:,}-word output head, Python). *GPU, Mistral 7B:* both are flat at first (a short
    sequence is one weight read either way), then the no-cache line climbs once the recomputed tokens make
    the step compute-bound.
    """)
    return


@app.cell
def _(batching, mo, serving_bench):
    mo.md(f"""
    ## 2 · Paged attention: blocks instead of contiguous reservations

    A server that does not know how long an answer will be must, with contiguous memory, reserve the
    longest possible (`prompt + max_tokens`) for every sequence. `helpers.serving.blocks.BlockAllocator`
    does what vLLM does instead: fixed blocks of {batching.PAGE_SIZE} token slots, a free list, a block table per
    sequence, reference counts and copy-on-write for shared prefixes. Below, both serve the same
    {serving_bench.PAGED_REQUESTS} chat requests (seeded `traces.chat_trace`, real token counts) one decode step at a
    time in the same KV memory; a request is admitted as soon as memory allows.
    """)
    return


@app.cell
def _(batching, blocks, paged_fit, paged_trace, tok, w):
    sims_in, capacity = paged_trace(tok, w)      # the bench's paged_over_contiguous_sequences uses the same
    sims = [blocks.simulate(sims_in, capacity, scheme, batching.PAGE_SIZE) for scheme in ("contiguous", "paged")]
    fit = paged_fit(tok, w)
    return capacity, fit, sims


@app.cell
def _(pd, sims):
    pd.DataFrame([s.summary() for s in sims]).assign(source="simulated: helpers.serving.blocks, chat trace token counts")
    return


@app.cell
def _(capacity, figures, loaded, sims):
    figures.paged_figure(sims, f"simulated on the chat trace tokenized by {loaded.model_name}'s tokenizer, "
                         f"{capacity:,} KV slots, blocks of {batching.PAGE_SIZE}")
    return


@app.cell
def _(fit, mo, sims):
    _c, _p = sims[0].summary(), sims[1].summary()
    mo.md(f"""
    **Measured in the simulation:** contiguous reservation used {_c["used share of reserved"]:.0%} of what it
    reserved — the rest is internal waste: room for tokens an answer has not generated yet, or never will
    (answers shorter than `max_tokens`); besides, {_c["mean external fragmentation (slots)"]:,.0f} free slots on
    average sat stranded in holes too small for the next request. Paging used {_p["used share of reserved"]:.0%}
    of what it held (at most one partly filled block per sequence).
    Paged ran {_p["mean sequences running"]:.1f} sequences at once on average against {_c["mean sequences running"]:.1f}
    and finished in {_p["decode steps to finish"]} steps against {_c["decode steps to finish"]}
    ({_p["preemptions"]} preemptions: paging admits optimistically and, when blocks run out, evicts the newest
    sequence to recompute it later — the simulation counts steps, not that recomputation's cost). At their full lengths, **{fit["paged"]} sequences fit paged against
    {fit["contiguous"]} contiguous ({fit["ratio"]:.1f}×).**

    **What you should see.** The same on any device: this is bookkeeping, not compute. The gap grows with
    how much `max_tokens` overstates real answers.
    """)
    return


@app.cell
def _(batching, chat_requests, model, tok, w):
    batch_reqs = chat_requests(tok, w)
    served = batching.compare_batching(model, batch_reqs, w.slots)
    return batch_reqs, served


@app.cell
def _(loaded, mo, served):
    _c = served["continuous"]
    mo.md(f"""
    **transformers' own paged cache** (the continuous-batching manager below) ran the chat requests in
    blocks of {_c.cache.page_size} tokens. `helpers.serving.batching.cb_config` sized it from the model and
    the requests — {_c.cache.num_blocks} blocks = {_c.cache.bytes / 1e6:,.2f} MB of KV
    (`helpers.memory.kv_bytes_per_token` × slots, {loaded.dtype}) — never from the machine's RAM, which
    transformers' default would take most of. Blocks in use, sampled while it ran: peak
    **{_c.peak_blocks} of {_c.cache.num_blocks}**.
    """)
    return


@app.cell
def _(mo):
    mo.md("""
    ## 3 · Continuous batching

    The same requests (mixed prompt and output lengths), three ways:

    - **one after another** — a naive local server;
    - **static batches** — `slots` requests at a time, prompts left-padded; a batch ends when its slowest
      request does, and the next batch only starts then;
    - **continuous batching** — transformers' manager (`model.init_continuous_batching`): a scheduler
      that, at every step, puts a waiting request into any slot that freed up (at most `slots` at once here).

    All three compute in a thread of their own, as the manager always does: PyTorch's CPU operators run
    on OpenMP thread teams, one per calling thread, and a thread that computes while the notebook's own
    team exists runs slower than one that computes alone (`helpers.serving.batching.in_worker_thread`
    says why) — the comparison holds only under the same conditions.
    """)
    return


@app.cell
def _(batching, loaded, pd, served):
    _rows = [batching.summary_row(r, served["sequential"]) for r in served.values()]
    for _r, _k in zip(_rows, served):
        _r["same tokens as one after another"] = batching.same_tokens(served[_k], served["sequential"])
    batch_table = pd.DataFrame(_rows).assign(**{"measured on": loaded.label})
    batch_table
    return (batch_table,)


@app.cell
def _(batching, figures, loaded, served, w):
    _panels = []
    for _k, _static in (("static", w.slots), ("continuous", None)):
        _r = served[_k]
        _segs = batching.slot_segments(_r, w.slots, _static)
        _panels.append((f"{_r.mode}: {_r.tokens_per_s:,.0f} tokens/s, slots idle "
                        f"{batching.idle_share(_segs, _r.wall_s, w.slots):.0%} of the time", _segs, _r.wall_s))
    figures.slots_figure(_panels, w.slots, loaded)
    return


@app.cell
def _(batch_reqs, batch_table, batching, memory, mo, pd, served, w):
    _pad = batching.padding_tokens(batch_reqs, w.slots)
    _t = batch_table.set_index("mode")
    _cb, _st = _t.iloc[2]["speed-up (tokens/s)"], _t.iloc[1]["speed-up (tokens/s)"]

    mo.md(f"""
    **Measured:** continuous batching served {_cb:.1f}× the tokens/s of one after another, static batching
    {_st:.1f}× — continuous batching **{"beat" if _cb > _st else "did not beat"}** static batching here. Static
    batching computed {_pad["prompt padding tokens"]:,} padding tokens and {_pad["finished rows' decode steps"]:,}
    decode rows for requests already done ({_pad["wasted share"]:.0%} of its work), and its hatched slots
    sat idle waiting for each batch's slowest request.

    One step of the continuous-batching manager took **{1e3 * served["continuous"].mean_step_s:,.1f} ms** on average
    and made {served["continuous"].tokens_per_step:.1f} tokens (its mean batch, of at most {w.slots}; prefills
    included) against **{1e3 * served["sequential"].mean_step_s:,.1f} ms** for one request's step (one token,
    prefills included): {served["continuous"].tokens_per_step:.1f} tokens for
    {served["continuous"].mean_step_s / served["sequential"].mean_step_s:,.1f}× the time of one.

    **What you should see.** *CPU, tiny:* several times the sequential throughput for continuous
    batching, less for static batches (their idle slots); a batched step costs more than a single row's
    (the sentence above gives this run's ratio), so batching is cheap but not free — the tiny model's
    fp32 arithmetic on two cores is no longer negligible at {w.slots} rows. A busy machine (other processes on the
    cores) shrinks every figure. *GPU, Mistral 7B:* a decode step reads all {memory.weight_bytes('mistral-7b-v0.1', 'bf16').bytes / 1e9:.1f} GB of weights whatever the
    batch, so throughput grows nearly linearly with the batch until the step turns compute-bound — continuous
    batching keeps the batch full.
    """)
    pd.DataFrame([_pad])
    return


@app.cell
def _(mo):
    mo.md("""
    ### Chunked prefill

    A long prompt arriving while others are decoding: prefilled in one step, it stalls everyone's next token
    for the whole prefill. transformers' scheduler splits a prompt longer than its token budget per step
    (`max_batch_tokens`) into chunks, interleaved with the others' decode steps. Below: the same arrival with
    a budget larger than the prompt (no chunking) and a small one.
    """)
    return


@app.cell
def _(batching, model, pd, quality, tok, torch, w):
    _short = [quality.eval_ids(tok, 24)[i:] for i in range(3)]
    _g = torch.Generator().manual_seed(0)
    _long = torch.randint(3, model.config.vocab_size, (w.long_prompt,), generator=_g).tolist()
    chunk_rows = batching.chunked_prefill(model, _short, _long, 24, 0.15, [2 * w.long_prompt, w.chunk_budget])
    chunk_table = pd.DataFrame(chunk_rows)
    chunk_table
    return (chunk_table,)


@app.cell
def _(chunk_table, mo):
    _one, _chunked = chunk_table.iloc[0], chunk_table.iloc[1]
    _gap = "worst ITL during its prefill (ms)"
    _seen = _one[_gap] is not None and _chunked[_gap] is not None    # None: no other token fell in its prefill
    _better = _seen and _chunked[_gap] < _one[_gap]
    _later = _chunked["long prompt TTFT (ms)"] > _one["long prompt TTFT (ms)"]
    _gaps = (f"the others' worst inter-token gap while the long prompt was prefilled was {_one[_gap]:,.0f} ms in one "
             f"step and {_chunked[_gap]:,.0f} ms in {int(_chunked['prefill steps (measured)'])} steps — chunking "
             f"**{'lowered' if _better else 'did not lower'}** it" if _seen else
             "no other request made a token while the long prompt was prefilled, so there is no gap to compare")
    mo.md(f"""
    **Measured:** {_gaps}; the long prompt's own TTFT went from {_one["long prompt TTFT (ms)"]:,.0f} to
    {_chunked["long prompt TTFT (ms)"]:,.0f} ms{" (chunks trade its TTFT for everyone else's smoothness)" if _later else ""}.
    Its {_chunked["long prompt tokens"]:,} tokens at {_chunked["max_batch_tokens"]:,} per step need at least
    {_chunked["chunks (fewest: ⌈prompt ÷ budget⌉)"]} steps; the scheduler took {_chunked["prefill steps (measured)"]}, as the
    others' decode tokens share each step's budget.

    **What you should see.** *CPU, tiny:* a prefill of a few hundred tokens is short, and timings jitter with
    load, so the gap is small and can flip on a busy machine. *GPU, Mistral 7B:* a 4k-token prefill takes
    hundreds of milliseconds; chunks of 512 cap the stall near one chunk's time.
    """)
    return


@app.cell
def _(batching, mo):
    mo.md(f"""
    ## 4 · Prefix caching

    `helpers.serving.radix.RadixTree` stores every prefilled prompt in a radix tree over token ids (SGLang's
    RadixAttention): a new prompt finds its longest cached prefix in one walk; hits count in whole blocks of
    {batching.PAGE_SIZE} (paged caches reuse whole blocks); least-recently-used unreferenced leaves are evicted when memory is
    short. Its hit rate on two seeded workloads from `helpers.serving.traces`:

    - **chat** — independent conversations (nothing shared but a few tokens of chat template);
    - **agentic** — one long shared system prompt, a proposal round, then review rounds in which every
      reviewer reads the whole transcript so far.
    """)
    return


@app.cell
def _(batching, radix, tok, traces):
    prefix_hits = {
        "chat": radix.hit_rate(traces.token_ids(tok, traces.chat_trace(16, seed=0)), block_size=batching.PAGE_SIZE),
        "agentic": radix.hit_rate(traces.token_ids(tok, traces.agentic_trace(agents=4, review_rounds=2, seed=0)),
                                  block_size=batching.PAGE_SIZE),
    }
    return (prefix_hits,)


@app.cell
def _(loaded, pd, prefix_hits):
    pd.DataFrame([{"trace": k, **{c: v for c, v in r.items() if c not in ("hits", "lengths")},
                   "tokenizer": loaded.model_name} for k, r in prefix_hits.items()])
    return


@app.cell
def _(batching, figures, loaded, prefix_hits):
    figures.hit_rate_figure(prefix_hits, f"computed: radix tree over {loaded.model_name}'s tokenizer, blocks of {batching.PAGE_SIZE}")
    return


@app.cell
def _(mo):
    mo.md("""
    A hit is only worth something if the stored keys and values are reused for real. Below, a prompt of a
    long shared prefix plus a short suffix: **cold**, prefilled whole; **warm**, only the suffix prefilled on
    top of a copy of the prefix's cache prefilled earlier (a server shares the blocks instead of copying;
    the copy's time is measured and taken out).
    """)
    return


@app.cell
def _(loaded, model, pd, prefix_reuse, torch, w):
    _g = torch.Generator().manual_seed(0)
    _prefix = torch.randint(3, model.config.vocab_size, (w.prefix_tokens,), generator=_g)
    _suffix = torch.randint(3, model.config.vocab_size, (w.suffix_tokens,), generator=_g)
    reuse = prefix_reuse.prefix_reuse(model, _prefix, _suffix)
    pd.DataFrame([reuse]).assign(**{"measured on": loaded.label})
    return (reuse,)


@app.cell
def _(figures, loaded, notebook, reuse):
    figures.bars_figure(["cold: prefix + suffix", "warm: suffix over cached prefix"],
                        [reuse["TTFT cold (ms)"], reuse["TTFT warm, suffix only (ms)"]], "time to first token (ms)",
                        f"prefix reuse: {reuse['prefix tokens']:,}-token prefix, {reuse['suffix tokens']}-token suffix, "
                        f"{notebook.speedup_phrase(reuse['TTFT ratio'])}", loaded, colours=[figures.BASELINE, figures.MEASURED])
    return


@app.cell
def _(mo, notebook, prefix_hits, reuse):
    _tokens = (reuse["prefix tokens"] + reuse["suffix tokens"]) / reuse["suffix tokens"]
    mo.md(f"""
    **Measured:** the agentic trace reused {prefix_hits["agentic"]["hit rate"]:.0%} of its prompt tokens, the chat
    trace {prefix_hits["chat"]["hit rate"]:.0%}. With a prefilled {reuse["prefix tokens"]:,}-token prefix reused, the
    time to first token was {notebook.speedup_phrase(reuse["TTFT ratio"])} than prefilling everything
    ({reuse["TTFT ratio"]:.1f}× against a token ratio of {_tokens:.1f}×), with the **same next token:
    {reuse["same next token"]}** (largest logit difference {reuse["max |logit difference|"]:.1e}: the same arithmetic in
    a different order).

    **What you should see.** *CPU and GPU:* at most the token ratio (prefix + suffix) ÷ suffix — and less,
    because the suffix still attends to the whole prefix and a short prefill pays fixed per-step costs; on a
    GPU a short suffix is latency-bound, so the ratio falls further below the token ratio.
    """)
    return


@app.cell
def _(kv_quant, loaded, mo):
    quality_profile, trained = kv_quant.quality_profile(loaded.profile)
    mo.md(f"""
    ## 5 · KV-cache quantization

    transformers' `QuantizedCache` stores keys and values in **fp8** (one scale per tensor), or in **4 and 2
    bits** (optimum-quanto: a scale and a zero point per group of 64 values; the newest 128 tokens stay in full
    precision until they are quantized, as in KIVI). Bytes of the real cache are measured
    (`helpers.memory.measured_cache_bytes`) against `helpers.memory.kv_cache_bytes`; quality is KL divergence
    and top-1 agreement against the full-precision cache (`helpers.quality`), on the evaluation text, with the
    profile **{quality_profile}**{"" if trained else " — **random weights: quality figures meaningless**"}.
    """)
    return quality_profile, trained


@app.cell
def _(kv_quant, loaded, model, pd, quality, tok):
    _ids = quality.eval_ids(tok, 300)
    kvq_bytes = pd.DataFrame(kv_quant.bytes_rows(model, loaded.spec, _ids, loaded.dtype))
    kvq_speed = pd.DataFrame(kv_quant.speed_rows(model, _ids))
    kvq_bytes.assign(**{"measured on": loaded.label})
    return kvq_bytes, kvq_speed


@app.cell
def _(kvq_speed, loaded):
    kvq_speed.assign(**{"measured on": loaded.label})
    return


@app.cell
def _(loaded, models, quality_profile):
    # the model the quality figures need (a trained one when helpers.models offers it), loaded once
    qloaded = loaded if quality_profile == loaded.profile else models.load(quality_profile, device=loaded.device)
    return (qloaded,)


@app.cell
def _(kv_quant, pd, qloaded, quality):
    kvq_quality = pd.DataFrame(kv_quant.quality_rows(
        qloaded.model, quality.eval_ids(qloaded.tokenizer, 400, profile=qloaded.profile)))
    kvq_quality.assign(**{"measured on": qloaded.label})
    return (kvq_quality,)


@app.cell
def _(figures, kvq_bytes, loaded):
    figures.bars_figure(list(kvq_bytes["scheme"]), list(kvq_bytes["measured bytes"] / 1e3), "KV cache (kB, 10³ bytes)",
                        f"KV cache of {int(kvq_bytes['tokens'].iloc[0])} tokens by scheme (measured)", loaded)
    return


@app.cell
def _(kv_quant, kvq_bytes, kvq_quality, memory, mo, trained):
    _missing = [s for s in kv_quant.SCHEMES if kv_quant.available(s)]
    if _missing:
        _out = mo.md(f"**Not measured here:** {', '.join(_missing)} — {kv_quant.available(_missing[0])}.")
    else:
        _b = kvq_bytes.set_index("scheme")
        _exact = bool((_b["measured bytes"] == _b["formula bytes (all parts)"]).all())
        _proj_tokens = 4096
        _proj = kv_quant.projected_shares("mistral-7b-v0.1", _proj_tokens, "bf16")
        _q = kvq_quality.set_index("scheme")
        _out = mo.md(f"""
        **Measured:** every scheme's cache matches the formula (`kv_quant.cache_bytes`: values, scales, residual)
        **{"to the byte" if _exact else "NOT exactly"}**. Besides the values: fp8 {_b.loc["fp8", "scales & zero points bytes"]:,} bytes of scales; 4 and 2 bits
        {_b.loc["4-bit", "scales & zero points bytes"]:,} bytes of scales and zero points plus
        {_b.loc["4-bit", "full-precision residual bytes"]:,} bytes of not-yet-quantized tokens. The whole cache is
        {_b.loc["fp8", "share of full precision"]:.0%}, {_b.loc["4-bit", "share of full precision"]:.0%} and
        {_b.loc["2-bit", "share of full precision"]:.0%} of full precision. Top-1 agreement with the full-precision
        cache: fp8 {_q.loc["fp8", "top-1 agreement"]:.0%}, 4-bit {_q.loc["4-bit", "top-1 agreement"]:.0%}, 2-bit
        {_q.loc["2-bit", "top-1 agreement"]:.0%}{"" if trained else " (random weights: near-ties flip the top token, so these mean little)"}.

        **What you should see.** *CPU, tiny:* bytes shrink as computed; speed barely moves (or worsens: the
        (de)quantization is not fused into attention); quality falls with the bits, 2-bit most. The shares
        above are of an fp32 cache. *GPU, Mistral 7B:* its bf16 cache ({memory.kv_bytes_per_token('mistral-7b-v0.1', 'bf16') / 1e3:.0f} kB per
        token) at {_proj_tokens:,} tokens would shrink to {_proj["fp8"]:.0%} (fp8), {_proj["4-bit"]:.0%} (4-bit) and
        {_proj["2-bit"]:.0%} (2-bit) — {1 / _proj["fp8"]:.1f}×, {1 / _proj["4-bit"]:.1f}× and {1 / _proj["2-bit"]:.1f}× the users or
        context (`kv_quant.projected_shares`: the same formula that matches the cache above to the byte, with
        the scales as wide as a bf16 cache keeps them, half the residual window in full precision); speed gains need fused kernels (vLLM's
        fp8 KV cache), not this reference path.
        """)
    _out
    return


@app.cell
def _(mo):
    mo.md("""
    ## 6 · Speculative decoding

    A cheap drafter proposes k tokens; the target checks all of them in **one** forward pass and keeps the
    longest prefix it agrees with, plus one token of its own — so the output is exactly the target's greedy
    output, on the same model as the quality figures above. Two drafters through transformers' assisted generation: a **draft model** (here the target's own
    first layers sharing its weights: no separately trained small model of this vocabulary is available
    offline) and **prompt lookup** (copy what followed the last n-gram earlier in the context). Counted,
    round by round: the tokens drafted and accepted, the target's forward passes. Two acceptance figures:
    the **acceptance rate** (accepted ÷ drafted: how much drafting was kept) and the **per-token
    acceptance α** (accepted ÷ checked: the target stops at the first rejection, so tokens drafted after
    it are never checked). Leviathan et al.'s model — each checked token accepted independently with
    probability α — expects (1 − α^(k+1)) ÷ (1 − α) tokens per target pass
    (`speculative.acceptance_model`).
    """)
    return


@app.cell
def _(pd, qloaded, quality, speculative, w):
    _text = quality.eval_ids(qloaded.tokenizer, 160, profile=qloaded.profile)
    _m = qloaded.model
    spec_rows = [speculative.speculate(_m, _text, w.decode_tokens, k=w.spec_k, draft_layers=w.draft_layers),
                 speculative.speculate(_m, _text, w.decode_tokens, k=w.spec_k, prompt_lookup=True)]
    spec_table = pd.DataFrame(spec_rows).assign(**{"measured on": qloaded.label})
    spec_context = len(_text) + w.decode_tokens // 2       # cached tokens at a typical draft step
    spec_table
    return spec_context, spec_table


@app.cell
def _(figures, qloaded, spec_table):
    figures.speculative_figure(spec_table.to_dict("records"), qloaded)
    return


@app.cell
def _(mo, qloaded, spec_context, spec_table, speculative, trained, w):
    _d, _p = spec_table.iloc[0], spec_table.iloc[1]
    _share = speculative.draft_step_share(qloaded.spec, w.draft_layers, spec_context, qloaded.dtype)
    _by_bytes = speculative.speedup_by_bytes(_d["tokens per target pass"], _d["mean drafted per drafting pass"], _share)
    _pass, _predicted = _by_bytes["pass cost (target steps)"], _by_bytes["predicted speed-up"]

    def _verdict(r):
        s = r["wall-clock speed-up"]
        return f"{s:.2f}× — {'faster' if s > 1 else 'slower than plain decoding'}"

    def _line(name, r):
        _e = r["expected tokens per pass (1−α^(k+1))/(1−α)"]
        return (f"- **{name}:** kept {r['acceptance rate (accepted ÷ drafted)']:.0%} of its drafted tokens; "
                f"α = {r['per-token acceptance α (accepted ÷ checked)']:.2f} per checked token; "
                f"{r['tokens per target pass']:.2f} tokens per target pass against {_e:.2f} expected at that α — "
                f"{speculative.fit_sentence(r['tokens per target pass'], _e)}. Wall clock {_verdict(r)}.")

    mo.md(f"""
    **Measured:**

    {_line("Draft model", _d)}
    {_line("Prompt lookup", _p)}

    Output identical to greedy: {bool(_d["identical to greedy"])} and {bool(_p["identical to greedy"])}.

    Each pass pays the drafter's steps too. The draft model is {w.draft_layers} of the target's
    {qloaded.model.config.num_hidden_layers} layers with the same {qloaded.model.config.vocab_size:,}-word output head: a
    draft step reads **{_share:.0%}** of what a target step reads (`speculative.draft_step_share`, from
    `helpers.stepcost`), so a pass — {_d["mean drafted per drafting pass"]:.1f} draft steps and one target step —
    costs about {_pass:.1f} target steps for its {_d["tokens per target pass"]:.2f} tokens: by bytes read, a
    speed-up of {_predicted:.2f}× (measured: {_d["wall-clock speed-up"]:.2f}×{"; lower, as every step also pays fixed costs the bytes do not count" if _d["wall-clock speed-up"] < _predicted else ""}){"" if trained else "; and with random weights the draft agrees with the target almost never (flat logits: near-ties)"}.
    Prompt lookup costs nothing to draft, and pays off when the output repeats the context.

    **What you should see.** *CPU, tiny (measured on tiny-trained):* both drafters above 1 token per pass — the
    trained model's first layers often agree with all of them — but only prompt lookup faster than plain
    decoding: the draft model's k steps cost nearly as much as the target's. *GPU, Mistral 7B:* the draft is the first quarter of its layers; trained weights agree
    far more often than random ones, but an early exit never trained to predict is a weak drafter, so prompt
    lookup often wins on repetitive text. Decoding is bound by reading the weights, so each accepted token is
    nearly free: with a separately trained small draft model, Leviathan et al. (ICML 2023) report 2–3×.
    """)
    return


@app.cell
def _(mo, notebook, speculative):
    _alpha, _ks = 0.6, (2, 4, 8)
    _e = [speculative.expected_tokens_per_pass(_alpha, _k) for _k in _ks]
    mo.vstack([
        mo.md("## Exercises"),
        notebook.exercise(1, "When does the KV cache stop paying on a GPU? Re-run section 1 with a longer prompt "
                          "(`quality.eval_ids(tok, 512)`). Which line moves, and why?", """
        The no-cache line: each step recomputes p + t tokens, so its time grows with the prompt; the cached step
        reads p + t cached tokens but computes one, and stays almost flat."""),
        notebook.exercise(2, "Static batching's waste. With `batching.padding_tokens(batch_reqs, k)` try k = 1, 4, "
                          "16. Why does the wasted share grow with k?", """
        A bigger batch pads to a longer longest prompt and waits for a longer longest answer; at k = 1 nothing is
        wasted but nothing is batched. Continuous batching gets the batch without the waste."""),
        notebook.exercise(3, f"Acceptance and k. With `speculative.expected_tokens_per_pass(alpha, k)`, compare "
                          f"α = {_alpha} at k = {', '.join(map(str, _ks))}. What limits a long draft?", f"""
        {", ".join(f"{_x:.2f}" for _x in _e)} tokens per pass: the chance that all k are accepted is α^k, so extra
        drafted tokens are mostly rejected, while each costs a draft step."""),
    ])
    return


@app.cell
def _(batch_table, fit, mo, notebook, on_off, prefix_hits, reuse, spec_table, started):
    _t = batch_table.set_index("mode")
    _best = spec_table.loc[spec_table["wall-clock speed-up"].idxmax()]
    _lossless = bool(spec_table["identical to greedy"].all())
    mo.md(f"""
    ## Takeaways

    - **The KV cache** turns quadratic work into linear: {on_off["tokens processed without cache"]:,} tokens run
      through the model without it, {on_off["tokens processed with cache"]:,} with;
      {"the same tokens out" if on_off["identical tokens"] else "**different tokens out** (near-ties)"}.
    - **Paging** stores what sequences hold, not what they might: {fit["ratio"]:.1f}× as many sequences fit in
      the same memory here.
    - **Continuous batching** fills freed slots at once: {_t.iloc[2]["speed-up (tokens/s)"]:.1f}× the throughput
      of serving one after another, against {_t.iloc[1]["speed-up (tokens/s)"]:.1f}× for static batches.
    - **Prefix caching** pays where prompts share prefixes — {prefix_hits["agentic"]["hit rate"]:.0%} of the agentic
      trace's prompt tokens, {prefix_hits["chat"]["hit rate"]:.0%} of the chat trace's — and a hit made the time
      to first token {notebook.speedup_phrase(reuse["TTFT ratio"])} here.
    - **KV-cache quantization** buys memory (users, context) at a quality cost to measure; speed needs fused kernels.
    - **Speculative decoding** {"kept the target's greedy output exactly" if _lossless else "changed the output here (near-ties)"}
      and pays only when drafts are cheap and often right: best here {_best["drafter"]},
      {_best["tokens per target pass"]:.2f} tokens per target pass, {notebook.speedup_phrase(_best["wall-clock speed-up"])}
      on the wall clock.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
