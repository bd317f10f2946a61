"""Model profiles and loading, chosen by WORKSHOP_PROFILE: ``tiny``, ``small`` (built here, random weights:
helpers.measure.local_models), ``tiny-trained`` (helpers.measure.training), ``mistral-7b`` from the Hub
(WORKSHOP_MODEL_ID; missing, gated or unreachable weights give the fix, never a hang), ``mistral-7b-random`` (its
architecture, random weights, on a GPU), ``auto``: mistral-7b on a CUDA GPU that can load it, tiny on one that
cannot, tiny-trained elsewhere."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import env
from ..formulas.specs import ModelSpec, load_config, spec_from_config
from .hardware import pick_device
from .local_models import (BUILT_PROFILES, LOCAL_PROFILES, ProfileUnavailable, build_tiny, cache_dir, load_tokenizer,
                           quiet_progress, tiny_model)

PROFILES = ("auto", "tiny", "mistral-7b", "mistral-7b-random", "tiny-trained", "small")
DEFAULT_MODEL_ID = "mistralai/Mistral-7B-v0.1"


def built_folder(profile: str) -> Path:
    """The folder of a profile built on this machine (LOCAL_PROFILES), built on first use."""
    if profile == "tiny-trained":
        from .training import build_trained

        return build_trained()
    if profile not in BUILT_PROFILES:
        raise ValueError(f"profile {profile!r} is not built locally; built profiles: {', '.join(LOCAL_PROFILES)}")
    config, folder_name, _ = BUILT_PROFILES[profile]
    return build_tiny(cache_dir() / folder_name, config)


def display_name(profile: str) -> str:
    """What a locally built profile's model is, for labels."""
    return "tiny (Mistral architecture, trained on Persuasion)" if profile == "tiny-trained" else BUILT_PROFILES[profile][2]


@dataclass
class WeightsStatus:
    available: bool
    where: str | None      # "cache" (on disk already) or "hub" (downloadable now) or None
    message: str


def _probe_hub(model_id: str, timeout: float) -> None:
    """Raise what the Hub answers about downloading model_id, or TimeoutError after `timeout` s (auth_check takes
    no timeout: it runs in a daemon thread, left behind when it does not answer in time)."""
    import threading

    from huggingface_hub import auth_check

    outcome: dict[str, BaseException] = {}

    def probe() -> None:
        try:
            auth_check(model_id)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome["error"] = exc

    worker = threading.Thread(target=probe, name="workshop-hub-probe", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"no answer from the Hub within {timeout:g} s")
    if "error" in outcome:
        raise outcome["error"]


def weights_status(model_id: str | None = None, probe_hub: bool = True, timeout: float = 10.0) -> WeightsStatus:
    """Whether a model's weights are in the local cache or reachable on the Hub; never downloads, answers in time."""
    model_id = model_id or hub_model_id()
    page = f"https://huggingface.co/{model_id}"
    try:
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(model_id, local_files_only=True,
                                      allow_patterns=["config.json", "*.safetensors", "*.json"]))
        if list(path.glob("*.safetensors")):
            return WeightsStatus(True, "cache", f"{model_id} weights are in the local cache ({path})")
    except Exception:  # noqa: BLE001 - any failure here means "not cached"
        pass
    offline = (env.text("HF_HUB_OFFLINE") or "").lower() in env.TRUE   # huggingface_hub's own reading
    if offline or not probe_hub:
        from huggingface_hub.constants import HF_HUB_CACHE

        asked = ("the Hub was not asked: it is switched off (HF_HUB_OFFLINE=1)" if offline
                 else "the Hub was not asked (only the local cache was checked)")
        return WeightsStatus(False, None, (
            f"{model_id} weights are not in the local Hugging Face cache ({HF_HUB_CACHE}); {asked}. "
            f"Fix: on a machine with internet run `hf download {model_id}` (accept the licence at {page} "
            "and set HF_TOKEN first if it is gated), or use WORKSHOP_PROFILE=tiny or mistral-7b-random."))
    from huggingface_hub.utils import GatedRepoError, RepositoryNotFoundError

    try:
        _probe_hub(model_id, timeout)
        return WeightsStatus(True, "hub", f"{model_id} is reachable on the Hub; the first load downloads about 15 GB")
    except GatedRepoError:
        return WeightsStatus(False, None, (
            f"{model_id} is gated and this machine has no access. Fix: accept the licence at {page}, "
            "create a read token, and set it as HF_TOKEN in the environment (never in a notebook cell)."))
    except RepositoryNotFoundError:
        return WeightsStatus(False, None, (
            f"{model_id} was not found on the Hub (or it is private). Fix: check WORKSHOP_MODEL_ID, "
            "or set HF_TOKEN if the repository needs one."))
    except Exception as exc:  # noqa: BLE001 - the Hub cannot be reached
        name = type(exc).__name__
        return WeightsStatus(False, None, (
            f"the Hugging Face Hub cannot be reached ({name}), and {model_id} is not in the local cache. "
            f"Fix: connect and run `hf download {model_id}`, or use WORKSHOP_PROFILE=tiny or mistral-7b-random."))


