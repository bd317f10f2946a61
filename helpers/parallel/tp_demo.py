"""Tensor parallelism for real: the tiny model's forward split over two processes on this machine (gloo over
127.0.0.1), its logits against the single-process model's, its all-reduces against the collectives model on
the loopback link measured the way a GPU link is (an all-reduce of 4 B: latency; of 4 MiB: bandwidth).

Each process keeps its share of every layer as Megatron-LM splits it (Shoeybi et al. 2019, arXiv:1909.08053,
§3): q/k/v and the MLP's gate/up by columns, the attention output and MLP down projections by rows, whose
partial outputs the processes add with one all-reduce each, two per layer. Embedding, norms and the output
head are replicated. Where the forward's time goes is measured: the shard's compute (also with the
communication switched off), the wait for the other process, the all-reduces, and one all-reduce of the
model's message timed alone and right after a matmul.
"""
from __future__ import annotations

import os
import socket
import statistics
import time
from dataclasses import dataclass

from .. import checks
from ..formulas import regime
from .collectives import all_reduce_s, bandwidth_from_all_reduce
from .links import custom_link

BIG_MESSAGE_BYTES = 4 * 2**20     # 4 MiB: bandwidth dominates
TINY_MESSAGE_BYTES = 4            # one float: latency dominates


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shard_model(model, rank: int, world: int, on_all_reduce=None) -> dict:
    """Keep this rank's share of every decoder layer and all-reduce the row-parallel outputs, calling
    on_all_reduce(wait_s, reduce_s) with the wait at a barrier first and the all-reduce apart. Returns the
    switch {"communicate": True}: False times the shard's compute alone (its outputs then partial sums)."""
    import torch
    import torch.distributed as dist

    cfg = model.config
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    nq, nkv, inter = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size
    for what, n in (("attention heads", nq), ("KV heads", nkv), ("MLP columns", inter)):
        if n % world:
            raise ValueError(f"tensor parallel over {world} processes needs the {n} {what} divisible by {world}")

    def rows(lin, start, stop):
        lin.weight = torch.nn.Parameter(lin.weight.data[start:stop].clone(), requires_grad=False)
        lin.out_features = stop - start

    def cols(lin, start, stop):
        lin.weight = torch.nn.Parameter(lin.weight.data[:, start:stop].clone(), requires_grad=False)
        lin.in_features = stop - start

    switch = {"communicate": True}

    def reduce_hook(_module, _inputs, output):
        if not switch["communicate"]:
            return output
        t0 = time.perf_counter()
        dist.barrier()                      # waiting for the other process, timed apart
        t1 = time.perf_counter()
        dist.all_reduce(output)
        if on_all_reduce is not None:
            on_all_reduce(t1 - t0, time.perf_counter() - t1)
        return output

    q, kv, mlp = nq // world * hd, nkv // world * hd, inter // world
    for layer in model.model.layers:
        a, m = layer.self_attn, layer.mlp
        rows(a.q_proj, rank * q, (rank + 1) * q)
        rows(a.k_proj, rank * kv, (rank + 1) * kv)
        rows(a.v_proj, rank * kv, (rank + 1) * kv)
        cols(a.o_proj, rank * q, (rank + 1) * q)
        rows(m.gate_proj, rank * mlp, (rank + 1) * mlp)
        rows(m.up_proj, rank * mlp, (rank + 1) * mlp)
        cols(m.down_proj, rank * mlp, (rank + 1) * mlp)
        a.o_proj.register_forward_hook(reduce_hook)
        m.down_proj.register_forward_hook(reduce_hook)
    return switch


def _time_all_reduce(nbytes: int, reps: int, before=None) -> float:
    """Median time of one all-reduce of `nbytes` (fp32) after a barrier, each after an untimed `before()`."""
    import torch
    import torch.distributed as dist

    x = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
    dist.all_reduce(x)                      # warm-up
    times = []
    for _ in range(reps):
        if before is not None:
            with torch.no_grad():
                before()
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(x)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _worker(rank: int, world: int, port: int, folder: str, ids, reps: int, queue) -> None:
    import torch
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        # rank 0 also keeps the whole model, timed in turn with the shards: one process's forward at the same
        # moment, on the same machine, with the same thread (the other rank waits meanwhile)
        whole = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval() if rank == 0 else None
        ids = torch.tensor(ids, dtype=torch.long)
        spent, waited = [], []
        switch = shard_model(model, rank, world, lambda w, r: (waited.append(w), spent.append(r)))
        med = statistics.median
        t = {"whole": [], "forward": [], "reduce": [], "wait": [], "alone": []}

        def timed(key: str, forward, sync: bool = True) -> None:
            if sync:
                dist.barrier()
            t0 = time.perf_counter()
            forward(ids)
            t[key].append(time.perf_counter() - t0)

        with torch.no_grad():
            logits = model(ids).logits      # warm-up, and the logits to compare
            for _ in range(reps):           # in turn: one process, the real forward, its compute alone
                dist.barrier()
                if whole is not None:       # rank 0's whole model, while the other rank waits
                    timed("whole", whole, sync=False)
                spent.clear(), waited.clear()
                timed("forward", model)
                t["reduce"].append(sum(spent)), t["wait"].append(sum(waited))
                switch["communicate"] = False
                timed("alone", model)
                switch["communicate"] = True
            hidden, head = torch.randn(ids.numel(), model.config.hidden_size), model.lm_head.weight
        nbytes = ids.numel() * model.config.hidden_size * 4
        tiny = _time_all_reduce(TINY_MESSAGE_BYTES, 4 * reps)
        big = _time_all_reduce(BIG_MESSAGE_BYTES, reps)
        message = _time_all_reduce(nbytes, 4 * reps)
        # the same call, each time right after the process computed (the output head's matmul): what a
        # call inside the forward meets, which a tight loop of calls does not
        after = _time_all_reduce(nbytes, 4 * reps, before=lambda: hidden @ head.T)
        queue.put((rank, {"logits": logits.numpy() if rank == 0 else None, "forward_s": med(t["forward"]),
                          "all_reduce_s": med(t["reduce"]), "calls": len(spent), "wait_s": med(t["wait"]),
                          "tiny_s": tiny, "big_s": big, "message_s": message, "after_compute_s": after,
                          "compute_alone_s": med(t["alone"]), "whole_s": med(t["whole"]) if t["whole"] else None,
                          "compute_s": med(f - r - w for f, r, w in zip(t["forward"], t["reduce"], t["wait"]))}))
        dist.destroy_process_group()
    except Exception as exc:  # reported by the parent, one line
        queue.put((rank, {"error": f"{type(exc).__name__}: {exc}"}))


