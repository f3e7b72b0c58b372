"""The planner: the physics a deployment plan must obey, its refusals, and its command line."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from conftest import ROOT

import inferlab
from inferlab.benchmark.workload import Workload
from inferlab.model import specs
from inferlab.plan import MODES, PlanResult, chip_prices, plan
from inferlab.predict import predict
from inferlab.serving.calibration import stack_for

H200, B200 = "NVIDIA H200 SXM", "NVIDIA B200"
EIGHT_B = "Llama 3.1 8B"
#: The issue's chat service: 1,000 tokens in, 200 out, TTFT p99 2 s, TPOT p99 50 ms.
CHAT = {"input_tokens": 1000, "output_tokens": 200, "ttft_p99_s": 2.0, "tpot_p99_s": 0.05}
#: Fewer simulated requests than the default keep each plan here under a second.
QUICK = {"requests": 2000}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inferlab.plan", *args],
                          capture_output=True, text=True, timeout=300)


def one(chip: str = H200, **kwargs):
    """The plan of one chip kind."""
    result = plan(EIGHT_B, chips=[chip], **{**CHAT, **QUICK, **kwargs})
    assert [p.chip for p in result.plans] == [chip], result.refused
    return result.plans[0]


# ---- physics --------------------------------------------------------------------------


def test_more_traffic_never_needs_fewer_chips():
    chips = [one(rate_per_s=rate).chips for rate in (5, 20, 60, 120, 240)]
    assert chips == sorted(chips)
    assert chips[0] == 1 and chips[-1] > 2  # the sweep crosses from one replica to several


def test_a_tighter_tpot_bound_never_gives_more_tokens_per_chip():
    found = [one(rate_per_s=60, tpot_p99_s=bound).tokens_per_s_per_chip
             for bound in (0.2, 0.05, 0.02, 0.012)]
    assert found == sorted(found, reverse=True)
    assert found[-1] < found[0]


def test_a_tighter_ttft_bound_never_gives_more_tokens_per_chip():
    found = [one(rate_per_s=60, ttft_p99_s=bound).tokens_per_s_per_chip
             for bound in (5.0, 0.5, 0.2, 0.1)]
    assert found == sorted(found, reverse=True)


@pytest.mark.parametrize("mode", MODES)
def test_the_whole_plan_meets_its_own_service_level_in_the_simulator(mode):
    """Every replica of the plan, simulated together at the whole traffic."""
    found = plan("Llama 3.1 70B", chips=[H200], modes=(mode,), rate_per_s=12,
                 **{**CHAT, "ttft_p99_s": 3.0, "tpot_p99_s": 0.06}, **QUICK).plans[0]
    assert found.mode == mode
    assert found.ttft_p99_s <= 3.0 and found.tpot_p99_s <= 0.06
    if mode == "disaggregated":
        prefill, decode = found.pools
        assert (prefill.role, decode.role) == ("prefill", "decode")
        assert found.chips == prefill.chips + decode.chips
        assert found.tp is found.pp is found.replicas is None
        return
    assert found.chips == found.tp * found.pp * found.replicas
    # The plan judged one replica at its Poisson share; here all of them share the
    # whole stream, dealt round-robin as the simulator's system deals it.
    whole = predict(H200, found.chips, "Llama 3.1 70B", found.precision, "Server",
                    workload=Workload.fixed(1000, 200), tps=[found.tp], pp=found.pp,
                    ttft_p99_s=3.0, tpot_p99_s=0.06, rate_per_s=found.rate_per_s,
                    rules=inferlab.benchmark.verdict.RunRules(min_duration_s=0.0, min_queries=4000,
                                                    offline_min_samples=4000))
    assert whole.valid and whole.started_share > 0.95
    assert whole.ttft_p99_s <= 3.0 and whole.tpot_p99_s <= 0.06


def test_at_a_loose_service_level_tokens_per_chip_approach_predicts_offline_figure():
    offline = predict(H200, 1, EIGHT_B, "fp8", "Offline", workload=Workload.fixed(1000, 200),
                      tps=[1]).tokens_per_s
    # Traffic for four chips at 95 % of the Offline rate: rounding costs no replica.
    rate = 4 * 0.95 * offline / 200
    loose = one(rate_per_s=rate, ttft_p99_s=120.0, tpot_p99_s=5.0)
    unbounded = one(rate_per_s=rate, ttft_p99_s=None, tpot_p99_s=None)
    for found in (loose, unbounded):
        assert found.chips == 4
        assert 0.9 * offline <= found.tokens_per_s_per_chip <= offline
    assert unbounded.pools[0].method.startswith("simulated: steady Offline")


def test_a_tpot_below_every_layouts_bandwidth_floor_is_refused_with_the_floor_named():
    result = plan(EIGHT_B, input_tokens=1000, output_tokens=200, tpot_p99_s=5e-5,
                  rate_per_s=20, chips=[B200, H200], **QUICK)
    assert result.plans == ()
    reasons = dict(result.refused)
    b200 = reasons[B200]
    assert "0.05 ms is below every layout's floor" in b200
    # The widest B200 replica of the NVLink domain, eight chips, names its own figures.
    assert "8 x NVIDIA B200" in b200 and "8.0 GB of weights" in b200
    assert "64.0 TB/s" in b200 and "0.125 ms" in b200
    with pytest.raises(ValueError, match="no chip meets the service level"):
        result.best()


def test_the_fastest_stream_is_the_step_the_tpot_floor_is_judged_by():
    from inferlab.plan import fastest_stream_tok_s

    rate, name = fastest_stream_tok_s(EIGHT_B, B200, context_tokens=1000)
    assert name.startswith("Llama 3.1 8B on 8 x NVIDIA B200")  # the widest split is fastest
    # Just above that stream's step the planner plans; just below it refuses.
    step = 1 / rate
    assert plan(EIGHT_B, input_tokens=1000, output_tokens=200, tpot_p99_s=step * 0.98,
                rate_per_s=1, chips=[B200], **QUICK).plans == ()
    assert plan(EIGHT_B, input_tokens=1000, output_tokens=200, tpot_p99_s=step * 1.5,
                rate_per_s=1, chips=[B200], **QUICK).plans != ()
    # A bigger model at the same precision streams slower on the same chip.
    assert fastest_stream_tok_s("Llama 3.1 70B", B200)[0] < rate
    with pytest.raises(ValueError, match="context_tokens"):
        fastest_stream_tok_s(EIGHT_B, B200, context_tokens=0)
    with pytest.raises(ValueError, match="chip"):
        fastest_stream_tok_s(EIGHT_B, "Groq LPU (GroqChip)")


def test_the_plan_explorer_shows_every_chip_it_sizes_planned_or_refused():
    from inferlab.pages.explorers import hardware

    flow = hardware.plan_explorer_compute(tpot_p99_ms=50, rate_per_s=200.0)
    result = flow.planned
    tables = hardware._workflow_tables(flow)["chips"]
    assert tables["chip"] == list(hardware.PLAN_CHIPS)
    planned = {p.chip: p.chips for p in result.plans}
    for chip, chips, verdict in zip(tables["chip"], tables["chips"], tables["verdict"],
                                    strict=True):
        assert (verdict == "planned") == (chip in planned)
        assert chips == planned[chip] if chip in planned else math.isnan(chips)
    # The decision guide judges the same service: 20 tok/s a user (50 ms), the traffic's
    # output tokens a day.
    assert flow.decision.requirements.per_user_tok_s == pytest.approx(20.0)
    assert flow.decision.requirements.tokens_per_day == pytest.approx(200.0 * 200 * 86_400)
    # Its own controls change the verdict, never the plans.
    churn = hardware.plan_explorer_compute(tpot_p99_ms=50, rate_per_s=200.0,
                                           changes_per_month=30.0)
    assert churn.planned is result and churn.decision.fits == ("gpu",)
    with pytest.raises(ValueError, match="precision"):
        hardware.plan_explorer_compute(precision="fp3")
    with pytest.raises(ValueError, match="rate_per_s"):
        hardware.plan_explorer_compute(rate_per_s=0.0)


def test_an_sram_machine_is_judged_by_its_own_bound():
    result = plan(EIGHT_B, input_tokens=1000, output_tokens=200, tpot_p99_s=1e-6,
                  rate_per_s=20, chips=["Groq LPU (GroqChip)"], **QUICK)
    reason = dict(result.refused)["Groq LPU (GroqChip)"]
    assert "keeps the weights in on-chip SRAM" in reason and "35 chip(s)" in reason
    assert "over the TPOT p99 of 0.001 ms" in reason


def test_a_chip_that_cannot_hold_the_model_is_refused_with_its_reason():
    result = plan("Llama 3.1 405B", input_tokens=1000, output_tokens=200, rate_per_s=1,
                  tpot_p99_s=0.1, chips=["AWS Inferentia2 (per chip)", H200], **QUICK)
    reasons = dict(result.refused)
    assert "AWS Inferentia2 (per chip)" in reasons
    assert "domain" in reasons["AWS Inferentia2 (per chip)"]
    assert [p.chip for p in result.plans] == [H200]



def test_a_disaggregated_plan_that_would_need_pipelined_decode_is_refused_with_why():
    # 405B at FP8 needs more L40S cards than a PCIe node holds: every layout has stages,
    # and a pipelined decode pool fed by a prefill pool is not modelled (lanes in lock
    # step). The aggregated plan of the same chip is still made: at 300 ms a token (at
    # 200 ms none is, each stage paying the host's work; the plan at 300 ms runs at about
    # 200 ms at its p99).
    kwargs = dict(input_tokens=1000, output_tokens=200, ttft_p99_s=5.0, tpot_p99_s=0.3,
                  rate_per_s=1, chips=["NVIDIA L40S"], **QUICK)
    split = plan("Llama 3.1 405B", modes=("disaggregated",), **kwargs)
    assert "a decode pool of pipeline stages" in dict(split.refused)["NVIDIA L40S"]
    together = plan("Llama 3.1 405B", **kwargs)
    assert [(p.mode, p.pools[0].pp > 1) for p in together.plans] == [("aggregated", True)]

# ---- what a plan reports ----------------------------------------------------------------


def test_costs_split_the_same_chip_hours_between_input_and_output_tokens():
    found = one(rate_per_s=20)
    price = chip_prices()[H200].usd_per_chip_hour
    out_per_hour = 20 * 200 * 3600
    assert found.usd_per_mtok == pytest.approx(found.chips * price / out_per_hour * 1e6)
    # Input and output prices, each times its tokens, add up to the chip-hours.
    paid = (found.usd_per_mtok_input * 20 * 1000 * 3600
            + found.usd_per_mtok_output * out_per_hour) / 1e6
    assert paid == pytest.approx(found.chips * price)
    assert 0 < found.prefill_share < 1


def test_tokens_per_day_is_the_same_traffic_as_its_rate():
    by_rate = one(rate_per_s=20)
    by_day = one(tokens_per_day=20 * 200 * 86400)
    assert by_day.rate_per_s == pytest.approx(20)
    assert by_day.as_dict() == by_rate.as_dict()


def test_names_and_spec_objects_plan_alike():
    named = one(rate_per_s=20)
    hw = specs.chip(H200)
    stack = stack_for(hw, "fp8")
    result = plan(specs.model(EIGHT_B), chips=[hw], stack=stack, rate_per_s=20, **CHAT, **QUICK)
    assert result.plans[0].as_dict() == named.as_dict()


def test_two_runs_give_the_same_plan():
    assert one(rate_per_s=60).as_dict() == one(rate_per_s=60).as_dict()


def test_each_plan_says_where_its_stacks_numbers_came_from():
    found = one(rate_per_s=20)
    assert found.fitted_on.startswith("compute efficiency and fixed cost per step fitted on "
                                      "Llama 2 70B")
    assert "MLPerf v" in found.fitted_on
    assumed = one("Google TPU v5e (per chip)", rate_per_s=20)
    assert assumed.fitted_on.startswith("assumed, not fitted")


def test_a_trace_brings_its_lengths_and_its_rate():
    from inferlab.lab.tool_files import read_trace

    trace = Workload.from_trace(read_trace(ROOT / "data" / "traces" / "guidellm_chat_c2"
                                           / "benchmarks.json"))
    result = plan(EIGHT_B, workload=trace, chips=[H200], ttft_p99_s=2.0, **QUICK)
    assert result.rate_per_s == pytest.approx(trace.native_rate_per_s)
    assert result.plans[0].chips >= 1


# ---- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, named", [
    ({"model": "Llama 9 1T"}, "model"),
    ({"chips": ["NVIDIA H900"]}, "chip"),
    ({"chips": []}, "chips"),
    ({"input_tokens": 0}, "input_tokens"),
    ({"output_tokens": -3}, "output_tokens"),
    ({"input_tokens": 200_000}, "context"),
    ({"ttft_p99_s": 0.0}, "ttft_p99_s"),
    ({"tpot_p99_s": -0.05}, "tpot_p99_s"),
    ({"per_user_tok_s": 0.0}, "per_user_tok_s"),
    ({"rate_per_s": 0.0}, "rate_per_s"),
    ({"rate_per_s": math.nan}, "rate_per_s"),
    ({"rate_per_s": None}, "rate_per_s"),
    ({"tokens_per_day": 1e9}, "tokens_per_day"),
    ({"modes": ("both",)}, "modes"),
    ({"requests": 0}, "requests"),
    ({"workload": Workload.fixed(100, 10)}, "workload"),
])
def test_bad_input_is_refused_naming_the_argument(kwargs, named):
    arguments = {"model": EIGHT_B, "chips": [H200], "rate_per_s": 20, **CHAT, **QUICK, **kwargs}
    with pytest.raises(ValueError, match=named):
        plan(**arguments)


def test_a_price_file_naming_an_unknown_chip_fails_with_its_file_and_line(tmp_path):
    good = (ROOT / "data" / "prices.csv").read_text().splitlines()
    bad = tmp_path / "prices.csv"
    bad.write_text("\n".join([good[0], good[1], good[1].replace("NVIDIA B200", "NVIDIA B900")
                              .replace("packetai-b200-on-demand", "mine")]) + "\n")
    with pytest.raises(ValueError, match=r"prices.csv, line 3, column 'chip'.*B900"):
        plan(EIGHT_B, chips=[H200], rate_per_s=20, prices=bad, **CHAT, **QUICK)


# ---- command line -------------------------------------------------------------------------


def test_the_command_line_prints_one_json_object_with_the_issues_fields():
    done = run_cli("--model", EIGHT_B, "--input-tokens", "1000", "--output-tokens", "200",
                   "--ttft-p99", "2", "--tpot-p99", "0.05", "--rate", "20", "--chips",
                   f"{H200},Cerebras WSE-3", "--requests", "2000", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert set(found) >= {"plans", "refused"}
    (row,) = found["plans"]
    assert set(row) >= {"chip", "chips", "tp", "pp", "replicas", "mode", "precision",
                        "tokens_per_s_per_chip", "ttft_p99_s", "tpot_p99_s",
                        "usd_per_mtok_input", "usd_per_mtok_output", "usd_per_mtok",
                        "binding", "fitted_on", "pools"}
    assert row["chip"] == H200 and row["mode"] in MODES
    assert row == one(rate_per_s=20).as_dict()
    assert [r["chip"] for r in found["refused"]] == ["Cerebras WSE-3"]
    assert "SRAM" in found["refused"][0]["reason"]


def test_the_command_line_table_lists_plans_then_refusals():
    done = run_cli("--model", EIGHT_B, "--input-tokens", "1000", "--output-tokens", "200",
                   "--tpot-p99", "0.05", "--rate", "20", "--chips", f"{H200},Apple M4 Max",
                   "--requests", "2000")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Llama 3.1 8B, fixed lengths: 1,000 in, 200 out")
    assert lines[2].startswith(H200)
    assert lines[-1].startswith("refused Apple M4 Max:")


@pytest.mark.parametrize("args, named", [
    (["--model", "Llama 9 1T", "--input-tokens", "10", "--output-tokens", "10", "--rate", "1"],
     "model"),
    (["--model", EIGHT_B, "--input-tokens", "10", "--output-tokens", "10", "--rate", "-1"],
     "rate_per_s"),
    (["--model", EIGHT_B, "--input-tokens", "10", "--output-tokens", "10", "--rate", "1",
      "--trace", "nowhere.json"], "--dataset"),
    (["--model", EIGHT_B, "--trace", "nowhere.json", "--rate", "1"], "nowhere.json"),
    (["--model", EIGHT_B, "--input-tokens", "10", "--output-tokens", "10", "--rate", "1",
      "--chips", " , "], "--chips"),
])
def test_bad_command_lines_exit_2_naming_the_argument_and_print_no_table(args, named):
    done = run_cli(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("error: ") and named in done.stderr


def test_a_command_line_where_every_chip_is_refused_exits_1():
    done = run_cli("--model", EIGHT_B, "--input-tokens", "1000", "--output-tokens", "200",
                   "--tpot-p99", "0.00005", "--rate", "20", "--chips", B200)
    assert done.returncode == 1
    assert "no plan: every chip kind was refused" in done.stdout
    assert f"refused {B200}: a TPOT p99 of 0.05 ms is below every layout's floor" in done.stdout


def test_the_package_is_callable_as_the_planner():
    assert isinstance(inferlab.plan(EIGHT_B, chips=[H200], rate_per_s=20, **CHAT, **QUICK),
                      PlanResult)


def test_a_request_too_long_for_the_narrowest_layout_is_planned_on_a_wider_one():
    # 121,000 tokens of one request fit Llama 3.1 70B's context but not one H100's cache
    # beside the weights: the planner skips the layouts whose lane cannot hold it.
    found = plan("Llama 3.1 70B", input_tokens=120_000, output_tokens=1_000, ttft_p99_s=120.0,
                 tpot_p99_s=0.2, rate_per_s=0.05, chips=["NVIDIA H100 SXM"], **QUICK)
    assert found.plans and min(p.pools[0].tp * p.pools[0].pp for p in found.plans) > 1
    from inferlab.plan import fastest_stream_tok_s

    tok_s, name = fastest_stream_tok_s("Llama 3.1 70B", "NVIDIA H100 SXM",
                                       context_tokens=121_000)
    assert tok_s > 0 and "8 x" in name
