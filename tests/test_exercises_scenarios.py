"""The answers to the scenarios chapter's exercises, computed as the solutions compute them."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.calibration import ASSUMED
from inferlab.claims import card, claim_from_result
from inferlab.data import load_table, result
from inferlab.loadgen import (
    BOUNDS,
    QueryLog,
    RunRules,
    System,
    bounds,
    early_stopping,
    example_system,
    judge,
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
    plain = RunRules()  # LoadGen's defaults: 600 s, 100 queries, no equal issue
    rates = [min_queries_for_early_stopping(slow) / plain.min_duration_s for slow in (0, 1)]
    assert rates == pytest.approx([459 / 600, 662 / 600])
    # Below that rate LoadGen does not issue more: the run ends at the minimum duration
    # and is invalid, all queries fast or not.
    n = 300
    issued = np.linspace(2.0, 600.0, n)
    slow = judge(QueryLog(issued, issued + 0.5, issued + 5.5, np.full(n, 101)), "Server",
                 rules=plain)
    assert slow.min_duration_met and slow.min_queries_met and slow.perf_constraints_met
    assert not slow.early_stopping_met and not slow.valid
    assert slow.queries == n
    # Under llama2-70b's equal issue a run holds at least one pass of 24,576 queries.
    assert mlperf_rules().pad(plain.min_queries) == 24_576 > min_queries_for_early_stopping(1)


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
    # Equal issue: both runs are one pass over the 24,576-sample dataset, the same queries.
    assert single.queries == tp8.queries == 24_576
    # The step shrinks far less than eightfold (the fixed cost stays, all-reduces are new),
    # and the plain p90 of a lone query's latency shrinks by the step's ratio.
    step_ratio = one.decode_step_s(1, 600) / wide.decode_step_s(1, 600)
    assert 3 < step_ratio < 6
    assert wide.allreduce_s(1) == pytest.approx(
        160 * (5e-6 + 7 * 8192 * 2 / 450e9))  # 80 layers x 2 one-shot all-reduces
    assert ratio == pytest.approx(step_ratio, rel=0.02)


def test_ex_scen_405b():
    ratios = {model: table["Interactive"].per_user_tok_s / table["Server"].per_user_tok_s
              for model, table in BOUNDS.items()}
    assert ratios == pytest.approx({"llama2-70b": 5.0, "llama3.1-8b": 100 / 30,
                                    "llama3.1-405b": 175 / 80})


def test_ex_scen_fourx():
    table = load_table("mlperf_llama2_70b").set_index("id")
    table["per_gpu"] = table["tokens_per_s"] / table["accelerators"]
    rows = {kind: (table.loc[f"v4.1-nvidia-1xb200-{kind}"],
                   table.loc[f"v4.1-nvidia-8xh100sxm-{kind}"]) for kind in ("server", "offline")}
    ratio = {kind: b.per_gpu / h.per_gpu for kind, (b, h) in rows.items()}
    assert ratio["server"] == pytest.approx(10_755.59 / (21_605.79 / 8))
    assert ratio["server"] == pytest.approx(3.98, abs=0.005)  # the claim's "up to 4x"
    assert ratio["offline"] == pytest.approx(11_264.4 / (24_524.9 / 8))
    mixed = rows["server"][0].per_gpu / rows["offline"][1].per_gpu
    assert mixed == pytest.approx(3.508, abs=1e-3)
    assert mixed == pytest.approx(result("mlperf-v4.1-nvidia-1xb200-server")["value"]
                                  / result("mlperf-v4.1-nvidia-h100-per-gpu-offline")["value"])
    b200, h100 = rows["server"]
    differ = [c for c in ("accelerator", "accelerators", "software", "precision", "division",
                          "category") if b200[c] != h100[c]]
    assert differ == ["accelerator", "accelerators", "precision", "category"]
    assert (b200.precision, b200.category, h100.precision, h100.category) == (
        "fp4", "preview", "fp8", "available")


def test_ex_scen_card():
    spec_card = card(claim_from_result("cerebras-l31-70b-specdec"))
    launch = result("cerebras-l31-70b-launch")["value"]
    assert spec_card.missing == ("phase", "output_tokens", "tokenizer", "chip_count",
                                 "precision", "context_tokens")
    assert spec_card.claim.value / launch == pytest.approx(2100 / 450)
