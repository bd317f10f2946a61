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

    from helpers.present import notebook, plots
    from helpers import preflight
    from helpers.present.glossary import term
    from helpers.formulas.memory import weight_bytes
    from helpers.present import run_times

    notebook.setup()
    started = time.perf_counter()
    MISTRAL_BF16 = weight_bytes("mistral-7b-v0.1", "bf16").bytes   # computed from its config.json


@app.cell(hide_code=True)
def _():
    mo.md(f"""
    # 00 · Preflight

    **What you will learn**

    1. Which model {term("profile")} the notebooks will run on this machine, and why.
    2. Whether the device, its memory and the libraries are what the notebooks need.
    3. Whether the Mistral 7B weights are here — and, if not, the exact fix.
    4. Which later notebooks will work here (go / no-go).

    {run_times.header("00")}

    On a machine without a GPU the first run also trains the `tiny-trained` model, once, in the model check
    under **Go / no-go** (the machine table gives how long it took here). On a GPU the model check loads
    Mistral 7B's {MISTRAL_BF16 / 1e9:,.2f} GB ({MISTRAL_BF16 / 2**30:,.2f} GiB) of bf16 weights for one forward pass.

    Run this first, on the machine you will use. `WORKSHOP_PROFILE` chooses the model: `tiny`,
    `tiny-trained`, `small`, `mistral-7b`, `mistral-7b-random` or `auto` (the default: Mistral 7B when a CUDA
    GPU and the weights are available; `tiny` on a CUDA GPU without them; `tiny-trained` without a CUDA GPU).
    Terms in blue link to the glossary (`workshop/glossary.md`).
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
    plots.table(pd.DataFrame(preflight.machine_rows(info, preflight.training_time())),
                "measured on this machine by helpers.preflight.summary; memory in bytes, GiB and GB")
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

    The model check loads exactly what the notebooks load (`models.load()`) and runs one forward pass; on a
    first run without a GPU it trains the `tiny-trained` model first, so its time is this section's.
    """)
    return


@app.cell
def _():
    model_check = preflight.check_model()  # loads exactly what the notebooks load (models.load())
    plots.table(pd.DataFrame([{"profile": model_check.profile, "loaded and ran": "✅" if model_check.ok else "❌",
                               "seconds": model_check.seconds, "message": model_check.message}]),
                "the model check, on this machine (helpers.preflight.check_model)")
    return (model_check,)


@app.cell
def _(info, model_check):
    plots.table(pd.DataFrame(preflight.go_no_go_rows(model_check.ok, info["versions"], info["device"]["kind"])),
                f"for profile {info['profile']} on {info['device']['kind']}; the last column: the same rules "
                "on a CUDA GPU with these libraries and a model that loads (helpers.preflight.go_no_go_rows)")
    return


@app.cell(hide_code=True)
def _():
    mo.md("""
    **What you should see.** The tables above are the facilitator's go/no-go for this machine.

    - **A laptop or CI without a CUDA GPU**: device `cpu`, profile `tiny-trained` (or `tiny` where set),
      the model check ✅ and every notebook *go*. The weights line says Mistral 7B is missing, with its fix;
      nothing on the tiny profiles needs them.
    - **A workshop GPU**: device `cuda` with its name, its memory as CUDA reports it (notebook 02 explains why
      an "80 GB" card shows less than 80 GiB) and profile `mistral-7b` once the weights are in the cache. The
      last column of the go/no-go table is what this table says there, with these libraries.
    - **A ❌ or a no-go**: the message beside it names what failed and the fix. A refused setting is listed
      first, in the words every notebook stops with; the notebooks that load no model still run.
    """)
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
    figure's source: the **{_gpu.name}** has the most memory, {_gpu.usable_memory_bytes:,.0f} B
    ({_gpu.usable_memory_bytes / 2**30:,.2f} GiB). Every later notebook draws from these two lists.""")
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
    {'✅' if _random.ok else '❌'}: *{_random.message}* With a model check that fails, the go/no-go table turns
    {_no_go} notebooks to no-go.""" if _cpu else f"""On a CUDA device `check_model('mistral-7b-random')` builds
    the full architecture ({weight_bytes("mistral-7b-v0.1", "fp32").params:,} parameters) and runs one forward
    pass; this solution does not run it. Where it cannot run, the go/no-go table turns {_no_go} notebooks to no-go.""")
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
