"""KV-cache and weight bytes: the formulas against worked examples, published checkpoint sizes,
and the bytes of real tensors (transformers caches, bitsandbytes-quantized models)."""
import pytest
import torch

from helpers.formulas import memory, specs
from helpers.measure import local_models, models, tensor_bytes


# ----------------------------------------------------------------------- KV formula

def test_mistral_kv_per_token_worked_example():
    # 2 (K and V) × 32 layers × 8 KV heads × 128 head_dim × 2 bytes (talk outline §3)
    assert memory.kv_bytes_per_token("mistral-7b-v0.1", "bf16") == 2 * 32 * 8 * 128 * 2 == 131_072


@pytest.mark.parametrize("name,expected", [
    ("mistral-7b-v0.3", 2 * 32 * 8 * 128 * 2),
    ("llama-3.1-8b", 2 * 32 * 8 * 128 * 2),
    ("qwen2.5-7b", 2 * 28 * 4 * 128 * 2),             # 57,344
    ("deepseek-v2-lite", 27 * (512 + 64) * 2),        # MLA latent + rope key, 31,104
    ("deepseek-v3", 61 * (512 + 64) * 2),             # 70,272
    ("gpt-oss-120b", 2 * 36 * 8 * 64 * 2),            # 73,728 at short context
])
def test_kv_per_token_every_preset(name, expected):
    assert memory.kv_bytes_per_token(name, "bf16") == expected


def test_kv_dtypes_scale_the_bytes():
    per = {d: memory.kv_bytes_per_token("mistral-7b-v0.1", d) for d in memory.KV_DTYPES}
    assert per["fp32"] == 2 * per["bf16"] == 4 * per["fp8"] == 4 * per["int8"] == 8 * per["int4"]


def test_context_times_users_worked_examples():
    # 4k context ≈ 0.5 GiB per user; 16k ≈ 2 GiB; 80 users at 4k ≈ 43 GB (talk outline §3),
    # on Mistral 7B v0.3 (no sliding window).
    assert memory.kv_cache_bytes("mistral-7b-v0.3", 4096, 1) == 2**29            # 0.5 GiB
    assert memory.kv_cache_bytes("mistral-7b-v0.3", 16384, 1) == 2**31           # 2 GiB
    assert round(memory.kv_cache_bytes("mistral-7b-v0.3", 4096, 80) / 1e9) == 43


def test_sliding_window_caps_the_cache():
    # Mistral 7B v0.1 slides a 4,096-token window on every layer: beyond it the cache stops growing.
    at_window = memory.kv_cache_bytes("mistral-7b-v0.1", 4096)
    assert memory.kv_cache_bytes("mistral-7b-v0.1", 32768) == at_window == 4096 * 131_072


def test_hybrid_layers_half_slide():
    # gpt-oss-120b: 18 sliding layers (window 128) and 18 full layers, 2 × 8 × 64 × 2 B per layer-token.
    per_layer = 2 * 8 * 64 * 2
    t = 131_072
    assert memory.kv_cache_bytes("gpt-oss-120b", t, 2) == 2 * (18 * t + 18 * 128) * per_layer


def test_bad_counts_are_value_errors():
    for bad in (0, -5, 1.5, True):
        with pytest.raises(ValueError, match="tokens must be a whole number ≥ 1"):
            memory.kv_cache_bytes("mistral-7b-v0.1", bad)
    with pytest.raises(ValueError, match="allowed"):
        memory.kv_bytes_per_token("mistral-7b-v0.1", "int3")


# ----------------------------------------------------------------------- measured caches

@pytest.mark.parametrize("tokens,batch", [(1, 1), (7, 1), (33, 2), (128, 3), (300, 1)])
def test_tiny_cache_bytes_equal_formula(tiny, tokens, batch):
    from transformers import DynamicCache

    ids = torch.randint(3, 32000, (batch, tokens))
    cache = DynamicCache(config=tiny.model.config)
    with torch.inference_mode():
        tiny.model(input_ids=ids, cache=cache, use_cache=True)
    assert tensor_bytes.measured_cache_bytes(cache) == memory.kv_cache_bytes(tiny.spec, tokens, batch, "fp32")


def test_tiny_cache_grows_by_one_token_per_decode_step(tiny):
    from helpers.measure.timing import timed_generate

    ids = torch.randint(3, 32000, (2, 10))
    g = timed_generate(tiny.model, ids, max_new_tokens=5, track_cache=True)
    expected = [memory.kv_cache_bytes(tiny.spec, 10 + i, 2, "fp32") for i in range(5)]
    assert g.cache_bytes == expected


