"""Tables of notebook 09 (beyond one GPU): the results of helpers.parallel.plan and helpers.parallel.sim
as DataFrames with readable headers — the only place their labels are made; the notebook reads the
results themselves by attribute.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Iterable, Mapping

from .offload import OffloadStep
from .plan import MoEStep, ParallelStep, TPScaling
from .sim import Summary

TP_COLUMNS = {"tp": "GPUs (tp)", "link": "link", "work_ms": "work ms", "all_reduce_ms": "all-reduces ms",
              "step_ms": "step ms", "communication_share": "communication share", "speed_up": "speed-up",
              "gain_over_previous": "gain over previous"}
PIPELINE_COLUMNS = {"tp": "tp", "pp": "pp", "micro_batches": "micro-batches", "gpus": "GPUs", "max_batch": "max batch",
                    "bubble_share": "bubble share", "communication_share": "communication share", "step_s": "step s",
                    "steady_step_s": "step s (pipeline full)", "tokens_per_s": "tokens/s",
                    "steady_tokens_per_s": "tokens/s (pipeline full)"}
MOE_COLUMNS = {"batch": "batch", "experts_touched": "experts touched", "expert_gb_read_per_gpu": "expert GB read per GPU",
               "expert_read_ms": "expert reads ms", "all_to_all_ms": "all-to-all ms",
               "all_to_all_share": "all-to-all share"}
OFFLOAD_COLUMNS = {"context": "context (tokens)", "kv_gb": "KV cache GB", "from_hbm_ms": "from HBM ms",
                   "over_pcie_ms": "over PCIe ms", "slower": "PCIe slower (×)"}
SIM_COLUMNS = {"deployment": "deployment", "requests": "requests", "ttft_p50_s": "TTFT p50 s", "ttft_p90_s": "TTFT p90 s",
               "itl_p50_s": "ITL p50 s", "itl_p90_s": "ITL p90 s", "slo_attainment": "SLO attainment",
               "goodput_rps": "goodput (requests/s)", "makespan_s": "makespan s"}


def _frame(rows: Iterable[dict], columns: dict[str, str]):
    import pandas as pd

    return pd.DataFrame(list(rows), columns=list(columns)).rename(columns=columns)


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


def deployments_frame(by_rate: Mapping[float, list[Summary]]):
    """sim.compare() per arrival rate, one row per deployment, the rate first."""
    columns = {"rate": "arrivals per s", **SIM_COLUMNS}
    return _frame(({"rate": rate, **asdict(r)} for rate, rows in by_rate.items() for r in rows), columns)