@dataclass
class Loaded:
    """A loaded model and everything a plot needs to say what produced it."""

    model: Any
    tokenizer: Any
    profile: str
    model_name: str
    device: str
    dtype: str
    reason: str
    config: dict = field(repr=False, default_factory=dict)

    @property
    def spec(self) -> ModelSpec:
        return spec_from_config(self.config, self.model_name)

    @property
    def label(self) -> str:
        return f"{self.model_name} · {self.dtype} · {self.device} · profile {self.profile}"


def run_on(loaded: Loaded, fn, *args, **kwargs) -> tuple[Loaded, Any]:
    """(loaded without its weights, fn(loaded, ...)): what a notebook records, so a replay carries its model's shape."""
    return replace(loaded, model=None, tokenizer=None), fn(loaded, *args, **kwargs)


def resolve_profile(profile: str | None = None, device: str | None = None) -> tuple[str, str]:
    """(profile, reason): the environment's WORKSHOP_PROFILE, or what ``auto`` picks here and why."""
    want = str(profile).strip().lower() if profile else env.choice("WORKSHOP_PROFILE", PROFILES, "auto")
    if want not in PROFILES:
        raise ValueError(f"unknown profile {want[:40]!r}; allowed: {', '.join(PROFILES)}")
    if want != "auto":
        return want, f"WORKSHOP_PROFILE={want} was set"
    dev = pick_device(device)
    if dev != "cuda":
        return "tiny-trained", (f"no CUDA GPU here (device: {dev}), so the tiny model runs, trained on a novel "
                                "(trained once per machine, then cached)")
    status = weights_status(probe_hub=True)
    if status.available:
        return "mistral-7b", f"a CUDA GPU and Mistral 7B weights ({status.where}) are available"
    return "tiny", f"a CUDA GPU is here but Mistral 7B weights are not: {status.message}"


def default_dtype(profile: str, device: str) -> str:
    """bf16 on a GPU that computes it natively, else fp16; fp32 for the built models on a CPU (bf16 is slow there)."""
    if device == "cpu" and profile in LOCAL_PROFILES:
        return "fp32"
    if device == "cuda":
        import torch

        return "bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp16"
    return "bf16"


def env_dtype() -> str | None:
    """WORKSHOP_DTYPE in the library's spelling (bf16, …), None when unset; EnvError when it is not a float dtype."""
    from ..formulas.units import FLOAT_DTYPES, normalize_dtype

    raw = env.text("WORKSHOP_DTYPE")
    if raw is None:
        return None
    try:
        return normalize_dtype(raw, FLOAT_DTYPES)
    except ValueError:
        raise env.refuse("WORKSHOP_DTYPE", os.environ["WORKSHOP_DTYPE"], ", ".join(FLOAT_DTYPES)) from None


def hub_model_id(default: str = DEFAULT_MODEL_ID) -> str:
    """The Hub id the mistral-7b profile loads: WORKSHOP_MODEL_ID, else `default`; EnvError when it is not one."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    value = env.text("WORKSHOP_MODEL_ID", default)
    try:
        validate_repo_id(value)
    except HFValidationError:
        raise env.refuse("WORKSHOP_MODEL_ID", os.environ.get("WORKSHOP_MODEL_ID", ""),
                         "a Hugging Face Hub id, name or owner/name (letters, digits, '-', '_' and '.'; at most 96 "
                         f"characters each), such as {DEFAULT_MODEL_ID}") from None
    return value


def load(profile: str | None = None, device: str | None = None, dtype: str | None = None) -> Loaded:
    """Load the model of a profile on a device; ProfileUnavailable says why one cannot run here."""
    from transformers import AutoModelForCausalLM

    from ..formulas.units import FLOAT_DTYPES, normalize_dtype
    from .dtypes import torch_dtype

    name, reason = resolve_profile(profile, device)
    dev = pick_device(device)
    dt = normalize_dtype(dtype or env_dtype() or default_dtype(name, dev), FLOAT_DTYPES)
    if name in LOCAL_PROFILES:
        folder = built_folder(name)
        with quiet_progress():
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch_dtype(dt)).to(dev).eval()
        return Loaded(model, load_tokenizer(folder), name, display_name(name), dev, dt, reason,
                      json.loads((folder / "config.json").read_text()))
    if name == "mistral-7b-random":
        if dev != "cuda":
            raise ProfileUnavailable(
                "mistral-7b-random builds the full 7.24 B-parameter model (14.5 GB in bf16) and is meant for a "
                f"CUDA GPU; this device is {dev}. Fix: run on a GPU, or use WORKSHOP_PROFILE=tiny.")
        cfg = load_config("mistral-7b-v0.1")[1]
        return Loaded(tiny_model(cfg, dev, dt), load_tokenizer(build_tiny()),  # the same Mistral 7B v0.1 tokenizer
                      name, "Mistral 7B v0.1 architecture, random weights", dev, dt, reason, cfg)
    model_id = hub_model_id()   # mistral-7b, from the Hub
    status = weights_status(model_id)
    if not status.available:
        raise ProfileUnavailable(status.message)
    from transformers import AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_id, dtype=torch_dtype(dt), device_map=dev).eval()
    return Loaded(model, AutoTokenizer.from_pretrained(model_id), name, model_id, dev, dt, reason, model.config.to_dict())
