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
  yields (1 − α^(k+1)) ÷ (1 − α) tokens per target pass (`expected_tokens_per_pass`, owned by
  helpers.formulas.speculation).
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
from dataclasses import dataclass

from .. import checks
from ..formulas.speculation import expected_tokens_per_pass  # eq. 1's owner; imported here for its callers
from ..formulas.verdicts import Verdict, change_verdict, factor, share
from .naive import _ForwardCounter


@dataclass(frozen=True)
class AcceptanceFit:
    """Leviathan et al.'s model fitted to counted rounds."""

    rejections: int                  # rounds that ended in a rejection
    alpha: float                     # per-token acceptance, accepted ÷ checked
    expected: float                  # tokens per pass, eq. 1 at alpha and each round's draft length
    measured: float                  # tokens per pass, (accepted + rounds) ÷ rounds


@dataclass(frozen=True)
class PassCost:
    """A bandwidth-bound model's speculative pass: its cost in target steps and the speed-up it predicts."""

    pass_cost_steps: float
    predicted_speedup: float


@dataclass(frozen=True)
class VerifyRatio:
    """A verify pass of k + 1 tokens per sequence against a decode step, both at a GPU's roofline floor."""

    context: int
    batch: int
    k: int
    decode_step_ms: float
    verify_pass_ms: float
    verify_over_decode: float
    verify_bound: str                # "memory" or "compute"
    decode_bound: str
    gpu: str


@dataclass(frozen=True)
class Speculation:
    """One greedy generation with a drafter (transformers' assisted generation) against plain greedy."""

    drafter: str
    k: int
    new_tokens: int
    drafted: int
    accepted: int
    acceptance_rate: float           # accepted ÷ drafted
    rejections: int
    alpha: float                     # per-token acceptance, accepted ÷ checked
    rounds: int
    target_passes: int
    plain_target_passes: int
    tokens_per_pass: float           # tokens per target pass, measured
    expected_tokens_per_pass: float  # eq. 1, (1 − α^(k+1)) ÷ (1 − α), at the fitted α
    mean_drafted_per_pass: float     # per pass that drafted
    plain_s: float
    speculative_s: float
    speedup: float                   # wall clock, plain ÷ speculative
    identical_to_greedy: bool


