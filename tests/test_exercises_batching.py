"""The exercises of chapter 'Batching', as the executed chapter answers them.

Each test reads the answers the solutions glued in the book build and checks them
against `data/results.csv`, the chip and model tables, MLPerf's bounds and the law or
bound the exercise is about, so an edited solution fails here.
"""

from __future__ import annotations

import pytest
from conftest import glued

from inferlab.benchmark.mlperf import MLPERF_LLAMA2_70B_BOUNDS
from inferlab.common.data import result
from inferlab.model import specs
from inferlab.pages.explorers.batching import curve_explorer_compute

RESERVE = 0.10  # the activation reserve every replica holds back


@pytest.fixture(scope="module")
def answers(built_book) -> dict:
    return glued(built_book, "03_batching")


@pytest.mark.build
def test_ex_batch_users_divide_the_published_rate(answers):
    row = result("mlperf-v5.0-nvidia-8xh200-interactive")
    interactive_tpot_s = MLPERF_LLAMA2_70B_BOUNDS["Interactive"][1]  # 40 ms: 25 tok/s a user
    assert answers["ex_batch_users_per_gpu"] * row["accelerator_count"] == pytest.approx(
        row["value"])
    assert answers["ex_batch_users_users"] == pytest.approx(row["value"] * interactive_tpot_s)


@pytest.mark.build
def test_ex_batch_ridge_is_where_the_batchs_compute_takes_as_long_as_the_weight_read(answers):
    h200 = specs.chip("NVIDIA H200 SXM")
    # A batch of b does 2 FLOP per weight per request and reads each FP8 weight (1 byte)
    # once: 2 N b / F = N / B at b = F / (2 B).
    peak = h200.fp8_flop_per_s / (2 * h200.memory_bandwidth_bytes_per_s)
    assert answers["ex_batch_ridge_peak"] == pytest.approx(peak)
    assert answers["ex_batch_ridge_real"] == pytest.approx(peak * 0.5 / 0.8)


@pytest.mark.build
def test_ex_batch_overhead_reproduces_nebiuss_drop(answers):
    target = 1 - (result("mlperf-v5.1-nebius-8xb200-interactive")["value"]
                  / result("mlperf-v5.1-nebius-8xb200-server")["value"])
    overhead_ms = answers["ex_batch_overhead_ms"]
    assert answers["ex_batch_overhead_target"] == pytest.approx(target)
    # The answer is the least fixed cost at which the closed-form curve's drop reaches the
    # target: the drop moves in small steps (its batches lie on a grid) and smoothly between
    # them, so it reaches it there (to the bisection's resolution, 30 halvings of 100 ms),
    # within two points, and 0.05 ms less falls short.
    def drop(ms):
        return curve_explorer_compute(efficiency=answers["batch_curve_efficiency"],
                                      step_overhead_ms=ms).drop("NVIDIA B200")

    resolution = 1e-8  # ten times what the drop moves over the last bracket (1e-7 ms)
    assert target - resolution <= drop(overhead_ms) < target + 0.02
    assert drop(overhead_ms - 0.05) < target
    # "Is that plausible?": tens of milliseconds, far above an engine's own cost per step.
    assert 15 < overhead_ms < 30
    assert answers["ex_batch_overhead_share"] == pytest.approx(
        overhead_ms / (MLPERF_LLAMA2_70B_BOUNDS["Interactive"][1] * 1e3))


@pytest.mark.build
def test_ex_batch_reserve_counts_whole_requests_in_the_cache(answers):
    l2_13b = specs.model("Llama 2 13B")
    h100 = specs.chip("NVIDIA H100 SXM")
    weights = l2_13b.params_total * 2  # FP16
    per_token = 2 * l2_13b.layers * l2_13b.kv_heads * l2_13b.head_dim * 2
    tokens = answers["ex_batch_reserve_cache_tokens"]
    free = (1 - RESERVE) * h100.memory_capacity_bytes - weights
    assert tokens * per_token <= free < (tokens + 1) * per_token
    for key, held in (("ex_batch_reserve_reserved", l2_13b.context_length_tokens),
                      ("ex_batch_reserve_paged", 300 + 294 // 2)):
        requests = answers[key]
        assert requests * held <= tokens < (requests + 1) * held, key


@pytest.mark.build
def test_ex_batch_static_by_hand_matches_the_simulator(answers):
    idle = answers["ex_batch_static_idle"]
    assert answers["ex_batch_static_idle_simulated"] == pytest.approx(idle, rel=1e-12)
    # The mean length, 294, is far below the cap, 1,024, that the longest of 64 nearly
    # reaches: most slots wait for the longest request.
    assert 0.5 < idle < 0.9


@pytest.mark.build
def test_ex_batch_little_holds_and_the_decode_batch_is_a_little_smaller(answers):
    in_flight = answers["ex_batch_little_in_flight"]
    assert in_flight == pytest.approx(answers["ex_batch_little_explorer"], rel=1e-9)
    # Queued and prefilling requests are in flight but not yet in the decode batch.
    assert 0.8 * in_flight < answers["ex_batch_little_decode_batch"] < in_flight


@pytest.mark.build
def test_ex_batch_server_tighter_bounds_keep_less_of_offline(answers):
    assert (0 < answers["ex_batch_server_interactive_share"]
            < answers["ex_batch_server_server_share"] <= 1)
    assert 0 < answers["ex_batch_server_interactive_rate"] < answers["ex_batch_server_server_rate"]
