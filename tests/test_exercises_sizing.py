"""The exercises of chapter 'Sizing a deployment', as the executed chapter answers them.

Each test reads the answers the solutions glued in the book build and checks them
against `data/hardware.csv`, `data/models.csv`, `data/prices.csv`, the assumptions the
exercise states and the bounds it is about, so an edited solution fails here.
"""

from __future__ import annotations

import pytest
from conftest import glued

from inferlab.model import specs
from inferlab.model.steptime import replica
from inferlab.serving.calibration import stack_for

DAY_S = 86_400


@pytest.fixture(scope="module")
def answers(built_book) -> dict:
    return glued(built_book, "08_sizing")


@pytest.mark.build
def test_ex_hw_decide_a_slow_small_model_needs_no_sram_machine(answers):
    assert answers["ex_hw_decide_fits"] == ("gpu", "fixed-function")
    # 40 tok/s is far below what one B200 gives an 8 B BF16 model at batch 1.
    b200 = specs.chip("NVIDIA B200")
    assert b200.memory_bandwidth_bytes_per_s / (specs.model("Llama 3.1 8B").params_total * 2) > 40
    # The SRAM families are refused first because the workload needs nothing a GPU node
    # cannot give; the reason carries the chips one copy of the model takes.
    assert answers["ex_hw_decide_against"] == {"lpu": "feasibility.fewest_chips",
                                               "dataflow": "feasibility.fewest_chips"}


@pytest.mark.build
def test_ex_hw_cost_price_solves_the_cost_formula(answers):
    # $1 per million tokens: price x 1 chip / (tok/s x 3600 / 1e6) = 1.
    rate = answers["ex_hw_cost_b8_chat_tok"]
    assert answers["ex_hw_cost_dollar_price"] == pytest.approx(rate * 3600 / 1e6)
    h200 = 2.25  # data/prices.csv, packetai-h200-on-demand, halved by the exercise
    assert answers["ex_hw_cost_half_h200"] == pytest.approx(h200 / 2)
    for name in ("chat", "batch"):
        h200_cost = answers["ex_hw_cost_half_h200"] / (
            answers[f"ex_hw_cost_{name}_h8_tok"] * 3600 / 1e6)
        assert answers["ex_hw_cost_h200_beats"][name] == (
            h200_cost < answers[f"ex_hw_cost_{name}_b8_usd"])


@pytest.mark.build
def test_ex_hw_plan_meets_its_bounds_prices_its_chips_and_never_more_than_doubles(answers):
    from inferlab.plan import chip_prices

    prices = chip_prices()
    for label, tokens_per_day in (("1b", 1e9), ("2b", 2e9)):
        rate = answers[f"ex_hw_plan_{label}_rate"]
        assert rate == pytest.approx(tokens_per_day / DAY_S / 300)
        for short, chip in (("h200", "NVIDIA H200 SXM"), ("b200", "NVIDIA B200")):
            key = f"ex_hw_plan_{short}_{label}"
            assert answers[f"{key}_ttft"] <= 3.0 and answers[f"{key}_tpot"] <= 0.04, key
            # Chips times the cheapest listed price, over the output tokens of an hour.
            per_hour = answers[f"{key}_chips"] * prices[chip].usd_per_chip_hour
            assert answers[f"{key}_usd"] == pytest.approx(per_hour / (rate * 300 * 3600) * 1e6)
    for short in ("h200", "b200"):
        one, two = answers[f"ex_hw_plan_{short}_1b_chips"], answers[f"ex_hw_plan_{short}_2b_chips"]
        assert one <= two <= 2 * one, short
    cheaper = min((("NVIDIA H200 SXM", "h200"), ("NVIDIA B200", "b200")),
                  key=lambda pair: answers[f"ex_hw_plan_{pair[1]}_1b_usd"])[0]
    assert answers["ex_hw_plan_cheaper"] == cheaper


@pytest.mark.build
def test_ex_hw_prefix_halves_the_mean_ttft_at_the_hit_rate_it_gives(answers):
    params = stack_for("NVIDIA H200 SXM", "fp8").replica_parameters(
        "NVIDIA H200 SXM", "fp8", "Llama 3.1 8B")
    rep = replica("Llama 3.1 8B", "NVIDIA H200 SXM", 1, "fp8", **params)
    cold, cached = rep.prefill_s(4000), rep.prefill_s(4000, 3000)
    assert answers["ex_hw_prefix_cold_ms"] == pytest.approx(cold * 1e3)
    assert answers["ex_hw_prefix_cached_ms"] == pytest.approx(cached * 1e3)
    hit = answers["ex_hw_prefix_half_hit"]
    assert 0 < hit < 1
    assert hit * cached + (1 - hit) * cold == pytest.approx(cold / 2)
    assert answers["ex_hw_prefix_spared"] == pytest.approx(0.9 * 3000 / 4000)


@pytest.mark.build
def test_ex_hw_lockstep_costs_where_the_lanes_steps_differ(answers):
    # (a) The round is the slower step; the faster lane waits out the rest.
    assert answers["ex_hw_lockstep_round_ms"] == pytest.approx(300.0)
    assert answers["ex_hw_lockstep_wait"] == pytest.approx(0.8)
    # (b) Short answers keep a prompt in nearly every step and lock step costs almost
    # nothing; long requests fill the cache, leave decode-only steps and cost throughput.
    assert answers["ex_hw_lockstep_cnn_prompt_steps"] >= 0.99
    assert answers["ex_hw_lockstep_long_prompt_steps"] < 0.95
    assert 0 <= answers["ex_hw_lockstep_cnn_cost"] < 0.01
    assert answers["ex_hw_lockstep_long_cost"] > 0.05
    # The long requests cost more, and they are as long as the prose says: a 405B request
    # holds more tokens of cache than twenty CNN answers.
    assert answers["ex_hw_lockstep_long_cost"] > answers["ex_hw_lockstep_cnn_cost"]
    assert answers["ex_hw_lockstep_long_tokens"] > 20 * answers["ex_hw_lockstep_cnn_out"]
    # A CNN lane's batch over its mean answer: about one request finishes every step.
    assert answers["ex_hw_lockstep_cnn_finishing"] == pytest.approx(
        answers["ex_hw_lockstep_cnn_batch"] / answers["ex_hw_lockstep_cnn_out"])
    assert answers["ex_hw_lockstep_cnn_finishing"] > 1
