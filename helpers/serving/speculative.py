"""Speculative decoding with transformers' assisted generation: a cheap drafter proposes k tokens, the
target model checks them all in one forward pass and keeps the longest prefix it agrees with, plus one
token of its own (Leviathan et al., ICML 2023; Chen et al., 2023). Greedy, so the output is exactly the
target's greedy output.

Two drafters:
- a **draft model**: here the target's own first layers (embeddings, the first `draft_layers` decoder
  layers, final norm and head, sharing the target's weights — self-speculative / early-exit drafting,
  as in LayerSkip, Elhoushi et al., ACL 2024), since a separately trained small model of the same
  vocabulary is not available offline; all the layers make a draft identical to the target (it must
  accept every token: a check of the counting); or any model object of the same vocabulary (`draft=`);
- **prompt lookup**: the continuation of the last n-gram's earlier occurrence in the context (no model).

Counted, not inferred: the target's forward calls (a hook), tokens drafted and accepted (wrapping the
candidate generator's two methods), round by round.

Two acceptance figures, not to be confused:
- the **acceptance rate**, accepted ÷ drafted: the share of the drafter's work that was kept;
- the **per-token acceptance α**, accepted ÷ checked: the chance that the target accepts a drafted token it
  looks at. The target stops at the first rejection, so the tokens drafted after it are never checked;
  checked = accepted + rejections (rounds that ended in one). This is the α of Leviathan et al.'s eq. 1:
  with each checked token accepted independently with probability α, a round that drafted k tokens
  yields (1 − α^(k+1)) ÷ (1 − α) tokens per target pass (`expected_tokens_per_pass`).
Put accepted ÷ drafted into eq. 1 and it undershoots: at α = 0.8 and k = 4 only 59 % of drafted tokens
are kept. What remains between the measured tokens per pass and eq. 1 at the per-token α is the
independence assumption (`fit_sentence`): with α fitted, measured ÷ expected compares the share of rounds
that ended in a rejection with the 1 − α^k that independence predicts. Clustered acceptances (whole drafts
on easy stretches, the first token rejected on hard ones) leave fewer tokens per pass than eq. 1, as the
cap of k wastes the easy stretches' surplus; drafts that agree to a similar depth every round, then
diverge, leave more.
"""
from __future__ import annotations

import contextlib
import time

from .. import checks
from ..cost.stepcost import _count
from .naive import _ForwardCounter


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """(1 − α^(k+1)) ÷ (1 − α): expected tokens a target pass yields when each of k drafted tokens is
    accepted with probability α until the first rejection (k + 1 at α = 1)."""
    if not checks.number(alpha, "alpha") <= 1:
        raise ValueError(f"alpha must be a number from 0 to 1, got {alpha!r}")
    _count(k, "k", 0)
    if alpha == 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def acceptance_model(rounds) -> dict:
    """Leviathan et al.'s model fitted to counted rounds: `rounds` is a sequence of (drafted, accepted) per
    target pass. Returns the rejections (rounds with accepted < drafted), the per-token acceptance
    α = accepted ÷ (accepted + rejections) (the maximum-likelihood α of eq. 1's model), the expected tokens
    per pass — eq. 1 at that α and each round's own draft length, averaged over rounds — and the measured
    one, (accepted + rounds) ÷ rounds."""
    if isinstance(rounds, (str, bytes)) or not hasattr(rounds, "__iter__"):
        raise ValueError(f"rounds must be a list of (drafted, accepted) pairs, got {rounds!r}"[:200])
    rounds = list(rounds)
    if not all(isinstance(r, (tuple, list)) and len(r) == 2 for r in rounds):
        raise ValueError("rounds must be a list of (drafted, accepted) pairs of whole numbers")
    rounds = [(_count(d, "drafted", 0), _count(a, "accepted", 0)) for d, a in rounds]
    if not rounds:
        raise ValueError("no rounds to fit: speculative decoding made no target pass")
    for d, a in rounds:
        if d < 0 or not 0 <= a <= d:
            raise ValueError(f"a round cannot accept {a} of {d} drafted tokens")
    accepted = sum(a for _, a in rounds)
    rejections = sum(a < d for d, a in rounds)
    checked = accepted + rejections
    alpha = accepted / checked if checked else 0.0
    expected = sum(expected_tokens_per_pass(alpha, d) for d, _ in rounds) / len(rounds)
    return {"rejections": rejections, "alpha": alpha, "expected": expected,
            "measured": (accepted + len(rounds)) / len(rounds)}


