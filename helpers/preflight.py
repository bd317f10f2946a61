"""Preflight (notebook 00): this machine, the profile that will run and why, library versions, memory, the
weights, and go/no-go per notebook. It loads the model as the notebooks do (``models.load()``), so a setting
they refuse is refused here too, with the same message and its fix.
"""
from __future__ import annotations

import ast
import difflib
import importlib.util
import os
import time
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from . import env
from .formulas.units import fmt_bytes
from .measure import training
from .measure.hardware import device_info, pick_device
from .measure.local_models import cache_dir
from .measure.models import ProfileUnavailable, env_dtype, hub_model_id, load, resolve_profile, weights_status
from .versions import library_versions

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"

# What each notebook needs beyond the profile's model; notebooks not listed need only the model.
NEEDS: dict[str, tuple[str, ...]] = {
    "00": (),
    "04": ("no-model",),
    "06": ("own-models",),   # builds its own tiny attention variants on the CPU, whatever the profile
    "05": ("bitsandbytes",),
    "08": ("server",),
    "09": ("own-models",),   # its one model is the tiny one its two-process run builds, whatever the profile
}


@dataclass
class ModelCheck:
    ok: bool
    profile: str
    seconds: float
    message: str


def check_model(profile: str | None = None, device: str | None = None) -> ModelCheck:
    """Load the profile's model (default: what every notebook loads) and run one forward pass; report, never raise."""
    t0 = time.perf_counter()
    try:
        import torch

        loaded = load(profile, device)
        ids = loaded.tokenizer("Preflight check.", return_tensors="pt")["input_ids"].to(loaded.device)
        with torch.inference_mode():
            loaded.model(input_ids=ids)
        return ModelCheck(True, loaded.profile, time.perf_counter() - t0, f"{loaded.label}: loaded and ran a forward pass")
    except Exception as exc:  # noqa: BLE001 - reported in the table; what load() refuses, word for word
        words = str(exc) if isinstance(exc, (ProfileUnavailable, ValueError)) else f"{type(exc).__name__}: {exc}"
        return ModelCheck(False, profile or "auto", time.perf_counter() - t0, words)


def notebooks(folder: Path = NOTEBOOK_DIR) -> list[tuple[str, str]]:
    """(number, file name) of every numbered marimo notebook."""
    return [(path.name[:2], path.name) for path in sorted(folder.glob("[0-9][0-9]_*.py"))]


def go_no_go(model_ok: bool, versions: dict[str, str], device: str, folder: Path = NOTEBOOK_DIR) -> list[dict]:
    """One row per notebook: go or no-go, and why."""
    rows = []
    for number, name in notebooks(folder):
        needs = set(NEEDS.get(number, ("model",)))
        why = []
        if "server" in needs and not all(importlib.util.find_spec(m) for m in ("fastapi", "uvicorn")):
            why.append("`transformers serve` needs the transformers[serving] extra (pip install 'transformers[serving]')")
        if {"model", "bitsandbytes", "server"} & needs and not model_ok:
            why.append("the profile's model does not load (see above)")
        if "bitsandbytes" in needs and versions.get("bitsandbytes", "").startswith("missing"):
            why.append("bitsandbytes is not installed")
        verdict = "no-go" if why else "go"
        if "server" in needs and device != "cuda":
            why.append("transformers serve on this CPU; vLLM and SGLang need a CUDA GPU")
        if "own-models" in needs:
            why.append("builds its own small models on the CPU, whatever the profile")
        if "no-model" in needs:
            why.append("the planner needs no model" + ("" if model_ok else
                       "; its last section, predicted against measured, shows a note instead"))
        rows.append({"notebook": name, "verdict": verdict, "why": "; ".join(why) or "ready"})
    return rows


def split_fix(message: str) -> tuple[str, str | None]:
    """(what is wrong, the fix from 'Fix:' on, or None) of a weights message: notebook 00 shows the fix whole."""
    head, sep, fix = message.partition("Fix:")
    return (head.strip(), fix.strip()) if sep else (message.strip(), None)


