"""The exercises of chapter 'The memory-bandwidth floor', as the executed chapter answers them.

Each test reads the answers the solutions glued in the book build and checks them
against `data/hardware.csv`, `data/models.csv` and the arithmetic the exercise is
about (bytes over bandwidth, bytes per token, the published all-reduce costs), so an
edited solution fails here. The last tests are unit tests of facts the solutions lean on.
"""

from __future__ import annotations

import pytest
from conftest import glued

from inferlab.common.data import result
from inferlab.model import roofline, specs
from inferlab.model.capacity import GIB, kv_bytes_per_token
from inferlab.model.feasibility import Infeasible, layout

GB = 1e9
RESERVE = 0.10  # the activation reserve the exercises state
H100 = specs.chip("NVIDIA H100 SXM")
LLAMA2_70B = specs.model("Llama 2 70B")
LLAMA31_70B = specs.model("Llama 3.1 70B")
LLAMA31_8B = specs.model("Llama 3.1 8B")


@pytest.fixture(scope="module")
def answers(built_book) -> dict:
    return glued(built_book, "02_bandwidth_floor")


def cache_bytes_per_token(model, bytes_per_value: float, kv_heads: int | None = None) -> float:
    """A key and a value per layer per KV head, ``head_dim`` numbers each."""
    heads = model.kv_heads if kv_heads is None else kv_heads
    return 2 * model.layers * heads * model.head_dim * bytes_per_value


@pytest.mark.build
def test_ex_bw_inf2_divides_awss_figure_and_the_floor_scales_as_one_over_bandwidth(answers):
    system = specs.chip("AWS inf2.48xlarge")
    per_chip = specs.chip("AWS Inferentia2 (per chip)").memory_bandwidth_bytes_per_s
    assert system.memory_bandwidth_bytes_per_s / GIB == pytest.approx(9840)  # AWS's figure
    assert answers["ex_bw_inf2_per_chip_gib_s"] == pytest.approx(9840 / system.chips)
    # Batch 1, no context: a step reads the FP16 weights it multiplies by once and one
    # row of the input embedding table.
    weights = roofline.params_read(specs.model("Llama 2 13B"), 1) * 2
    assert answers["ex_bw_inf2_floor_ms"] == pytest.approx(weights / per_chip * 1e3)
    assert answers["ex_bw_inf2_wrong_floor_ms"] == pytest.approx(weights / 9.8e12 * 1e3)
    assert answers["ex_bw_inf2_factor"] == pytest.approx(9.8e12 / per_chip)


@pytest.mark.build
def test_ex_bw_groq_counts_the_fewest_chips_in_binary_and_decimal_megabytes(answers):
    weights = LLAMA31_8B.params_total * 1  # INT8: a byte per weight
    assert answers["ex_bw_groq_bytes"] == 220 * 2**20
    for key, chip_bytes in (("ex_bw_groq_chips", 220 * 2**20), ("ex_bw_groq_chips_decimal", 220e6)):
        chips = answers[key]
        assert (chips - 1) * chip_bytes < weights <= chips * chip_bytes, key
    assert answers["ex_bw_groq_chips_decimal"] > answers["ex_bw_groq_chips"]


@pytest.mark.build
def test_ex_bw_b200_batches_are_the_largest_that_fit_and_grow_faster_than_memory(answers):
    assert specs.chip("NVIDIA B200").memory_capacity_bytes == 180 * GB  # NVIDIA's MLPerf README
    weights = LLAMA2_70B.params_total * 1  # FP8
    per_request = 4096 * cache_bytes_per_token(LLAMA2_70B, 1)
    for capacity_gb in (180, 192):
        batch = answers[f"ex_bw_b200_batch_{capacity_gb}"]
        usable = (1 - RESERVE) * capacity_gb * GB
        assert weights + batch * per_request <= usable < weights + (batch + 1) * per_request
    # The weights stay put, so all the extra memory goes to the cache.
    batches = answers["ex_bw_b200_batch_192"] / answers["ex_bw_b200_batch_180"]
    assert batches > 192 / 180


@pytest.mark.build
def test_ex_bw_tpu_ceilings_are_bandwidth_over_the_weights(answers):
    tpu = specs.chip("Google TPU v5e (per chip)")
    weights = roofline.params_read(LLAMA31_8B, 1) * 1  # INT8, one embedding row
    assert tpu.memory_bandwidth_bytes_per_s == 819e9  # Google's figure
    assert answers["ex_bw_tpu_tok_s_819"] == pytest.approx(819e9 / weights)
    assert answers["ex_bw_tpu_tok_s_800gib"] == pytest.approx(800 * 2**30 / weights)
    assert answers["ex_bw_tpu_pct_apart"] == pytest.approx((800 * 2**30 / 819e9 - 1) * 100)
    assert answers["ex_bw_tpu_fits"] is True
    assert LLAMA31_8B.params_total * 1 <= (1 - RESERVE) * tpu.memory_capacity_bytes  # stored


