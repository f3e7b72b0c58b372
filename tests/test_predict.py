"""The MLPerf predictor: its command line, its refusals, and the calibration it stands on."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import statistics
import subprocess
import sys

import numpy as np
import pytest

from inferlab.benchmark.verdict import mlperf_rules
from inferlab.common.data import load_table
from inferlab.model import specs
from inferlab.model.feasibility import Infeasible
from inferlab.predict import FIT_RULES, accepted_chips, peak_batch, predict, tp_options
from inferlab.serving.calibration import Stack, at_bound, bound_share, row_key, stack, stacks
from inferlab.sizing import milliseconds

QUICK = ["--scale", "0.05"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inferlab.predict", *args],
                          capture_output=True, text=True, timeout=300)


def test_list_chips_prints_the_accepted_chips_one_a_line():
    done = run_cli("--list-chips")
    assert done.returncode == 0
    names = done.stdout.splitlines()
    assert names == accepted_chips()
    assert {"NVIDIA H200 SXM", "NVIDIA B200", "AMD MI300X", "NVIDIA L40S"} <= set(names)
    # Whole systems and chips without a calibrated stack are not offered.
    assert "NVIDIA GB200 NVL72 (rack)" not in names and "Groq LPU (GroqChip)" not in names
    assert set(names) <= set(specs.chips())


def test_json_gives_tokens_per_s_and_validity():
    done = run_cli("--chip", "NVIDIA H200 SXM", "--chips", "8", "--precision", "fp8",
                   "--scenario", "Offline", "--json", *QUICK)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["valid"] is True  # valid under the scaled rules it was judged by
    assert found["chips"] == 8
    assert found["scenario"] == "Offline" and found["unit"] == "tokens/s"
    # The command line prints what the function computes, at NVIDIA's own width.
    same = predict("NVIDIA H200 SXM", 8, "Llama 2 70B", "fp8", "Offline",
                   rules=mlperf_rules(scale=0.05))
    assert found["tokens_per_s"] == pytest.approx(same.tokens_per_s, rel=1e-12)
    assert (found["tp"], found["replicas"]) == (1, 8) and "NVIDIA" in found["tp_from"]


def test_an_offline_first_token_is_said_to_be_timed_from_the_runs_start():
    # Fixed lengths judged by steady Offline: every query is sent at the start, so the
    # first tokens' p99 is minutes, and the line says where it is counted from.
    done = run_cli("--chip", "NVIDIA H100 SXM", "--chips", "8", "--model", "Llama 3.1 8B",
                   "--input-tokens", "1000", "--output-tokens", "200")
    assert done.returncode == 0, done.stderr
    [line] = [line.strip() for line in done.stdout.splitlines() if "TTFT" in line]
    ttft = line.removeprefix("TTFT p99 (from the run's start): ").split(" ms;")[0]
    assert float(ttft.replace(",", "")) > 60_000, line


def test_a_duration_is_written_in_milliseconds_or_seconds_never_powers_of_ten():
    assert [milliseconds(s) for s in (0.0367, 0.999, 12.345, 1234.5, 98765.4)] == [
        "36.7 ms", "999 ms", "12.3 s", "1,234 s", "98,765 s"]


def test_an_impossible_configuration_exits_non_zero_with_the_reason():
    done = run_cli("--chip", "NVIDIA H100 SXM", "--chips", "1", "--precision", "fp16",
                   "--scenario", "Offline", *QUICK)
    assert done.returncode == 2
    assert "needs at least 2 chips" in done.stderr
    done = run_cli("--chip", "No Such Chip", "--chips", "8", *QUICK)
    assert done.returncode == 2 and "unknown chip" in done.stderr


def test_csv_in_csv_out_writes_one_result_row_per_configuration(tmp_path):
    source = tmp_path / "in.csv"
    source.write_text("chip,chips,model,precision,scenario\n"
                      "NVIDIA H200 SXM,8,Llama 2 70B,fp8,Offline\n"
                      "NVIDIA B200,8,Llama 2 70B,fp4,Offline\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    done = run_cli("--csv", str(source), "--out", str(out), *QUICK)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [row["chip"] for row in rows] == ["NVIDIA H200 SXM", "NVIDIA B200"]
    assert all(float(row["tokens_per_s"]) > 0 and row["valid"] in ("yes", "no") for row in rows)
    # A bad row is named by its line.
    source.write_text("chip,chips,model,precision,scenario\nNVIDIA H200 SXM,x,Llama 2 70B,fp8,"
                      "Offline\n", encoding="utf-8")
    done = run_cli("--csv", str(source), "--out", str(out), *QUICK)
    assert done.returncode == 2 and "line 2, column 'chips'" in done.stderr


def test_tensor_parallel_options_fit_and_divide_the_system():
    assert tp_options("NVIDIA H200 SXM", 8, "Llama 2 70B", "fp8") == [1, 2, 4, 8]
    assert tp_options("NVIDIA H100 SXM", 8, "Llama 2 70B", "fp16") == [2, 4, 8]
    assert tp_options("NVIDIA H100 SXM", 16, "Llama 2 70B", "fp16") == [2, 4, 8]
    with pytest.raises(Infeasible, match="needs at least"):
        tp_options("NVIDIA L40S", 1, "Llama 2 70B", "fp8")


def test_unknown_model_and_scenario_are_refused():
    with pytest.raises(ValueError, match="model: unknown model 'Llama 9'; known: Llama 2 7B"):
        predict("NVIDIA H200 SXM", 8, "Llama 9")
    with pytest.raises(ValueError, match="scenario"):
        predict("NVIDIA H200 SXM", 8, scenario="Burst")
    # A model MLPerf has no benchmark for has no data set to default to: it needs lengths.
    with pytest.raises(ValueError, match="workload: Qwen3 30B-A3B has no MLPerf data set"):
        predict("NVIDIA H200 SXM", 8, "Qwen3 30B-A3B")


def test_peak_batch_counts_queries_in_flight_per_replica():
    from inferlab.benchmark.verdict import QueryLog
    log = QueryLog([0, 0, 1, 1], [1, 1, 2, 2], [3, 3, 4, 4], [2, 2, 2, 2])
    assert peak_batch(log, 1) == 4
    assert peak_batch(log, 2) == 2
    # Dealt by position: the first two queries to one replica, the last two to the other.
    assert peak_batch(log, 2, [np.array([0, 1]), np.array([2, 3])]) == 2
    assert peak_batch(log, 2, [np.array([0, 1, 2, 3]), np.array([], dtype=int)]) == 4
    with pytest.raises(ValueError, match="shares: give at most one array"):
        peak_batch(log, 1, [np.array([0, 1]), np.array([2, 3])])


def _anchor(fitted, scenario: str) -> tuple[dict, float]:
    """One row of the stack's anchor for Offline (or, given "bounded", its latency-bound
    scenario) and the median of all of the anchor's rows, which the fit reproduces."""
    table = load_table("mlperf_llama2_70b").set_index("id", drop=False)
    rows = [table.loc[i] for i in fitted.fitted_on
            if (table.loc[i, "scenario"] == "Offline") == (scenario == "Offline")]
    return rows[0], statistics.median(row["tokens_per_s"] for row in rows)


