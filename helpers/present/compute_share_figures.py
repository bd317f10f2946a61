"""Figures and tables of where the compute goes (helpers.formulas.compute_share), for notebook 10: the display
names of the parts live here."""
from __future__ import annotations

from typing import Any, Sequence

from ..formulas.compute_share import TALK_LAYER_SHARE, PhaseTerms
from . import plots

# FlopTerms's fields, as a table names them
FLOP_PARTS = {"embedding": "embedding (a lookup)", "attention_projections": "layers: attention projections (q, k, v, o)",
              "attention_context": "layers: attention over the context (QKᵀ, softmax·V)", "mlp": "layers: MLP",
              "head": "head (logits)"}

def shares_frame(rows: Sequence[PhaseTerms]):
    """A pandas table, one row per phase and length: the share of each part of the forward pass's FLOPs."""
    import pandas as pd

    return pd.DataFrame([{"phase": r.phase, "tokens": r.tokens,
                          **{label: getattr(r.terms, f) / r.terms.total for f, label in FLOP_PARTS.items()}}
                         for r in rows])


@plots.notes_when_empty('Share of compute in each part of a forward pass')
def share_figure(sweep: Sequence[PhaseTerms], source: Any, threshold: float = TALK_LAYER_SHARE):
    """Share of FLOPs in all layers and in attention over the context, by length, prefill and decode."""
    fig, axes = plots.figure(ncols=2, width=5.2, height=4)
    for ax, phase in zip(axes, ("prefill", "decode")):
        rows = [r for r in sweep if r.phase == phase]
        names = list(dict.fromkeys(r.model for r in rows))
        for name, style in zip(names, ("-", "--", ":", "-.")):
            g = [r for r in rows if r.model == name]
            tokens = [r.tokens for r in g]
            ax.plot(tokens, [100 * r.terms.layer_share for r in g], style, color="tab:orange", lw=2,
                    label=f"{name}: all layers")
            ax.plot(tokens, [100 * r.terms.context_share for r in g], style, color="tab:purple",
                    label=f"{name}: attention over the context")
        ax.axhline(100 * threshold, color="grey", lw=1, ls="-.", label=f"the talk's {threshold:.0%}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("prompt tokens" if phase == "prefill" else "context (tokens in the cache)")
        ax.set_ylabel("share of the forward pass's FLOPs (%)")
        ax.set_title(f"{phase}: one {'prompt' if phase == 'prefill' else 'decode step'}", fontsize=10)
        ax.set_ylim(0, 101)
    axes[0].legend(fontsize=6.5, loc="center left")   # the empty middle-left of the prefill panel
    fig.suptitle("Where the FLOPs go, by context length")
    return plots.finish(fig, source)
