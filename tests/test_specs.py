"""Model shapes from the presets' config.json, and exact parameter counts from the architecture
built on the meta device, against published figures (helpers/presets/SOURCES.md)."""
import json

import pytest

from helpers.formulas import specs

# Published parameter counts: metadata.total_size of each model's model.safetensors.index.json
# divided by 2 bytes (bf16 checkpoints), or the count the model card states.
PUBLISHED_PARAMS = {
    "mistral-7b-v0.1": 14_483_464_192 // 2,   # 7,241,732,096
    "mistral-7b-v0.3": 14_496_047_104 // 2,   # 7,248,023,552 (vocab 32,768)
    "llama-3.1-8b": 16_060_522_496 // 2,      # 8,030,261,248
    "qwen2.5-7b": 15_231_233_024 // 2,        # 7,615,616,512
    "deepseek-v2-lite": 31_412_968_448 // 2,  # 15,706,484,224
    "gpt-oss-120b": 116_829_156_672,          # GGUF parameter count; checkpoint stores experts in MXFP4
}


@pytest.mark.parametrize("name,published", sorted(PUBLISHED_PARAMS.items()))
def test_param_count_matches_published(name, published):
    assert specs.param_count(name) == published


def test_deepseek_v3_main_model_is_671b():
    # 671 B main model (the card's "685B" adds the 14 B multi-token-prediction module, which
    # transformers does not build) — paper arXiv:2412.19437 §1.
    n = specs.param_count("deepseek-v3")
    assert 671.0e9 <= n < 671.1e9


def test_mistral_count_by_hand():
    """The same number from the architecture's matrices, written out (Mistral paper Table 1)."""
    h, inter, layers, vocab, kv = 4096, 14336, 32, 32000, 8 * 128
    attn = h * h * 2 + h * kv * 2          # q, o; k, v
    mlp = 3 * h * inter                     # gate, up, down
    norms = 2 * h
    total = 2 * vocab * h + layers * (attn + mlp + norms) + h
    assert total == 7_241_732_096 == specs.param_count("mistral-7b-v0.1")


def test_breakdown_adds_up_and_separates_kinds():
    pb = specs.param_breakdown("mistral-7b-v0.1")
    assert pb.embedding == pb.lm_head == 32000 * 4096
    assert pb.linear_layers == 32 * 7
    assert pb.experts == 0
    assert pb.embedding + pb.lm_head + pb.linear + pb.experts + pb.other == pb.total
    gpt = specs.param_breakdown("gpt-oss-120b")
    assert gpt.expert_matrices == 36 * 128 * 2  # gate_up and down per expert per layer


@pytest.mark.parametrize("name,attention,kv_heads,head_dim,window,sliding", [
    ("mistral-7b-v0.1", "gqa", 8, 128, 4096, 32),
    ("mistral-7b-v0.3", "gqa", 8, 128, None, 0),
    ("llama-3.1-8b", "gqa", 8, 128, None, 0),
    ("qwen2.5-7b", "gqa", 4, 128, None, 0),       # sliding_window present but use_sliding_window=false
    ("deepseek-v2-lite", "mla", 16, 128, None, 0),
    ("deepseek-v3", "mla", 128, 56, None, 0),
    ("gpt-oss-120b", "hybrid", 8, 64, 128, 18),   # explicit head_dim 64 ≠ 2880 / 64
])
def test_shapes_read_from_config(name, attention, kv_heads, head_dim, window, sliding):
    s = specs.get_spec(name)
    assert s.attention == attention
    assert s.num_kv_heads == kv_heads
    if attention != "mla":
        assert s.head_dim == head_dim
    assert s.sliding_window == window
    assert s.sliding_layers == sliding


def test_mla_ranks():
    s = specs.get_spec("deepseek-v3")
    assert (s.kv_lora_rank, s.qk_rope_head_dim, s.qk_nope_head_dim, s.v_head_dim) == (512, 64, 128, 128)
    assert s.num_layers == 61 and s.num_heads == 128


def test_head_kinds(tmp_path):
    base = json.loads(specs.preset_path("mistral-7b-v0.3").read_text())
    for kv, kind in ((32, "mha"), (1, "mqa"), (4, "gqa")):
        assert specs.spec_from_config({**base, "num_key_value_heads": kv}).attention == kind


def test_config_path_and_folder(tmp_path):
    src = specs.preset_path("llama-3.1-8b").read_text()
    (tmp_path / "config.json").write_text(src)
    assert specs.get_spec(tmp_path / "config.json").num_layers == 32
    assert specs.get_spec(str(tmp_path)).num_layers == 32


@pytest.mark.parametrize("content,match", [
    ("not json", "cannot read"),
    ("[1, 2]", "not a Hugging Face config"),
    ('{"model_type": "mistral"}', "no 'hidden_size'"),
    ('{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3, "vocab_size": 10}',
     "cannot be shared"),
])
def test_bad_configs_raise_value_error(tmp_path, content, match):
    p = tmp_path / "config.json"
    p.write_text(content)
    with pytest.raises(ValueError, match=match):
        specs.get_spec(p)


def test_unknown_model_lists_presets():
    with pytest.raises(ValueError, match="presets: mistral-7b-v0.1"):
        specs.get_spec("mistral-8b")


def test_unbuildable_architecture_is_a_value_error():
    with pytest.raises(ValueError, match="unsupported config"):
        specs.param_count({"model_type": "no-such-arch", "hidden_size": 8, "num_hidden_layers": 1,
                           "num_attention_heads": 2, "vocab_size": 10})
