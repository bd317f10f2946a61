"""Preflight: what this machine is, which profile will run and why, library versions, memory,
whether the weights are present, and a go/no-go line for each notebook."""
from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import re
import time
from dataclasses import dataclass
from pathlib import Path

from .hardware import device_info, pick_device
from .models import resolve_profile, weights_status

LIBRARIES = ("torch", "transformers", "accelerate", "bitsandbytes", "mistral_common", "marimo",
             "pandas", "matplotlib", "numpy", "huggingface_hub")

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"

# What each notebook needs beyond the profile's model; notebooks not listed need only the model.
NEEDS: dict[str, tuple[str, ...]] = {
    "00": (),
    "04": ("no-model",),
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
    """Load the profile's model and run one forward pass; report instead of raising."""
    from .models import ProfileUnavailable, load

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
    except ProfileUnavailable as exc:
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
        if "no-model" in needs:
            why.append("the planner needs no model" + ("" if model_ok else
                       "; its last section, predicted against measured, shows a note instead"))
        title = re.sub(r"^\d\d_", "", name[:-3]).replace("_", " ")
        rows.append({"notebook": name, "topic": title, "verdict": verdict, "why": "; ".join(why) or "ready"})
    return rows


def summary() -> dict:
    """Everything the preflight notebook shows, as plain data. A wrong WORKSHOP_DEVICE or
    WORKSHOP_PROFILE is reported (and the defaults used), not raised: the preflight must always answer."""
    problems = []
    try:
        dev = pick_device()
    except ValueError as exc:
        problems.append(f"WORKSHOP_DEVICE: {exc}; using auto")
        dev = pick_device("auto")
    info = device_info(dev)
    try:
        profile, reason = resolve_profile(device=dev)
    except ValueError as exc:
        problems.append(f"{exc}; using auto")
        profile, reason = resolve_profile("auto", device=dev)
        reason = f"{reason} (WORKSHOP_PROFILE is not valid: {os.environ.get('WORKSHOP_PROFILE')!r})"
    status = weights_status(probe_hub=(dev == "cuda"), timeout=5)
    return {"device": info.to_dict(), "profile": profile, "reason": reason,
            "weights": {"available": status.available, "where": status.where, "message": status.message},
            "versions": library_versions(), "problems": problems}