@pytest.mark.parametrize("name", ["TensorRT-LLM FP8", "TensorRT-LLM FP4", "vLLM ROCm FP8",
                                  "TensorRT-LLM FP8 (v4.1)", "vLLM ROCm FP8 (v4.1)"])
def test_each_stored_stack_reproduces_its_offline_anchor(name):
    """data/stacks.csv is the calibration's output: stale values fail here."""
    fitted = stack(name)
    offline, median = _anchor(fitted, "Offline")
    found = predict(offline["accelerator"], int(offline["accelerators"]), "Llama 2 70B",
                    offline["precision"], "Offline", stack=fitted,
                    rules=FIT_RULES["Offline"])
    assert found.tokens_per_s == pytest.approx(median, rel=0.02)
    assert found.valid


def test_the_hopper_stack_reproduces_its_interactive_anchor_and_a_bigger_overhead_lowers_it():
    fitted = stack("TensorRT-LLM FP8")
    row, median = _anchor(fitted, "bounded")
    args = (row["accelerator"], int(row["accelerators"]), "Llama 2 70B", row["precision"],
            row["scenario"])
    found = predict(*args, stack=fitted, rules=FIT_RULES[row["scenario"]])
    assert found.valid and found.tpot_p99_s <= 0.040
    assert found.tokens_per_s == pytest.approx(median, rel=0.03)
    # The same stack (so the same engines) with half as much again of fixed cost.
    slower = dataclasses.replace(fitted, step_overhead_s=fitted.step_overhead_s * 1.5)
    rules = FIT_RULES[row["scenario"]]
    assert predict(*args, stack=slower, rules=rules).tokens_per_s < found.tokens_per_s


