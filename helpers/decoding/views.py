"""Tables and figures of the decode regimes (helpers.decoding.regimes) for notebook 03."""
from __future__ import annotations

from typing import Any, Sequence

from .breakdown import StepBreakdown
from .regimes import Regime, skip_reason
from ..present import plots

_MARKERS = {"eager": "^", "generate": "v", "packed": "D", "static": "s", "static+compile": "*"}
_PART_COLOURS = {"weight_matmuls": "tab:blue", "attention": "tab:cyan", "other_operators": "tab:orange",
                 "outside_operators": "tab:red"}


def part_label(part: str) -> str:
    """A part of helpers.decoding.breakdown.PARTS as a table or figure shows it: "weight matmuls"."""
    return part.replace("_", " ")


def breakdown_rows(b: StepBreakdown) -> list[dict]:
    """A step breakdown as table rows: part, ms per step, share of Σ parts; then Σ parts, the step
    measured without the profiler and the memory floor."""
    total = b.parts_sum_s
    out = [{"part": part_label(k), "ms_per_step": v * 1e3, "share": v / total} for k, v in b.parts.items()]
    out.append({"part": "Σ parts (profiled)", "ms_per_step": total * 1e3, "share": 1.0})
    out.append({"part": "measured step (no profiler)", "ms_per_step": b.measured_step_s * 1e3,
                "share": b.measured_step_s / total})
    if b.floor_s is not None:
        out.append({"part": "memory floor (bytes ÷ bandwidth)", "ms_per_step": b.floor_s * 1e3,
                    "share": b.floor_s / total})
    return out


def source(regimes: Sequence[Regime]) -> str:
    """The stamp of a figure over several models: each model · dtype, the device, the profiles."""
    models = ", ".join(f"{r.name} ({r.dtype})" for r in regimes)
    return f"measured: {models} · {regimes[0].device} · profiles {', '.join(r.name for r in regimes)}"


def implementations_frame(regimes: Sequence[Regime]):
    """One row per model × implementation: step, floor, efficiency, same tokens as the eager loop."""
    import pandas as pd

    rows = []
    for reg in regimes:
        for r in reg.results:
            rows.append({"model": reg.name, "implementation": r.impl, "step_ms": r.step_s * 1e3,
                         "floor_ms": r.floor_s * 1e3, "efficiency": r.efficiency, "tokens_per_s": 1 / r.step_s,
                         "same_tokens_as_eager": r.same_tokens, "kv_slots_read": r.kv_slots,
                         "compile_s": r.compile_s, "steps_timed": r.steps, "measured on": reg.label})
        for impl in reg.skipped:
            rows.append({"model": reg.name, "implementation": impl, "step_ms": None, "floor_ms": None,
                         "efficiency": None, "tokens_per_s": None, "same_tokens_as_eager": None,
                         "kv_slots_read": None, "compile_s": None, "steps_timed": 0,
                         "measured on": f"skipped: {skip_reason(impl, reg.device, reg.dtype) or 'not asked for'}"})
    return pd.DataFrame(rows)


def breakdown_frame(regimes: Sequence[Regime]):
    """One row per model × part of the profiled eager step (ms per step and share of Σ parts)."""
    import pandas as pd

    rows = []
    for reg in regimes:
        if reg.breakdown is None:
            continue
        for row in breakdown_rows(reg.breakdown):
            rows.append({"model": reg.name, **row, "measured on": reg.label})
    return pd.DataFrame(rows)


