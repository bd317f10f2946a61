"""Notebook 09's tables: helpers.parallel's results with readable headers (made only here) and, against a
reference, the ratio with its below / at / above label. None raises on a value (zero, NaN, one sample).
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Iterable, Mapping

from ..formulas import regime
from .collectives import all_reduce_crossover_bytes, all_reduce_latency_s, all_reduce_s
from .disagg import Deployment
from .links import Link, get_link, links
from .offload import OffloadStep
from .plan import MoEStep, ParallelStep, TPScaling
from .tp_demo import TPRun

TP_COLUMNS = {"tp": "GPUs (tp)", "link": "link", "work_ms": "work ms", "all_reduce_ms": "all-reduces ms",
              "step_ms": "step ms", "communication_share": "communication share", "speed_up": "speed-up",
              "gain_over_previous": "gain over previous"}
PIPELINE_COLUMNS = {"tp": "tp", "pp": "pp", "micro_batches": "micro-batches", "gpus": "GPUs", "max_batch": "max batch",
                    "bubble_share": "bubble share", "communication_share": "communication share", "step_s": "step s",
                    "steady_step_s": "step s (pipeline full)", "tokens_per_s": "tokens/s",
                    "steady_tokens_per_s": "tokens/s (pipeline full)"}
MOE_COLUMNS = {"batch": "batch", "experts_touched": "experts touched", "experts_per_gpu": "experts per GPU, mean",
               "busiest_experts": "experts on the busiest GPU", "expert_read_ms": "expert reads ms, mean GPU",
               "busiest_read_ms": "expert reads ms, busiest GPU", "all_to_all_ms": "all-to-all ms",
               "all_to_all_share": "all-to-all share, mean GPU", "busiest_all_to_all_share": "all-to-all share, busiest GPU"}
OFFLOAD_COLUMNS = {"context": "context (tokens)", "kv_gb": "KV cache GB", "from_hbm_ms": "from HBM ms",
                   "over_pcie_ms": "over PCIe ms", "slower": "PCIe ÷ HBM time"}
DEPLOYMENT_COLUMNS = {"name": "deployment", "prefill_load": "prefill load", "decode_batch": "decode batch per GPU",
                      "ttft_ms": "TTFT ms", "itl_ms": "ITL ms", "longest_gap_ms": "longest gap ms",
                      "kv_send_ms": "KV transfer ms"}


def _frame(rows: Iterable[dict], columns: dict[str, str]):
    import pandas as pd

    return pd.DataFrame(list(rows), columns=list(columns)).rename(columns=columns)


def links_frame(gpus: Iterable[str]):
    """Each GPU's catalogued links: the source's figure, the bandwidth each way, one ring step's latency."""
    return _frame(({"gpu": lk.gpu, "link": lk.name, "scope": lk.scope,
                    "figure": f"{lk.figure:,g} {lk.unit}, {'each direction' if lk.direction == 'each' else 'both directions'}",
                    "each_way": lk.bandwidth / 1e9, "hop_us": lk.hop_latency_us}
                   for g in gpus for lk in links(g)),
                  {"gpu": "GPU", "link": "link", "scope": "scope", "figure": "source's figure",
                   "each_way": "GB/s each way", "hop_us": "hop latency µs"})


def all_reduce_frame(message_bytes: float, n: int, by_kind: Mapping[str, Link]):
    """One all-reduce on each link: its time, latency's share, the crossover message, ÷ the first link's."""
    times = {k: all_reduce_s(message_bytes, n, lk) for k, lk in by_kind.items()}
    first = next(iter(times.values()), float("nan"))
    return _frame(({"link": lk.label, "us": 1e6 * times[k],
                    "latency_share": regime.ratio(all_reduce_latency_s(n, lk), times[k]),
                    "crossover_mb": all_reduce_crossover_bytes(n, lk) / 1e6 if n > 1 else float("nan"),
                    "vs_first": regime.ratio(times[k], first)} for k, lk in by_kind.items()),
                  {"link": "link", "us": "all-reduce µs", "latency_share": "latency share",
                   "crossover_mb": "crossover MB", "vs_first": "time ÷ first link's"})


def scaling_frame(scaling: Mapping[str, list[TPScaling]]):
    """tp_scaling() per link kind (e.g. {"nvlink": …, "pcie": …}), one row per degree."""
    return _frame((asdict(r) for rows in scaling.values() for r in rows), TP_COLUMNS)


def pipeline_frame(steps: Iterable[ParallelStep]):
    """parallel_step() results, one row each: the bubble, the communication share, the step and tokens/s."""
    return _frame((s.to_dict() for s in steps), PIPELINE_COLUMNS)