def test_the_clock_share_stretches_the_fixed_cost_only_on_lower_clocked_cards():
    fitted = stack("TensorRT-LLM FP8")
    assert 0 < fitted.clock_share < 1
    base = fitted.step_overhead_s
    for name in ("NVIDIA H200 SXM", "NVIDIA H100 SXM"):
        assert fitted.step_overhead_on(name, "fp8") == pytest.approx(base)
    slowdown = 1978.9 / 1670.5
    assert fitted.step_overhead_on("NVIDIA H200 NVL", "fp8") == pytest.approx(
        base * (1 - fitted.clock_share + fitted.clock_share * slowdown))
    # None of it at the clock: the NVL card pays the SXM part's cost.
    host_only = Stack("host only", fitted.compute_efficiency, base)
    assert host_only.step_overhead_on("NVIDIA H200 NVL", "fp8") == pytest.approx(base)
    with pytest.raises(ValueError, match="chip"):
        fitted.step_overhead_on("NVIDIA H9000", "fp8")


def test_a_borrowed_clock_share_is_never_tested_by_a_clock():
    # One share is measured: the FP8 stack's, on a lower-clocked card. Every other stack
    # borrows it (for what it says of the fixed cost's growth with depth), so none of
    # them may serve a lower-clocked card by default or predict an audited row on one:
    # there its borrowed share would stand in for a measurement it never had.
    from inferlab.model.roofline import clock_slowdown
    from inferlab.serving.calibration import row_stack, stack_for

    measured = stack("TensorRT-LLM FP8")
    assert 0 < measured.clock_share < 1
    measuring = {"TensorRT-LLM FP8", "TensorRT-LLM FP8 (v4.1)"}  # the v4.1 one: same card
    for name, found in stacks().items():
        assert found.clock_share == measured.clock_share, name
    for name in specs.chips():
        chip = specs.chip(name)
        for precision in ("fp8", "fp4", "bf16"):
            try:
                served = stack_for(name, precision)
                slowdown = clock_slowdown(chip, precision)
            except ValueError:  # no stack for the vendor, or no peak at that format
                continue
            assert served.name in measuring or slowdown == 1.0, (name, precision)
    for row in load_table("mlperf_llama2_70b").to_dict("records"):
        name = row_stack(row["software"], row["precision"], row["round"])
        if name not in stacks() or row["accelerator"] not in specs.chips():
            continue  # not predicted (model_accuracy.py lists these rows as skipped)
        slowdown = clock_slowdown(specs.chip(row["accelerator"]), row["precision"])
        assert name in measuring or slowdown == 1.0, row["id"]


