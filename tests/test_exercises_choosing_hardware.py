"""The exercises of chapter 'Choosing hardware', as the executed chapter answers them.

Each test reads the answers the solutions glued in the book build and checks them
against `data/hardware.csv`, `data/models.csv`, `data/results.csv`, the assumptions
the exercise states and the bound it is about, so an edited solution fails here.
"""

from __future__ import annotations

import math

import pytest
from conftest import glued

from inferlab.common.data import load_table, result
from inferlab.model import roofline, specs
from inferlab.model.roofline import params_read

RESERVE = 0.10  # family_floor holds back 10 % of memory, as the exercise says
DAY_S = 86_400


@pytest.fixture(scope="module")
def answers(built_book) -> dict:
    return glued(built_book, "07_choosing_hardware")


@pytest.mark.build
def test_ex_hw_chips_are_the_fewest_that_hold_every_expert(answers):
    params = specs.model("DeepSeek-V3").params_total  # all 671 B, not the 37 B active
    for key, chip, bytes_per_weight in (("ex_hw_chips_lpu_int8", "Groq LPU (GroqChip)", 1),
                                        ("ex_hw_chips_lpu_fp16", "Groq LPU (GroqChip)", 2),
                                        ("ex_hw_chips_b200_fp8", "NVIDIA B200", 1)):
        usable = (1 - RESERVE) * specs.chip(chip).memory_capacity_bytes
        chips = answers[key]
        assert (chips - 1) * usable < params * bytes_per_weight <= chips * usable, key


@pytest.mark.build
def test_ex_hw_compile_fills_the_budget_and_is_linear_in_the_compile_time(answers):
    budget_s = answers["hw_max_compile_pct"] / 100 * answers["hw_month_days"] * DAY_S
    for minutes in (5, 30):
        changes = answers[f"ex_hw_compile_changes_{minutes}_min"]
        # Each change recompiles every graph once.
        assert changes * answers["hw_shapes"] * minutes * 60 == pytest.approx(budget_s), minutes
    assert answers["ex_hw_compile_changes_5_min"] == pytest.approx(
        6 * answers["ex_hw_compile_changes_30_min"])


@pytest.mark.build
def test_ex_hw_padding_finer_buckets_pad_less_and_compile_more(answers):
    coarse, fine = answers["ex_hw_padding_coarse_buckets"], answers["ex_hw_padding_fine_buckets"]
    doublings = math.log2(4096 / 128)
    assert (coarse, fine) == (doublings + 1, 2 * doublings + 1)
    coarse_share = answers["ex_hw_padding_coarse_share"]
    fine_share = answers["ex_hw_padding_fine_share"]
    # A prompt of at least 128 tokens is padded by less than its own length (one bucket
    # per doubling) or than 1 - 1/sqrt(2) of the bucket (two per doubling).
    assert 0 < fine_share < 1 - 1 / math.sqrt(2)
    assert fine_share < coarse_share < 0.5


@pytest.mark.build
def test_ex_hw_groq_claim_is_above_the_hbm_node_and_the_pipeline(answers):
    claim = answers["hw_groq_claim"]
    b200 = specs.chip("NVIDIA B200")
    # Batch 1: a step reads every weight it multiplies by once and one row of the input
    # embedding table, FP8 on the HBM node, INT8 through Groq's pipeline, whose chips
    # read their layers one after another.
    params = roofline.params_read(specs.model("Llama 3.1 70B"), 1)
    hbm = 8 * b200.memory_bandwidth_bytes_per_s / (params * 1)
    pipeline = specs.chip("Groq LPU (GroqChip)").memory_bandwidth_bytes_per_s / (params * 1)
    assert answers["ex_hw_groq_over_hbm"] == pytest.approx(claim / hbm)
    assert answers["ex_hw_groq_over_pipeline"] == pytest.approx(claim / pipeline)
    assert answers["ex_hw_groq_over_plain"] == pytest.approx(
        claim / result("aa-groq-l31-70b-before-specdec")["value"])
    fp4 = answers["ex_hw_groq_fp4_tok_s"]
    assert fp4 == pytest.approx(8 * b200.memory_bandwidth_bytes_per_s / (params * 0.5))
    assert fp4 > claim  # on paper only
    assert b200.domain_chips == 8 and answers["ex_hw_groq_sixteen_refused"] == "domain"