FIT_TOLERANCE = 0.15   # measured within ±15 % of eq. 1 at the fitted α: the independence model describes it


def fit_sentence(measured: float, expected: float, tolerance: float = FIT_TOLERANCE) -> str:
    """How measured tokens per pass compare with eq. 1 at the fitted per-token α, by rule: within
    `tolerance` (relative) independent acceptances describe them; below, acceptances cluster (more rounds
    end without a rejection than 1 − α^k predicts, and a round can keep at most k); above, rounds end in a
    rejection more often than predicted, after accepting a similar part of the draft each time."""
    checks.number(expected, "expected tokens per pass", positive=True)
    checks.number(measured, "measured tokens per pass", positive=True)
    checks.number(tolerance, "tolerance")
    ratio = measured / expected
    if abs(ratio - 1) <= tolerance:
        return f"within {tolerance:.0%} of the model (measured ÷ expected {ratio:.3f}): independent acceptances describe it"
    if ratio < 1:
        return (f"{ratio:.3f}× the model: acceptances cluster — whole drafts on easy stretches, the first token "
                f"rejected on hard ones — and a round keeps at most k")
    return (f"{ratio:.3f}× the model: most rounds accept a similar part of the draft and then reject, more "
            f"regularly than independent tokens would")


def draft_step_share(spec, draft_layers: int, context: int, dtype: str = "bf16") -> float:
    """Bytes a decode step of the early-exit draft (the target's first `draft_layers` layers, its
    embeddings, norm and output head) reads ÷ a target step's, at `context` cached tokens: both from
    helpers.cost.stepcost.decode_cost, the owner of what a step reads. A decode step is bound by these reads,
    so this is roughly what each draft token costs in target steps."""
    from ..cost.specs import get_spec
    from ..cost.stepcost import decode_cost

    spec = get_spec(spec)
    if isinstance(draft_layers, bool) or not isinstance(draft_layers, int) or not 1 <= draft_layers <= spec.num_layers:
        raise ValueError(f"draft_layers must be a whole number from 1 to {spec.num_layers}, got {draft_layers!r}")
    cfg = dict(spec.config, num_hidden_layers=draft_layers)          # the draft's shape, as a config
    if cfg.get("layer_types"):
        cfg["layer_types"] = list(cfg["layer_types"])[:draft_layers]
    draft = get_spec(cfg)
    full = decode_cost(spec, context, 1, dtype)
    part = decode_cost(draft, context, 1, dtype)
    return (part.weight_read_bytes + part.kv_bytes) / (full.weight_read_bytes + full.kv_bytes)


def speedup_by_bytes(tokens_per_pass: float, drafted_per_pass: float, draft_share: float) -> dict[str, float]:
    """What a bandwidth-bound model of a step predicts for speculative decoding: a pass costs one target
    step plus `drafted_per_pass` draft steps of `draft_share` of a target step each (draft_step_share),
    and yields `tokens_per_pass` tokens; plain decoding pays one target step a token. Returns the pass's
    cost in target steps and the predicted speed-up, tokens ÷ cost."""
    for name, v, low in (("tokens_per_pass", tokens_per_pass, 1), ("drafted_per_pass", drafted_per_pass, 0),
                         ("draft_share", draft_share, 0)):
        checks.number(v, name, minimum=low)
    cost = 1 + drafted_per_pass * draft_share
    return {"pass cost (target steps)": cost, "predicted speed-up": tokens_per_pass / cost}