def implementations_summary(reg: Regime, cache_bytes: int | None = None) -> str:
    """One markdown bullet per model: the eager loop and the fastest implementation against the floor, the
    regime by a rule (efficiency ≥ 0.5: memory-bound), generate's cost per step, compilation."""
    eager, gen, best = reg.result("eager"), reg.result("generate"), reg.best
    regime = ("memory-bound: the bytes set the pace" if best.efficiency >= 0.5
              else "overhead-bound: most of the step is not moving bytes")
    same = "identical" if all(r.same_tokens for r in reg.results) else "**not identical**"
    gen_text = ""
    if gen is not None:
        from ..formulas.verdicts import change_verdict

        v = generate_verdict(reg)
        gen_text = f" `generate` {v.words.split(': `generate` ', 1)[1]}" + (
            ": its input preparation, mask update, logits processors and stopping checks run every step."
            if change_verdict(gen.step_s / eager.step_s) == "higher" else
            ": its per-step bookkeeping is lost in this step's other costs.")
    comp = reg.result("static+compile")
    comp_text = (f" Compiling took {comp.compile_s:,.1f} s." if comp is not None and comp.compile_s else
                 (f" Skipped here: {', '.join(reg.skipped)}." if reg.skipped else ""))
    return (f"- **{reg.name}**: the bare loop runs at {100 * eager.efficiency:,.1f} % of its floor "
            f"({eager.step_s * 1e3:,.2f} ms against {eager.floor_s * 1e3:,.2f} ms); the fastest here is "
            f"**{best.impl}** at **{100 * best.efficiency:,.1f} %** — {regime}. Greedy tokens of every "
            f"implementation: {same}.{gen_text}{comp_text}{kernel_sentence(reg, cache_bytes)}")


def kernel_sentence(reg: Regime, cache_bytes: int | None = None) -> str:
    """Where the gap below the floor starts: the kernels' own bandwidth against the copy's, by rule; a kernel
    above the copy's bandwidth is named with its reason (helpers.formulas.verdicts.above_floor_reason, the
    last-level cache `cache_bytes`)."""
    ceiling = reg.kernel_ceiling()
    if ceiling is None:
        return ""
    name, share = ceiling
    parts = ", ".join(f"{k} {v / 1e9:,.1f} GB/s" for k, v in reg.kernel_bandwidth.items())
    what = {"linear": "`nn.Linear`'s own kernel", "packed": "oneDNN on prepacked weights"}.get(name, name)
    best = reg.best
    split = (f" Of the fastest loop's {100 * (1 - best.efficiency):,.0f} points below its floor, "
             f"{100 * (1 - share):,.0f} are the kernel's (even a step that did nothing but these products "
             f"would stop at {100 * share:,.0f} %) and {100 * (share - best.efficiency):,.0f} the rest of the step's "
             "(other operators, Python)" if share < 1 and best.efficiency < share else "")
    return (f" The matrix–vector kernels themselves, alone on a {reg.buffer_bytes()[1] / 2**20:,.0f} MiB stack of weights "
            f"(helpers.measure.microbench.gemv_benchmark), read at {parts}: the fastest, {what}, at "
            f"**{100 * share:,.0f} %** of the copy's {reg.bandwidth / 1e9:,.1f} GB/s."
            + (split + "." if split else "") + _above(reg, share, cache_bytes))


def _above(reg: Regime, share: float, cache_bytes: int | None, read_bytes: int | None = None) -> str:
    """' Above the copy's bandwidth: <reason>.' when a rate ÷ the copy's is past the margin, else ''."""
    from ..formulas.verdicts import change_verdict
    from ..formulas.verdicts import above_floor_reason

    if change_verdict(share) != "higher":
        return ""
    read = reg.buffer_bytes()[1] if read_bytes is None else read_bytes
    what = "its stack of weights" if read_bytes is None else "its weights"
    return f" Above the copy's bandwidth{above_floor_reason(read, cache_bytes, what)}."


