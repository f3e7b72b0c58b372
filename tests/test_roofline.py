"""The bandwidth floor and the roofline: published figures and the inequalities that must hold."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from inferlab.model import roofline as rl
from inferlab.model.capacity import BYTES_PER_PARAM, kv_bytes_per_token, weight_bytes
from inferlab.model.specs import chip, chips, model, models
from inferlab.pages.explorers import bandwidth


def _bandwidth(name):
    return chip(name).memory_bandwidth_bytes_per_s


@pytest.mark.parametrize(
    ("chip_name", "ms"), [("NVIDIA H100 SXM", 41.8), ("NVIDIA H200 SXM", 29.2)]
)
def test_70b_fp16_floor_matches_the_published_figures(chip_name, ms):
    floor = rl.decode_floor(weight_bytes(70e9, "fp16"), _bandwidth(chip_name))
    assert floor.step_s * 1e3 == pytest.approx(ms, abs=0.05)
    assert floor.per_user_tok_s == pytest.approx(1 / floor.step_s)


def test_h200_has_143_percent_of_h100_bandwidth_and_the_same_compute():
    h100, h200 = chip("NVIDIA H100 SXM"), chip("NVIDIA H200 SXM")
    assert h200.memory_bandwidth_bytes_per_s / h100.memory_bandwidth_bytes_per_s == pytest.approx(
        1.433, abs=0.001)
    assert h200.bf16_flop_per_s == h100.bf16_flop_per_s


def test_kv_cache_adds_to_the_floor_with_batch_and_context():
    weights = weight_bytes(70e9, "fp16")
    base = rl.decode_floor(weights, 3.35e12)
    longer = rl.decode_floor(weights, 3.35e12, kv_bytes_per_token=327680, context_tokens=4096)
    bigger = rl.decode_floor(weights, 3.35e12, kv_bytes_per_token=327680, context_tokens=4096,
                             batch=8)
    assert base.step_s < longer.step_s < bigger.step_s
    assert bigger.kv_bytes == 8 * longer.kv_bytes
    # Batching lowers each user's ceiling but raises the aggregate (memory-bound regime).
    assert bigger.per_user_tok_s < longer.per_user_tok_s
    assert bigger.aggregate_tok_s > longer.aggregate_tok_s


@pytest.mark.parametrize("model_name", models())
def test_more_bandwidth_never_raises_the_floor(model_name):
    shape = model(model_name)
    bandwidths = sorted(_bandwidth(name) for name in chips())
    for precision in BYTES_PER_PARAM:
        steps = [rl.model_decode_floor(shape, precision, b, context_tokens=2048, batch=4).step_s
                 for b in bandwidths]
        assert all(a >= b for a, b in itertools.pairwise(steps))


@pytest.mark.parametrize("chip_name", chips())
def test_more_bytes_per_parameter_never_lowers_the_floor(chip_name):
    by_size = sorted(BYTES_PER_PARAM, key=BYTES_PER_PARAM.get)
    for model_name in models():
        steps = [rl.model_decode_floor(model(model_name), p, _bandwidth(chip_name),
                                       context_tokens=1024).step_s for p in by_size]
        assert all(a <= b for a, b in itertools.pairwise(steps))


def test_ridge_point_and_attainable():
    h100 = chip("NVIDIA H100 SXM")
    ridge = rl.ridge_point_flop_per_byte(h100.bf16_flop_per_s, h100.memory_bandwidth_bytes_per_s)
    assert ridge == pytest.approx(989.4e12 / 3.35e12)
    at = rl.attainable_flop_per_s(np.array([1.0, ridge, 10 * ridge]), h100.bf16_flop_per_s,
                                  h100.memory_bandwidth_bytes_per_s)
    assert at[0] == pytest.approx(3.35e12)
    assert at[1] == pytest.approx(h100.bf16_flop_per_s)
    assert at[2] == pytest.approx(h100.bf16_flop_per_s)
    assert rl.attainable_flop_per_s(0.0, 1.0, 1.0) == 0.0


def test_decode_sits_left_of_the_ridge_and_prefill_right():
    h100 = chip("NVIDIA H100 SXM")
    ridge = rl.ridge_point_flop_per_byte(h100.bf16_flop_per_s, h100.memory_bandwidth_bytes_per_s)
    llama = model("Llama 2 70B")
    per_token = kv_bytes_per_token(llama, "bf16")
    decode = rl.decode_pass(llama.params_active, "bf16")
    assert decode.intensity_flop_per_byte == pytest.approx(1.0)
    prefill = rl.prefill_pass(llama.params_active, "bf16", 2048, kv_bytes_per_token=per_token)
    assert decode.intensity_flop_per_byte < ridge < prefill.intensity_flop_per_byte
    # A larger batch walks decode toward the ridge.
    intensities = [rl.decode_pass(llama.params_active, "bf16", kv_bytes_per_token=per_token,
                                      context_tokens=512, batch=b).intensity_flop_per_byte
                   for b in (1, 4, 16, 64, 256)]
    assert intensities == sorted(intensities)


def test_h200_over_h100_at_max_batch_exceeds_the_bandwidth_ratio_when_memory_bound():
    llama = model("Llama 2 70B")
    h100, h200 = chip("NVIDIA H100 SXM"), chip("NVIDIA H200 SXM")
    a = rl.throughput_at_max_batch(h100, llama, "fp8", 4096, chips=8, reserve_fraction=0.1)
    b = rl.throughput_at_max_batch(h200, llama, "fp8", 4096, chips=8, reserve_fraction=0.1)
    assert a.bound == b.bound == "memory"
    assert b.batch > a.batch
    assert b.aggregate_tok_s / a.aggregate_tok_s > 4.8 / 3.35
    # Short contexts: both compute-bound at the same peak, so the same rate.
    a = rl.throughput_at_max_batch(h100, llama, "fp8", 256, chips=8, reserve_fraction=0.1)
    b = rl.throughput_at_max_batch(h200, llama, "fp8", 256, chips=8, reserve_fraction=0.1)
    assert a.bound == b.bound == "compute"
    assert b.aggregate_tok_s == pytest.approx(a.aggregate_tok_s)
    nothing = rl.throughput_at_max_batch(h100, llama, "fp16", 4096, chips=1)
    assert nothing.batch == 0 and nothing.bound == "capacity"


def test_peak_for_precision():
    assert rl.peak_flop_per_s(chip("NVIDIA H100 SXM"), "fp8") == pytest.approx(1978.9e12)
    with pytest.raises(ValueError, match="chip"):
        rl.peak_flop_per_s(chip("Google TPU v5e (per chip)"), "fp8")
    with pytest.raises(ValueError, match="precision"):
        rl.peak_flop_per_s(chip("NVIDIA H100 SXM"), "fp32")


def test_a_card_held_to_fewer_watts_sustains_its_watts_times_the_full_parts_flop_per_joule():
    sxm = chip("NVIDIA H100 SXM")
    for name, watts in (("NVIDIA H100 NVL", 400), ("NVIDIA H100 PCIe", 350)):
        card = chip(name)
        assert card.full_power_part == sxm.name and card.board_power_w == watts
        held = rl.sustained_flop_per_s(card, "fp8")
        assert held == pytest.approx(watts * 1978.9e12 / 700)
        assert held < rl.peak_flop_per_s(card, "fp8")
    # The MI300X is the MI325X's compute die, at 750 W instead of 1,000 W.
    mi300 = chip("AMD MI300X")
    assert mi300.full_power_part == "AMD MI325X"
    assert rl.sustained_flop_per_s(mi300, "fp8") == pytest.approx(0.75 * 2614.9e12)
    # Full-power parts, and a card whose watts cover its datasheet peak, keep the peak.
    for name in ("NVIDIA H100 SXM", "NVIDIA H200 NVL", "NVIDIA B200", "AMD MI325X"):
        assert rl.sustained_flop_per_s(chip(name), "fp8") == rl.peak_flop_per_s(chip(name), "fp8")


def test_a_card_with_a_full_power_part_but_no_watts_is_refused():
    import dataclasses
    card = dataclasses.replace(chip("NVIDIA H100 NVL"), board_power_w=float("nan"))
    with pytest.raises(ValueError, match="board_power_w"):
        rl.sustained_flop_per_s(card, "fp8")


def test_a_lower_clocked_card_is_slower_by_its_datasheet_ratio_and_full_parts_are_not():
    # The NVL cards are rated 1,670.5 dense FP8 TFLOP/s against the SXM part's 1,978.9.
    for name in ("NVIDIA H100 NVL", "NVIDIA H200 NVL"):
        assert rl.clock_slowdown(chip(name), "fp8") == pytest.approx(1978.9 / 1670.5)
    # The PCIe card's ratio counts its fewer multiprocessors too.
    assert rl.clock_slowdown(chip("NVIDIA H100 PCIe"), "fp8") == pytest.approx(1978.9 / 1513)
    # Same datasheet peaks (MI300X, MI325X) or no full-power part: no slowdown.
    for name in ("AMD MI300X", "NVIDIA H200 SXM", "NVIDIA B200", "NVIDIA GH200 144GB"):
        assert rl.clock_slowdown(chip(name), "fp8") == 1.0
    with pytest.raises(ValueError, match="chip"):
        rl.clock_slowdown("NVIDIA H9000", "fp8")
    with pytest.raises(ValueError, match="precision"):
        rl.clock_slowdown(chip("NVIDIA H200 NVL"), "fp5")


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: rl.decode_floor(1e9, 0), "bandwidth_bytes_per_s"),
        (lambda: rl.decode_floor(1e9, -3.35e12), "bandwidth_bytes_per_s"),
        (lambda: rl.decode_floor(1e9, float("nan")), "bandwidth_bytes_per_s"),
        (lambda: rl.decode_floor(0, 1e12), "weight_bytes"),
        (lambda: rl.decode_floor(1e9, 1e12, batch=0), "batch"),
        (lambda: rl.decode_floor(1e9, 1e12, context_tokens=-1), "context_tokens"),
        (lambda: rl.floor_s(1e9, 0), "bandwidth_bytes_per_s"),
        (lambda: rl.ceiling_tok_s(0), "step_s"),
        (lambda: rl.ridge_point_flop_per_byte(1e15, 0), "bandwidth_bytes_per_s"),
        (lambda: rl.attainable_flop_per_s(-1, 1e15, 1e12), "intensity_flop_per_byte"),
        (lambda: rl.model_decode_floor(model("Llama 2 7B"), "fp5", 1e12), "precision"),
    ],
)
def test_bad_input_names_the_argument(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()


def test_explorers_compute_and_refuse_bad_values():
    view = bandwidth.floor_explorer_compute(70, "fp16", "NVIDIA H100 SXM", 1.0, 0, 0, 1)
    assert view.floor.step_s * 1e3 == pytest.approx(41.8, abs=0.05)
    assert view.chips_to_hold == 2
    custom = bandwidth.floor_explorer_compute(70, "fp16", bandwidth.CUSTOM_CHIP, 4.8, 320, 4096, 8)
    assert custom.floor.bandwidth_bytes_per_s == 4.8e12
    assert custom.per_user_tok_s[0] > custom.per_user_tok_s[-1]
    with pytest.raises(ValueError, match="bandwidth_tb_s"):
        bandwidth.floor_explorer_compute(70, "fp16", bandwidth.CUSTOM_CHIP, 0, 320, 4096, 8)
    roof = bandwidth.roofline_explorer_compute("NVIDIA H100 SXM", "Llama 2 70B", "bf16", 1, 2048)
    assert roof.decode.intensity_flop_per_byte < roof.ridge_flop_per_byte
    assert roof.prefill.intensity_flop_per_byte > roof.ridge_flop_per_byte
