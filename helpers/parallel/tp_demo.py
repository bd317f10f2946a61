"""Tensor parallelism for real: the tiny model's forward split over two processes on this machine (gloo over
127.0.0.1), its logits against the single-process model's, its all-reduces against the collectives model on
the loopback link measured the way a GPU link is (an all-reduce of 4 B: latency; of 4 MiB: bandwidth).

Each process keeps its share of every layer as Megatron-LM splits it (Shoeybi et al. 2019, arXiv:1909.08053,
§3): q/k/v and the MLP's gate/up by columns, the attention output and MLP down projections by rows, whose
partial outputs the processes add with one all-reduce each, two per layer. Embedding, norms and the output
head are replicated. Rank 0 also runs the whole model, in turn with the shards: the reference logits and time.
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from statistics import median

from ..formulas import regime
from .collectives import all_reduce_s, bandwidth_from_all_reduce
from .links import custom_link

BIG_MESSAGE_BYTES = 4 * 2**20     # 4 MiB: bandwidth dominates
TINY_MESSAGE_BYTES = 4            # one float: latency dominates


def shard_model(model, rank: int, world: int) -> dict:
    """Keep this rank's share of every decoder layer and all-reduce the row-parallel outputs. Returns the state its
    hooks note each all-reduce in (the wait at a barrier first, then the call); "communicate" False times the
    shard's compute alone (its outputs then partial sums)."""
    import torch
    import torch.distributed as dist

    cfg = model.config
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    q, kv, mlp = (n // world for n in (cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd, cfg.intermediate_size))
    state = {"communicate": True, "waits": [], "reduces": []}

    def reduce_hook(_module, _inputs, output):
        if state["communicate"]:
            t0 = time.perf_counter()
            dist.barrier()                  # waiting for the other process, timed apart
            t1 = time.perf_counter()
            dist.all_reduce(output)
            state["waits"].append(t1 - t0), state["reduces"].append(time.perf_counter() - t1)
        return output

    for layer in model.model.layers:
        a, m = layer.self_attn, layer.mlp
        for lin, n, dim in ((a.q_proj, q, 0), (a.k_proj, kv, 0), (a.v_proj, kv, 0), (a.o_proj, q, 1),
                            (m.gate_proj, mlp, 0), (m.up_proj, mlp, 0), (m.down_proj, mlp, 1)):
            part = lin.weight.data.narrow(dim, rank * n, n).clone()   # dim 0: output rows (a column split)
            lin.weight = torch.nn.Parameter(part, requires_grad=False)
            lin.out_features, lin.in_features = part.shape
        a.o_proj.register_forward_hook(reduce_hook)
        m.down_proj.register_forward_hook(reduce_hook)
    return state


def _time_all_reduce(nbytes: int, reps: int, before=lambda: None) -> float:
    """Median time of one all-reduce of `nbytes` (fp32) after a barrier, each after an untimed `before()`."""
    import torch
    import torch.distributed as dist

    x = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
    dist.all_reduce(x)                      # warm-up
    times = []
    for _ in range(reps):
        with torch.no_grad():
            before()
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(x)
        times.append(time.perf_counter() - t0)
    return median(times)


def _worker(rank: int, world: int, port: int, folder: str, tokens: int, seed: int, reps: int, queue) -> None:
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
        ids = torch.randint(3, model.config.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(seed))
        state = shard_model(model, rank, world)
        t = {"whole": [], "forward": [], "reduce": [], "wait": [], "alone": []}
        with torch.no_grad():
            logits = model(ids).logits      # warm-up, and the logits to compare
            for _ in range(reps):           # in turn: one process (rank 0), the real forward, its compute alone
                for key, forward in (("whole", whole), ("forward", model), ("alone", model)):
                    dist.barrier()
                    state["communicate"] = key == "forward"
                    if key == "forward":
                        state["waits"].clear(), state["reduces"].clear()
                    if forward is not None:     # the other rank waits at the next barrier meanwhile
                        t0 = time.perf_counter()
                        forward(ids)
                        t[key].append(time.perf_counter() - t0)
                t["reduce"].append(sum(state["reduces"])), t["wait"].append(sum(state["waits"]))   # the forward's
            hidden, head = torch.randn(ids.numel(), model.config.hidden_size), model.lm_head.weight
            ref = whole(ids).logits if whole is not None else logits    # one process's: what the shards must give
        nbytes = ids.numel() * model.config.hidden_size * 4
        queue.put((rank, {
            "max_abs_diff": (logits - ref).abs().max().item(), "logit_scale": ref.abs().max().item(),
            "same_argmax": bool((logits.argmax(-1) == ref.argmax(-1)).all()), "message_bytes": nbytes,
            "forward_s": median(t["forward"]), "all_reduce_s": median(t["reduce"]), "calls": len(state["reduces"]),
            "wait_s": median(t["wait"]),
            "tiny_s": _time_all_reduce(TINY_MESSAGE_BYTES, 4 * reps), "big_s": _time_all_reduce(BIG_MESSAGE_BYTES, reps),
            "message_s": _time_all_reduce(nbytes, 4 * reps),
            # the same call, each time right after the process computed (the output head's matmul): what a
            # call inside the forward meets, which a tight loop of calls does not
            "after_compute_s": _time_all_reduce(nbytes, 4 * reps, before=lambda: hidden @ head.T),
            "compute_alone_s": median(t["alone"]), "whole_s": median(t["whole"]) if t["whole"] else None,
            "compute_s": median(f - r - w for f, r, w in zip(t["forward"], t["reduce"], t["wait"]))}))
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
    """Run the tiny model's forward over `tokens` tokens in `world` processes, rank 0 also in one."""
    import multiprocessing as mp

    from ..measure.local_models import build_tiny

    if world < 2:
        raise ValueError(f"tensor parallelism needs at least 2 processes, got world={world}")
    folder = str(build_tiny())
    with socket.socket() as s:         # a free port for the processes to meet at
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, world, port, folder, tokens, seed, reps, queue), daemon=True)
             for r in range(world)]
    for p in procs:
        p.start()
    try:
        results = dict(queue.get(timeout=timeout_s) for _ in range(world))
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
    if errors := [r["error"] for r in results.values() if "error" in r]:
        raise RuntimeError(f"tensor-parallel worker failed: {errors[0]}")
    r0 = results[0]
    bandwidth = bandwidth_from_all_reduce(BIG_MESSAGE_BYTES, world, r0["big_s"], r0["tiny_s"])
    link = custom_link("loopback (gloo, 127.0.0.1)", bandwidth, r0["tiny_s"] / (2 * (world - 1)))
    load = os.getloadavg()[0] / (os.cpu_count() or 1) if hasattr(os, "getloadavg") else None   # none on Windows
    return TPRun(world, tokens, r0["max_abs_diff"], r0["same_argmax"], r0["forward_s"], r0["whole_s"], r0["all_reduce_s"],
                 r0["wait_s"], r0["calls"], r0["message_bytes"], r0["tiny_s"], bandwidth,
                 r0["calls"] * all_reduce_s(r0["message_bytes"], world, link, base_s=0.0), r0["compute_s"],
                 r0["compute_alone_s"], r0["message_s"], r0["after_compute_s"], load, r0["logit_scale"])
