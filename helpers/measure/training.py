"""The ``tiny-trained`` profile: the tiny model trained for a minute on *Persuasion* (helpers.measure.quality), so
that quality figures mean something (a random model's perplexity sits near the vocabulary size). AdamW with warm-up
and cosine decay, from the ``tiny`` weights; cached under a key of config, text, recipe and torch version."""
from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .local_models import (TINY_CONFIG, TOKENIZER_FILE, build_once, build_tiny, cache_dir, load_tokenizer,
                           quiet_progress, tokenizer_source)
from .quality import TEXT_FILE, TEXT_SOURCE, encode, eval_ids, next_token_logprobs, perplexity, split, training_text

RECIPE: dict[str, Any] = {
    "seq_len": 128,        # tokens per training window, BOS first
    "batch_size": 8,       # windows per step
    "steps": 120,
    "lr": 6e-3,            # peak AdamW learning rate, after a linear warm-up
    "warmup_steps": 5,
    "min_lr_ratio": 0.1,   # cosine decay to this share of the peak
    "weight_decay": 0.0,
    "betas": [0.9, 0.95],
    "grad_clip": 1.0,
    "seed": 0,             # data order (the starting weights are the tiny profile's, local_models.TINY_SEED)
}


def cache_key(config: dict, full_text: str, recipe: dict) -> str:
    import torch

    blob = json.dumps({"config": config, "text_sha256": hashlib.sha256(full_text.encode()).hexdigest(),
                       "recipe": recipe, "torch": torch.__version__.split("+")[0]}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def trained_folder(config: dict | None = None, recipe: dict | None = None) -> Path:
    return cache_dir() / f"tiny-trained-{cache_key(dict(config or TINY_CONFIG), training_text(), dict(recipe or RECIPE))}"


def log(folder: Path | None = None) -> dict[str, Any]:
    """The training record saved beside the weights."""
    return json.loads(((folder or build_trained()) / "training.json").read_text())


def build_trained(config: dict | None = None, recipe: dict | None = None, progress: bool = True) -> Path:
    """The trained model's folder, trained once under a file lock."""
    config, recipe = dict(config or TINY_CONFIG), dict(recipe or RECIPE)
    folder = trained_folder(config, recipe)

    def write(tmp: Path) -> None:
        record = train(tmp, config, recipe, progress)
        record["key"] = folder.name.removeprefix("tiny-trained-")
        (tmp / "training.json").write_text(json.dumps(record, indent=1))

    return build_once(folder, (folder / "training.json").exists, write)


def lr_at(step: int, recipe: dict) -> float:
    peak, warm, steps = recipe["lr"], recipe["warmup_steps"], recipe["steps"]
    if step < warm:
        return peak * (step + 1) / warm
    t = (step - warm) / max(1, steps - 1 - warm)
    floor = recipe["min_lr_ratio"]
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t)))


def train(out: Path, config: dict, recipe: dict, progress: bool = True) -> dict[str, Any]:
    """Train from the tiny profile's random weights, save model and tokenizer into `out`; the record."""
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM

    start = build_tiny(config=config)  # the random tiny model: same config, same seed
    tok = load_tokenizer(start)
    train_text, _ = split()
    data = torch.tensor(encode(tok, train_text)[1:], dtype=torch.long)  # BOS goes in front of each window
    bos = torch.tensor([config.get("bos_token_id", 1)], dtype=torch.long)
    held = torch.tensor(eval_ids(tok, profile="tiny-trained"), dtype=torch.long).reshape(1, -1)
    L, B = recipe["seq_len"], recipe["batch_size"]

    with quiet_progress():
        model = AutoModelForCausalLM.from_pretrained(start, dtype=torch.float32)

    def heldout_loss() -> float:   # the tiny config has no dropout: train and eval mode compute the same
        with torch.inference_mode():
            return model(input_ids=held, labels=held).loss.item()

    before = heldout_loss()
    opt = torch.optim.AdamW(model.parameters(), lr=lr_at(0, recipe), betas=tuple(recipe["betas"]),
                            weight_decay=recipe["weight_decay"])
    gen = torch.Generator().manual_seed(recipe["seed"])
    losses: list[float] = []
    wall0, cpu0 = time.perf_counter(), time.process_time()
    model.train()
    for step in tqdm(range(recipe["steps"]), desc="training tiny-trained (once per machine)", disable=not progress):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, recipe)
        starts = torch.randint(0, len(data) - L + 1, (B,), generator=gen)
        x = torch.stack([torch.cat([bos, data[s:s + L - 1]]) for s in starts.tolist()])
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(round(loss.item(), 4))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    after = heldout_loss()
    with quiet_progress():
        model.save_pretrained(out)
    shutil.copy(tokenizer_source(), out / TOKENIZER_FILE)
    return {"text": TEXT_SOURCE, "text_file": TEXT_FILE.name, "text_sha256": hashlib.sha256(training_text().encode()).hexdigest(),
            "train_tokens": int(len(data)), "heldout_tokens": int(held.shape[1]), "recipe": recipe,
            "tokens_seen": recipe["steps"] * B * L, "losses": losses,
            "heldout_loss_before": before, "heldout_loss_after": after,
            "train_wall_s": round(wall, 2), "train_cpu_s": round(cpu, 2), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__}


@dataclass(frozen=True)
class Perplexity:
    """One model's perplexity on its profile's evaluation text, or the uniform guess's."""

    model: str
    profile: str
    perplexity: float
    tokens: int
    measured_on: str


def perplexities(*loaded) -> list[Perplexity]:
    """Each loaded model's Perplexity, then the uniform guess's (exactly the vocabulary's size)."""
    out = []
    for m in loaded:
        ids = eval_ids(m.tokenizer, profile=m.profile)
        out.append(Perplexity(m.model_name, m.profile, perplexity(next_token_logprobs(m.model, ids), ids), len(ids),
                              m.label))
    vocab = int(loaded[0].config["vocab_size"])
    out.append(Perplexity(f"uniform guess over {vocab:,} tokens", "", float(vocab), out[0].tokens,
                          "computed: exp(ln V) = V"))
    return out
