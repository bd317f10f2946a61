"""Preflight: what this machine is, which profile will run and why, library versions, memory,
whether the weights are present, and a go/no-go line for each notebook.

It predicts what the notebooks do: it loads the model exactly as they do (``models.load()`` with the
environment's WORKSHOP_PROFILE and WORKSHOP_DEVICE), so a setting the notebooks refuse is refused here
too, with the same message and its fix — never "ignored" here and fatal there.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import re
import time
from dataclasses import dataclass
from pathlib import Path

from .measure.hardware import device_info, pick_device
from .measure.models import resolve_profile, weights_status

LIBRARIES = ("torch", "transformers", "accelerate", "bitsandbytes", "mistral_common", "marimo",
             "pandas", "matplotlib", "numpy", "huggingface_hub")

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"

# What each notebook needs beyond the profile's model; notebooks not listed need only the model.
NEEDS: dict[str, tuple[str, ...]] = {
    "00": (),
    "04": ("no-model",),
    "06": ("own-models",),   # builds its own tiny attention variants on the CPU, whatever the profile
    "05": ("bitsandbytes",),
    "08": ("server",),
}


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            mod = importlib.import_module(name)
            out[name] = getattr(mod, "__version__", "installed")
        except Exception as exc:  # noqa: BLE001 - a broken import is a finding, not a crash
            out[name] = f"missing ({type(exc).__name__})"
    return out


@dataclass
class ModelCheck:
    ok: bool
    profile: str
    seconds: float
    message: str


def check_model(profile: str | None = None, device: str | None = None) -> ModelCheck:
    """Load the profile's model and run one forward pass; report instead of raising. Without arguments
    it loads what every notebook loads (``models.load()``, from the environment's settings)."""
    from .measure.models import ProfileUnavailable, load

    t0 = time.perf_counter()
    try:
        import torch

        loaded = load(profile, device)
        ids = loaded.tokenizer("Preflight check.", return_tensors="pt")["input_ids"].to(loaded.device)
        with torch.inference_mode():
            loaded.model(input_ids=ids)
        msg = f"{loaded.label}: loaded and ran a forward pass"
        name = loaded.profile
        del loaded
        return ModelCheck(True, name, time.perf_counter() - t0, msg)
    except (ProfileUnavailable, ValueError) as exc:  # what the notebooks' load() raises, word for word
        return ModelCheck(False, profile or "auto", time.perf_counter() - t0, str(exc))
    except Exception as exc:  # noqa: BLE001 - reported in the table
        return ModelCheck(False, profile or "auto", time.perf_counter() - t0, f"{type(exc).__name__}: {exc}")


def notebooks(folder: Path = NOTEBOOK_DIR) -> list[tuple[str, str]]:
    """(number, file name) of every numbered marimo notebook."""
    out = []
    for path in sorted(folder.glob("[0-9][0-9]_*.py")):
        out.append((path.name[:2], path.name))
    return out


def go_no_go(model_ok: bool, versions: dict[str, str], device: str, folder: Path = NOTEBOOK_DIR) -> list[dict]:
    """One row per notebook: go or no-go, and why."""
    rows = []
    for number, name in notebooks(folder):
        needs = NEEDS.get(number, ("model",))
        verdict, why = "go", []
        if "model" in needs or "bitsandbytes" in needs:
            if not model_ok:
                verdict = "no-go"
                why.append("the profile's model does not load (see above)")
        if "bitsandbytes" in needs and versions.get("bitsandbytes", "").startswith("missing"):
            verdict = "no-go"
            why.append("bitsandbytes is not installed")
        if "server" in needs:
            if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
                verdict = "no-go"
                why.append("`transformers serve` needs the transformers[serving] extra (pip install 'transformers[serving]')")
            if not model_ok:
                verdict = "no-go"
                why.append("the profile's model does not load (see above)")
            if device != "cuda":
                why.append("transformers serve on this CPU; vLLM and SGLang need a CUDA GPU")
        if "own-models" in needs:
            why.append("builds its own small models on the CPU, whatever the profile")
        if "no-model" in needs:
            why.append("the planner needs no model" + ("" if model_ok else
                       "; its last section, predicted against measured, shows a note instead"))
        title = re.sub(r"^\d\d_", "", name[:-3]).replace("_", " ")
        rows.append({"notebook": name, "topic": title, "verdict": verdict, "why": "; ".join(why) or "ready"})
    return rows


def split_fix(message: str) -> tuple[str, str | None]:
    """(what is wrong, the fix) of a weights message: the fix is everything from 'Fix:' on, shown whole
    by notebook 00 rather than cut off in a table cell; (message, None) when there is no fix."""
    head, sep, fix = message.partition("Fix:")
    return (head.strip(), fix.strip()) if sep else (message.strip(), None)


def summary() -> dict:
    """Everything the preflight notebook shows, as plain data; it always answers.

    A WORKSHOP_DEVICE or WORKSHOP_PROFILE that ``models.load()`` refuses is listed in ``problems`` with
    load()'s own message (the notebooks stop on it, and check_model() reports it); the machine is still
    described, as auto would see it.
    """
    problems = []
    try:
        dev = pick_device()
    except ValueError as exc:
        problems.append(str(exc))
        dev = pick_device("auto")
    info = device_info(dev)
    try:
        profile, reason = resolve_profile(device=dev)
    except ValueError as exc:
        problems.append(str(exc))
        profile = "none"
    if problems:
        reason = "a setting is refused (below): the notebooks that load a model stop with the same message"
    status = weights_status(probe_hub=(dev == "cuda"), timeout=5)
    weights = status.message
    if not status.available and dev != "cuda":
        weights += " No CUDA GPU here, so no profile needs these weights on this machine."
    return {"device": info.to_dict(), "profile": profile, "reason": reason,
            "weights": {"available": status.available, "where": status.where, "message": weights},
            "versions": library_versions(), "problems": problems}


def findings(info: dict, model_check: ModelCheck, go: list[dict]) -> list:
    """What this run's preflight found, each a Verdict (helpers.formulas.verdicts) with the numbers it read:
    the device and its memory, the profile and why, the model check and its seconds, how many notebooks
    are go (and which are not), and the Mistral 7B weights."""
    from .formulas.units import fmt_bytes
    from .formulas.verdicts import Verdict

    dev = info["device"]
    memory = f", {fmt_bytes(dev['total_memory'])} of memory" if dev["total_memory"] else ", its memory unknown"
    ok = sum(r["verdict"] == "go" for r in go)
    stopped = [r["notebook"] for r in go if r["verdict"] != "go"]
    weights = info["weights"]
    return [
        Verdict(f"device `{dev['kind']}` ({dev['name']}){memory}", "device", {"total_memory": dev["total_memory"] or 0}),
        Verdict(f"profile `{info['profile']}`: {info['reason']}", "profile", {}),
        Verdict(f"the model check {'passed' if model_check.ok else 'failed'} in {model_check.seconds:,.1f} s",
                "model_check", {"ok": float(model_check.ok), "seconds": model_check.seconds}),
        Verdict(f"{ok} of {len(go)} notebooks go" + (f"; no-go: {', '.join(stopped)}" if stopped else ""),
                "go", {"go": ok, "notebooks": len(go)}),
        Verdict("the Mistral 7B weights are in the local cache" if weights["available"] else
                "the Mistral 7B weights are not here, with the fix above"
                + ("; no profile that runs on this device needs them" if dev["kind"] != "cuda" else ""),
                "weights", {"available": float(weights["available"])}),
    ]


def profile_refusal(value: str) -> str | None:
    """The message the preflight lists under problems (and every notebook stops with) when WORKSHOP_PROFILE
    is `value`, or None when it is a profile: what ``resolve_profile`` raises for it, word for word."""
    from unittest import mock

    with mock.patch.dict(os.environ, {"WORKSHOP_PROFILE": value}):
        try:
            resolve_profile(device="cpu")
        except ValueError as exc:
            return str(exc)
    return None