@dataclass
class TPRun:
    """What the two-process run measured (seconds are medians over `reps` forwards)."""

    world: int
    tokens: int
    max_abs_diff: float          # largest |tensor-parallel logit − single-process logit|
    same_argmax: bool            # every position predicts the same next token
    forward_s: float             # one tensor-parallel forward (rank 0)
    single_forward_s: float      # the same forward in one process (rank 0, whole model, in turn with the shards)
    all_reduce_s: float          # time inside the all-reduces of one forward (rank 0), after the barrier
    wait_s: float                # time waiting at the barrier before them (the other process lagging)
    all_reduces: int             # per forward: 2 per layer
    message_bytes: int           # one all-reduce's message: tokens × hidden × 4 B (fp32)
    link_latency_s: float        # measured: an all-reduce of one float
    link_bandwidth: float        # measured: B/s one way, from an all-reduce of 4 MiB
    predicted_all_reduce_s: float  # all_reduces × all_reduce_s(message, world, measured link)
    compute_s: float = float("nan")            # rank 0's forward less its waiting and all-reduces: the shard's compute
    compute_alone_s: float = float("nan")      # rank 0's forward with the all-reduces switched off (a cross-check)
    message_all_reduce_s: float = float("nan")  # one all-reduce of message_bytes timed on its own (after a barrier)
    after_compute_all_reduce_s: float = float("nan")  # the same, each right after the output head's matmul
    load_per_core: float | None = None         # the machine's 1-minute load average ÷ its cores, when it ran
    logit_scale: float = float("nan")          # largest |single-process logit|: the scale fp32 rounds at

    @property
    def diff_epsilons(self) -> float:
        """The largest logit difference in units of fp32 rounding at the logits' scale (regime.epsilons)."""
        return regime.epsilons(self.max_abs_diff, self.logit_scale, "fp32")


def run_tp(world: int = 2, tokens: int = 32, reps: int = 5, seed: int = 0, timeout_s: float = 120.0) -> TPRun:
    """Run the tiny model's forward over `tokens` tokens in `world` processes and in this one."""
    import multiprocessing as mp

    import torch
    from transformers import AutoModelForCausalLM

    from ..measure.local_models import build_tiny

    world, tokens, reps = checks.count(world, "world"), checks.count(tokens, "tokens"), checks.count(reps, "reps")
    if world < 2:
        raise ValueError(f"tensor parallelism needs at least 2 processes, got world={world}")
    from transformers.utils import logging as hf_logging

    folder = str(build_tiny())
    hf_logging.disable_progress_bar()
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, model.config.vocab_size, (1, tokens), generator=g)
    with torch.no_grad():
        ref = model(ids).logits        # the reference logits; one process's time is taken by rank 0, in turn
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, folder, ids.tolist(), reps, queue), daemon=True)
             for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    try:
        for _ in range(world):
            rank, res = queue.get(timeout=timeout_s)
            results[rank] = res
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
    errors = [r["error"] for r in results.values() if "error" in r]
    if errors:
        raise RuntimeError(f"tensor-parallel worker failed: {errors[0]}")
    r0 = results[0]
    hidden = model.config.hidden_size
    message = tokens * hidden * 4
    hop = r0["tiny_s"] / (2 * (world - 1))
    bandwidth = bandwidth_from_all_reduce(BIG_MESSAGE_BYTES, world, r0["big_s"], r0["tiny_s"])
    link = custom_link("loopback (gloo, 127.0.0.1)", bandwidth, hop)
    predicted = r0["calls"] * all_reduce_s(message, world, link, base_s=0.0)
    tp_logits = torch.from_numpy(r0["logits"])
    diff = (tp_logits - ref).abs().max().item()
    same = bool((tp_logits.argmax(-1) == ref.argmax(-1)).all())
    load = os.getloadavg()[0] / (os.cpu_count() or 1) if hasattr(os, "getloadavg") else None   # none on Windows
    return TPRun(world, tokens, diff, same, r0["forward_s"], r0["whole_s"], r0["all_reduce_s"], r0["wait_s"],
                 r0["calls"], message, r0["tiny_s"], bandwidth, predicted, r0["compute_s"], r0["compute_alone_s"],
                 r0["message_s"], r0["after_compute_s"], load, ref.abs().max().item())