def breakdown_summary(reg: Regime, cache_bytes: int | None = None) -> str:
    """One markdown bullet per model: the share of the step waiting for memory, the fixed share, the
    largest part beyond the floor, and whether the parts add up to the measured step within 10 %."""
    b = reg.breakdown
    if b is None:
        return f"- **{reg.name}**: no breakdown measured."
    part, secs = max(b.beyond_floor().items(), key=lambda kv: kv[1])
    part = part_label(part)
    check = "within" if abs(b.sum_over_measured - 1) <= 0.10 else "**outside**"
    mm = ""
    if b.matmul_bandwidth is not None:
        mm = (f" Its weight matmuls read {b.weight_bytes / 1e6:,.0f} MB in {b.parts.weight_matmuls_s * 1e3:,.2f} ms: "
              f"{b.matmul_bandwidth / 1e9:,.1f} GB/s"
              + (f", against the copy's {reg.bandwidth / 1e9:,.1f} GB/s" if reg.bandwidth else "") + "."
              + (_above(reg, b.matmul_bandwidth / reg.bandwidth, cache_bytes, b.weight_bytes) if reg.bandwidth else ""))
    return (f"- **{reg.name}** ({b.impl} loop): at best {100 * b.memory_share:,.0f} % of the step waits for memory (floor "
            f"{b.floor_s * 1e3:,.2f} ms of a {b.measured_step_s * 1e3:,.2f} ms step); "
            f"{100 * b.fixed_share:,.0f} % goes to other operators and to no operator at all; the largest part "
            f"beyond the floor is *{part}* ({secs * 1e3:,.2f} ms). The parts add up to "
            f"{100 * b.sum_over_measured:,.0f} % of the step measured without the profiler ({check} ±10 %).{mm}")


@plots.notes_when_empty('Decode on the roofline')
def roofline_figure(regimes: Sequence[Regime], peak_flops: float, bandwidth: float | None = None, dtype: str = ""):
    """Left: every implementation of every model on this device's roofline (zoomed on decode).
    Right: each one's efficiency, floor ÷ measured step, against 100 % (the memory floor).
    The memory roof: `bandwidth`, or by default the regimes' own (measured alongside their steps)."""
    import numpy as np

    from ..present import plots
    from ..formulas.roofline import attainable_flops

    if bandwidth is None:
        bandwidth = max(r.bandwidth for r in regimes if r.bandwidth)
    fig, (ax, bars) = plots.figure(ncols=2, width=5.2, height=5.2)
    pts = [(reg, r) for reg in regimes for r in reg.results]
    xs = [r.point.intensity for _, r in pts]
    ys = [r.point.achieved_flops for _, r in pts]
    grid = np.logspace(np.log10(min(xs) / 3), np.log10(max(xs) * 3), 100)
    ax.loglog(grid, [attainable_flops(x, peak_flops, bandwidth) for x in grid], color="black", lw=2,
              label=f"memory roof: {bandwidth / 1e9:,.1f} GB/s × intensity")
    kernels = regimes[0].kernel_bandwidth if regimes and regimes[0].kernel_bandwidth else {}
    for (name, bw), ls in zip(kernels.items(), (":", "--")):
        ax.loglog(grid, [attainable_flops(x, peak_flops, bw) for x in grid], color="dimgray", lw=1.2, ls=ls,
                  label=f"kernel roof, {name}: {bw / 1e9:,.1f} GB/s (matrix–vector alone)")
    colours = dict(zip([reg.name for reg in regimes], ["tab:blue", "tab:green", "tab:purple", "tab:brown"]))
    for k, (reg, r) in enumerate(pts):
        ax.scatter(r.point.intensity, r.point.achieved_flops, marker=_MARKERS.get(r.impl, "o"), s=60,
                   color=colours[reg.name], zorder=3, label=f"{reg.name} · {r.impl}")
    ax.set_ylim(min(ys) / 3, max(max(ys), max(attainable_flops(x, peak_flops, bandwidth) for x in xs)) * 3)
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("FLOP/s achieved")
    ax.set_title("Decode implementations on the roofline")
    ax.grid(True, which="both", alpha=0.2)
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    names = [f"{reg.name} · {r.impl}" for reg, r in pts]
    effs = [100 * r.efficiency for _, r in pts]
    y = range(len(names))
    bars.barh(list(y), effs, color=[colours[reg.name] for reg, _ in pts])
    bars.axvline(100, color="black", lw=1.5, ls="--", label="memory floor (100 %)")
    ceiling = regimes[0].kernel_ceiling() if regimes else None
    if ceiling is not None:
        bars.axvline(100 * ceiling[1], color="dimgray", lw=1.2, ls=":",
                     label=f"fastest kernel alone ({ceiling[0]}): {100 * ceiling[1]:,.0f} %")
    for i, e in enumerate(effs):
        bars.annotate(f"{e:,.1f} %", (e, i), textcoords="offset points", xytext=(3, -3), fontsize=8)
    bars.set_yticks(list(y), names, fontsize=8)
    bars.invert_yaxis()
    bars.set_xlim(0, max(110, max(effs) * 1.2))
    bars.set_xlabel("efficiency: floor ÷ measured step, %")
    bars.set_title(f"How close each gets to the floor (batch 1, {dtype})".replace(", )", ")"))
    bars.legend(fontsize=8, loc="lower right")
    return plots.finish(fig, source(regimes))