def moe_frame(rows: Iterable[MoEStep]):
    """moe_rows(), one row per batch."""
    return _frame((asdict(r) for r in rows), MOE_COLUMNS)


def offload_frame(steps: Iterable[OffloadStep]):
    """offload_steps(), one row per context."""
    return _frame((asdict(s) for s in steps), OFFLOAD_COLUMNS)


def deployments_frame(rows: Iterable[Deployment], ttft_slo_s: float, itl_slo_s: float):
    """disagg.deployments() (ms), with TTFT ÷ its SLO and ITL ÷ its SLO, each labelled."""
    frame = _frame(({"name": d.name, "prefill_load": d.prefill_load, "decode_batch": d.decode_batch,
                     "ttft_ms": 1e3 * d.ttft_s, "itl_ms": 1e3 * d.itl_s, "longest_gap_ms": 1e3 * d.longest_gap_s,
                     "kv_send_ms": 1e3 * d.kv_send_s} for d in rows), DEPLOYMENT_COLUMNS)
    frame["TTFT SLO ms"], frame["ITL SLO ms"] = 1e3 * ttft_slo_s, 1e3 * itl_slo_s
    frame = regime.ratio_columns(frame, "TTFT ms", "TTFT SLO ms", "TTFT ÷ SLO")
    frame = regime.ratio_columns(frame, "ITL ms", "ITL SLO ms", "ITL ÷ SLO")
    return frame.drop(columns=["TTFT SLO ms", "ITL SLO ms"])


def tp_frame(run: TPRun):
    """The two-process run against one process: the logits, the all-reduces against the prediction, the link."""
    rows = [("largest |logit difference| against one process", run.max_abs_diff),
            ("largest |logit| (the scale)", run.logit_scale),
            ("that difference in fp32 ε × scale", run.diff_epsilons),
            ("same next token at every position", str(bool(run.same_argmax))),
            (f"{run.all_reduces} all-reduces of {run.message_bytes:,} B, measured ms", 1e3 * run.all_reduce_s),
            ("the same, predicted over the measured link ms", 1e3 * run.predicted_all_reduce_s),
            ("measured ÷ predicted", regime.ratio(run.all_reduce_s, run.predicted_all_reduce_s)),
            ("loopback latency µs (an all-reduce of one float)", 1e6 * run.link_latency_s),
            ("loopback GB/s each way (an all-reduce of 4 MiB)", run.link_bandwidth / 1e9),
            ("machine load per core while it ran", "unknown" if run.load_per_core is None else run.load_per_core)]
    return _frame(({"quantity": k, "value": v} for k, v in rows), {"quantity": "quantity", "value": "value"})


def tp_parts_frame(run: TPRun):
    """Where rank 0's forward went (ms; medians, so the parts add up only about), each ÷ one process's forward."""
    parts = [("one process: the whole model", run.single_forward_s), ("two processes: the forward", run.forward_s),
             ("  of which computing its shard", run.compute_s), ("  of which waiting for the other process", run.wait_s),
             (f"  of which in its {run.all_reduces} all-reduces", run.all_reduce_s),
             ("the shard alone, all-reduces switched off", run.compute_alone_s)]
    return _frame(({"part": k, "ms": 1e3 * v, "share": regime.ratio(v, run.single_forward_s)} for k, v in parts),
                  {"part": "part", "ms": "ms", "share": "÷ one process's forward"})


def tp_calls_frame(run: TPRun, gpu: str = "H100 SXM"):
    """One all-reduce of the model's message, measured three ways, predicted and computed over `gpu`'s NVLink,
    each ÷ the call alone in a loop."""
    n = max(run.all_reduces, 1)
    alone = run.message_all_reduce_s
    rows = [("inside the forward (per call), measured", run.all_reduce_s / n),
            ("alone, right after a matmul, measured", run.after_compute_all_reduce_s),
            ("alone, in a tight loop, measured", alone),
            ("predicted: latency + bytes ÷ bandwidth of the loopback", run.predicted_all_reduce_s / n),
            (f"computed: {run.world} {gpu}s over NVLink",
             all_reduce_s(run.message_bytes, run.world, get_link(gpu, "nvlink", run.world)))]
    return _frame(({"call": k, "us": 1e6 * v, "vs_alone": regime.ratio(v, alone)} for k, v in rows),
                  {"call": f"one all-reduce of {run.message_bytes:,} B", "us": "µs", "vs_alone": "÷ alone in a loop"})