def test_only_the_small_kernels_share_of_the_fixed_cost_grows_with_depth():
    fitted = stack("TensorRT-LLM FP8")
    base, share = fitted.step_overhead_s, fitted.clock_share
    # The fitted model's 80 layers pay the fitted cost; a 32-layer model pays the host's
    # part whole and 32/80 of the small kernels'; a 126-layer one 126/80 of them.
    assert fitted.step_overhead_on("NVIDIA H200 SXM", "fp8") == pytest.approx(base)
    for name, layers in (("Llama 3.1 8B", 32), ("Llama 3.1 405B", 126)):
        assert specs.model(name).layers == layers
        assert fitted.step_overhead_on("NVIDIA H200 SXM", "fp8", name) == pytest.approx(
            base * (1 - share + share * layers / 80))
    shallow = fitted.step_overhead_on("NVIDIA H200 SXM", "fp8", "Llama 3.1 8B")
    deep = fitted.step_overhead_on("NVIDIA H200 SXM", "fp8", "Llama 3.1 405B")
    assert base * (1 - share) < shallow < base < deep < base * 126 / 80
    # A cost that is all the host's is paid whole by every model, on every card.
    host_only = Stack("host only", fitted.compute_efficiency, base)
    for name in ("Llama 3.1 8B", "Llama 3.1 405B", "DeepSeek-R1"):
        assert host_only.step_overhead_on("NVIDIA H200 NVL", "fp8", name) == base


def test_each_pipeline_stage_pays_the_hosts_part_of_the_fixed_cost():
    from inferlab.benchmark.workload import Workload
    from inferlab.predict import replica_for

    fitted = stack("TensorRT-LLM FP8")
    base, share = fitted.step_overhead_s, fitted.clock_share
    # Every stage runs the engine's loop for every micro-batch: the host's part is paid
    # once a stage; the small kernels' part once a round, the stages splitting the layers.
    for stages in (1, 2, 4):
        assert fitted.step_overhead_on("NVIDIA H200 SXM", "fp8", stages=stages) == (
            pytest.approx(base * ((1 - share) * stages + share)))
    host_only = Stack("host only", fitted.compute_efficiency, base)
    assert host_only.step_overhead_on("NVIDIA H200 SXM", "fp8", stages=3) == (
        pytest.approx(3 * base))
    # The replica predict runs carries it: two stages pay more than one, less than twice.
    work = Workload.dataset("llama3.1-405b")
    model, chip = specs.model("Llama 3.1 405B"), specs.chip("NVIDIA H200 SXM")
    flat = replica_for(chip, model, "fp8", fitted, work, 8)
    piped = replica_for(chip, model, "fp8", fitted, work, 4, pp=2)
    assert piped.step_overhead_s == pytest.approx(
        fitted.step_overhead_on(chip, "fp8", model, stages=2))
    assert flat.step_overhead_s < piped.step_overhead_s < 2 * flat.step_overhead_s
    for bad in (0, 1.5, -2):
        with pytest.raises(ValueError, match="stages"):
            fitted.step_overhead_on("NVIDIA H200 SXM", "fp8", stages=bad)


def test_a_clock_share_outside_zero_to_one_is_refused_by_name():
    fitted = stack("TensorRT-LLM FP8")
    for bad in (-0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match="clock_share"):
            dataclasses.replace(fitted, clock_share=bad).step_overhead_on("NVIDIA H200 NVL",
                                                                          "fp8")


def test_the_hopper_stack_reproduces_its_lower_clocked_anchor_and_a_larger_share_lowers_it():
    fitted = stack("TensorRT-LLM FP8")
    ids = load_table("mlperf_llama2_70b").set_index("id")
    nvl = [i for i in fitted.fitted_on if ids.loc[i, "accelerator"] == "NVIDIA H200 NVL"]
    assert nvl == ["v5.1-dell-8xh200nvl-interactive"]  # the one NVL run at a bound
    args = ("NVIDIA H200 NVL", 8, "Llama 2 70B", "fp8", "Interactive")
    found = predict(*args, stack=fitted, rules=FIT_RULES["Interactive"])
    assert found.tokens_per_s == pytest.approx(ids.loc[nvl[0], "tokens_per_s"], rel=0.03)
    more = dataclasses.replace(fitted, clock_share=min(1.0, fitted.clock_share * 2))
    assert predict(*args, stack=more, rules=FIT_RULES["Interactive"]).tokens_per_s \
        < found.tokens_per_s


