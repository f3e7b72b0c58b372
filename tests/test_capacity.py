"""Capacity: bytes per parameter, KV cache per token, chips to hold a model, what fits."""

from __future__ import annotations

import itertools
import math

import pytest

from inferlab.model import capacity as cap
from inferlab.model.specs import chip, chips, model, models

MIB = 2**20


def test_bytes_per_param_table():
    assert cap.BYTES_PER_PARAM == {
        "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp4": 0.5, "int4": 0.5,
    }
    assert cap.bytes_per_param("FP16") == 2.0


@pytest.mark.parametrize(("precision", "gb"), [("fp16", 140), ("int8", 70), ("int4", 35)])
def test_70b_weight_bytes_match_the_published_140_70_35_gb(precision, gb):
    assert cap.weight_bytes(70e9, precision) == pytest.approx(gb * 1e9)


def test_llama2_70b_kv_cache_is_320_kib_per_token_at_bf16():
    llama = model("Llama 2 70B")
    assert cap.kv_bytes_per_token(llama, "bf16") == 320 * 1024
    # Without grouped-query attention (64 KV heads, one per query head): 8x as much.
    assert cap.kv_bytes_per_token(llama, "bf16", kv_heads=llama.attention_heads) == 2560 * 1024


def test_llama2_7b_is_multi_head_attention_at_512_kib_per_token():
    assert cap.kv_bytes_per_token(model("Llama 2 7B"), "bf16") == 512 * 1024


def test_deepseek_v3_uses_the_mla_latent_formula():
    # 61 layers x (512 latent + 64 rotary key) x 2 bytes = 70,272 bytes (config_671B.json).
    assert cap.kv_bytes_per_token(model("DeepSeek-V3"), "bf16") == 70_272


def test_an_mla_cache_follows_its_config_and_a_missing_width_raises_clearly():
    from dataclasses import replace

    # DeepSeek-V3: one 512-wide latent and one 64-wide rotary key per layer and token.
    assert cap.kv_bytes_per_token(model("DeepSeek-V3")) == 61 * (512 + 64) * 2
    wider = replace(model("DeepSeek-V3"), name="A wider MLA model", kv_lora_rank=1024)
    assert cap.kv_bytes_per_token(wider) == 61 * (1024 + 64) * 2
    unknown = replace(model("DeepSeek-V3"), name="Some MLA model", kv_lora_rank=0,
                      qk_rope_head_dim=0)
    with pytest.raises(ValueError, match="multi-head latent attention"):
        cap.kv_bytes_per_token(unknown)
    with pytest.raises(ValueError, match="kv_heads"):
        cap.kv_bytes_per_token(model("DeepSeek-V3"), kv_heads=8)


def test_groq_chips_to_hold_70b():
    groq = chip("Groq LPU (GroqChip)")
    # 220 MiB per chip (ISCA 2022). 70e9 / 220 MiB = 303.4, so 304 chips at INT8; 607 at FP16.
    assert groq.memory_capacity_bytes == pytest.approx(220 * MIB, rel=1e-5)
    ratio = 70e9 / (220 * MIB)
    assert ratio == pytest.approx(303.4, abs=0.05)
    assert cap.chips_to_hold(cap.weight_bytes(70e9, "int8"), 220 * MIB) == 304
    assert cap.chips_to_hold(cap.weight_bytes(70e9, "fp16"), 220 * MIB) == 607
    assert cap.chips_to_hold(cap.weight_bytes(70e9, "fp16"), groq.memory_capacity_bytes) == 607


def test_chips_to_hold_exact_multiple_is_not_rounded_up():
    assert cap.chips_to_hold(140e9, 70e9) == 2
    assert cap.chips_to_hold(140e9 + 1e6, 70e9) == 3


def test_too_big_for_any_allowed_chip_count_raises():
    with pytest.raises(ValueError, match="max_chips=8"):
        cap.chips_to_hold(cap.weight_bytes(405e9, "fp16"), 80e9, max_chips=8)


def test_weights_only_ceilings():
    assert cap.largest_model_params(80e9, "fp16") == pytest.approx(40e9)
    assert cap.largest_model_params(141e9, "fp16") == pytest.approx(70.5e9)
    assert cap.largest_model_params(32e9, "fp16") == pytest.approx(16e9)
    assert cap.largest_model_params(16e9, "fp16") == pytest.approx(8e9)
    assert cap.largest_model_params(80e9, "fp16", 0.1) == pytest.approx(36e9)


def test_kv_tokens_and_max_batch_on_h200():
    h200 = chip("NVIDIA H200 SXM")
    llama = model("Llama 2 70B")
    weights = cap.weight_bytes(llama.params_total, "fp8")
    per_token = cap.kv_bytes_per_token(llama, "fp8")
    tokens = cap.kv_tokens_that_fit(h200.memory_capacity_bytes, weights, per_token)
    assert tokens == math.floor((141e9 - weights) / per_token)
    batch = cap.max_batch(h200.memory_capacity_bytes, weights, per_token, 4096)
    assert batch == tokens // 4096
    budget = cap.memory_budget(h200.memory_capacity_bytes, weights, per_token, 4096, batch)
    assert budget.fits
    assert not cap.memory_budget(h200.memory_capacity_bytes, weights, per_token, 4096,
                                 batch + 1).fits


def test_nothing_fits_when_the_weights_do_not():
    assert cap.kv_tokens_that_fit(80e9, 140e9, 327680) == 0
    assert cap.max_batch(80e9, 140e9, 327680, 1024) == 0


@pytest.mark.parametrize(("chip_name", "model_name"), list(itertools.product(chips(), models())))
def test_a_model_that_fits_at_fp16_fits_at_int8_and_int4(chip_name, model_name):
    capacity = chip(chip_name).memory_capacity_bytes
    params = model(model_name).params_total
    fits = {p: cap.weight_bytes(params, p) <= capacity for p in cap.BYTES_PER_PARAM}
    if fits["fp16"]:
        assert fits["int8"] and fits["fp8"] and fits["int4"]
    needed = [cap.chips_to_hold(cap.weight_bytes(params, p), capacity) for p in
              ("fp32", "fp16", "int8", "int4")]
    assert needed == sorted(needed, reverse=True)


def test_kv_cache_grows_linearly_with_context_and_batch():
    per_token = 327680
    assert cap.kv_cache_bytes(per_token, 4096, 8) == 8 * cap.kv_cache_bytes(per_token, 4096)
    assert cap.kv_cache_bytes(per_token, 8192) == 2 * cap.kv_cache_bytes(per_token, 4096)


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: cap.bytes_per_param("fp6"), "precision"),
        (lambda: cap.weight_bytes(0, "fp16"), "params"),
        (lambda: cap.weight_bytes(-1e9, "fp16"), "params"),
        (lambda: cap.weight_bytes(70e9, "nf4"), "precision"),
        (lambda: cap.kv_cache_bytes(1, 10, 0), "batch"),
        (lambda: cap.kv_cache_bytes(-1, 10), "kv_bytes_per_token"),
        (lambda: cap.chips_to_hold(1e9, 0), "capacity_bytes"),
        (lambda: cap.usable_bytes(80e9, 1.0), "reserve_fraction"),
        (lambda: cap.max_batch(80e9, 10e9, 1000, 0), "context_tokens"),
        (lambda: cap.kv_bytes_per_token(model("Llama 2 70B"), kv_heads=0), "kv_heads"),
    ],
)
def test_bad_input_names_the_argument(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()