def verify_step_ratio(spec, k: int, context: int, batch: int, gpu: str = "H100 SXM", dtype: str = "bf16") -> dict:
    """What verifying k drafts costs: a target pass over k + 1 tokens per sequence ÷ a decode step of one,
    both at a GPU's roofline floor, max(bytes ÷ bandwidth, FLOPs ÷ peak) (helpers.cost.stepcost.forward_cost:
    the same weights and cached K/V are read either way; the FLOPs grow k + 1 times). About 1 while the
    verify pass stays bound by memory — each accepted token nearly free — and up to k + 1 once the batch
    makes it compute-bound, when speculation stops paying."""
    from ..cost.gpus import get_gpu
    from ..cost.stepcost import forward_cost

    _count(k, "k", 1)
    g = get_gpu(gpu)
    peak, _ = g.peak_flops(dtype)

    def floor(n: int) -> tuple[float, str]:
        c = forward_cost(spec, n, context, batch, dtype, logits_tokens=n)
        return max(c.bytes / g.bandwidth, c.flops / peak), "memory" if c.bytes / g.bandwidth >= c.flops / peak \
            else "compute"

    (t1, b1), (tk, bk) = floor(1), floor(k + 1)
    return {"context": context, "batch": batch, "k": k, "decode step (ms)": 1e3 * t1, "verify pass (ms)": 1e3 * tk,
            "verify ÷ decode": tk / t1, "verify bound by": bk, "decode bound by": b1, "gpu": g.name}


def draft_model(target, layers: int):
    """A model of the target's class with its first `layers` decoder layers, sharing the target's
    embedding, those layers, the final norm and the head (no weights copied). `layers` equal to the
    target's layer count gives a draft identical to the target, a model object of its own (without the
    target's hooks, so a counter hooked on the target never counts the draft's calls)."""
    import copy

    n = target.config.num_hidden_layers
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers <= n:
        raise ValueError(f"draft layers must be a whole number from 1 to {n} (all of them: a draft identical "
                         f"to the target), got {layers!r}")
    import torch

    def shallow(module):
        """A copy sharing the submodules, with its own module dict and no hooks (a counter hooked on the
        target must not count the draft's calls)."""
        out = copy.copy(module)
        out._modules = dict(module._modules)
        for name in ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs",
                     "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called"):
            if hasattr(module, name):
                setattr(out, name, type(getattr(module, name))())
        return out

    draft = shallow(target)                   # shares every submodule
    base = shallow(target.model)

    base.layers = torch.nn.ModuleList(list(target.model.layers)[:layers])
    base.config = copy.deepcopy(target.config)
    base.config.num_hidden_layers = layers
    draft.model = base
    draft.config = base.config
    draft.generation_config = copy.deepcopy(target.generation_config)
    return draft


@contextlib.contextmanager
def _count_drafts(stats: dict):
    """Wrap the candidate generators' get_candidates and update_candidate_strategy to count drafted and
    accepted tokens (restored on exit)."""
    from transformers.generation import candidate_generator as cg

    classes = [cg.AssistedCandidateGenerator, cg.PromptLookupCandidateGenerator]
    saved = [(c, c.get_candidates, c.update_candidate_strategy) for c in classes]

    def wrap(get, update):
        def get_candidates(self, input_ids, *a, **kw):
            out = get(self, input_ids, *a, **kw)
            drafted = out[0].shape[1] - input_ids.shape[1]
            stats["drafted"] += drafted
            stats["passes with a draft"] += drafted > 0
            stats["last drafted"] = drafted
            return out

        def update_candidate_strategy(self, input_ids, scores, num_matches):
            stats["accepted"] += int(num_matches)
            stats["rounds"] += 1
            stats["per round"].append((stats["last drafted"], int(num_matches)))
            return update(self, input_ids, scores, num_matches)

        return get_candidates, update_candidate_strategy

    try:
        for c, get, update in saved:
            c.get_candidates, c.update_candidate_strategy = wrap(get, update)
        yield stats
    finally:
        for c, get, update in saved:
            c.get_candidates, c.update_candidate_strategy = get, update


def _generate(model, ids, new_tokens: int, **kw):
    import torch

    with torch.inference_mode():
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, do_sample=False, **kw)