@dataclass(frozen=True)
class Control:
    """A notebook control's `env_default(name, default, allowed or lo=…, hi=…)`; allowed None: computed from data."""

    notebook: str
    name: str
    default: object
    allowed: object = None
    lo: float | None = None
    hi: float | None = None


_UNKNOWN = object()
_BUILDS = {"range": range, "list": list, "tuple": tuple}


def _static(node: ast.AST, names: dict):
    """The value of a literal, of range/list/tuple over literals, or of a name bound to one; else _UNKNOWN."""
    if isinstance(node, ast.Name):
        return names.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in _BUILDS and not node.keywords:
        args = [_static(a, names) for a in node.args]
        return _UNKNOWN if _UNKNOWN in args else _BUILDS[node.func.id](*args)
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNKNOWN


def controls(folder: Path = NOTEBOOK_DIR) -> list[Control]:
    """Every notebook control read from the environment: the `env_default` calls in the notebooks' source."""
    out = []
    for number, name in notebooks(folder):
        cells = ast.parse((folder / name).read_text(encoding="utf-8")).body
        for cell in (c for c in cells if isinstance(c, ast.FunctionDef)):
            names = {t.targets[0].id: _static(t.value, {}) for t in cell.body
                     if isinstance(t, ast.Assign) and len(t.targets) == 1 and isinstance(t.targets[0], ast.Name)}
            for call in ast.walk(cell):
                func = getattr(call, "func", None)
                if isinstance(call, ast.Call) and getattr(func, "attr", getattr(func, "id", None)) == "env_default":
                    args = [_static(a, names) for a in call.args] + [_UNKNOWN, None]
                    kw = {k.arg: _static(k.value, names) for k in call.keywords}
                    default, allowed = args[1], None if args[2] is _UNKNOWN else args[2]
                    if default is _UNKNOWN:     # computed by the notebook: the kind its options have
                        default = next(iter(allowed), None) if allowed is not None else None
                    out.append(Control(number, args[0], default, allowed, kw.get("lo"), kw.get("hi")))
    return out


def _refusal(read) -> str | None:
    """What `read()` refuses with (a ValueError's line), or None."""
    try:
        read()
    except ValueError as exc:
        return str(exc)
    return None


def setting_problems(folder: Path = NOTEBOOK_DIR) -> list[str]:
    """A line per WORKSHOP_* variable set here that its reader refuses (in its words), then per one nothing reads."""
    readers = (pick_device, lambda: resolve_profile(device="cpu"), env_dtype, hub_model_id, cache_dir,
               lambda: env.flag("WORKSHOP_COMPILE"), lambda: env.flag("WORKSHOP_BENCH_COMPILE"),
               lambda: env.folder("WORKSHOP_FIGURES_DIR"), lambda: env.folder("WORKSHOP_REPLAY_RECORD"),
               env.cell_timeout, lambda: env.url("WORKSHOP_REPO_URL"))
    problems = [p for p in map(_refusal, readers) if p]
    found = controls(folder)
    problems += [f"{p} (notebook {c.notebook})" for c in found
                 if (c.allowed is not None or None not in (c.lo, c.hi)) and env.text(c.name) is not None
                 and (p := _refusal(lambda: env.control(c.name, c.default, c.allowed, lo=c.lo, hi=c.hi)))]
    known = set(env.VARIABLES) | {c.name for c in found}
    # helpers installed without the notebooks (pip on Colab): the controls are unknown, so none is called unread
    for name in sorted(k for k in os.environ if k.startswith("WORKSHOP_") and k not in known) if found else ():
        close = difflib.get_close_matches(name, sorted(known), n=1)
        problems.append(f"{name} is set but the workshop reads no such variable"
                        + (f"; did you mean {close[0]}?" if close else "")
                        + " Fix: unset it, or use a variable helpers.env.VARIABLES or a notebook control names")
    return list(dict.fromkeys(problems))