def test_every_stack_names_the_rows_it_was_fitted_on():
    # All the rows of one to three configurations (Offline, the latency-bound one, and a
    # lower-clocked card's): a fit on a group's median names every row of the group, and
    # no other.
    records = load_table("mlperf_llama2_70b").to_dict("records")
    by_id = {row["id"]: row for row in records}
    for fitted in stacks().values():
        assert set(fitted.fitted_on) <= set(by_id)
        keys = {row_key(by_id[i])[0] for i in fitted.fitted_on}
        assert 1 <= len(keys) <= 3 and None not in keys
        group = set()
        for key in keys:
            rows = [row for row in records if row_key(row)[0] == key]
            limits = [row for row in rows if at_bound(row["id"])]
            # A latency-bound group counts only the runs that reached a bound, where any did.
            if key[3] != "Offline" and limits:
                rows = limits
            group |= {row["id"] for row in rows}
        assert set(fitted.fitted_on) == group, fitted.name


def test_a_run_reached_a_bound_when_a_p99_came_within_five_percent_of_it():
    # Nebius's Interactive H200 run: p99 TTFT 431.5 of 450 ms, TPOT 39.64 of 40 ms.
    assert bound_share("v5.1-nebius-8xh200sxm-interactive") == pytest.approx(39.642461 / 40,
                                                                             rel=1e-4)
    assert at_bound("v5.1-nebius-8xh200sxm-interactive")
    # Cisco's, at NVIDIA's default target: 269 ms and 36.8 ms, 92 % of the nearer bound.
    assert bound_share("v5.1-cisco-8xh200sxm-interactive") == pytest.approx(0.92, abs=0.005)
    assert at_bound("v5.1-cisco-8xh200sxm-interactive") is False
    # Server bounds are 2 s and 200 ms: ASUSTeK's p99 TPOT was 193 ms.
    assert at_bound("v5.1-asustek-8xh200sxm-server")
    # No summary recorded (a v5.0 run): neither verdict.
    assert at_bound("v5.0-nvidia-8xh200sxm-interactive") is None
    assert math.isnan(bound_share("v5.0-nvidia-8xh200sxm-interactive"))


def test_engine_settings_come_from_the_submitters_own_configuration():
    from inferlab.serving.calibration import engine_scheduler, engine_settings
    server = engine_settings("TensorRT-LLM FP8", "NVIDIA H200 SXM", "Server")
    inter = engine_settings("TensorRT-LLM FP8", "NVIDIA H200 SXM", "Interactive")
    # NVIDIA's v5.0 H200 files: 1,536 tokens per Server step, 256 per Interactive one.
    assert (server["token_budget"], inter["token_budget"]) == (1536, 256)
    assert inter["max_batch"] == 256  # a chunked step holds one decode token per request
    amd = engine_settings("vLLM ROCm FP8", "AMD MI300X", "Interactive")
    assert amd["chunked_prefill"] is False and amd["max_batch"] == 600
    assert engine_scheduler("vLLM ROCm FP8", "AMD MI300X", "Server").chunked_prefill is False
    # AMD's v5.1 MI325X Server file: nine decode steps a round, ten queued prompts a prefill.
    mi325 = engine_scheduler("vLLM ROCm FP8", "AMD MI325X", "Server")
    assert (mi325.scheduler_steps, mi325.min_prefill_queries) == (9, 10)
    assert engine_scheduler("TensorRT-LLM FP8", "NVIDIA H200 SXM", "Server").scheduler_steps == 1
    unknown = engine_settings("hand-made", "NVIDIA H200 SXM", "Server")
    assert unknown["source"] == "the book's default engine"
    # The width is the submitter's own chip's: AMD ran the MI300X at TP1, NVIDIA the
    # v4.1 H100 at TP2; a chip that borrows another's engine borrows no width.
    assert amd["tp"] == 1 and unknown["tp"] is None
    assert engine_settings("TensorRT-LLM FP8 (v4.1)", "NVIDIA H100 SXM", "Server")["tp"] == 2
    assert engine_settings("TensorRT-LLM FP8", "NVIDIA H100 PCIe", "Server")["tp"] is None
    # Fujitsu's own v5.0 files for its eight H100 NVLs: TP2 engines of at most 640 requests.
    nvl = engine_settings("TensorRT-LLM FP8", "NVIDIA H100 NVL", "Server")
    assert (nvl["tp"], nvl["max_batch"], nvl["token_budget"]) == (2, 640, 2048)
    # NVIDIA's GB200 folder has Offline and Server files only: Interactive takes the B200's
    # engine, and with another chip's file no width.
    gb200 = {s: engine_settings("TensorRT-LLM FP4", "NVIDIA GB200 (per GPU)", s)
             for s in ("Server", "Interactive")}
    assert gb200["Server"]["tp"] == 1 and "GB200" in gb200["Server"]["source"]
    assert gb200["Interactive"]["tp"] is None and "B200-SXM" in gb200["Interactive"]["source"]