def acceptance_model(rounds) -> AcceptanceFit:
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
    rounds = [(checks.count(d, "drafted", 0), checks.count(a, "accepted", 0)) for d, a in rounds]
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
    return AcceptanceFit(rejections, alpha, expected, (accepted + len(rounds)) / len(rounds))


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
    helpers.formulas.stepcost.decode_cost, the owner of what a step reads. A decode step is bound by these reads,
    so this is roughly what each draft token costs in target steps."""
    from ..formulas.specs import get_spec
    from ..formulas.stepcost import decode_cost

    spec = get_spec(spec)
    checks.count(draft_layers, "draft_layers", 1, spec.num_layers)
    cfg = dict(spec.config, num_hidden_layers=draft_layers)          # the draft's shape, as a config
    if cfg.get("layer_types"):
        cfg["layer_types"] = list(cfg["layer_types"])[:draft_layers]
    draft = get_spec(cfg)
    full = decode_cost(spec, context, 1, dtype)
    part = decode_cost(draft, context, 1, dtype)
    return (part.weight_read_bytes + part.kv_bytes) / (full.weight_read_bytes + full.kv_bytes)


def speedup_by_bytes(tokens_per_pass: float, drafted_per_pass: float, draft_share: float) -> PassCost:
    """What a bandwidth-bound model of a step predicts for speculative decoding: a pass costs one target
    step plus `drafted_per_pass` draft steps of `draft_share` of a target step each (draft_step_share),
    and yields `tokens_per_pass` tokens; plain decoding pays one target step a token. Returns the pass's
    cost in target steps and the predicted speed-up, tokens ÷ cost."""
    for name, v, low in (("tokens_per_pass", tokens_per_pass, 1), ("drafted_per_pass", drafted_per_pass, 0),
                         ("draft_share", draft_share, 0)):
        checks.number(v, name, low)
    cost = 1 + drafted_per_pass * draft_share
    return PassCost(cost, tokens_per_pass / cost)


def pays(tokens_per_pass: float, pass_cost_steps: float) -> Verdict:
    """Whether a speculative round can pay: it yields `tokens_per_pass` tokens for the time of
    `pass_cost_steps` decode steps (its verify pass and its draft steps), plain decoding one token a step.
    It can pay when tokens ÷ cost beats 1 by more than the change margin (helpers.formulas.verdicts), cannot
    when it falls short by as much, and breaks even in between."""
    checks.number(tokens_per_pass, "tokens per pass", 1)
    checks.number(pass_cost_steps, "a round's cost in decode steps", positive=True)
    r = tokens_per_pass / pass_cost_steps
    words = {"higher": f"can pay ({factor(r)} the tokens of plain decoding in the same time)",
             "about equal": f"breaks even ({factor(r)})",
             "lower": f"cannot pay ({factor(r)} the tokens of plain decoding in the same time)"}[change_verdict(r)]
    return Verdict(words, "speculative.pays", {"tokens_per_pass": tokens_per_pass, "pass_cost_steps": pass_cost_steps,
                                               "ratio": r})


def head_share(spec, dtype: str = "bf16") -> Verdict:
    """The output head's share of the weights a decode step reads (helpers.formulas.stepcost.decode_cost; the
    head is vocabulary × hidden values), with its band: what an early-exit draft reads whatever its layers."""
    from ..formulas.specs import get_spec
    from ..formulas.stepcost import decode_cost
    from ..formulas.units import dtype_bytes

    spec = get_spec(spec)
    head = spec.vocab_size * spec.hidden_size * dtype_bytes(dtype)
    v = share(head, decode_cost(spec, 1, 1, dtype).weight_read_bytes, "the weights a step reads")
    return Verdict(f"the {spec.vocab_size:,}-word output head is {v.words}", "share", v.evidence)


def verify_on_gpu(rows: list[VerifyRatio]) -> list[Verdict]:
    """verify_step_ratio's rows read by rule, one verdict per context: the verify pass against a decode step at
    the smallest batch, and the first batch at which the pass turns compute-bound (or none up to the largest)."""
    out = []
    for c in sorted({r.context for r in rows}):
        mine = sorted((r for r in rows if r.context == c), key=lambda r: r.batch)
        first = next((r for r in mine if r.verify_bound == "compute"), None)
        turn = (f"it turns compute-bound at batch {first.batch} (verify {first.verify_over_decode:.2f}× a decode step)"
                if first else f"it stays memory-bound at every batch up to {mine[-1].batch}")
        out.append(Verdict(f"at {c:,} tokens of context a verify pass of {mine[0].k + 1} tokens costs "
                           f"{mine[0].verify_over_decode:.2f}× a decode step at batch {mine[0].batch} on an "
                           f"{mine[0].gpu}; {turn}", "speculative.verify_on_gpu",
                           {"context": c, "batch1_ratio": mine[0].verify_over_decode,
                            "compute_bound_from": first.batch if first else 0}))
    return out


def verify_step_ratio(spec, k: int, context: int, batch: int, gpu: str = "H100 SXM",
                      dtype: str = "bf16") -> VerifyRatio:
    """What verifying k drafts costs: a target pass over k + 1 tokens per sequence ÷ a decode step of one,
    both at a GPU's roofline floor, max(bytes ÷ bandwidth, FLOPs ÷ peak) (helpers.formulas.stepcost.forward_cost:
    the same weights and cached K/V are read either way; the FLOPs grow k + 1 times). About 1 while the
    verify pass stays bound by memory — each accepted token nearly free — and up to k + 1 once the batch
    makes it compute-bound, when speculation stops paying."""
    from ..formulas.gpus import get_gpu
    from ..formulas.roofline import step_floor
    from ..formulas.stepcost import forward_cost

    checks.count(k, "k")
    g = get_gpu(gpu)
    peak, _ = g.peak_flops(dtype)
    one, many = (step_floor(forward_cost(spec, n, context, batch, dtype, logits_tokens=n), peak, g.bandwidth)
                 for n in (1, k + 1))
    return VerifyRatio(context, batch, k, 1e3 * one.seconds, 1e3 * many.seconds, many.seconds / one.seconds,
                       many.bound, one.bound, g.name)


def draft_model(target, layers: int):
    """A model of the target's class with its first `layers` decoder layers, sharing the target's
    embedding, those layers, the final norm and the head (no weights copied). `layers` equal to the
    target's layer count gives a draft identical to the target, a model object of its own (without the
    target's hooks, so a counter hooked on the target never counts the draft's calls)."""
    import copy

    n = target.config.num_hidden_layers
    checks.count(layers, "draft layers (all of them: a draft identical to the target)", 1, n)
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
              prompt_lookup: bool = False, ngram: int = 3, draft=None) -> Speculation:
    """One greedy generation with a drafter against plain greedy generation, both timed, back to back:
    acceptance, target passes, tokens per pass (measured and expected from α), wall-clock speed-up,
    identical output. One drafter: `draft_layers=<n>` (the target's first n layers, sharing its
    weights; n = all of them for an identical draft), `draft=<model>` (a model object of the same
    vocabulary, not the target itself) or `prompt_lookup=True`.

    Counted: `drafted` and `accepted` from the candidate generator, `rounds` (its update calls), and
    independently `target_passes` (a hook on the target); tokens generated = accepted + target passes."""
    import torch
    from transformers.utils import logging as hf_logging

    from ..measure.timing import check_ids

    checks.count(new_tokens, "new_tokens")
    checks.count(k, "k", 1, 64)
    checks.count(ngram, "ngram", 1, 64)
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
    return Speculation(name, k, made, stats["drafted"], stats["accepted"], kept, fit.rejections, fit.alpha,
                       stats["rounds"], spec_calls, plain_calls, made / spec_calls, fit.expected, k_eff,
                       plain_s, spec_s, plain_s / spec_s, bool(torch.equal(plain, spec)))