def test_sliding_window_cache_measured(tmp_path, tiny_config):
    """A real DynamicSlidingWindowLayer keeps window − 1 tokens between steps."""
    from transformers import AutoModelForCausalLM, DynamicCache

    folder = local_models.build_tiny(tmp_path / "swa", {**tiny_config, "sliding_window": 16, "num_hidden_layers": 2})
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    spec = specs.spec_from_config(model.config.to_dict(), "tiny-swa")
    assert spec.sliding_window == 16 and spec.sliding_layers == 2
    for tokens in (5, 15, 16, 40):
        cache = DynamicCache(config=model.config)
        with torch.inference_mode():
            model(input_ids=torch.randint(3, 32000, (1, tokens)), cache=cache, use_cache=True)
        assert tensor_bytes.measured_cache_bytes(cache) == memory.kv_cache_bytes(spec, tokens, 1, "fp32", window_slots=15)


# ----------------------------------------------------------------------- weights

def test_mistral_weight_bytes_bf16():
    # The safetensors index of mistralai/Mistral-7B-v0.1 gives total_size 14,483,464,192 bytes.
    w = memory.weight_bytes("mistral-7b-v0.1", "bf16")
    assert w.bytes == 14_483_464_192 and w.params == 7_241_732_096


def test_gpt_oss_mxfp4_equals_published_checkpoint():
    # openai/gpt-oss-120b ships its experts in MXFP4 and the rest in bf16: 65,248,815,744 bytes
    # of tensors (helpers/presets/SOURCES.md). The scheme's formula gives exactly that.
    assert memory.weight_bytes("gpt-oss-120b", "mxfp4").bytes == 65_248_815_744


@pytest.mark.parametrize("name", ["mistral-7b-v0.1", "llama-3.1-8b", "qwen2.5-7b"])
def test_quantization_orders_bytes(name):
    b = {s: memory.weight_bytes(name, s).bytes for s in ("fp32", "bf16", "fp8", "int8", "nf4", "nf4-dq")}
    assert b["fp32"] > b["bf16"] > b["int8"] > b["nf4"] > b["nf4-dq"]
    assert b["bf16"] > b["fp8"]


def test_bitsandbytes_leaves_experts_and_embeddings_alone():
    # bitsandbytes replaces nn.Linear only: gpt-oss's fused expert tensors stay in bf16 under int8.
    w = memory.weight_bytes("gpt-oss-120b", "int8")
    pb = specs.param_breakdown("gpt-oss-120b")
    assert w.unquantized_params == pb.total - pb.linear >= pb.experts + pb.embedding + pb.lm_head


def test_unknown_scheme():
    with pytest.raises(ValueError, match="allowed: .*nf4"):
        memory.weight_bytes("mistral-7b-v0.1", "int3")


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["int8", "nf4", "nf4-dq"])
def test_bitsandbytes_measured_equals_formula(scheme):
    """The real bitsandbytes-quantized tiny model: its tensors' bytes equal the formula exactly."""
    import warnings

    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    q = {"int8": BitsAndBytesConfig(load_in_8bit=True),
         "nf4": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4"),
         "nf4-dq": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                      bnb_4bit_use_double_quant=True)}[scheme]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_pretrained(local_models.build_tiny(), quantization_config=q,
                                                     dtype=torch.bfloat16, device_map="cpu")
    spec = specs.spec_from_config(local_models.TINY_CONFIG, "tiny")
    assert tensor_bytes.measured_weight_bytes(model) == memory.weight_bytes(spec, scheme).bytes


def test_loaded_model_bytes_equal_formula(tiny):
    assert tensor_bytes.measured_weight_bytes(tiny.model) == memory.weight_bytes(tiny.spec, "fp32").bytes
    # buffers (rotary inverse frequencies) come on top
    assert tensor_bytes.measured_model_bytes(tiny.model) > tensor_bytes.measured_weight_bytes(tiny.model)


def test_torch_dtype_takes_any_spelling():
    import torch

    from helpers.measure.dtypes import torch_dtype

    assert torch_dtype("fp32") is torch.float32 and torch_dtype("bfloat16") is torch.bfloat16 and torch_dtype("FP16") is torch.float16
    with pytest.raises(ValueError, match="allowed: fp32, bf16, fp16"):
        torch_dtype("int8")


def test_prefill_activation_is_the_mlp_intermediate():
    # Mistral 7B v0.1: intermediate_size 14,336 (its config.json), bf16
    assert memory.prefill_activation_bytes("mistral-7b-v0.1", 1024, 512, "bf16") == 512 * 1024 * 14_336 * 2
    assert memory.prefill_activation_bytes("mistral-7b-v0.1", 1024, 512, "bf16") / 1e9 == pytest.approx(15.03, abs=0.01)
    assert memory.prefill_activation_bytes("llama-3.1-8b", 10, 1, "fp32") == 10 * 14_336 * 4
    with pytest.raises(ValueError, match="batch"):
        memory.prefill_activation_bytes("mistral-7b-v0.1", 10, 0)


def test_cache_window_slots_is_the_window_less_the_current_token():
    from helpers.formulas.memory import cache_window_slots
    from helpers.formulas.specs import get_spec

    assert cache_window_slots(get_spec("mistral-7b-v0.1")) == 4095     # config.json: sliding_window 4096
    assert cache_window_slots(get_spec("mistral-7b-v0.3")) is None     # no window