def test_a_chip_the_stack_ran_gets_the_submitters_width_and_others_the_best_that_fits():
    quick = {"rules": mlperf_rules(scale=0.05)}
    own = predict("AMD MI300X", 8, "Llama 2 70B", "fp8", "Offline", **quick)
    assert own.tp == 1 and "8xMI300X_2xEPYC_9575F" in own.tp_from
    borrowed = predict("NVIDIA H100 PCIe", 4, "Llama 2 70B", "fp8", "Offline", **quick)
    assert borrowed.tp_from == "the best of 1, 2, 4"
    forced = predict("AMD MI300X", 8, "Llama 2 70B", "fp8", "Offline", tps=[2], **quick)
    assert (forced.tp, forced.replicas, forced.tp_from) == (2, 4, "given")


def test_a_given_width_must_divide_the_chips_and_fit():
    with pytest.raises(ValueError, match="tps: width 3 does not divide chips=8"):
        predict("AMD MI300X", 8, "Llama 2 70B", "fp8", "Offline", tps=[3])
    with pytest.raises(ValueError, match="tps: give at least one"):
        predict("AMD MI300X", 8, "Llama 2 70B", "fp8", "Offline", tps=[])
    with pytest.raises(TypeError, match="tps"):
        predict("AMD MI300X", 8, "Llama 2 70B", "fp8", "Offline", tps=2)
    # One H100 NVL (94 GB) cannot hold 70B parameters at 16 bits.
    with pytest.raises(Infeasible):
        predict("NVIDIA H100 NVL", 8, "Llama 2 70B", "bf16", "Offline", tps=[1])


def test_scenario_pairs_are_the_systems_that_ran_both_bounded_scenarios():
    from inferlab.serving.calibration import scenario_pairs
    pairs = scenario_pairs(load_table("mlperf_llama2_70b"))
    nebius = next(p for p in pairs if p["submitter"] == "Nebius"
                  and p["accelerator"] == "NVIDIA B200")
    assert nebius["drop"] == pytest.approx(1 - 59622.73 / 101610.58)
    assert all(0 < p["drop"] < 1 for p in pairs)
    assert nebius["server_key"][:4] == ("NVIDIA B200", 8, "fp4", "Server")


