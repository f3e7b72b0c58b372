"""A Server prediction at a service level of one's own: p99 TTFT and TPOT bounds given.

The same rate search that judges MLPerf's Server scenario judges any bounds, on any
model and workload; this is what a planner sizing a deployment asks of the predictor.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from inferlab.benchmark.mlperf import bounds
from inferlab.benchmark.verdict import RunRules, mlperf_rules
from inferlab.benchmark.workload import Workload
from inferlab.predict import predict

H200 = "NVIDIA H200 SXM"
CHAT = Workload.fixed(1000, 200)
#: Shorter runs than MLPerf's, so that each search takes seconds.
SHORT = RunRules(min_duration_s=60.0)


def test_mlperfs_own_bounds_given_by_hand_reproduce_its_server_result():
    rules = mlperf_rules("llama3.1-8b", scale=0.1)
    own = bounds("llama3.1-8b", "Server")
    mlperf = predict(H200, 1, "Llama 3.1 8B", "fp8", "Server", workload="llama3.1-8b",
                     rules=rules)
    given = predict(H200, 1, "Llama 3.1 8B", "fp8", "Server", workload="llama3.1-8b",
                    rules=rules, ttft_p99_s=own.ttft_s, tpot_p99_s=own.tpot_s)
    assert given.tokens_per_s == pytest.approx(mlperf.tokens_per_s, rel=1e-12)
    assert given.rate_per_s == pytest.approx(mlperf.rate_per_s, rel=1e-12)
    assert "TTFT <= 2 s and TPOT <= 100 ms" in given.rules


def test_a_tighter_tpot_bound_never_serves_more_and_each_plan_meets_its_own_bounds():
    served = []
    for tpot in (0.08, 0.04, 0.025):
        found = predict(H200, 1, "Llama 3.1 8B", "fp8", "Server", workload=CHAT,
                        rules=SHORT, ttft_p99_s=2.0, tpot_p99_s=tpot)
        assert found.valid
        assert found.ttft_p99_s <= 2.0 and found.tpot_p99_s <= tpot
        served.append(found.tokens_per_s)
    assert served == sorted(served, reverse=True)
    assert served[-1] < served[0]  # the tightest bound binds


def test_a_model_without_an_mlperf_benchmark_is_predicted_at_given_bounds():
    found = predict(H200, 1, "Qwen3 30B-A3B", "fp8", "Server", workload=CHAT, rules=SHORT,
                    ttft_p99_s=1.0)
    assert found.valid and found.tokens_per_s > 0 and found.ttft_p99_s <= 1.0
    assert "TTFT <= 1 s and TPOT <= any" in found.rules
    # Without bounds of one's own the model has none to take.
    with pytest.raises(ValueError, match="no MLPerf benchmark"):
        predict(H200, 1, "Qwen3 30B-A3B", "fp8", "Server", workload=CHAT, rules=SHORT)


def test_a_tpot_bound_alone_serves_no_more_than_the_offline_rate():
    offline = predict(H200, 1, "Llama 3.1 8B", "fp8", workload=CHAT)
    found = predict(H200, 1, "Llama 3.1 8B", "fp8", "Server", workload=CHAT, rules=SHORT,
                    tpot_p99_s=0.08)
    assert found.valid and found.tpot_p99_s <= 0.08
    assert found.tokens_per_s <= 1.25 * offline.tokens_per_s


@pytest.mark.parametrize("given, name", [
    ({"ttft_p99_s": 0.0}, "ttft_p99_s"), ({"tpot_p99_s": -0.05}, "tpot_p99_s"),
    ({"tpot_p99_s": math.nan}, "tpot_p99_s"), ({"ttft_p99_s": 1e9}, "ttft_p99_s"),
])
def test_bounds_outside_their_range_are_refused_by_name(given, name):
    with pytest.raises(ValueError, match=name):
        predict(H200, 1, "Llama 3.1 8B", "fp8", "Server", workload=CHAT, rules=SHORT,
                **given)


def test_bounds_with_a_scenario_they_do_not_judge_are_refused():
    with pytest.raises(ValueError, match="scenario: bounds of one's own"):
        predict(H200, 1, "Llama 3.1 8B", "fp8", "Offline", workload=CHAT, tpot_p99_s=0.05)


def test_the_command_line_takes_the_bounds():
    done = subprocess.run(
        [sys.executable, "-m", "inferlab.predict", "--chip", H200, "--chips", "1",
         "--model", "Llama 3.1 8B", "--input-tokens", "1000", "--output-tokens", "200",
         "--scenario", "Server", "--ttft-p99", "0.5", "--tpot-p99", "0.05", "--json"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["valid"] is True and found["ttft_p99_s"] <= 0.5
    assert found["tpot_p99_s"] <= 0.05
    assert found["rules"] == "Server at p99 TTFT <= 500 ms and TPOT <= 50 ms, MLPerf's duration"
    bad = subprocess.run(
        [sys.executable, "-m", "inferlab.predict", "--chip", H200, "--chips", "1",
         "--model", "Llama 3.1 8B", "--input-tokens", "1000", "--output-tokens", "200",
         "--scenario", "Server", "--tpot-p99", "0"], capture_output=True, text=True,
        timeout=120)
    assert bad.returncode == 2 and "tpot_p99_s" in bad.stderr and not bad.stdout


def test_the_command_line_runs_a_server_at_a_rate_of_ones_own():
    base = [sys.executable, "-m", "inferlab.predict", "--chip", H200, "--chips", "1",
            "--model", "Llama 3.1 8B", "--input-tokens", "1000", "--output-tokens", "200",
            "--scenario", "Server"]
    found = {}
    for rate in ("2", "40"):
        done = subprocess.run([*base, "--rate", rate, "--json"], capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        found[rate] = json.loads(done.stdout)
        # The run is at the rate given, not at one a search found.
        assert found[rate]["rate_per_s"] == float(rate)
    # A light load keeps up with short first tokens; twenty times it, on one chip, queues.
    assert found["2"]["started_share"] > 0.99 > found["40"]["started_share"]
    assert found["40"]["ttft_p99_s"] > 10 * found["2"]["ttft_p99_s"]
    assert found["40"]["tpot_p99_s"] > found["2"]["tpot_p99_s"]
    text = subprocess.run([*base, "--rate", "2"], capture_output=True, text=True, timeout=600)
    assert "query rate: 2.00 per second" in text.stdout
    assert "queries started while the stream ran: 99.9% of those sent" in text.stdout
    for bad, named in ((["--rate", "-1"], "rate_per_s"),
                       (["--rate", "2", "--scenario", "Offline"], "rate_per_s")):
        refused = subprocess.run([*base, *bad], capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and named in refused.stderr and not refused.stdout


def test_a_server_run_without_bounds_names_both_ways_to_give_them():
    # Qwen3 has no MLPerf benchmark to take bounds from: the refusal says what will do.
    with pytest.raises(ValueError, match=r"scenario: .*give Offline, or bounds of your own "
                                         r"\(ttft_p99_s, tpot_p99_s\)"):
        predict(H200, 8, "Qwen3 30B-A3B", "fp8", "Server", workload=CHAT, rate_per_s=2.0)
    # Given bounds of one's own, the same run is predicted.
    found = predict(H200, 8, "Qwen3 30B-A3B", "fp8", "Server", workload=CHAT,
                    rate_per_s=2.0, tpot_p99_s=0.05)
    assert found.rate_per_s == 2.0 and found.tpot_p99_s > 0
