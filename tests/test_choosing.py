"""Behaviour of inferlab.choosing: family floors, fixed-shape costs, the guide, the leaderboard."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from inferlab import choosing
from inferlab.benchmark.traffic import Lengths
from inferlab.choosing import FAMILIES, Requirements, decide, family_floor, latency_spread
from inferlab.leaderboard import VERDICTS, check_leaderboard, check_row
from inferlab.model import specs, steptime
from inferlab.model.feasibility import Infeasible, fewest_chips
from inferlab.model.roofline import flop_per_token, params_read
from inferlab.serving.fixed_shapes import padding_waste, power_of_two_buckets, recompile_cost
from inferlab.serving.simulator import FixedShape


def test_groq_chip_counts_match_the_bandwidth_chapter():
    # 70 B parameters on 220 MiB chips: 303 at INT8, 607 at FP16 with no reserve
    # (the bandwidth chapter); with the 10 % reserve the counts rise by about a ninth.
    floor = family_floor("Llama 3.1 70B", "lpu", "int8")
    weights = specs.model("Llama 3.1 70B").params_total
    usable = specs.chip("Groq LPU (GroqChip)").memory_capacity_bytes * 0.9
    assert floor.chips_to_hold == math.ceil(weights / usable)
    assert floor.chips_to_hold > 303
    # The LPU runs as a pipeline over exactly those chips: the data give it no scale-up domain.
    assert (floor.layout.tp, floor.layout.pp) == (1, floor.chips_to_hold)


def test_sram_bounds_are_a_pipeline_and_an_ideal_split():
    # Pipelined, a token reads its 69.5 GB (every weight but the embedding rows it does not
    # look up) at one chip's 80 TB/s, whatever the chip count; the ideal split reads them
    # at every chip's bandwidth at once.
    floor = family_floor("Llama 3.1 70B", "lpu", "int8")
    weights = params_read(specs.model("Llama 3.1 70B"), 1)
    assert weights == pytest.approx(69.5e9, rel=1e-3)
    assert floor.pipeline_tok_s == pytest.approx(80e12 / weights)  # ~1.13k tok/s
    assert floor.tensor_parallel_tok_s == pytest.approx(floor.chips_used * 80e12 / weights)
    assert floor.ceiling_tok_s == floor.pipeline_tok_s
    # Compute at the published INT8 rate allows more than memory on the pipeline.
    assert floor.compute_tok_s == pytest.approx(750e12 / flop_per_token("Llama 3.1 70B"))
    assert floor.compute_tok_s > floor.pipeline_tok_s and floor.binds == "memory"
    # More chips than needed raise the ideal bound and leave the pipeline bound alone.
    wider = family_floor("Llama 3.1 70B", "lpu", "int8", chips=2 * floor.chips_used)
    assert wider.pipeline_tok_s == pytest.approx(floor.pipeline_tok_s)
    assert wider.tensor_parallel_tok_s == pytest.approx(2 * floor.tensor_parallel_tok_s)
    # No FP8 rate is published for Groq, so compute gives no bound there.
    assert math.isnan(family_floor("Llama 3.1 70B", "lpu", "fp8").compute_tok_s)


def test_one_wafer_does_not_hold_llama_70b_at_16_bits():
    floor = family_floor("Llama 3.1 70B", "dataflow", "fp16")
    assert floor.weight_bytes == pytest.approx(141.1e9, rel=1e-3)
    assert floor.chips_to_hold == 4 == fewest_chips("Llama 3.1 70B", "Cerebras WSE-3", "fp16")
    with pytest.raises(Infeasible) as refused:
        family_floor("Llama 3.1 70B", "dataflow", "fp16", chips=1)
    assert refused.value.kind == "capacity"


def test_moe_bounds_read_only_the_active_experts_at_batch_1():
    floor = family_floor("DeepSeek-V3", "lpu", "int8")
    spec = specs.model("DeepSeek-V3")
    # One token reads its active parameters but the embedding table's unread rows.
    read = params_read(spec, 1)
    assert read == pytest.approx(spec.params_active - spec.embedding_params
                                 + spec.hidden_size)
    assert floor.pipeline_tok_s == pytest.approx(80e12 / read)


def test_nodes_that_cannot_hold_or_reach_are_refused():
    with pytest.raises(Infeasible) as refused:  # 16 GPUs exceed the 8-GPU NVLink domain
        family_floor("Llama 3.1 70B", "gpu", "fp8", chip="NVIDIA B200", chips=16)
    assert refused.value.kind == "domain"
    with pytest.raises(Infeasible) as refused:  # 1.34 TB on 8 x 180 GB (B200, the reference)
        family_floor("DeepSeek-V3", "gpu", "fp16")
    assert refused.value.kind == "capacity"
    # The guide turns the refusal into the reason against, with the chips it would take.
    verdict = decide(model="DeepSeek-V3", precision="fp16").verdict("gpu")
    assert verdict.floor is None and not verdict.fits
    assert verdict.against[0].computed_by == "feasibility.layout"
    assert verdict.against[0].value == fewest_chips("DeepSeek-V3", "NVIDIA B200", "fp16",
                                                    context_tokens=2048)


def test_gpu_ceiling_is_node_bandwidth_over_active_bytes():
    floor = family_floor("Llama 3.1 70B", "gpu", "fp8")  # the reference: 8 x B200, 8 TB/s each
    model = specs.model("Llama 3.1 70B")
    expected = 8 * 8.0e12 / params_read(model, 1)
    assert floor.chips_used == 8
    assert floor.ceiling_tok_s == pytest.approx(expected)
    assert floor.chips_to_hold == 1


def test_more_chips_never_lower_the_ceiling():
    ceilings = [family_floor("Llama 3.1 8B", "gpu", "bf16", chips=c).ceiling_tok_s
                for c in (1, 2, 4, 8)]
    assert ceilings == sorted(ceilings)


def test_bad_family_and_chips_raise():
    with pytest.raises(ValueError, match="family"):
        family_floor("Llama 3.1 8B", "tpu-ish")
    with pytest.raises(ValueError, match="chips"):
        family_floor("Llama 3.1 8B", "gpu", chips=0)


def test_recompile_cost_is_linear_and_zero_without_changes():
    one = recompile_cost(1)
    assert one.shapes == 14  # 5 prompt buckets + 9 batch buckets
    assert recompile_cost(3).compile_s_per_month == pytest.approx(3 * one.compile_s_per_month)
    assert recompile_cost(0).fraction_of_month == 0
    fine = FixedShape(prompt_buckets=power_of_two_buckets(128, 2048, 4))
    assert recompile_cost(1, fine).compile_s_per_month > one.compile_s_per_month
    with pytest.raises(ValueError, match="changes_per_month"):
        recompile_cost(-1)


def test_padding_waste_exact_on_known_lengths():
    waste = padding_waste(np.array([100, 128, 129, 500]), (128, 256, 512))
    assert waste.requested_tokens == 857
    assert waste.computed_tokens == 128 + 128 + 256 + 512
    assert waste.fraction == pytest.approx(1 - 857 / 1024)
    with pytest.raises(ValueError, match="largest bucket"):
        padding_waste(np.array([600]), (128, 256, 512))


def test_more_buckets_never_waste_more():
    prompts = Lengths(300, cv=1.0, min_tokens=1, max_tokens=2048)
    wastes = [padding_waste(prompts, power_of_two_buckets(128, 2048, k)).fraction
              for k in (1, 2, 4, 8)]
    assert all(a >= b for a, b in zip(wastes, wastes[1:], strict=False))
    assert wastes[0] > 0.2 > wastes[-1]


def test_power_of_two_buckets():
    assert power_of_two_buckets(128, 1024) == (128, 256, 512, 1024)
    assert len(power_of_two_buckets(128, 1024, 2)) == 7
    with pytest.raises(ValueError, match="largest"):
        power_of_two_buckets(512, 128)


def test_fixed_shape_steps_are_constant_and_gpu_steps_vary():
    spreads = latency_spread()
    assert spreads["fixed-function"].step_ratio == pytest.approx(1.0)
    assert spreads["gpu"].step_ratio > 1.0
    # Padded prefills interrupt decode: the fixed-shape server's per-request tail is wider.
    assert spreads["fixed-function"].tpot_ratio > spreads["gpu"].tpot_ratio


def test_rules_of_thumb_follow_from_the_numbers():
    frozen_volume = decide(per_user_tok_s=30, changes_per_month=0.5, tokens_per_day=5e9)
    assert "fixed-function" in frozen_volume.fits and "gpu" in frozen_volume.fits
    assert "lpu" not in frozen_volume.fits
    strict = decide(per_user_tok_s=400, tail_ratio_max=1.05)
    assert strict.fits == ("lpu",)
    # Above Groq's attainable pipeline bound (0.65 x ~1.13k tok/s) only the wafers remain.
    assert decide(per_user_tok_s=1000).fits == ("dataflow",)
    changing = decide(model="Llama 3.1 8B", precision="bf16", per_user_tok_s=30,
                      changes_per_month=30, tokens_per_day=2e8)
    assert changing.fits == ("gpu",)


def test_every_reason_carries_a_number_and_a_function():
    for verdict in decide().verdicts:
        assert verdict.reasons
        for reason in verdict.reasons:
            assert isinstance(reason.value, (float, int))
            assert reason.computed_by
        assert verdict.fits == (not verdict.against)


@pytest.mark.parametrize("values", [{}, {"per_user_tok_s": 1000}, {"per_user_tok_s": 400,
                                    "tail_ratio_max": 1.05},
                                    {"model": "Llama 3.1 8B", "precision": "fp16",
                                     "changes_per_month": 30, "tokens_per_day": 2e8}])
def test_every_reason_says_in_words_what_decided_it(values):
    # A figure cell shows the first reason against a family: words and a number, not
    # the name of the function that computed it.
    for verdict in decide(**values).verdicts:
        for reason in verdict.reasons:
            assert reason.label and len(reason.label) <= 48, reason.label
            assert reason.computed_by not in reason.label
            assert not re.search(r"\b[a-z]+\.[a-z_]+\b", reason.label), reason.label
    slow = decide(per_user_tok_s=1000).verdicts[0].against[0]
    assert slow.label.startswith("too slow:") and "1,000 tok/s" in slow.label


def test_speed_rule_flips_at_the_attainable_ceiling():
    ceiling = family_floor("Llama 3.1 70B", "gpu", "fp8").ceiling_tok_s
    limit = ceiling * steptime.ATTAINABLE_FRACTION
    assert "gpu" in decide(per_user_tok_s=limit * 0.99).fits
    assert "gpu" not in decide(per_user_tok_s=limit * 1.01).fits


def test_workload_validation():
    with pytest.raises(ValueError, match="per_user_tok_s"):
        Requirements(per_user_tok_s=0)
    with pytest.raises(ValueError, match="tail_ratio_max"):
        Requirements(tail_ratio_max=0.5)
    with pytest.raises(ValueError, match="precision"):
        Requirements(precision="fp7")
    with pytest.raises(ValueError, match="name"):
        Requirements(model="GPT-9")
    with pytest.raises(ValueError, match="values"):
        decide(Requirements(), per_user_tok_s=3)


def test_leaderboard_rows():
    table = check_leaderboard()
    assert len(table) == 20
    by = {(r.provider, r.model): r for r in table.itertuples()}
    # Above the 8 x B200 node: Cerebras and Groq Llama 3.3 70B. Cerebras's four 16-bit
    # wafers allow far more even pipelined; Groq's 1,400 is above its INT8 pipeline bound.
    cerebras, groq = by[("Cerebras", "Llama 3.3 70B")], by[("Groq", "Llama 3.3 70B")]
    assert cerebras.verdict == VERDICTS[2]
    assert cerebras.chips_to_hold == 4 and cerebras.pipeline_tok_s > 50 * 2100
    assert groq.verdict == VERDICTS[3]
    assert groq.pipeline_tok_s < 1400 < groq.tensor_parallel_tok_s
    assert by[("SambaNova", "Llama 3.3 70B")].verdict == "single-stream on HBM"
    assert by[("Fireworks", "DeepSeek V3.2")].verdict == "single-stream on HBM"
    # No architecture, no floor.
    assert by[("first-party API", "GPT-5")].verdict == "unknown model"
    assert math.isnan(by[("first-party API", "GPT-5")].hbm_ceiling_tok_s)
    # Llama 3.3 70B is checked with its own shape: 8 x 8 TB/s over the 69.5 GB a token reads.
    row = check_row("Llama 3.3 70B", "LPU", 1400)
    assert row.architecture == "Llama 3.3 70B"
    assert row.hbm_ceiling_tok_s == pytest.approx(
        8 * 8e12 / params_read(specs.model("Llama 3.3 70B"), 1))


def test_row_above_ceiling_with_weights_in_hbm_means_speculation():
    row = check_row("Llama 3.3 70B", "GPU cloud", 5000)
    assert row.verdict == VERDICTS[5]
    # SambaNova's SN40L reads its weights from HBM and DDR: no SRAM bound lifts it.
    samba = check_row("Llama 3.3 70B", "reconfigurable dataflow", 5000)
    assert samba.verdict == VERDICTS[5] and math.isnan(samba.pipeline_tok_s)
    # Above even the ideal split over every Groq chip, only speculation is left.
    assert check_row("Llama 3.3 70B", "LPU", 1e6).verdict == VERDICTS[4]
    assert check_row("Llama 3.3 70B", "LPU", 1000).verdict == VERDICTS[2]
    with pytest.raises(ValueError, match="hardware_family"):
        check_row("Llama 3.3 70B", "quantum", 10)


def test_families_have_reference_chips():
    for family in FAMILIES:
        specs.chip(choosing.FAMILY_CHIPS[family])


# --- cost --------------------------------------------------

from inferlab.choosing import speculation_needed  # noqa: E402
from inferlab.costs import (  # noqa: E402
    break_even_usd_per_chip_hour,
    chip_price,
    cost_per_million_tokens,
)


def test_cost_per_million_tokens_is_the_formula():
    # 8 chips at $2/chip-hour serving 4,000 tok/s: $16 an hour over 14.4 M tokens an hour.
    assert cost_per_million_tokens(8, 2.0, 4000.0) == pytest.approx(16 / 14.4)
    assert cost_per_million_tokens(8, 0.0, 4000.0) == 0.0


@pytest.mark.parametrize("rate", [1.0, 10.0, 1e3, 1e5])
def test_cost_falls_as_throughput_rises_and_rises_with_chips_and_price(rate):
    base = cost_per_million_tokens(8, 3.0, rate)
    assert cost_per_million_tokens(8, 3.0, 2 * rate) == pytest.approx(base / 2)
    assert cost_per_million_tokens(8, 3.0, rate * 1.01) < base
    assert cost_per_million_tokens(16, 3.0, rate) == pytest.approx(2 * base)
    assert cost_per_million_tokens(8, 6.0, rate) == pytest.approx(2 * base)
    # The break-even price inverts the formula for one chip.
    assert break_even_usd_per_chip_hour(cost_per_million_tokens(1, 3.0, rate), rate) == (
        pytest.approx(3.0))


@pytest.mark.parametrize("argument, args", [
    ("chips", (0, 3.0, 100.0)), ("chips", (2.5, 3.0, 100.0)),
    ("usd_per_chip_hour", (8, -1.0, 100.0)), ("usd_per_chip_hour", (8, math.nan, 100.0)),
    ("tokens_per_s", (8, 3.0, 0.0)), ("tokens_per_s", (8, 3.0, math.inf)),
])
def test_cost_refuses_bad_input_by_name(argument, args):
    with pytest.raises(ValueError, match=argument):
        cost_per_million_tokens(*args)


def test_prices_are_dated_list_prices_per_chip():
    b200 = chip_price("packetai-b200-on-demand")
    assert b200.chip == "NVIDIA B200" and b200.price_kind == "list" and b200.date
    # The AWS row is for an 8-GPU instance; the chip-hour is an eighth of it.
    assert chip_price("aws-capacity-block-p5-h100").usd_per_chip_hour == pytest.approx(
        39.33 / 8)
    with pytest.raises(ValueError, match="price_id"):
        chip_price("no-such-row")


def test_speculation_needed_reaches_the_target_with_the_acceptance_it_names():
    from inferlab.serving.speculative import speedup

    need = speculation_needed(60.0, 400.0, 0.05)
    assert need.speedup == pytest.approx(400 / 60)
    assert speedup(need.acceptance_rate, need.draft_tokens, 0.05) == pytest.approx(
        need.speedup, rel=1e-6)
    assert speculation_needed(500.0, 400.0).acceptance_rate == 0.0
    with pytest.raises(ValueError, match="target_tok_s"):
        speculation_needed(1.0, 400.0)  # 400x: beyond 17 tokens a pass
