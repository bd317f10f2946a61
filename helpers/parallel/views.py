"""Notebook 09's tables: helpers.parallel's results under readable headers (made only here) and, against a
reference, the ratio with its below / at / above label. None raises on a value (zero, NaN, one sample).
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Iterable, Mapping

import pandas as pd

from ..formulas import regime
from .collectives import all_reduce_crossover_bytes, all_reduce_latency_s, all_reduce_s
from .links import Link, get_link, links
from .tp_demo import TPRun

# the headers of frame(): a result's fields, in the order shown
TP_COLUMNS = {"tp": "GPUs (tp)", "link": "link", "work_ms": "work ms", "all_reduce_ms": "all-reduces ms",
              "step_ms": "step ms", "communication_share": "communication share", "speed_up": "speed-up",
              "gain_over_previous": "gain over previous"}
PIPELINE_COLUMNS = {"tp": "tp", "pp": "pp", "micro_batches": "micro-batches", "gpus": "GPUs", "max_batch": "max batch",
                    "bubble_share": "bubble share", "communication_share": "communication share", "step_s": "step s",
                    "steady_step_s": "step s (pipeline full)", "tokens_per_s": "tokens/s",
                    "steady_tokens_per_s": "tokens/s (pipeline full)"}


def frame(rows: Iterable, columns: Mapping[str, str]) -> pd.DataFrame:
    """Results (dataclasses), one row each, under the headers `columns` gives their fields."""
    rows = [r.to_dict() if hasattr(r, "to_dict") else asdict(r) for r in rows]
    return pd.DataFrame(rows, columns=list(columns)).rename(columns=columns)


def links_frame(gpus: Iterable[str]) -> pd.DataFrame:
    """Each GPU's catalogued links: the source's figure, the bandwidth each way, one ring step's latency."""
    return pd.DataFrame([(lk.gpu, lk.name, lk.scope, f"{lk.figure:,g} {lk.unit}, "
                          f"{'each direction' if lk.direction == 'each' else 'both directions'}",
                          lk.bandwidth / 1e9, lk.hop_latency_us) for g in gpus for lk in links(g)],
                        columns=["GPU", "link", "scope", "source's figure", "GB/s each way", "hop latency µs"])


def all_reduce_frame(message_bytes: float, n: int, by_kind: Mapping[str, Link]) -> pd.DataFrame:
    """One all-reduce on each link: its time, latency's share, the crossover message, ÷ the first link's."""
    times = {k: all_reduce_s(message_bytes, n, lk) for k, lk in by_kind.items()}
    first = next(iter(times.values()), float("nan"))
    return pd.DataFrame([(lk.label, 1e6 * times[k], regime.ratio(all_reduce_latency_s(n, lk), times[k]),
                          all_reduce_crossover_bytes(n, lk) / 1e6 if n > 1 else float("nan"),
                          regime.ratio(times[k], first)) for k, lk in by_kind.items()],
                        columns=["link", "all-reduce µs", "latency share", "crossover MB", "time ÷ first link's"])


def deployments_frame(rows: Iterable, ttft_slo_s: float, itl_slo_s: float) -> pd.DataFrame:
    """disagg.deployments() (ms), with TTFT ÷ its SLO and ITL ÷ its SLO, each labelled."""
    table = pd.DataFrame([(d.name, d.prefill_load, d.decode_batch, 1e3 * d.ttft_s, 1e3 * d.itl_s, 1e3 * d.longest_gap_s,
                           1e3 * d.kv_send_s) for d in rows],
                         columns=["deployment", "prefill load", "decode batch per GPU", "TTFT ms", "ITL ms", "longest gap ms",
                                  "KV transfer ms"])
    table["TTFT SLO ms"], table["ITL SLO ms"] = 1e3 * ttft_slo_s, 1e3 * itl_slo_s
    table = regime.ratio_columns(table, "TTFT ms", "TTFT SLO ms", "TTFT ÷ SLO")
    return regime.ratio_columns(table, "ITL ms", "ITL SLO ms", "ITL ÷ SLO").drop(columns=["TTFT SLO ms", "ITL SLO ms"])


def tp_frame(run: TPRun) -> pd.DataFrame:
    """The two-process run against one process: the logits, the all-reduces against the prediction, the link."""
    return pd.DataFrame([
        ("largest |logit difference| against one process", run.max_abs_diff),
        ("largest |logit| (the scale)", run.logit_scale),
        ("that difference in fp32 ε × scale", run.diff_epsilons),
        ("same next token at every position", str(bool(run.same_argmax))),
        (f"{run.all_reduces} all-reduces of {run.message_bytes:,} B, measured ms", 1e3 * run.all_reduce_s),
        ("the same, predicted over the measured link ms", 1e3 * run.predicted_all_reduce_s),
        ("measured ÷ predicted", regime.ratio(run.all_reduce_s, run.predicted_all_reduce_s)),
        ("loopback latency µs (an all-reduce of one float)", 1e6 * run.link_latency_s),
        ("loopback GB/s each way (an all-reduce of 4 MiB)", run.link_bandwidth / 1e9),
        ("machine load per core while it ran", "unknown" if run.load_per_core is None else run.load_per_core)],
        columns=["quantity", "value"])


def tp_parts_frame(run: TPRun) -> pd.DataFrame:
    """Where rank 0's forward went (ms; medians, so the parts add up only about), each ÷ one process's forward."""
    parts = [("one process: the whole model", run.single_forward_s), ("two processes: the forward", run.forward_s),
             ("  of which computing its shard", run.compute_s), ("  of which waiting for the other process", run.wait_s),
             (f"  of which in its {run.all_reduces} all-reduces", run.all_reduce_s),
             ("the shard alone, all-reduces switched off", run.compute_alone_s)]
    return pd.DataFrame([(k, 1e3 * v, regime.ratio(v, run.single_forward_s)) for k, v in parts],
                        columns=["part", "ms", "÷ one process's forward"])


def tp_calls_frame(run: TPRun, gpu: str = "H100 SXM") -> pd.DataFrame:
    """One all-reduce of the model's message: measured three ways, predicted, computed over `gpu`'s NVLink."""
    alone, n = run.message_all_reduce_s, max(run.all_reduces, 1)
    calls = [("inside the forward (per call), measured", run.all_reduce_s / n),
             ("alone, right after a matmul, measured", run.after_compute_all_reduce_s),
             ("alone, in a tight loop, measured", alone),
             ("predicted: latency + bytes ÷ bandwidth of the loopback", run.predicted_all_reduce_s / n),
             (f"computed: {run.world} {gpu}s over NVLink",
              all_reduce_s(run.message_bytes, run.world, get_link(gpu, "nvlink", run.world)))]
    return pd.DataFrame([(k, 1e6 * v, regime.ratio(v, alone)) for k, v in calls],
                        columns=[f"one all-reduce of {run.message_bytes:,} B", "µs", "÷ alone in a loop"])