def speculate(model, ids, new_tokens: int, k: int = 4, draft_layers: int | None = None,
              prompt_lookup: bool = False, ngram: int = 3, draft=None) -> dict:
    """One greedy generation with a drafter against plain greedy generation, both timed, back to back:
    acceptance, target passes, tokens per pass (measured and expected from α), wall-clock speed-up,
    identical output. One drafter: `draft_layers=<n>` (the target's first n layers, sharing its
    weights; n = all of them for an identical draft), `draft=<model>` (a model object of the same
    vocabulary, not the target itself) or `prompt_lookup=True`.

    Counted: `drafted` and `accepted` from the candidate generator, `rounds` (its update calls), and
    independently `target passes` (a hook on the target); tokens generated = accepted + target passes."""
    import torch
    from transformers.utils import logging as hf_logging

    from ..measure.timing import check_ids

    _count(new_tokens, "new_tokens", 1)
    _count(k, "k", 1, 64)
    _count(ngram, "ngram", 1, 64)
    if sum([draft_layers is not None, draft is not None, bool(prompt_lookup)]) != 1:
        raise ValueError("choose one drafter: draft_layers=<n>, draft=<model> or prompt_lookup=True")
    if draft is model:
        raise ValueError("the draft must be a model object of its own (for an identical draft, "
                         "draft_layers=<all the target's layers> shares the weights): the target's forward "
                         "calls are counted by a hook, which would count the draft's too")
    ids = check_ids(model, ids, new_tokens, "ids", one_sequence=True).to(next(model.parameters()).device)
    saved_config = None
    if prompt_lookup:
        kw = {"prompt_lookup_num_tokens": k, "max_matching_ngram_size": ngram}
        name = f"prompt lookup (n-gram ≤ {ngram})"
    else:
        if draft is None:
            draft = draft_model(model, draft_layers)
            name = f"draft model ({draft_layers} of {model.config.num_hidden_layers} layers)"
        else:
            saved_config = draft.generation_config        # the caller's object: restored on exit
            name = f"draft model ({type(draft).__name__}, {draft.config.num_hidden_layers} layers)"
        import copy

        g = draft.generation_config = copy.deepcopy(draft.generation_config)
        g.num_assistant_tokens, g.num_assistant_tokens_schedule = k, "constant"
        g.assistant_confidence_threshold = 0.0      # always draft k (random weights: flat, low-confidence logits)
        kw = {"assistant_model": draft}
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()   # the draft's generate() call warns about its own arguments every round
    counter = None
    try:
        _generate(model, ids[:, :8], 4)                 # warm-up, untimed
        _generate(model, ids[:, :8], 4, **kw)
        counter = _ForwardCounter(model)
        t0 = time.perf_counter()
        plain = _generate(model, ids, new_tokens)
        plain_s = time.perf_counter() - t0
        plain_calls = counter.calls
        counter.calls = 0
        stats = {"drafted": 0, "accepted": 0, "passes with a draft": 0, "rounds": 0, "last drafted": 0,
                 "per round": []}
        with _count_drafts(stats):
            t0 = time.perf_counter()
            spec = _generate(model, ids, new_tokens, **kw)
            spec_s = time.perf_counter() - t0
        spec_calls = counter.calls
    finally:
        if counter is not None:
            counter.close()
        if saved_config is not None:
            draft.generation_config = saved_config
        hf_logging.set_verbosity(verbosity)
    made = spec.shape[1] - ids.shape[1]
    kept = stats["accepted"] / stats["drafted"] if stats["drafted"] else 0.0
    k_eff = stats["drafted"] / stats["passes with a draft"] if stats["passes with a draft"] else 0.0
    fit = acceptance_model(stats["per round"])
    return {"drafter": name, "k": k, "new tokens": made, "drafted": stats["drafted"], "accepted": stats["accepted"],
            "acceptance rate (accepted ÷ drafted)": kept, "rejections": fit["rejections"],
            "per-token acceptance α (accepted ÷ checked)": fit["alpha"],
            "rounds": stats["rounds"], "target passes": spec_calls,
            "plain target passes": plain_calls,
            "tokens per target pass": made / spec_calls,
            "expected tokens per pass (1−α^(k+1))/(1−α)": fit["expected"],
            "mean drafted per drafting pass": k_eff,
            "plain s": plain_s, "speculative s": spec_s, "wall-clock speed-up": plain_s / spec_s,
            "identical to greedy": bool(torch.equal(plain, spec))}