@pytest.mark.build
def test_ex_bw_gqa_cache_is_eight_times_larger_without_grouped_heads(answers):
    full = LLAMA31_70B.context_length_tokens
    assert (LLAMA31_70B.attention_heads, LLAMA31_70B.kv_heads, full) == (64, 8, 131_072)
    assert answers["ex_bw_gqa_gb"] == pytest.approx(
        full * cache_bytes_per_token(LLAMA31_70B, 2) / GB)
    assert answers["ex_bw_gqa_gb_without"] == pytest.approx(8 * answers["ex_bw_gqa_gb"])
    # The solution's remark: no GPU in the data holds one such request.
    biggest_gpu = max(specs.chip(n).memory_capacity_bytes for n in specs.chips()
                      if specs.chip(n).family == "gpu")
    assert answers["ex_bw_gqa_gb_without"] * GB > biggest_gpu


@pytest.mark.build
def test_ex_bw_cerebras_needs_more_h100s_than_a_domain_holds(answers):
    claim = result("cerebras-l31-70b-launch")["value"]
    weights = LLAMA31_70B.params_total * 2  # BF16
    tp = answers["ex_bw_cerebras_tp"]

    def ceiling(chips):
        return chips * H100.memory_bandwidth_bytes_per_s / weights

    assert ceiling(tp) >= claim > ceiling(tp - 1)
    assert tp > H100.domain_chips == 8
    assert answers["ex_bw_cerebras_refused"] == "domain"


@pytest.mark.build
def test_ex_bw_ridge_batch_reaches_the_ridge_and_the_cache_caps_the_intensity(answers):
    ridge = answers["ex_bw_ridge_ridge"]
    assert ridge == pytest.approx(H100.bf16_flop_per_s / H100.memory_bandwidth_bytes_per_s)
    # Without cache the intensity of batch B is B FLOP per byte.
    assert answers["ex_bw_ridge_batch"] - 1 < ridge <= answers["ex_bw_ridge_batch"]
    limit = answers["ex_bw_ridge_limit"]
    n = LLAMA2_70B.params_active
    assert limit == pytest.approx(2 * n / (2048 * cache_bytes_per_token(LLAMA2_70B, 2)))
    assert limit < ridge  # with 2,048-token contexts decode never reaches the ridge
    huge = roofline.decode_pass(n, "bf16",
                                    kv_bytes_per_token=kv_bytes_per_token(LLAMA2_70B, "bf16"),
                                    context_tokens=2048, batch=10**6)
    assert limit * 0.99 < huge.intensity_flop_per_byte < limit


@pytest.mark.build
def test_ex_bw_tp_answers_follow_the_published_all_reduce_costs(answers):
    gb200 = specs.chip("NVIDIA GB200 (per GPU)")
    assert (gb200.link_bytes_per_s, gb200.domain_chips) == (900e9, 72)
    link, hop = gb200.link_bytes_per_s, 1e-6
    message = LLAMA2_70B.hidden_size * 2  # one token's FP16 activations
    weights = LLAMA2_70B.params_total * 2
    allreduces = 2 * LLAMA2_70B.layers

    def allreduce_s(p, algorithm):
        # Thakur et al. (2005) for the ring; one-shot and two-shot through a switch.
        costs = {"ring": 2 * (p - 1) * hop + 2 * (p - 1) / p * message / link,
                 "one-shot": hop + (p - 1) * message / link,
                 "two-shot": 2 * hop + 2 * (p - 1) / p * message / link}
        return costs["ring"] if algorithm == "ring" else min(costs.values())

    candidates = [1, 2, 4, 8, 16, 32, 64]
    for algorithm in ("ring", "best"):
        memory = {p: weights / (p * gb200.memory_bandwidth_bytes_per_s) for p in candidates}
        talk = {p: 0.0 if p == 1 else allreduces * allreduce_s(p, algorithm) for p in candidates}
        ceiling = {p: 1 / (memory[p] + talk[p]) for p in candidates}
        crossover = answers[f"ex_bw_tp_{algorithm}_crossover_tp"]
        assert talk[crossover] > memory[crossover], algorithm
        assert all(talk[p] <= memory[p] for p in candidates if p < crossover), algorithm
        assert answers[f"ex_bw_tp_{algorithm}_fastest_tp"] == max(ceiling, key=ceiling.get)
        assert answers[f"ex_bw_tp_{algorithm}_tok_s"] == pytest.approx(max(ceiling.values()))
    # The solution's point: one hop instead of 2 (tp - 1) pays for far more chips.
    assert answers["ex_bw_tp_ring_crossover_tp"] < answers["ex_bw_tp_best_crossover_tp"]
    assert answers["ex_bw_tp_best_tok_s"] > 7 * answers["ex_bw_tp_ring_tok_s"]


def test_bw_cerebras_speed_is_out_of_reach_of_h100s_and_of_one_wafers_memory():
    """The solution's explanation: eight H100s hold the model, nineteen are refused, and
    one wafer's SRAM does not hold the weights, so Cerebras spreads them over wafers."""
    layout(LLAMA31_70B, H100, "bf16", tp=H100.domain_chips)
    with pytest.raises(Infeasible) as refusal:
        layout(LLAMA31_70B, H100, "bf16", tp=H100.domain_chips + 1)
    assert refusal.value.kind == "domain"
    assert specs.chip("Cerebras WSE-3").memory_capacity_bytes < LLAMA31_70B.params_total * 2


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
