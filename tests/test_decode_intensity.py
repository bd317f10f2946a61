"""Notebook 03's decode intensity, computed: against batch with and without the KV cache (hand-worked for
Mistral 7B on an H100), the GPU figures a learner should expect, and the folded solutions."""
import pytest

from helpers.formulas import decode_intensity, roofline
from helpers.present import expected, notebook, roofline_figures
from helpers.capacity import ranking as capacity_ranking, views as capacity_views

MISTRAL = "mistral-7b-v0.1"


def test_mistral_at_4k_on_an_h100_stays_far_under_the_ridge():
    df = decode_intensity.intensity_table(MISTRAL, "H100 SXM", contexts=(4096,))
    s = decode_intensity.summary(df)[0]
    assert s["max_batch"] == 115                      # the planner's budget on the 79.11 GiB an H100 reports
    # By hand: 115 × 16,368,271,360 FLOPs ÷ (14,221,320,192 B of weights
    #          + 115 × (8,192 B embedding row + 4,097 × 131,072 B of cache read and written))
    flops = 115 * 16_368_271_360
    nbytes = 14_221_320_192 + 115 * (8192 + 4097 * 131_072)
    assert s["intensity_at_max_batch"] == pytest.approx(flops / nbytes) == pytest.approx(24.78, abs=0.01)
    assert s["ridge"] == pytest.approx(989.5e12 / 3.35e12)          # from the catalog, not typed
    assert s["intensity_at_max_batch"] / s["ridge"] == pytest.approx(24.78 / 295.37, abs=1e-3)
    # the cache puts a ceiling on the intensity whatever the batch: FLOPs ÷ KV bytes per sequence
    ceiling = df["intensity_with_kv"].max()
    assert ceiling < 16_368_271_360 / (4097 * 131_072)
    # the limit itself, by hand: 16,368,271,360 FLOPs ÷ (8,192 + 4,097 × 131,072) B per sequence = 30.48
    assert s["limit_with_kv"] == pytest.approx(16_368_271_360 / (8192 + 4097 * 131_072)) == pytest.approx(30.48, abs=0.01)
    assert ceiling < s["limit_with_kv"] < s["ridge"]


def test_at_the_weights_only_crossover_batch_decode_at_4k_is_still_far_under_the_ridge():
    """The talk's 'reaches the ridge near batch 295': with the cache counted, batch 295 at 4,096 tokens does
    28 FLOP/B — and does not fit an H100 (115 do)."""
    p = decode_intensity.point(MISTRAL, "H100 SXM", context=4096, batch=295)
    flops, nbytes = 295 * 16_368_271_360, 14_221_320_192 + 295 * (8192 + 4097 * 131_072)
    assert p.intensity_with_kv == pytest.approx(flops / nbytes) == pytest.approx(27.97, abs=0.01)
    assert p.intensity_weights_only == pytest.approx(294.15, abs=0.01) and p.intensity_weights_only < p.ridge
    assert not p.fits and p.max_batch == 115 and p.bound == "memory"
    assert decode_intensity.point(MISTRAL, "H100 SXM", context=256, batch=1024).bound == "compute"
    fig = roofline_figures.point_figure(p)
    assert "(at most 115 fit)" in fig.axes[0].get_title()
    row = roofline_figures.point_frame(p).iloc[0]
    assert row["label"] == "below" and row["with the cache ÷ ridge"] == pytest.approx(p.intensity_with_kv / p.ridge)
    assert row["largest batch that fits"] == 115


def test_weights_only_intensity_grows_with_the_batch_and_crosses_near_the_crossover():
    df = decode_intensity.intensity_table(MISTRAL, "H100 SXM", contexts=(1024,), batches=[1, 256, 512])
    w = dict(zip(df["batch"], df["intensity_weights_only"]))
    assert w[1] == pytest.approx(1.0, abs=0.01)                  # 2 FLOPs per 2-byte parameter
    assert w[256] < w[512] and w[256] < df["ridge"].iloc[0] < w[512]   # crossover ≈ 295
    assert all(df["intensity_with_kv"] < df["intensity_weights_only"] + 0.2)


def test_a_short_context_with_a_huge_batch_can_reach_the_ridge():
    s = decode_intensity.summary(decode_intensity.intensity_table(MISTRAL, "H100 SXM", contexts=(256,)))[0]
    assert s["intensity_at_max_batch"] >= s["ridge"]
    assert s["limit_with_kv"] > s["ridge"]


def test_a_batch_too_large_to_fit_reaches_the_ridge_only_where_the_limit_allows():
    s = decode_intensity.summary(decode_intensity.intensity_table(MISTRAL, "L4", contexts=(256,)))[0]
    assert s["intensity_at_max_batch"] < s["ridge"] < s["limit_with_kv"]      # 24 GB: the batch that would does not fit


def test_intensity_figure_is_titled_and_stamped():
    df = decode_intensity.intensity_table(MISTRAL, "H100 SXM", contexts=(512, 4096), batches=[1, 8, 64])
    fig = roofline_figures.intensity_figure(df, MISTRAL, "bf16")
    assert "Decode's arithmetic intensity" in fig.axes[0].get_title()
    assert any("H100 SXM figures from the GPU catalog" in t.get_text() for t in fig.texts)


# ----------------------------------------------------------------------------- expected, solutions, tables

def test_what_you_should_see_on_an_h100():
    e = roofline.gpu_roofline("H100 SXM", expected.REFERENCE_MODEL, contexts=(4096,))
    assert e["ridge"] == pytest.approx(295.37, abs=0.01) and e["crossover_batch"] == pytest.approx(e["ridge"])
    assert e["decode_floor_s"][4096] == pytest.approx(14_758_330_368 / 3.35e12)
    assert e["decode_at_efficiency_s"][4096] == pytest.approx(e["decode_floor_s"][4096] / e["efficiency"])
    assert e["prefill_intensity"] > e["ridge"] > e["decode_intensity"][4096]


def test_folded_solution_outside_marimo_is_a_details_block():
    html = notebook.folded("Solution", "**42**, because\n\n- one\n- two").text
    assert html.startswith("<details>") and "<strong>42</strong>" in html and "<li>" in html


def test_request_table_prices_input_and_output():
    df = capacity_views.request_frame(capacity_ranking.rank_requests(MISTRAL, 1000, 200, slo_ms=20))
    ok = df[df["status"] == "ok"]
    assert list(ok["$ per request"]) == sorted(ok["$ per request"])
    assert (ok["$ per M output tokens (request)"] > ok["$ per M input tokens"]).all()


def test_the_cache_caps_decodes_intensity_whatever_the_batch():
    """Notebook 03's objective, computed: Mistral 7B at 4,096 tokens, bf16. Per sequence a step does
    2·N FLOPs in the matrices plus 4·L·d·c in attention, and reads its cache, 2·L·kv·hd·2 B per token × c;
    the weights, read once for the batch, drop out as it grows: about 31 FLOP/B, an H100's ridge 295."""
    from helpers.formulas import gpus, roofline
    from helpers.formulas.decode_intensity import limit_intensity
    from helpers.formulas.specs import get_spec

    s = get_spec("mistral-7b-v0.1")
    c = 4096
    by_hand = (2 * 7_241_732_096 + 4 * s.num_layers * s.hidden_size * c) / (c * 2 * s.num_layers * s.num_kv_heads * s.head_dim * 2)
    cap = limit_intensity("mistral-7b-v0.1", c)
    assert abs(cap - by_hand) / by_hand < 0.05
    g = gpus.get_gpu("H100 SXM")
    assert cap < roofline.ridge_point(g.peak_flops("bf16")[0], g.bandwidth) / 5