@plots.notes_when_empty('Where one decode step goes')
def breakdown_figure(regimes: Sequence[Regime]):
    """Each model's profiled eager step as one bar of 100 %: the four parts, the memory floor marked."""
    from ..present import plots

    regs = [r for r in regimes if r.breakdown is not None]
    fig, ax = plots.figure(width=8, height=1.8 + 0.8 * len(regs))
    for i, reg in enumerate(regs):
        b = reg.breakdown
        left = 0.0
        for part, secs in b.parts.items():
            share = 100 * secs / b.parts_sum_s
            ax.barh(i, share, left=left, color=_PART_COLOURS[part], label=part_label(part) if i == 0 else None)
            if share >= 7:
                ax.text(left + share / 2, i, f"{secs * 1e3:,.2f} ms", ha="center", va="center",
                        fontsize=7, color="white")
            left += share
        if b.floor_s is not None:
            x = 100 * b.floor_s / b.parts_sum_s
            ax.plot([x, x], [i - 0.45, i + 0.45], color="black", lw=2.5,
                    label="memory floor (bytes ÷ bandwidth)" if i == 0 else None)
    ax.set_yticks(range(len(regs)),
                  [f"{r.name} · {r.breakdown.impl}\n{r.breakdown.parts_sum_s * 1e3:,.2f} ms profiled\n"
                   f"{r.breakdown.measured_step_s * 1e3:,.2f} ms measured" for r in regs], fontsize=8)
    ax.invert_yaxis()   # the first model on top
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of one decode step (profiled, fastest loop, batch 1), %")
    ax.set_title("Where one decode step's time goes")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=3)
    return plots.finish(fig, source(regimes))


# ============================================================================ notebook 03 §6's words, by rule
# Each sentence about a measured size or direction is chosen by a rule from the regime's numbers
# (helpers.formulas.verdicts: the 10 % margin, shares, factors) and returned as a Verdict with them.

def generate_verdict(reg: Regime):
    """`generate` against the bare loop, by verdicts.speed, with the difference per step in ms."""
    from ..formulas import verdicts

    eager, gen = reg.result("eager"), reg.result("generate")
    if eager is None or gen is None:
        return verdicts.Verdict(f"{reg.name}: `generate` not measured", "generate", {})
    v = verdicts.speed(gen.step_s, eager.step_s, than="the bare loop")
    diff = (gen.step_s - eager.step_s) * 1e3
    return verdicts.Verdict(f"{reg.name}: `generate` {v.words} ({diff:+,.2f} ms per step)", "generate",
                            {**v.evidence, "diff_ms": diff})