@pytest.mark.build
def test_ex_hw_spec_acceptance_gives_the_speedup_by_leviathans_formula(answers):
    plain = answers["ex_hw_spec_plain"]
    for tag, cost in (("5", 0.05), ("10", 0.10)):
        a, k = answers[f"ex_hw_spec_accept_{tag}"], answers[f"ex_hw_spec_draft_{tag}"]
        assert answers[f"ex_hw_spec_speedup_{tag}"] == pytest.approx(300 / plain)
        expected = (1 - a ** (k + 1)) / (1 - a)  # tokens per target pass
        assert expected / (1 + k * cost) == pytest.approx(300 / plain, rel=1e-6)
    # A dearer draft needs more acceptance.
    assert answers["ex_hw_spec_accept_10"] > answers["ex_hw_spec_accept_5"]


@pytest.mark.build
def test_ex_hw_specdec_is_the_least_acceptance_that_explains_groqs_speed_up(answers):
    target = (result("aa-groq-l31-70b-specdec")["value"]
              / result("aa-groq-l31-70b-before-specdec")["value"])
    a, k = answers["ex_hw_specdec_acceptance"], answers["ex_hw_specdec_draft_tokens"]
    longest = answers["hw_max_draft"]

    def speed_up(a, k, draft_cost=0.01):
        # Leviathan et al. (2023): tokens per target pass over the cost of one cycle.
        return (1 - a ** (k + 1)) / (1 - a) / (1 + k * draft_cost)

    assert answers["ex_hw_specdec_speedup"] == pytest.approx(target)
    assert 1 <= k <= longest
    assert speed_up(a, k) == pytest.approx(target, rel=1e-6)
    # Least: a little less acceptance reaches it at no draft length the search tries.
    assert all(speed_up(a - 0.005, j) < target for j in range(1, int(longest) + 1))
    # A nearly free draft asks for less acceptance than the text's 5 % draft.
    assert a * 100 < answers["hw_spec_groq_accept"]


@pytest.mark.build
def test_ex_hw_moe_finds_the_least_batch_that_reads_nine_tenths_of_the_experts(answers):
    qwen = specs.model("Qwen3 235B-A22B")
    k, experts = qwen.experts_per_token, qwen.experts
    batch = answers["ex_hw_moe_batch"]

    def experts_read(b):
        return experts * (1 - (1 - k / experts) ** b)

    assert experts_read(batch) >= 0.9 * experts > experts_read(batch - 1)
    assert answers["ex_hw_moe_share"] == pytest.approx(
        params_read(qwen, batch) / qwen.params_total)
    # Batching spreads the read: far fewer bytes a token than one token alone.
    assert answers["ex_hw_moe_gb_per_token"] * 1e9 == pytest.approx(
        params_read(qwen, batch) / batch)
    assert answers["ex_hw_moe_gb_per_token"] < answers["ex_hw_moe_gb_alone"] / 3


@pytest.mark.build
def test_ex_hw_pair_shares_are_the_vendor_tables_and_fall_towards_the_bandwidth_ratio(answers):
    table = load_table("trtllm_throughput").set_index("id")
    rate = {(chip, lengths): table.loc[f"trtllm-1.0-llama3.1-8b-{chip}-tp1-fp8-{lengths}",
                                       "tokens_per_s"]
            for chip in ("h100", "h200") for lengths in ("128-128", "20000-2000")}
    assert answers["ex_hw_pair_short"] == pytest.approx(
        rate["h100", "128-128"] / rate["h200", "128-128"])
    assert answers["ex_hw_pair_long"] == pytest.approx(
        rate["h100", "20000-2000"] / rate["h200", "20000-2000"])
    bandwidth = specs.chip("NVIDIA H100 SXM").memory_bandwidth_bytes_per_s / specs.chip(
        "NVIDIA H200 SXM").memory_bandwidth_bytes_per_s
    assert answers["ex_hw_pair_bandwidth"] == pytest.approx(bandwidth)
    # The solution's reading: alike where arithmetic binds, the long lengths the lowest
    # share, and none below the bandwidths' ratio (same FLOP/s, so bytes are all that
    # separate the chips).
    assert abs(answers["ex_hw_pair_short"] - 1) < 0.05
    assert answers["ex_hw_pair_lowest"] == pytest.approx(answers["ex_hw_pair_long"])
    assert bandwidth < answers["ex_hw_pair_lowest"] < 0.8