def test_each_group_runs_as_long_as_its_rows_record_never_shorter_than_mlperf():
    from inferlab.accuracy import audited_rows, row_groups, run_rules
    from inferlab.benchmark.mlperf import MLPERF_MIN_DURATION_S, OFFLINE_MIN_SAMPLES

    groups = row_groups(audited_rows("deepseek-r1"))[0]
    offline = next(g for key, g in groups.items() if key[:2] == ("NVIDIA B200", 8)
                   and key[3] == "Offline")
    server = next(g for key, g in groups.items() if key[:2] == ("NVIDIA B200", 8)
                  and key[3] == "Server")
    # Every submitter of R1 on eight B200s issued six passes of the data set, LoadGen logs
    # say, in both scenarios.
    assert {row["run_queries"] for row in offline + server} == {6 * 4_388}
    ran = run_rules("deepseek-r1", "Offline", offline)
    assert ran.offline_min_samples == 6 * 4_388 > OFFLINE_MIN_SAMPLES["deepseek-r1"]
    assert run_rules("deepseek-r1", "Server", server).min_queries == 6 * 4_388
    half = run_rules("deepseek-r1", "Offline", offline, scale=0.5)
    assert half.offline_min_samples == 3 * 4_388
    assert half.min_duration_s == MLPERF_MIN_DURATION_S * 0.5
    # A row with no log behind it (a results table's), or a record below MLPerf's minimum,
    # leaves MLPerf's rules as they are.
    minimum = mlperf_rules("deepseek-r1")
    assert run_rules("deepseek-r1", "Offline", [{"run_queries": math.nan}]) == minimum
    short = run_rules("deepseek-r1", "Offline", [{"run_queries": 10, "run_duration_s": 60}])
    assert short == minimum
    # A longer recorded duration lengthens the run too.
    longer = run_rules("llama3.1-405b", "Server", [{"run_queries": 100,
                                                    "run_duration_s": 5_400}])
    assert longer.min_duration_s == 5_400 and longer.min_queries == 100


def test_a_runs_bound_share_is_its_nearer_p99_over_its_bound():
    from inferlab.accuracy import audited_rows, bound_share
    from inferlab.serving import calibration

    # Cisco's two-node H100 405B Server run held 3.7 of 6 s to the first token and 99.5
    # of 175 ms a token: a rate chosen well short of what the system holds.
    cisco = "v5.1-cisco-hgx_h100_h100_sxm_80gbx16_trt-llama3.1-405b-server"
    assert bound_share("llama3.1-405b", cisco) == pytest.approx(3702.0 / 6000.0)
    nebius = "v5.1-nebius-h200_sxm_141gbx8_trt-llama3.1-405b-server"
    assert bound_share("llama3.1-405b", nebius) == pytest.approx(5642.7 / 6000.0)
    offline = audited_rows("llama3.1-405b").query("scenario == 'Offline'")["id"].iloc[0]
    assert math.isnan(bound_share("llama3.1-405b", offline))
    # One function for every benchmark: Llama 2 70B's from its own table.
    row = "v5.1-nebius-8xh200sxm-interactive"
    assert bound_share("llama2-70b", row) == calibration.bound_share(row)
    with pytest.raises(ValueError, match="row_id"):
        bound_share("llama3.1-405b", nebius.replace("405b", "8b"))


def test_a_server_run_at_its_own_rate_is_modelled_at_that_rate_against_its_own_log():
    from inferlab.accuracy import at_own_rates
    from inferlab.common.data import load_table

    latencies = load_table("mlperf_llm_latencies").set_index("id")
    runs = at_own_rates("deepseek-r1", scale=0.1)
    # Every summarised R1 run, each once: all six are TensorRT-LLM Server runs.
    assert sorted(run.id for run in runs) == sorted(
        i for i in latencies.index if "-deepseek-r1-" in i)
    for run in runs:
        log = latencies.loc[run.id]
        assert run.key[3] == "Server"
        assert run.prediction.rate_per_s == run.rate_per_s == log["scheduled_samples_per_s"]
        assert run.measured_tpot_p99_s == pytest.approx(log["tpot_p99_ms"] / 1e3)
        assert run.measured_ttft_p99_s == pytest.approx(log["ttft_p99_ms"] / 1e3)
        assert run.tpot_error == pytest.approx(
            run.prediction.tpot_p99_s / run.measured_tpot_p99_s - 1)
        # At rates the engine held, the model keeps up too, and a busier run's tokens are
        # no faster than a quieter one's on the same eight chips.
        assert run.prediction.valid
    b200 = sorted((run.rate_per_s, run.prediction.tpot_p99_s) for run in runs
                  if run.key[:2] == ("NVIDIA B200", 8))
    assert [tpot for _, tpot in b200] == sorted(tpot for _, tpot in b200)
    with pytest.raises(ValueError, match="benchmark"):
        at_own_rates("llama2-70b")


