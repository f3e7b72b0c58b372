"""The exercises of chapter 'Benchmark scenarios', as the executed chapter answers them.

Each test reads the answers the solutions glued in the book build and checks them
against `data/results.csv`, `data/mlperf_llama2_70b.csv`, MLPerf's published bounds
and its early-stopping rule, written out here from the rules rather than taken from
the package, so an edited solution fails here. The last test is a unit test of what
LoadGen does with a run too short to pass, which the solution describes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import glued

from inferlab.benchmark.verdict import QueryLog, RunRules, judge
from inferlab.common.data import load_table, result
from inferlab.model import specs
from inferlab.model.capacity import weight_bytes
from inferlab.model.roofline import params_read

# MLPerf Inference's TPOT bounds (s) by benchmark, Server and Interactive.
TPOT_BOUNDS_S = {"llama2-70b": (0.200, 0.040), "llama3.1-8b": (0.100, 0.030),
                 "llama3.1-405b": (0.175, 0.080), "deepseek-r1": (0.080, 0.015)}


@pytest.fixture(scope="module")
def answers(built_book) -> dict:
    return glued(built_book, "05_scenarios")


def passes_early_stopping(queries: int, slow: int, percentile=0.99, confidence=0.99) -> bool:
    """MLPerf's early-stopping rule: a run with ``slow`` of ``queries`` over the bound
    passes when P[Binomial(queries, 1 - percentile) <= slow] < 1 - confidence."""
    q = 1 - percentile
    tail = sum(math.exp(math.lgamma(queries + 1) - math.lgamma(i + 1)
                        - math.lgamma(queries - i + 1) + i * math.log(q)
                        + (queries - i) * math.log1p(-q)) for i in range(slow + 1))
    return tail < 1 - confidence


@pytest.mark.build
def test_ex_scen_per_gpu_divides_each_result_by_its_gpus(answers):
    for key, row in (("ex_scen_per_gpu_rack", "azure-gb200-nvl72-l2-70b-v4.1"),
                     ("ex_scen_per_gpu_server", "mlperf-v5.0-nvidia-8xb200-offline")):
        published = result(row)
        assert answers[key] * published["accelerator_count"] == pytest.approx(
            published["value"]), key
    difference = answers["ex_scen_per_gpu_difference"]
    assert difference == pytest.approx(
        answers["ex_scen_per_gpu_rack"] / answers["ex_scen_per_gpu_server"] - 1)
    assert abs(difference) < 0.05  # "within a few per cent"


@pytest.mark.build
def test_ex_scen_little_holds_the_batch_littles_law_gives(answers):
    run = "v5.1-nvidia-b200_sxm_180gbx8_trt-deepseek-r1-server"
    log = load_table("mlperf_llm_latencies").set_index("id").loc[run]
    # Little's law from the summary's own figures, and tokens a second as batch over TPOT.
    held = log["completed_samples_per_s"] * log["mean_latency_s"]
    assert answers["ex_scen_little_held"] == pytest.approx(held)
    assert answers["ex_scen_little_tok_s"] == pytest.approx(held / log["tpot_mean_ms"] * 1e3)
    reported = load_table("mlperf_llm_results").set_index("id").loc[run, "tokens_per_s"]
    assert answers["ex_scen_little_reported"] == pytest.approx(reported)
    assert answers["ex_scen_little_tok_s"] == pytest.approx(reported, rel=0.01)
    # NVIDIA's configuration: 512 requests on each of eight attention ranks.
    assert answers["ex_scen_little_limit"] == 8 * 512
    assert answers["ex_scen_little_fill"] == pytest.approx(held / (8 * 512))
    server_tpot_s = TPOT_BOUNDS_S["deepseek-r1"][0]
    assert answers["ex_scen_little_tpot_bound"] == pytest.approx(server_tpot_s * 1e3)
    assert answers["ex_scen_little_tpot_p99"] == pytest.approx(log["tpot_p99_ms"])


@pytest.mark.build
def test_ex_scen_more_a_passing_p99_still_fails_early_stopping(answers):
    slow, run = 180, 20_000
    # 180 is under 1 % of 20,000, so the query at the 99th percentile is a fast one.
    assert answers["ex_scen_more_p99_s"] == 0.5
    needed = answers["ex_scen_more_needed"]
    assert passes_early_stopping(needed, slow) and not passes_early_stopping(needed - 1, slow)
    assert not passes_early_stopping(run, slow)
    assert answers["ex_scen_more_more"] == needed - run


@pytest.mark.build
def test_ex_scen_slowest_rates_issue_just_enough_queries_in_the_minimum_time(answers):
    duration_s = answers["scen_min_s"]
    assert duration_s == 600  # LoadGen's default minimum duration
    for slow in (0, 1):
        queries = answers[f"ex_scen_slowest_rate_{slow}"] * duration_s
        assert queries == pytest.approx(round(queries))
        queries = round(queries)
        assert passes_early_stopping(queries, slow), slow
        assert not passes_early_stopping(queries - 1, slow), slow
    # With none slow the rule has a closed form: ceil(log(0.01) / log(0.99)) = 459.
    assert answers["ex_scen_slowest_rate_0"] * duration_s == pytest.approx(459)
    # One equal-issue pass over Llama 2 70B's dataset is far more than either needs.
    assert answers["ex_scen_slowest_pass_queries"] == answers["scen_dataset"] == 24_576
    assert answers["ex_scen_slowest_pass_queries"] > answers["ex_scen_slowest_rate_1"] * 600


@pytest.mark.build
def test_ex_scen_tp8_the_latency_shrinks_as_one_step_does(answers):
    # Equal issue: both runs are one pass over the same 24,576 queries.
    assert answers["ex_scen_tp8_queries_tp1"] == answers["ex_scen_tp8_queries_tp8"] == 24_576
    step_ratio = answers["ex_scen_tp8_step_tp1_ms"] / answers["ex_scen_tp8_step_tp8_ms"]
    # Far less than eightfold: the fixed cost stays and the all-reduces are new.
    assert 3 < step_ratio < 6
    p90_ratio = answers["ex_scen_tp8_p90_tp1_s"] / answers["ex_scen_tp8_p90_tp8_s"]
    assert p90_ratio == pytest.approx(step_ratio, rel=0.02)
    # 80 layers x 2 one-shot all-reduces of one token's 8,192 FP16 activations over
    # 450 GB/s NVLink, each paying the assumed hop latency once.
    hop_s = answers["scen_ar_latency_us"] * 1e-6
    assert answers["ex_scen_tp8_allreduce_ms"] == pytest.approx(
        160 * (hop_s + 7 * 8192 * 2 / 450e9) * 1e3)


@pytest.mark.build
def test_ex_scen_405b_ratios_are_those_of_mlperfs_tpot_bounds(answers):
    assert answers["ex_scen_405b_ratios"] == pytest.approx(
        {model: server / interactive for model, (server, interactive) in TPOT_BOUNDS_S.items()})
    assert answers["ex_scen_405b_interactive_tok_s"] == pytest.approx(
        {model: 1 / interactive for model, (_, interactive) in TPOT_BOUNDS_S.items()})


@pytest.mark.build
def test_ex_scen_fourx_per_gpu_ratios_from_nvidias_rows(answers):
    table = load_table("mlperf_llama2_70b").set_index("id")
    per_gpu = table["tokens_per_s"] / table["accelerators"]
    for kind in ("server", "offline"):
        assert answers[f"ex_scen_fourx_{kind}"] == pytest.approx(
            per_gpu[f"v4.1-nvidia-1xb200-{kind}"] / per_gpu[f"v4.1-nvidia-8xh100sxm-{kind}"])
    assert answers["ex_scen_fourx_server"] == pytest.approx(4, rel=0.01)  # "up to 4x"
    # The mixed ratio, checked against the per-GPU rows of the other table.
    assert answers["ex_scen_fourx_mixed"] == pytest.approx(
        result("mlperf-v4.1-nvidia-1xb200-server")["value"]
        / result("mlperf-v4.1-nvidia-h100-per-gpu-offline")["value"])
    # FP4 Preview against FP8 Available: more than the chip differs.
    assert answers["ex_scen_fourx_differ"] == ["accelerator", "accelerators", "precision",
                                               "category"]


@pytest.mark.build
def test_ex_scen_card_names_what_the_cerebras_claim_leaves_out(answers):
    assert answers["ex_scen_card_ratio"] == pytest.approx(
        result("cerebras-l31-70b-specdec")["value"] / result("cerebras-l31-70b-launch")["value"])
    assert answers["ex_scen_card_missing"] == ("phase", "output_tokens", "tokenizer",
                                               "chip_count", "precision", "context_tokens")


def test_ex_scen_slowest_loadgen_ends_a_short_run_invalid_rather_than_issuing_more():
    plain = RunRules()  # LoadGen's defaults: 600 s, 100 queries, no equal issue
    n = 300  # all within the bound, but fewer than early stopping needs
    issued = np.linspace(2.0, 600.0, n)
    run = judge(QueryLog(issued, issued + 0.5, issued + 5.5, np.full(n, 101)), "Server",
                rules=plain)
    assert run.min_duration_met and run.min_queries_met and run.perf_constraints_met
    assert not run.early_stopping_met and not run.valid
    assert run.queries == n


@pytest.mark.build
def test_ex_scen_quant_halves_the_bytes_and_doubles_the_ceiling(answers):
    bandwidth = specs.chip("NVIDIA H200 SXM").memory_bandwidth_bytes_per_s
    # Batch 1 reads every weight but the unused embedding rows, once a token.
    read = params_read(specs.model("Llama 3.1 70B"), 1)
    assert answers["ex_scen_quant_fp8_tok"] == pytest.approx(
        bandwidth / weight_bytes(read, "fp8"), rel=1e-6)
    assert answers["ex_scen_quant_int4_tok"] / answers["ex_scen_quant_fp8_tok"] == \
        pytest.approx(2.0, rel=1e-6)
