"""The answers of the exercises of chapter 'The memory-bandwidth floor', computed as there."""

from __future__ import annotations

import math

import pytest

from inferlab import capacity, parallel, roofline, specs
from inferlab.capacity import (
    ACTIVATION_RESERVE_FRACTION,
    GIB,
    MIB,
    chips_to_hold,
    kv_bytes_per_token,
    weight_bytes,
)
from inferlab.data import result
from inferlab.roofline import model_decode_floor

GB = 1e9
H100 = specs.chip("NVIDIA H100 SXM")
LLAMA2_70B = specs.model("Llama 2 70B")


def test_ex_bw_inf2_per_chip_bandwidth_and_overstatement():
    system = specs.chip("AWS inf2.48xlarge")
    inf2 = specs.chip("AWS Inferentia2 (per chip)")
    assert system.memory_bandwidth_bytes_per_s / GIB == pytest.approx(9840, abs=0.01)
    assert 9840 / system.chips == pytest.approx(820)
    l2_13b = specs.model("Llama 2 13B")
    right = model_decode_floor(l2_13b, "fp16", inf2.memory_bandwidth_bytes_per_s).step_s
    wrong = model_decode_floor(l2_13b, "fp16", 9.8e12).step_s
    assert right * 1e3 == pytest.approx(31.7, abs=0.05)
    assert right / wrong == pytest.approx(11.95, abs=0.01)


def test_ex_bw_groq_mib_against_mb():
    weights = weight_bytes(specs.model("Llama 3.1 8B").params_total, "int8")
    assert 220 * MIB == 230_686_720
    assert chips_to_hold(weights, 220 * MIB) == 35
    assert chips_to_hold(weights, 220e6) == 37


def test_ex_bw_b200_180_against_192_gb():
    def batch(capacity_gb):
        return capacity.max_batch(capacity_gb * GB, weight_bytes(LLAMA2_70B.params_total, "fp8"),
                                  kv_bytes_per_token(LLAMA2_70B, "fp8"), 4096,
                                  reserve_fraction=ACTIVATION_RESERVE_FRACTION)

    assert specs.chip("NVIDIA B200").memory_capacity_bytes == 180 * GB
    assert (batch(180), batch(192)) == (138, 154)
    assert batch(192) / batch(180) > 192 / 180


def test_ex_bw_tpu_819_gb_s_against_800_gib_s():
    l31_8b = specs.model("Llama 3.1 8B")
    at_819 = model_decode_floor(l31_8b, "int8", 819e9).per_user_tok_s
    at_800gib = model_decode_floor(l31_8b, "int8", 800 * GIB).per_user_tok_s
    assert (at_800gib / at_819 - 1) * 100 == pytest.approx(4.88, abs=0.01)
    tpu = specs.chip("Google TPU v5e (per chip)")
    assert weight_bytes(l31_8b.params_total, "int8") <= tpu.memory_capacity_bytes


def test_ex_bw_gqa_full_context_cache():
    l31_70b = specs.model("Llama 3.1 70B")
    full = l31_70b.context_length_tokens
    with_gqa = capacity.kv_cache_bytes(kv_bytes_per_token(l31_70b, "bf16"), full)
    without = capacity.kv_cache_bytes(
        kv_bytes_per_token(l31_70b, "bf16", kv_heads=l31_70b.attention_heads), full)
    assert with_gqa / GB == pytest.approx(42.9, abs=0.05)
    assert without == 8 * with_gqa
    biggest_gpu = max(specs.chip(n).memory_capacity_bytes for n in specs.chips()
                      if specs.chip(n).family == "gpu")
    assert without > biggest_gpu


def test_ex_bw_cerebras_h100_count():
    claim = result("cerebras-l31-70b-launch")["value"]
    w = weight_bytes(specs.model("Llama 3.1 70B").params_total, "bf16")
    needed = math.ceil(claim * w / H100.memory_bandwidth_bytes_per_s)
    assert needed == 19
    assert roofline.decode_floor(w, needed * H100.memory_bandwidth_bytes_per_s).per_user_tok_s \
        >= claim
    assert roofline.decode_floor(w, (needed - 1) * H100.memory_bandwidth_bytes_per_s) \
        .per_user_tok_s < claim


def test_ex_bw_ridge_batch_and_kv_limit():
    ridge = roofline.ridge_point_flop_per_byte(H100.bf16_flop_per_s,
                                               H100.memory_bandwidth_bytes_per_s)
    assert math.ceil(ridge) == 296
    at_ridge = roofline.decode_workload(LLAMA2_70B.params_active, "bf16", batch=296)
    assert at_ridge.intensity_flop_per_byte >= ridge
    limit = 2 * LLAMA2_70B.params_active / (2048 * kv_bytes_per_token(LLAMA2_70B, "bf16"))
    assert limit == pytest.approx(205.6, abs=0.05)
    huge = roofline.decode_workload(LLAMA2_70B.params_active, "bf16",
                                    kv_bytes_per_token=kv_bytes_per_token(LLAMA2_70B, "bf16"),
                                    context_tokens=2048, batch=10**6)
    assert limit * 0.99 < huge.intensity_flop_per_byte < limit < ridge


def test_ex_bw_tp_where_splitting_stops_paying():
    def step(tp):
        return parallel.tensor_parallel_step(
            weight_bytes(LLAMA2_70B.params_total, "fp16"), H100.memory_bandwidth_bytes_per_s, tp,
            layers=LLAMA2_70B.layers, hidden_size=LLAMA2_70B.hidden_size,
            link_bytes_per_s=H100.interconnect_bytes_per_s, hop_latency_s=1e-6)

    split = {tp: step(tp) for tp in (1, 2, 4, 8, 16, 32, 64)}
    first = next(tp for tp, s in split.items() if s.allreduce_s > s.memory_s)
    best = max(split, key=lambda tp: split[tp].per_user_tok_s)
    assert first == 16
    assert best == 16
    assert split[best].per_user_tok_s == pytest.approx(135.5, abs=0.1)
