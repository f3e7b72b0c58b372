"""The answers to the scenarios chapter's exercises, computed as the solutions compute them."""

from __future__ import annotations

import pytest

from inferlab.calibration import ASSUMED
from inferlab.claims import card, claim_from_result
from inferlab.data import result
from inferlab.loadgen import (
    BOUNDS,
    System,
    bounds,
    early_stopping,
    example_system,
    loadgen_percentile,
    min_queries_for_early_stopping,
    mlperf_rules,
    run_scenario,
)
from inferlab.steptime import replica


def test_ex_scen_per_gpu():
    azure = result("azure-gb200-nvl72-l2-70b-v4.1")
    dgx = result("mlperf-v5.0-nvidia-8xb200-offline")
    azure_gpu = azure["value"] / azure["accelerator_count"]
    dgx_gpu = dgx["value"] / dgx["accelerator_count"]
    assert azure_gpu == pytest.approx(12_013.9, abs=0.1)
    assert dgx_gpu == pytest.approx(12_357.25)
    assert azure_gpu / dgx_gpu - 1 == pytest.approx(-0.0278, abs=1e-3)


def test_ex_scen_more():
    slow, run = 180, 20_000
    ttft = [2.5] * slow + [0.5] * (run - slow)
    verdict = early_stopping(ttft, bounds("llama2-70b", "Server").ttft_s)
    assert loadgen_percentile(ttft, 0.99) == 0.5
    assert not verdict.passed
    assert verdict.needed == min_queries_for_early_stopping(180) == 21_360
    assert verdict.more_queries == 1_360


def test_ex_scen_slowest():
    rules = mlperf_rules()
    rates = [min_queries_for_early_stopping(slow) / rules.min_duration_s for slow in (0, 1)]
    assert rates == pytest.approx([459 / 600, 662 / 600])


def test_ex_scen_tp8():
    one = example_system().replica
    wide = replica("Llama 2 70B", "NVIDIA H200 SXM", 8, "fp8",
                   memory_efficiency=one.memory_efficiency,
                   compute_efficiency=one.compute_efficiency,
                   step_overhead_s=one.step_overhead_s,
                   allreduce_latency_s=ASSUMED["allreduce_latency_s"])
    single = run_scenario(example_system(), "SingleStream")
    tp8 = run_scenario(System("8x H200, TP8", wide, 1), "SingleStream")
    ratio = single.result / tp8.result
    assert single.valid and tp8.valid
    assert tp8.queries > single.queries  # more queries fit in the minimum duration
    assert ratio > 4
    # The step shrinks far less than eightfold (the fixed cost stays, all-reduces are new),
    # and the p90 ratio exceeds the step's because the longer run trims more of the tail.
    step_ratio = one.decode_step_s(1, 600) / wide.decode_step_s(1, 600)
    assert 3 < step_ratio < 6
    assert wide.allreduce_s(1) == pytest.approx(
        160 * (5e-6 + 7 * 8192 * 2 / 450e9))  # 80 layers x 2 one-shot all-reduces
    assert ratio > step_ratio


def test_ex_scen_405b():
    ratios = {model: table["Interactive"].per_user_tok_s / table["Server"].per_user_tok_s
              for model, table in BOUNDS.items()}
    assert ratios == pytest.approx({"llama2-70b": 5.0, "llama3.1-8b": 100 / 30,
                                    "llama3.1-405b": 175 / 80})


def test_ex_scen_fourx():
    b = claim_from_result("mlperf-v4.1-nvidia-1xb200-server")
    h = claim_from_result("mlperf-v4.1-nvidia-h100-per-gpu-offline")
    assert b.value / h.value == pytest.approx(3.508, abs=1e-3)
    differ = [f for f in ("concurrency", "chip_count", "audited") if getattr(b, f) != getattr(h, f)]
    assert differ == ["concurrency"]


def test_ex_scen_card():
    spec_card = card(claim_from_result("cerebras-l31-70b-specdec"))
    launch = result("cerebras-l31-70b-launch")["value"]
    assert spec_card.missing == ("phase", "output_tokens", "tokenizer", "chip_count",
                                 "precision", "context_tokens")
    assert spec_card.claim.value / launch == pytest.approx(2100 / 450)
