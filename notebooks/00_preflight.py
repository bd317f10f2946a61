# /// script
# requires-python = ">=3.10"
# dependencies = [
#     "llm-inference-workshop-helpers @ git+https://github.com/YOUR-GITHUB-OWNER/llm-inference-at-scale@main",
#     "torch",
# ]
# ///

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")

with app.setup:
    import time

    import marimo as mo
    import pandas as pd

    from helpers.present import expected, notebook, plots
    from helpers import preflight
    from helpers.present.glossary import term
    from helpers.formulas.memory import weight_bytes
    from helpers.formulas.units import fmt_bytes
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()


@app.function
def first_training() -> str:
    """How long training the tiny-trained model took on this machine, from its log; before it ran, that it
    has not (the records' first runs above say how long it took there)."""
    from helpers.measure import training

    try:
        folder = training.trained_folder()
    except ValueError:  # a refused setting (WORKSHOP_CACHE): its line shows first below
        return "not known until the setting refused below is fixed"
    if not (folder / "training.json").exists():
        return "not trained here yet (a record's first run above includes its training)"
    log = training.log(folder)
    return (f"here it took {log['train_wall_s']:,.0f} s on {log['torch_threads']} threads "
            "(its log, `training.json`, in the workshop cache)")


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 00 · Preflight

    **What you will learn**

    1. Which model {term("profile")} the notebooks will run on this machine, and why.
    2. Whether the device, its memory and the libraries are what the notebooks need.
    3. Whether the Mistral 7B weights are here — and, if not, the exact fix.
    4. Which later notebooks will work here (go / no-go).

    {run_times.header("00")} The first run on a machine without a GPU also trains the `tiny-trained` model, once, in the model check under **Go / no-go**: {first_training()}. On a GPU the model check loads Mistral 7B's {weight_bytes("mistral-7b-v0.1", "bf16").bytes / 1e9:,.1f} GB of bf16 weights (computed, `helpers.formulas.memory.weight_bytes`) for one forward pass.

    Run this first, on the machine you will use. Set `WORKSHOP_PROFILE` to choose the model: `tiny`,
    `tiny-trained`, `mistral-7b`, `mistral-7b-random` or `auto` (the default: Mistral 7B when a CUDA GPU
    and the weights are available; `tiny` on a CUDA GPU without them; without a CUDA GPU `tiny-trained`,
    trained once per machine — the line above says how long that took). Terms in blue link to the
    glossary (`workshop/glossary.md`).
    """)
    return


@app.cell
def _():
    info = preflight.summary()
    return (info,)


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## This machine and the profile
    """)
    return


@app.cell
def _(info):
    dev = info["device"]
    machine = pd.DataFrame(
        [
            ("device", f"{dev['kind']}: {dev['name']}"),
            ("memory (total)", fmt_bytes(dev["total_memory"]) if dev["total_memory"] else "unknown"),
            ("memory (free now)", fmt_bytes(dev["free_memory"]) if dev["free_memory"] else "unknown"),
            ("CPU threads / CUDA SMs", str(dev["cores"])),
            ("CUDA capability", dev["capability"] or "-"),
            ("profile", info["profile"]),
        ],
        columns=["what", "this machine"],
    )
    plots.table(machine, "measured on this machine by helpers.preflight.summary")
    return


@app.cell
def _(info):
    # A refused setting first, then the reason and the weights check with its fix, as text shown whole
    mo.md("\n\n".join(preflight.notes(info)))
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Library versions
    """)
    return


@app.cell
def _(info):
    versions = pd.DataFrame(sorted(info["versions"].items()), columns=["library", "version"])
    plots.table(versions, "installed in this Python environment")
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Go / no-go

    The model check loads exactly what the notebooks load (`models.load()`); on a first run without a GPU it
    trains the `tiny-trained` model first, so its time is this section's.
    """)
    return


@app.cell
def _():
    model_check = preflight.check_model()  # loads exactly what the notebooks load (models.load())
    return (model_check,)


@app.cell(hide_code=True)
def _(model_check):
    mo.md(f"""
    Model check ({model_check.seconds:.1f} s): {'✅' if model_check.ok else '❌'} {model_check.message}
    """)
    return


@app.cell
def _(info, model_check):
    go = pd.DataFrame(preflight.go_no_go(model_check.ok, info["versions"], info["device"]["kind"]))
    plots.table(go, f"for profile {info['profile']} on {info['device']['kind']}")
    return (go,)


