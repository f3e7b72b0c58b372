"""inferlab.serving.loadgen against MLCommons' own LoadGen, on the same runs.

Each run is a real LoadGen test (``mlperf_loadgen``) of a few seconds at most,
against a Python SUT answering on a seeded timetable (inferlab.serving.real_loadgen). The
per-query log is rebuilt from LoadGen's trace, in its own nanoseconds, and then
judged by inferlab.benchmark.verdict.judge; every figure LoadGen wrote must come out again.

Tolerances: latencies agree to 1 ns. LoadGen keeps integer nanoseconds and
truncates TPOT, ``(latency - ttft) / (tokens - 1)``, to a whole nanosecond, where we
divide in floating point, so a TPOT can differ by just under 1 ns; the trace's
times are whole nanoseconds, so nothing else is lost. Rates agree to 1e-5
relative: LoadGen prints them with six significant digits.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from inferlab.benchmark import early_stopping as es
from inferlab.benchmark import mlperf
from inferlab.serving import loadgen as lg

real = pytest.importorskip("mlperf_loadgen")
from inferlab.benchmark import verdict  # noqa: E402
from inferlab.serving import real_loadgen as rl  # noqa: E402  (needs the package above

DATASET = 24  # samples: small, so that equal issue pads to a multiple LoadGen can reach fast
NS = 1e-9

#: (scenario, settings, bounds): each run once per test session.
RUNS = {
    # Long enough for early stopping (at 300 per second, ~750 queries) and within bounds.
    "server_valid": ("Server", dict(ttft_bound_s=0.5, tpot_bound_s=0.05, min_duration_s=2.5,
                                    target_qps=300.0)),
    # The TPOT bound sits inside the script's 0.2-0.6 ms: TPOT fails, TTFT is not tested.
    "server_tpot_broken": ("Server", dict(ttft_bound_s=0.5, tpot_bound_s=0.0003,
                                          min_duration_s=0.5, target_qps=200.0)),
    # The TTFT bound sits inside the script's 2-10 ms; TPOT passes, so TTFT is tested too.
    "server_ttft_broken": ("Server", dict(ttft_bound_s=0.005, tpot_bound_s=0.05,
                                          min_duration_s=2.0, target_qps=300.0)),
    # MLPerf's 600 s minimum, cut to 1 s by max_duration: invalid for duration.
    "server_short": ("Server", dict(ttft_bound_s=0.5, tpot_bound_s=0.05, min_duration_s=600.0,
                                    max_duration_s=1.0, target_qps=200.0)),
    # Single-Stream: 2 x 0.3 s / 10 ms = 60 queries, padded to 72.
    "single": ("SingleStream", dict(ttft_bound_s=0.5, tpot_bound_s=0.05, min_duration_s=0.3,
                                    min_queries=1, expected_latency_s=0.01)),
    # Without equal issue and with too few queries for early stopping (needs 64).
    "single_short": ("SingleStream", dict(ttft_bound_s=0.5, tpot_bound_s=0.05,
                                          min_duration_s=0.2, min_queries=30,
                                          expected_latency_s=0.01, equal_issue=False)),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    script = rl.Script.seeded(DATASET, seed=7)
    done = {}
    for name, (scenario, kwargs) in RUNS.items():
        settings = rl.settings(scenario, **kwargs)
        done[name] = (rl.run(script, settings, tmp_path_factory.mktemp(name)), kwargs)
    return done


def ours(run, kwargs):
    rules = verdict.RunRules(min_duration_s=kwargs["min_duration_s"],
                        min_queries=kwargs.get("min_queries", 100),
                        equal_issue=kwargs.get("equal_issue", True), dataset_samples=DATASET)
    limit = mlperf.LatencyBounds(kwargs["ttft_bound_s"], kwargs["tpot_bound_s"])
    return verdict.judge(run.log, run.scenario, rules=rules, limit=limit), rules


def same_verdict(summary, run):
    """Our verdict and each of its parts equal LoadGen's."""
    flags = {"min_duration_met": "result_min_duration_met",
             "min_queries_met": "result_min_queries_met",
             "early_stopping_met": "early_stopping_met"}
    if run.scenario == "Server":
        flags["perf_constraints_met"] = "result_perf_constraints_met"
    assert summary.valid == (run.figure("result_validity") == "VALID")
    for ours_name, theirs in flags.items():
        assert getattr(summary, ours_name) == run.figure(theirs), ours_name


def same_ns(seconds, run, key):
    """A latency of ours equals LoadGen's figure ``key`` (in ns) to 1 ns."""
    assert seconds == pytest.approx(run.figure(key) * NS, abs=NS), key


def test_the_real_loadgen_wrote_its_logs(runs):
    run, _ = runs["server_valid"]
    assert run.figure("loadgen_version").startswith("6.")
    assert "MLPerf Results Summary" in run.summary
    assert run.figure("num_errors") == 0
    assert len(run.log) == run.figure("result_query_count")


@pytest.mark.parametrize("name", [name for name, (scenario, _) in RUNS.items()
                                  if scenario == "Server"])