def implementation_verdicts(reg: Regime, cache_bytes: int | None = None) -> list:
    """One model's implementations, by rule: the fastest one's floor share (verdicts.share), the packed loop, the
    static cache and `generate` against the bare loop (verdicts.speed), and the fastest matrix–vector kernel
    against the copy's bandwidth (helpers.measure.microbench.against_copy: above it, with the reason)."""
    from ..formulas import verdicts
    from ..measure.microbench import against_copy

    eager, best = reg.result("eager"), reg.best
    out = [verdicts.Verdict(f"{reg.name}: the fastest, {best.impl}, at {100 * best.efficiency:,.1f} % of its floor — the "
                            f"floor is {verdicts.share(best.floor_s, best.step_s, 'its step').words}"
                            if best.efficiency <= 1 + verdicts.CHANGE_MARGIN else
                            f"{reg.name}: the fastest, {best.impl}, beats its floor ({verdicts.factor(best.efficiency)})",
                            "best", {"efficiency": best.efficiency})]
    for impl, what in (("packed", "the packed loop"), ("static", "the static cache")):
        r = reg.result(impl)
        if r is not None and eager is not None:
            v = verdicts.speed(r.step_s, eager.step_s, than="the bare loop")
            out.append(verdicts.Verdict(f"{reg.name}: {what} {v.words}", impl, v.evidence))
    out.append(generate_verdict(reg))
    copy_bytes, kernel_bytes = reg.buffer_bytes()
    for name, bw in (reg.kernel_bandwidth or {}).items():
        what = {"linear": "`nn.Linear`'s kernel", "packed": "oneDNN's kernel on prepacked weights"}.get(name, name)
        out.append(against_copy(bw, reg.bandwidth, kernel_bytes, f"{reg.name}: {what}", cache_bytes, copy_bytes,
                                read_what="its stack of weights"))
    return out


def regimes_verdict(regimes: Sequence[Regime]):
    """The smallest model's best efficiency against the largest's, by the margin (who is nearer its floor)."""
    from ..present.roofline_figures import closer_verdict

    small, big = min(regimes, key=lambda r: r.weight_bytes), max(regimes, key=lambda r: r.weight_bytes)
    return closer_verdict(small.name, small.best.efficiency, big.name, big.best.efficiency)


def breakdown_verdicts(reg: Regime, cache_bytes: int | None = None) -> list:
    """One model's profiled step, by rule: the weight matmuls' share of it (verdicts.share), the parts that read no
    weights (attention aside: other operators and no operator at all), and the matmuls' own read rate against
    the copy's bandwidth (against_copy: above it when the weights stayed in the cache) and the fastest kernel's."""
    from ..formulas import verdicts
    from ..measure.microbench import against_copy

    b = reg.breakdown
    if b is None:
        return [verdicts.Verdict(f"{reg.name}: no breakdown measured", "breakdown", {})]
    mm = verdicts.share(b.parts.weight_matmuls_s, b.parts_sum_s, "the profiled step")
    rest = verdicts.share(b.parts.other_operators_s + b.parts.outside_operators_s, b.parts_sum_s, "it")
    out = [verdicts.Verdict(f"{reg.name}: the weight matmuls take {mm.words}; other operators and no operator at all "
                            f"{rest.words}", "breakdown", {"matmuls": mm.evidence["fraction"],
                                                           "rest": rest.evidence["fraction"]})]
    if b.matmul_bandwidth is not None and reg.bandwidth:
        copy_bytes, _ = reg.buffer_bytes()
        out.append(against_copy(b.matmul_bandwidth, reg.bandwidth, b.weight_bytes, f"{reg.name}'s weight matmuls read",
                                cache_bytes, copy_bytes))
        if reg.kernel_bandwidth:
            name, bw = max(reg.kernel_bandwidth.items(), key=lambda kv: kv[1])
            v = verdicts.against_roof(b.matmul_bandwidth, bw, "it")
            out.append(verdicts.Verdict(f"{reg.name}'s weight matmuls against the fastest kernel's own rate ({name}, "
                                        f"{bw / 1e9:,.1f} GB/s): {v.words}", "kernel", v.evidence))
    return out