@app.cell(hide_code=True)
def _(go, info, model_check):
    _cuda_go = preflight.go_no_go(True, info["versions"], "cuda")
    _ok_cuda = sum(r["verdict"] == "go" for r in _cuda_go)
    _w = weight_bytes("mistral-7b-v0.1", "bf16").bytes
    expected.should_see(preflight.findings(info, model_check, go.to_dict("records")), [
        expected.gpu_memory_on_gpu(),
        expected.computed(f"with Mistral 7B loaded ({_w / 1e9:,.2f} GB of bf16 weights), the go/no-go table on a CUDA "
                          f"device says go for {_ok_cuda} of {len(_cuda_go)} notebooks with this environment's libraries",
                          "helpers.preflight.go_no_go(True, these versions, 'cuda'); helpers.formulas.memory.weight_bytes"),
    ])
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    ## Exercises
    """)
    return


@app.cell
def _():
    from helpers.formulas.gpus import catalog as _catalog
    from helpers.formulas.specs import PRESETS as _PRESETS, param_count as _param_count

    _big = max(_PRESETS, key=_param_count)
    _gpu = max(_catalog(), key=lambda g: g.usable_memory_bytes)
    notebook.exercise(1, """From a terminal, list the models and GPUs the calculators know:
    `python -m helpers presets` and `python -m helpers gpus`. Which preset is the largest, and which
    GPU has the most memory?""", f"""
    `presets` lists every shipped `config.json` ({", ".join(_PRESETS)}) with its parameter count:
    **{_big}** is the largest, at {_param_count(_big):,} parameters. `gpus` prints the catalog with each
    figure's source: the **{_gpu.name}** has the most memory, {_gpu.usable_memory_bytes / 1e9:,.2f}·10⁹ B — {_gpu.usable_memory_note}.
    Every later notebook draws from these two lists.""")
    return


@app.cell
def _(info):
    # The solution runs what the exercise asks, where it is cheap: on a CUDA GPU mistral-7b-random would
    # build the full model, so there the solution says so instead of running it.
    _cpu = info["device"]["kind"] != "cuda"
    _random = preflight.check_model("mistral-7b-random") if _cpu else None
    _no_go = sum(r["verdict"] == "no-go" for r in preflight.go_no_go(False, info["versions"], info["device"]["kind"]))
    _refused = preflight.profile_refusal("mistral-70b")
    _first = (f"""On this machine (`{info["device"]["kind"]}`) `check_model('mistral-7b-random')` returns
    {'✅' if _random.ok else '❌'} after {_random.seconds:,.1f} s: *{_random.message}* With a model check that fails,
    the go/no-go table turns {_no_go} notebooks to no-go.""" if _cpu else f"""On this CUDA device
    `check_model('mistral-7b-random')` builds the full architecture
    ({weight_bytes("mistral-7b-v0.1", "fp32").params:,} parameters, {weight_bytes("mistral-7b-v0.1", "bf16").bytes / 1e9:,.1f} GB
    in bf16) and runs one forward pass; not run in this solution. Where it cannot run, the go/no-go table
    turns {_no_go} notebooks to no-go.""")
    notebook.exercise(2, """Ask the preflight about other profiles from a terminal:
    `python -c "from helpers import preflight; print(preflight.check_model('mistral-7b-random'))"`, then
    `WORKSHOP_PROFILE=mistral-70b python -c "from helpers import preflight; print(preflight.summary()['problems'])"`.
    What does each report?""", f"""
    {_first}

    `mistral-70b` is not a profile. The preflight still answers: `summary()['problems']` holds the message
    `helpers.measure.models.resolve_profile` raises, caught here — *{_refused}* — and every notebook that
    loads a model stops with the same line. A wrong input is a message, never a traceback.""")
    return


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    ## Takeaways

    - The profile decides everything the later notebooks measure: the tiny model on a CPU shows the
      mechanisms; Mistral 7B on a GPU shows the full-size figures (each header says how long each takes).
    - Missing weights are a message with its fix, never a hang: the tiny and `mistral-7b-random`
      profiles need no download.
    - Every plot and table from here on says which model, dtype, device and profile produced it.

    *This run took {notebook.elapsed(started)}.*
    """)
    return


if __name__ == "__main__":
    app.run()