def test_server_figures_match_loadgen(runs, name):
    summary, _ = ours(*runs[name])
    run, fig = runs[name][0], runs[name][0].figure
    same_verdict(summary, run)
    same_ns(summary.ttft_p99_s, run, "result_first_token_99.00_percentile_latency_ns")
    same_ns(summary.tpot_p99_s, run, "result_time_per_output_token_99.00_percentile_ns")
    assert summary.result == pytest.approx(fig("result_completed_tokens_per_second"), rel=1e-5)
    assert summary.completed_samples_per_s == pytest.approx(
        fig("result_completed_samples_per_sec"), rel=1e-5)
    assert summary.scheduled_samples_per_s == pytest.approx(
        fig("result_scheduled_samples_per_sec"), rel=1e-5)
    assert summary.queries == fig("result_query_count")


@pytest.mark.parametrize("name", ["server_valid", "server_tpot_broken", "server_ttft_broken"])
def test_early_stopping_words_and_order_match_loadgen(runs, name):
    run, kwargs = runs[name]
    summary, _ = ours(run, kwargs)
    for metric in ("ttft", "tpot"):
        theirs = run.figure(f"early_stopping_{metric}_result")
        verdict = summary.early_stopping(metric)
        if verdict is None:  # LoadGen did not evaluate it either
            assert theirs == ""
            continue
        assert ("Run successful" in theirs) == verdict.passed
        if not verdict.passed:
            more = int(re.search(r"at least (\d+) more", theirs).group(1))
            assert more == verdict.more_queries


def test_the_runs_cover_valid_and_each_way_to_fail(runs):
    verdicts = {name: ours(run, kwargs)[0] for name, (run, kwargs) in runs.items()}
    assert verdicts["server_valid"].valid and runs["server_valid"][0].figure(
        "result_validity") == "VALID"
    broken = verdicts["server_tpot_broken"]
    assert not broken.perf_constraints_met and broken.early_stopping("ttft") is None
    ttft = verdicts["server_ttft_broken"]
    assert not ttft.perf_constraints_met and not ttft.early_stopping("ttft").passed
    assert ttft.early_stopping("tpot").passed
    short = verdicts["server_short"]
    assert not short.valid and not short.min_duration_met
    assert verdicts["single"].valid
    assert not verdicts["single_short"].early_stopping_met


@pytest.mark.parametrize("name", [name for name, (scenario, _) in RUNS.items()
                                  if scenario == "Server" and name != "server_short"])
def test_equal_issue_count_matches_loadgen(runs, name):
    # The schedule LoadGen drew (from its own seed) gives, by our rule, the count it issued.
    run, kwargs = runs[name]
    _, rules = ours(run, kwargs)
    count = lg.queries_to_issue(run.log.arrival_s, rules)
    assert count == len(run.log) == run.figure("generated_query_count")
    assert count % DATASET == 0
    assert count > kwargs["target_qps"] * kwargs["min_duration_s"] * 0.8  # not just padded 100


@pytest.mark.parametrize("name", ["single", "single_short"])
def test_single_stream_figures_match_loadgen(runs, name):
    run, kwargs = runs[name]
    summary, rules = ours(run, kwargs)
    same_verdict(summary, run)
    fig = run.figure
    same_ns(summary.result, run, "result_90.00_percentile_latency_ns")
    same_ns(summary.ttft_p99_s, run, "result_first_token_90.00_percentile_latency_ns")
    same_ns(summary.tpot_p99_s, run, "result_time_per_output_token_90.00_percentile_ns")
    assert len(run.log) == fig("result_query_count")
    assert fig("effective_min_query_count") == lg.single_stream_min_queries(
        rules, kwargs["expected_latency_s"])
    for metric in ("ttft", "tpot"):
        verdict = summary.early_stopping(metric)
        estimate = run.estimate_s(metric)
        if estimate is None:
            assert verdict is None or not verdict.passed
            continue
        assert verdict.estimate_s == pytest.approx(estimate, abs=NS)
        discarded = int(re.search(r"discard (\d+) highest",
                                  fig(f"early_stopping_{metric}_result")).group(1))
        assert verdict.discarded == discarded


def test_the_result_is_the_plain_p90_not_the_estimate(runs):
    run, kwargs = runs["single"]
    summary, _ = ours(run, kwargs)
    assert summary.result == pytest.approx(es.loadgen_percentile(run.log.e2e_s, 0.90))
    assert summary.result == pytest.approx(
        float(re.search(r"90.0th percentile latency \(ns\) : (\d+)", run.summary).group(1)) * NS,
        abs=NS)


def test_the_trace_agrees_with_the_script(runs):
    # LoadGen's clock and the SUT's agree: each TTFT is at least the scripted delay.
    run, _ = runs["single"]
    script = rl.Script.seeded(DATASET, seed=7)
    assert np.all(run.log.ttft_s >= script.ttft_s[run.sample_index] - 1e-4)
    assert np.all(run.log.output_tokens == script.tokens[run.sample_index])
