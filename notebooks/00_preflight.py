import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo
    import pandas as pd

    from helpers import notebook, preflight
    from helpers.units import fmt_bytes

    notebook.setup()
    return fmt_bytes, mo, pd, preflight


@app.cell
def _(mo):
    mo.md("""
    # 00 · Preflight

    Run this first, on the machine you will use. It says what this machine is, which model
    profile the notebooks will run (set `WORKSHOP_PROFILE` to choose: `tiny`, `tiny-trained`,
    `mistral-7b`, `mistral-7b-random`, or `auto`; without a CUDA GPU `auto` picks `tiny-trained`,
    trained once per machine in about a minute), the library versions, the memory at hand, whether the
    Mistral 7B weights are present, and whether each later notebook will work here.
    """)
    return


@app.cell
def _(preflight):
    info = preflight.summary()
    return (info,)


@app.cell
def _(mo):
    mo.md("""
    ## This machine and the profile
    """)
    return


@app.cell
def _(fmt_bytes, info, pd):
    dev = info["device"]
    machine = pd.DataFrame(
        [
            ("device", f"{dev['kind']}: {dev['name']}"),
            ("memory (total)", fmt_bytes(dev["total_memory"]) if dev["total_memory"] else "unknown"),
            ("memory (free now)", fmt_bytes(dev["free_memory"]) if dev["free_memory"] else "unknown"),
            ("CPU threads / CUDA SMs", dev["cores"]),
            ("CUDA capability", dev["capability"] or "-"),
            ("profile", info["profile"]),
            ("why this profile", info["reason"]),
            ("Mistral 7B weights", info["weights"]["message"]),
            *[("⚠ setting ignored", p) for p in info["problems"]],
        ],
        columns=["what", "this machine"],
    ).set_index("what")
    machine
    return


@app.cell
def _(mo):
    mo.md("""
    ## Library versions
    """)
    return


@app.cell
def _(info, pd):
    versions = pd.DataFrame(sorted(info["versions"].items()), columns=["library", "version"]).set_index("library")
    versions
    return


@app.cell
def _(info, preflight):
    model_check = preflight.check_model(info["profile"], info["device"]["kind"])
    return (model_check,)


@app.cell
def _(mo, model_check):
    mo.md(f"""
    ## Go / no-go

    Model check ({model_check.seconds:.1f} s): {'✅' if model_check.ok else '❌'} {model_check.message}
    """)
    return


@app.cell
def _(info, model_check, pd, preflight):
    go = pd.DataFrame(preflight.go_no_go(model_check.ok, info["versions"], info["device"]["kind"])).set_index("notebook")
    go
    return


if __name__ == "__main__":
    app.run()
