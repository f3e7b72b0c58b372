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
from inferlab.feasibility import Infeasible, layout
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
    layout(l31_8b, tpu, "int8").check(1, 1)  # fits after the reserve too


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
    # The chapter's answer: no NVLink domain of H100s is that large, so the split is refused.
    assert needed > H100.domain_chips
    with pytest.raises(Infeasible) as refusal:
        layout(specs.model("Llama 3.1 70B"), H100, "bf16", tp=needed)
    assert refusal.value.kind == "domain"
    layout(specs.model("Llama 3.1 70B"), H100, "bf16", tp=H100.domain_chips)
    assert specs.chip("Cerebras WSE-3").memory_capacity_bytes < w


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
    gb200 = specs.chip("NVIDIA GB200 (per GPU)")
    weights = weight_bytes(LLAMA2_70B.params_total, "fp16")

    def step(tp, algorithm):
        layout(LLAMA2_70B, gb200, "fp16", tp=tp).check(1, 1)  # fits, inside the NVL72 domain
        ring = parallel.tensor_parallel_step(
            weights, gb200.memory_bandwidth_bytes_per_s, tp, layers=LLAMA2_70B.layers,
            hidden_size=LLAMA2_70B.hidden_size, link_bytes_per_s=gb200.link_bytes_per_s,
            hop_latency_s=1e-6)
        if algorithm == "ring":
            return ring
        one = parallel.allreduce_s(LLAMA2_70B.hidden_size * 2, tp, gb200.link_bytes_per_s,
                                   1e-6, algorithm)
        return parallel.TensorParallelStep(tp, ring.memory_s, ring.allreduces * one,
                                           ring.allreduces)

    assert gb200.link_bytes_per_s == 900e9 and gb200.domain_chips == 72
    answers = {}
    for algorithm in ("ring", "best"):
        split = {tp: step(tp, algorithm) for tp in (1, 2, 4, 8, 16, 32, 64)}
        first = next(tp for tp, s in split.items() if s.allreduce_s > s.memory_s)
        best = max(split, key=lambda tp: split[tp].per_user_tok_s)
        answers[algorithm] = (first, best, split[best].per_user_tok_s)
    assert answers["ring"][:2] == (8, 8)
    assert answers["ring"][2] == pytest.approx(227.2, abs=0.1)
    assert answers["best"][:2] == (64, 64)
    assert answers["best"][2] == pytest.approx(1680.2, abs=0.1)
    # One hop instead of 2 (tp - 1): the best split is several times faster than the ring's.
    assert answers["best"][2] > 7 * answers["ring"][2]


def test_bw_tp_sweep_stops_at_the_domain():
    """The chapter's tensor-parallel figure: H100 up to 8, Inferentia2 up to 12, refused beyond."""
    inf2 = specs.chip("AWS Inferentia2 (per chip)")
    for chip, domain in ((H100, 8), (inf2, 12)):
        assert chip.domain_chips == domain
        layout(LLAMA2_70B, chip, "fp16", tp=domain)
        with pytest.raises(Infeasible) as refusal:
            layout(LLAMA2_70B, chip, "fp16", tp=domain + 1)
        assert refusal.value.kind == "domain"
    assert H100.link_bytes_per_s == 450e9  # per direction: half the quoted 900 GB/s
    assert H100.link_bytes_per_s / H100.scaleout_bytes_per_s == pytest.approx(9)
