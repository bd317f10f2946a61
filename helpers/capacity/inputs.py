"""The planner web app's inputs (notebook 04 under ``marimo run``), checked together: a bad value gives a
note next to the controls while the last good answer stays. The path box reads only regular ``*.json`` files
up to MAX_CONFIG_BYTES; whatever stops one from being read gives the same note, so the box does not tell
whether a path exists on the server.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..formulas.config_schema import MAX_CONFIG_BYTES, show
from ..formulas.specs import ALIASES, PRESETS, ModelSpec, get_spec, load_config, spec_from_config
from .. import checks
from .planner import check_context
from .ranking import rank

MAX_MIN_BATCH = 4096  # the notebook's "minimum batch" control stops there


def unreadable_note(text: str) -> str:
    return (f"cannot use {show(text, 80)} as a model: the box takes a preset name or the path of a Hugging Face "
            f"config file ending in .json, at most {MAX_CONFIG_BYTES / 1e6:g} MB, that this app can read")


def read_model(text: str) -> tuple[ModelSpec | None, str]:
    """(spec, "") for a preset name or a readable, valid JSON config file; (None, note) otherwise."""
    text = str(text).strip()
    if ALIASES.get(text.lower(), text.lower()) in PRESETS:
        return get_spec(text), ""
    if Path(text).suffix.lower() != ".json":
        return None, unreadable_note(text)
    try:
        name, cfg = load_config(text)
    except ValueError:  # whatever the reason: the same note
        return None, unreadable_note(text)
    try:
        return spec_from_config(cfg, name), ""
    except ValueError as exc:
        return None, str(exc)


@dataclass(frozen=True)
class PlannerInputs:
    """Every value the planner's cells read, checked together."""

    model: ModelSpec
    weights: str
    kv: str
    context: int
    slo_ms: float | None
    min_batch: int
    gpus: int

    def astuple(self) -> tuple:
        return (self.model, self.weights, self.kv, self.context, self.slo_ms, self.min_batch, self.gpus)

    def label(self) -> str:
        slo = f"SLO {self.slo_ms:g} ms" if self.slo_ms else "no SLO"
        return (f"{self.model.name}, weights {self.weights}, KV {self.kv}, {self.context:,} tokens, {slo}, "
                f"minimum batch {self.min_batch}, {self.gpus} GPU{'s' if self.gpus > 1 else ''}")


def check(path_text: str, preset: str, weights: str, kv: str, context, slo_ms, min_batch, gpus) -> PlannerInputs:
    """The controls' values as PlannerInputs, or ValueError saying what is wrong and what is allowed."""
    spec, note = read_model(path_text) if str(path_text or "").strip() else (get_spec(preset), "")
    if spec is None:
        raise ValueError(note)
    if min_batch is None:
        min_batch = 1
    if isinstance(min_batch, float) and min_batch.is_integer():       # the number box's 4.0
        min_batch = int(min_batch)
    min_batch = checks.count(min_batch, "minimum batch", maximum=MAX_MIN_BATCH)
    slo = checks.number(slo_ms, "SLO", positive=True, unit="ms per output token") if slo_ms else None
    if isinstance(gpus, str) and gpus.strip().isascii() and gpus.strip().isdigit():  # the dropdown's "1" … "8"
        gpus = int(gpus)
    gpus = checks.count(gpus, "GPU count")
    context = check_context(spec, context)
    rank(spec, weights, kv, context, slo_ms=slo, min_batch=min_batch, gpus=gpus)  # raises when it fits no GPU
    return PlannerInputs(spec, weights, kv, context, slo, min_batch, gpus)


class LastGood:
    """Keeps the last inputs that gave an answer. Create one per session (in a notebook cell: a module-level
    one would be shared by every visitor of the web app)."""

    def __init__(self, default: PlannerInputs | None = None):
        self.last = default or PlannerInputs(get_spec("mistral-7b-v0.1"), "bf16", "bf16", 4096, 10.0, 1, 1)

    def resolve(self, *values) -> tuple[PlannerInputs, str]:
        """(inputs to show, note): the new inputs and "" when they are good; else the last good ones and a
        note (markdown) saying what was wrong and what is shown instead. Arguments as for check()."""
        try:
            self.last = check(*values)
            return self.last, ""
        except (ValueError, TypeError, OverflowError) as exc:
            why = str(exc) if isinstance(exc, ValueError) else f"a value the planner cannot use ({exc})"
            return self.last, f"⚠️ **Cannot plan this:** {why}. Showing the last good answer: {self.last.label()}."