def test_the_recorded_run_lengths_meet_mlperfs_minimums_and_come_in_pairs():
    from inferlab.benchmark.mlperf import (
        MLPERF_MIN_DURATION_S,
        MLPERF_MIN_QUERIES,
        OFFLINE_MIN_SAMPLES,
    )

    table = load_table("mlperf_llm_results")
    recorded = table["run_queries"].notna()
    assert (recorded == table["run_duration_s"].notna()).all()
    # Every row whose source is its own LoadGen log records its run; a results table's
    # row cannot.
    from_log = table["source"].str.endswith("mlperf_log_summary.txt")
    assert (recorded == from_log).all()
    for row in table[recorded].to_dict("records"):
        least = (OFFLINE_MIN_SAMPLES[row["benchmark"]] if row["scenario"] == "Offline"
                 else MLPERF_MIN_QUERIES)
        assert row["run_queries"] >= least, row["id"]
        assert row["run_duration_s"] >= MLPERF_MIN_DURATION_S, row["id"]


def test_a_rate_search_that_ends_at_its_own_limit_is_not_scored(monkeypatch):
    import inferlab.accuracy as accuracy

    real = accuracy.predict

    def at_limit(*args, **kwargs):
        found = real(*args, **kwargs)
        # What a search returns when every rate it tried passed: a floor, not a rate.
        return dataclasses.replace(found, at_ceiling=found.scenario == "Server")

    monkeypatch.setattr(accuracy, "predict", at_limit)
    scored, skipped = accuracy.score("deepseek-r1", scenarios=("Offline", "Server"),
                                     scale=0.05)
    assert {entry.key[3] for entry in scored} == {"Offline"}
    server_rows = set(accuracy.audited_rows("deepseek-r1").query("scenario == 'Server'")["id"])
    refused = {row_id for row_id, reason in skipped if "the most the search tries" in reason}
    assert refused == server_rows


def test_a_recorded_run_longer_than_a_run_may_hold_is_held_to_the_most_it_may():
    from inferlab.accuracy import audited_rows, row_groups, run_length_effect, run_rules
    from inferlab.benchmark.verdict import MAX_QUERIES

    groups = row_groups(audited_rows("mixtral-8x7b"))[0]
    b200 = next(g for key, g in groups.items() if key[:2] == ("NVIDIA B200", 8)
                and key[3] == "Offline")
    assert max(row["run_queries"] for row in b200 if row["run_queries"] > 0) > MAX_QUERIES
    held = run_rules("mixtral-8x7b", "Offline", b200)
    assert held.offline_min_samples <= MAX_QUERIES
    assert held.offline_min_samples % held.dataset_samples == 0
    assert held.offline_min_samples > MAX_QUERIES - held.dataset_samples
    # The count then sets the length: a longer recorded duration would only ask the model
    # for more samples than a run may hold.
    assert held.min_duration_s == mlperf_rules("mixtral-8x7b").min_duration_s
    # Eight H100s ran Mixtral Offline under two stacks: which one to compare is not the
    # function's to guess.
    with pytest.raises(ValueError, match="chip: 8 x NVIDIA H100 SXM ran mixtral-8x7b"):
        run_length_effect("mixtral-8x7b", "NVIDIA H100 SXM", 8)