def summary() -> dict:
    """Everything notebook 00 shows, as data; it always answers (a refused setting listed under ``problems``)."""
    refused = _refusal(pick_device) is not None
    dev = pick_device("auto") if refused else pick_device()
    try:
        profile, reason = resolve_profile(device=dev)
    except ValueError:
        profile, refused = "none", True
    if refused:
        reason = "a setting is refused (below): the notebooks that load a model stop with the same message"
    try:
        status = weights_status(probe_hub=(dev == "cuda"), timeout=5)
        weights, available, where = status.message, status.available, status.where
    except ValueError as exc:  # WORKSHOP_MODEL_ID refused (listed in problems)
        weights, available, where = str(exc), False, None
    if not available and dev != "cuda":
        weights += " No CUDA GPU here, so no profile needs these weights on this machine."
    return {"device": device_info(dev).to_dict(), "profile": profile, "reason": reason,
            "weights": {"available": available, "where": where, "message": weights},
            "versions": library_versions(), "problems": setting_problems()}


def training_time() -> dict | None:
    """{"seconds", "threads"} of training `tiny-trained` here, from its log; None before, or with a refused cache."""
    try:    # not trained yet (no log), or a refused WORKSHOP_CACHE (listed under problems)
        log = training.log(training.trained_folder())
    except (ValueError, FileNotFoundError):
        return None
    return {"seconds": float(log["train_wall_s"]), "threads": int(log["torch_threads"])}


def machine_rows(info: dict, trained: dict | None = None) -> list[dict]:
    """Notebook 00's machine table from summary()'s dict and training_time()'s ("–" where unknown)."""
    dev = info["device"]
    rows = {"device": f"{dev['kind']}: {dev['name']}",
            "memory (total)": dev.get("total_memory") and fmt_bytes(dev["total_memory"]),
            "memory (free now)": dev.get("free_memory") and fmt_bytes(dev["free_memory"]),
            "CPU threads / CUDA SMs": dev.get("cores") and str(dev["cores"]), "CUDA capability": dev.get("capability"),
            "profile": info["profile"], "tiny-trained: training here, once":
                trained and f"{trained['seconds']:,.0f} s on {trained['threads']} threads"}
    return [{"what": k, "this machine": v or "–"} for k, v in rows.items()]


def go_no_go_rows(model_ok: bool, versions: dict[str, str], device: str, folder: Path = NOTEBOOK_DIR) -> list[dict]:
    """go_no_go here, beside what the same rules give on a CUDA GPU with a model that loads."""
    cuda = {r["notebook"]: r["verdict"] for r in go_no_go(True, versions, "cuda", folder)}
    return [{"notebook": r["notebook"], "here": r["verdict"], "why": r["why"],
             "on a CUDA GPU (computed)": cuda[r["notebook"]]}
            for r in go_no_go(model_ok, versions, device, folder)]


def profile_refusal(value: str) -> str | None:
    """What ``resolve_profile`` raises for WORKSHOP_PROFILE=`value` (every notebook's stop), or None."""
    with mock.patch.dict(os.environ, {"WORKSHOP_PROFILE": value}):
        return _refusal(lambda: resolve_profile(device="cpu"))


def notes(info: dict) -> list[str]:
    """Notebook 00's lines under its machine table (markdown): refused settings, why this profile, the weights."""
    weights, fix = split_fix(info["weights"]["message"])
    lines = [f"⛔ **Setting refused:** {p}" for p in info["problems"]]
    lines += [f"**Why this profile:** {info['reason']}", f"**Mistral 7B weights:** {weights}"]
    if fix:
        lines += [f"**The fix, whole:** {fix}",
                  "Nothing else needs them: every notebook runs on the tiny profile, and `mistral-7b-random` "
                  "measures the full-size architecture on a GPU without a download."]
    return lines
