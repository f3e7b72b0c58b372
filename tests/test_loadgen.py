"""LoadGen's scenarios and validity rules, checked on constructed runs whose verdict is known."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from inferlab.benchmark import early_stopping as es
from inferlab.benchmark import mlperf, verdict
from inferlab.pages.explorers import scenarios
from inferlab.serving import loadgen as lg
from inferlab.serving.example import example_system
from inferlab.serving.simulator import MLPERF_LLAMA2_70B_BOUNDS


def server_log(n, *, duration_s=700.0, ttft_s=0.5, tpot_s=0.05, tokens=100,
               slow_ttft=0, slow_tpot=0):
    """A Server run of ``n`` queries spread evenly over ``duration_s``, with the given
    numbers of queries over the llama2-70b Server bounds (TTFT 2 s, TPOT 200 ms)."""
    issued = np.linspace(1.0, duration_s, n)
    ttft = np.full(n, ttft_s)
    ttft[:slow_ttft] = 2.5
    tpot = np.full(n, tpot_s)
    tpot[n - slow_tpot:] = 0.25 if slow_tpot else tpot_s
    first = issued + ttft
    finish = first + tpot * (tokens - 1)
    return verdict.QueryLog(issued, first, finish, np.full(n, tokens))


# ---- the bounds table -------------------------------------------------------------------

def test_bounds_are_the_rules_values():
    assert mlperf.bounds("llama2-70b", "Server") == mlperf.LatencyBounds(2.0, 0.2)
    assert mlperf.bounds("llama2-70b", "Interactive") == mlperf.LatencyBounds(0.45, 0.04)
    assert mlperf.bounds("llama3.1-8b", "Server") == mlperf.LatencyBounds(2.0, 0.1)
    assert mlperf.bounds("llama3.1-8b", "Interactive") == mlperf.LatencyBounds(0.5, 0.03)
    assert mlperf.bounds("llama3.1-405b", "Server") == mlperf.LatencyBounds(6.0, 0.175)
    assert mlperf.bounds("llama3.1-405b", "Interactive") == mlperf.LatencyBounds(4.5, 0.08)


def test_llama2_bounds_have_one_definition():
    for scenario, pair in MLPERF_LLAMA2_70B_BOUNDS.items():
        assert (mlperf.BOUNDS["llama2-70b"][scenario].ttft_s,
                mlperf.BOUNDS["llama2-70b"][scenario].tpot_s) == pair


def test_bounds_table_is_frozen():
    with pytest.raises(TypeError):
        mlperf.BOUNDS["gpt-5"] = {}
    with pytest.raises(TypeError):
        mlperf.BOUNDS["llama2-70b"]["Server"] = mlperf.LatencyBounds(9, 9)


@pytest.mark.parametrize(("model", "scenario", "word"), [
    ("llama9", "Server", "model"), ("llama2-70b", "Offline", "scenario"),
    ("llama2-70b", "MultiStream", "scenario"),
])
def test_bad_bounds_requests_raise(model, scenario, word):
    with pytest.raises(ValueError, match=word):
        mlperf.bounds(model, scenario)


# ---- early stopping --------------------------------------------------------------------

def test_no_slow_query_needs_459_queries_at_p99():
    assert es.min_passing_queries(0) == math.ceil(math.log(0.01) / math.log(0.99)) == 459


def test_single_stream_needs_64_queries_as_loadgen_prints():
    # LoadGen's Single-Stream summary: "Processed at least 64 queries" (p90, one slow query).
    assert es.min_queries_for_early_stopping(1, 0.90) == 64


def test_multistream_p99_needs_662_queries_as_mlperf_conf_sets():
    # mlperf.conf: *.MultiStream.min_query_count = 662, the early-stopping minimum at p99.
    assert es.min_queries_for_early_stopping(1, 0.99) == 662


def test_min_passing_is_the_smallest_h_below_one_percent():
    for t in (0, 1, 5, 40):
        h = es.min_passing_queries(t)
        assert es.early_stopping_odds(h, t, 0.99) < 0.01
        assert es.early_stopping_odds(h - 1, t, 0.99) >= 0.01


def test_needed_queries_grow_with_slow_queries():
    needed = [es.min_queries_for_early_stopping(t) for t in range(0, 60, 5)]
    assert all(b > a for a, b in zip(needed, needed[1:], strict=False))
    # Roughly t / 0.01 for many slow queries: the share must sit below 1 %.
    assert es.min_queries_for_early_stopping(200) > 200 / 0.01


def test_binomial_cdf_matches_the_direct_sum():
    n, q = 30, 0.2
    direct = sum(math.comb(n, x) * q**x * (1 - q) ** (n - x) for x in range(6))
    assert es.binomial_cdf(5, n, q) == pytest.approx(direct, rel=1e-12)
    assert es.binomial_cdf(30, 30, q) == 1.0


def test_early_stopping_counts_strictly_over_the_bound():
    verdict = es.early_stopping([1.0, 2.0, 2.0001], 2.0)
    assert verdict.overlatency == 1
    assert not verdict.passed
    assert verdict.more_queries == verdict.needed - 3


def test_early_stopping_estimate_discards_what_the_run_can_afford():
    latencies = np.arange(1, 101, dtype=float)  # 100 queries at p90
    estimate, discarded = es.early_stopping_estimate(latencies, 0.90)
    t = discarded + 1
    assert es.min_queries_for_early_stopping(t, 0.90) <= 100
    assert es.min_queries_for_early_stopping(t + 1, 0.90) > 100
    assert estimate == latencies[100 - t]
    with pytest.raises(ValueError, match="at least 64"):
        es.early_stopping_estimate(latencies[:63], 0.90)


@pytest.mark.parametrize("bad", [0, 1, -0.5, 1.5, True])
def test_bad_percentile_raises(bad):
    with pytest.raises(ValueError, match="percentile"):
        es.min_passing_queries(0, bad)


def test_negative_overlatency_raises():
    with pytest.raises(ValueError, match="overlatency"):
        es.min_passing_queries(-1)


# ---- the verdicts on constructed runs ----------------------------------------------------

def test_a_clean_long_run_is_valid():
    summary = verdict.judge(server_log(1000), "Server")
    assert summary.valid, summary.reasons
    assert summary.perf_constraints_met and summary.early_stopping_met


def test_meeting_the_p99_but_failing_early_stopping_is_invalid():
    # 600 queries, 3 over the TTFT bound: LoadGen's p99 (index 594 of 600) is within
    # the bound, and 600 queries would pass with none slow, but 3 slow ones need more.
    log = server_log(600, slow_ttft=3)
    summary = verdict.judge(log, "Server")
    assert summary.ttft_p99_s <= 2.0
    assert summary.perf_constraints_met
    assert not summary.early_stopping_met
    assert not summary.valid
    ttft = summary.early_stopping("ttft")
    assert ttft.metric == "ttft" and ttft.overlatency == 3
    assert ttft.more_queries == es.min_queries_for_early_stopping(3) - 600
    assert any("early stopping on TTFT" in reason for reason in summary.reasons)


def test_early_stopping_applies_to_tpot_separately():
    # TTFT would pass; TPOT fails, and LoadGen then does not evaluate TTFT at all.
    summary = verdict.judge(server_log(600, slow_tpot=2), "Server")
    assert [verdict.metric for verdict in summary.early] == ["tpot"]
    assert not summary.early_stopping("tpot").passed
    assert summary.early_stopping("ttft") is None
    assert not summary.valid
    assert "TTFT Early Stopping Result:\n\nTPOT" in summary.text()


def test_early_stopping_runs_tpot_first_then_ttft():
    summary = verdict.judge(server_log(600, slow_ttft=3), "Server")
    assert [verdict.metric for verdict in summary.early] == ["tpot", "ttft"]
    assert summary.early_stopping("tpot").passed and not summary.early_stopping("ttft").passed


def test_one_short_of_the_minimum_duration_is_invalid():
    long_enough = verdict.judge(server_log(2000, duration_s=600.0), "Server")
    short = verdict.judge(server_log(2000, duration_s=599.0), "Server")
    assert long_enough.valid
    assert not short.valid and not short.min_duration_met
    assert "short of the minimum" in short.reasons[0]


def test_too_few_queries_is_invalid_even_when_long():
    rules = verdict.RunRules(min_duration_s=10.0, min_queries=100)
    summary = verdict.judge(server_log(99, duration_s=20.0), "Server", rules=rules)
    assert not summary.min_queries_met and not summary.valid


def test_p99_over_the_bound_is_invalid():
    summary = verdict.judge(server_log(2000, slow_ttft=40), "Server")
    assert not summary.perf_constraints_met
    assert summary.ttft_p99_s > 2.0
    assert not summary.valid


def test_interactive_judges_the_same_run_more_strictly():
    log = server_log(1000, ttft_s=0.3, tpot_s=0.05)
    assert verdict.judge(log, "Server").valid
    interactive = verdict.judge(log, "Interactive")
    assert not interactive.valid
    assert any("TPOT" in reason for reason in interactive.reasons)


def test_offline_needs_its_sample_count_and_duration():
    n = 100
    log = verdict.QueryLog(np.zeros(n), np.full(n, 1.0), np.linspace(2, 700, n), np.full(n, 10))
    summary = verdict.judge(log, "Offline")
    assert not summary.valid and not summary.min_queries_met
    assert summary.result == pytest.approx(n * 10 / 700)
    rules = verdict.RunRules(offline_min_samples=100)
    assert verdict.judge(log, "Offline", rules=rules).valid


def test_tpot_is_mlperfs_definition():
    log = verdict.QueryLog([0.0, 0.0], [1.0, 1.0], [3.0, 2.0], [5, 3])
    assert log.tpot_s == pytest.approx([(3.0 - 1.0) / 4, (2.0 - 1.0) / 2])


@pytest.mark.parametrize("scenario", mlperf.SCENARIOS)
def test_a_one_token_answer_is_an_error_not_a_tpot_of_zero(scenario):
    # LoadGen logs "Number of tokens need to be greater than 1" as a runtime error.
    # The log, like every request log here, says the one-token answer has no TPOT (nan);
    # the judge refuses the run, as LoadGen does.
    log = verdict.QueryLog([0.0, 0.0], [1.0, 1.0], [3.0, 1.0], [5, 1])
    assert log.tpot_s[0] == pytest.approx(0.5) and np.isnan(log.tpot_s[1])
    with pytest.raises(ValueError, match="output_tokens: query 1 produced 1 token"):
        verdict.judge(log, scenario)


def test_summary_text_has_loadgens_shape():
    text = verdict.judge(server_log(400, slow_ttft=3), "Server").text()
    assert "Result is : INVALID" in text
    assert "Early stopping satisfied: NO" in text
    assert "Would need to run at least" in text


def test_bad_logs_and_scenarios_raise():
    with pytest.raises(ValueError, match="scenario"):
        verdict.judge(server_log(10), "Batch")
    with pytest.raises(ValueError, match="model"):
        verdict.judge(server_log(10), "Server", "gpt-9")
    with pytest.raises(ValueError, match="finish_s"):
        verdict.QueryLog([0.0], [2.0], [1.0], [3])
    with pytest.raises(ValueError, match="arrival_s"):
        verdict.QueryLog([-1.0], [2.0], [3.0], [3])


# ---- scenarios against the simulator -----------------------------------------------------

SHORT = verdict.mlperf_rules(scale=0.1)
TINY = verdict.mlperf_rules(scale=0.01)


def test_scenarios_rank_as_the_chapter_says():
    system = example_system()
    offline = lg.run_scenario(system, "Offline", rules=SHORT)
    server = lg.run_scenario(system, "Server", rate_per_s=60.0, rules=SHORT)
    single = lg.run_scenario(system, "SingleStream", rules=SHORT)
    assert offline.valid and server.valid and single.valid
    assert offline.result > server.result
    assert single.unit == "s" and single.queries >= 100
    # Server issues queries until the minimum duration has passed.
    assert server.duration_s >= SHORT.min_duration_s


def test_server_search_finds_a_valid_rate_below_an_invalid_one():
    system = example_system()
    found = lg.find_server_rate(system, "Interactive", iterations=6)
    assert found.best is not None and found.best.valid
    assert found.best.rules.min_duration_s == 600.0
    failed = [rate for rate, valid, *_ in found.trials if not valid]
    assert failed and min(failed) > found.rate_per_s
    assert found.result_tok_s == pytest.approx(found.best.result)


def test_a_search_valid_at_its_first_limit_raises_the_limit():
    # A short run's Offline rate is mostly its last batches draining, far below what the
    # system sustains: a search capped there would report its cap, not the system.
    system, rules = example_system(), verdict.mlperf_rules(scale=0.05)
    start = 1.2 * lg.offline_rate_per_s(system, lg.Workload(), rules)
    found = lg.find_server_rate(system, "Server", rules=rules, iterations=6)
    failed = [trial.rate_per_s for trial in found.trials if not trial.valid]
    assert found.trials[0].rate_per_s == pytest.approx(start) and found.trials[0].valid
    assert found.rate_per_s > 2 * start
    assert failed and min(failed) > found.rate_per_s
    assert found.best is not None and found.best.valid


def test_the_raised_limit_stops_where_run_scenario_would_refuse_the_rate():
    # A quarter-second run passes at any rate its queue can absorb in that time; the
    # search stops at the largest rate run_scenario accepts instead of growing forever.
    system = example_system()
    rules = verdict.RunRules(min_duration_s=0.25, min_queries=100, offline_min_samples=100,
                        confidence=0.5)
    most = lg.MAX_OVERLOAD * system.ceiling_rate_per_s(*lg.Workload().lengths(
        lg.CEILING_SAMPLE))
    found = lg.find_server_rate(system, "Server", rules=rules, iterations=4)
    assert max(trial.rate_per_s for trial in found.trials) == pytest.approx(most)
    assert found.rate_per_s == pytest.approx(most) and found.best.valid


@pytest.mark.parametrize("scenario", ["Server", "Interactive"])
def test_a_trial_cut_short_is_one_the_full_run_judges_invalid(scenario):
    # The search abandons a trial once its p99 is certain to miss a bound; the full run
    # of every trial must give the verdict the search recorded, so the rate is unchanged.
    system = example_system()
    # An upper rate far past saturation makes the first trials hopeless from the start.
    found = lg.find_server_rate(system, scenario, rules=SHORT, iterations=6,
                                upper_rate_per_s=400.0)
    assert any(trial.cut_short for trial in found.trials)
    for trial in found.trials:
        full = lg.run_scenario(system, scenario, rate_per_s=trial.rate_per_s, rules=SHORT)
        assert full.valid == trial.valid
        if trial.cut_short:
            limit = mlperf.bounds("llama2-70b", scenario)
            assert full.ttft_p99_s > limit.ttft_s or full.tpot_p99_s > limit.tpot_s
            assert math.isnan(trial.ttft_p99_s) and math.isnan(trial.tpot_p99_s)
        else:
            assert (trial.ttft_p99_s, trial.tpot_p99_s) == (full.ttft_p99_s, full.tpot_p99_s)


def test_no_run_beats_the_compute_ceiling():
    # The ceiling counts only the matrix multiplies, so even the Offline run, with every
    # query queued at once, completes fewer queries per second.
    system, mix = example_system(), lg.Workload()
    prompts, outputs = mix.lengths(SHORT.offline_min_samples)
    ceiling = system.ceiling_rate_per_s(prompts, outputs)
    assert lg.offline_rate_per_s(system, mix) < ceiling < 2 * lg.offline_rate_per_s(system, mix)


def test_a_rate_ten_times_past_the_ceiling_is_refused_with_the_largest_allowed():
    system = example_system()
    ceiling = system.ceiling_rate_per_s(*lg.Workload().lengths(10_000))
    with pytest.raises(ValueError,
                       match=r"rate_per_s: 86,400\.0 queries/s .*give at most ") as refused:
        lg.run_scenario(system, "Server", rate_per_s=86_400.0, rules=TINY)
    # The largest rate allowed is the limit times the ceiling of the run's own queries.
    allowed = float(str(refused.value).rsplit("give at most ", 1)[1].replace(",", ""))
    assert allowed == pytest.approx(lg.MAX_OVERLOAD * ceiling, rel=0.02)
    # Just under the limit still runs: an overloaded run is a lesson, not an error.
    over = lg.run_scenario(system, "Interactive", rate_per_s=0.9 * lg.MAX_OVERLOAD * ceiling,
                           rules=TINY)
    assert not over.valid


@pytest.mark.parametrize(("kwargs", "word"), [
    ({"scenario": "Server", "rate_per_s": -3.0}, "rate_per_s"),
    ({"scenario": "Server", "rate_per_s": None}, "rate_per_s"),
    ({"scenario": "Batch"}, "scenario"),
    ({"scenario": "Server", "rate_per_s": 5.0, "model": "gpt-9"}, "model"),
])
def test_run_scenario_rejects_bad_input(kwargs, word):
    with pytest.raises(ValueError, match=word):
        lg.run_scenario(example_system(), rules=SHORT, **kwargs)


def test_search_rejects_unbounded_scenarios_and_bad_rates():
    with pytest.raises(ValueError, match="scenario"):
        lg.find_server_rate(example_system(), "Offline")
    with pytest.raises(ValueError, match="rate_per_s"):
        lg.find_server_rate(example_system(), "Server", upper_rate_per_s=0.0)


def test_rules_scale_and_validate():
    assert verdict.mlperf_rules().min_duration_s == 600.0
    assert verdict.mlperf_rules().offline_min_samples == 24_576
    assert SHORT.min_duration_s == pytest.approx(60.0) and SHORT.min_queries == 100
    with pytest.raises(ValueError, match="scale"):
        verdict.mlperf_rules(scale=0)
    with pytest.raises(ValueError, match="model"):
        verdict.mlperf_rules("gpt-9")


def test_query_mix_draws_are_prefix_consistent():
    work = lg.Workload(seed=3)
    p10, o10 = work.lengths(10)
    p99, o99 = work.lengths(99)
    assert np.array_equal(p10, p99[:10]) and np.array_equal(o10, o99[:10])
    assert np.array_equal(work.unit_arrivals(10), work.unit_arrivals(50)[:10])


def test_explorer_compute_judges_against_the_chosen_bounds():
    view = scenarios.server_explorer_compute(40.0, "Interactive")
    assert view.limit == mlperf.bounds("llama2-70b", "Interactive")
    assert view.summary.valid
    with pytest.raises(ValueError, match="scenario"):
        scenarios.server_explorer_compute(40.0, "Offline")


# ---- equal issue, LoadGen's sample rates, Single-Stream's result ------------------------

def test_mlperf_rules_turn_equal_issue_on_with_the_dataset():
    rules = verdict.mlperf_rules()
    assert rules.equal_issue and rules.dataset_samples == 24_576
    assert not verdict.RunRules().equal_issue
    assert verdict.mlperf_rules("llama3.1-405b").dataset_samples == 8_313
    assert verdict.mlperf_rules(scale=0.25).dataset_samples == 6_144
    assert rules.pad(100) == 24_576 and rules.pad(24_576) == 24_576 and rules.pad(24_577) == 49_152
    assert verdict.RunRules().pad(100) == 100
    with pytest.raises(ValueError, match="dataset_samples"):
        verdict.RunRules(dataset_samples=0)


def test_server_count_is_whole_passes_past_the_minimum_duration():
    rules = verdict.RunRules(min_duration_s=10.0, min_queries=5, equal_issue=True,
                             dataset_samples=7)
    times = np.arange(100) * 0.5  # query 21 (index 20) is the first at 10 s
    assert lg.queries_to_issue(times, rules) == 21  # 5 -> 7 -> 14 -> 21
    times = np.arange(100) * 0.45  # index 23 is the first at or past 10 s: 24 queries
    assert lg.queries_to_issue(times, rules) == 28
    plain = replace(rules, equal_issue=False)
    assert lg.queries_to_issue(times, plain) == 24
    with pytest.raises(ValueError, match="scheduled_s"):
        lg.queries_to_issue(times[:20], rules)


def test_chapter_rates_issue_what_the_issue_measured_with_loadgen():
    # At the chapter's former rates LoadGen issues 4 and 3 passes of 24,576, not 78,682
    # and 57,510 (issue 14, checked against the real LoadGen by its author).
    work, rules = lg.Workload(), verdict.mlperf_rules()
    assert lg.server_query_count(131.1, work, rules) == 98_304
    assert lg.server_query_count(95.85, work, rules) == 73_728
    assert lg.server_query_count(131.1, work, replace(rules, equal_issue=False)) < 80_000


def test_single_stream_minimum_pads_past_a_multiple():
    rules = verdict.RunRules(min_duration_s=0.3, min_queries=1, equal_issue=True,
                             dataset_samples=24)
    assert lg.single_stream_min_queries(rules, 0.01) == 72  # 60 -> 72
    # 24 queries is already a multiple: LoadGen still adds a whole pass.
    assert lg.single_stream_min_queries(replace(rules, min_queries=24), 1.0) == 48
    assert lg.single_stream_min_queries(replace(rules, equal_issue=False), 0.01) == 1
    with pytest.raises(ValueError, match="expected_latency_s"):
        lg.single_stream_min_queries(rules, 0.0)


def test_server_reports_scheduled_and_completed_samples_per_second():
    summary = verdict.judge(server_log(1000), "Server")
    last = int(np.argmax(summary.log.arrival_s))
    assert summary.scheduled_samples_per_s == pytest.approx(999 / summary.log.arrival_s[last])
    assert summary.completed_samples_per_s == pytest.approx(999 / summary.log.finish_s[last])
    text = summary.text()
    assert "Completed samples per second" in text and "Scheduled samples per second" in text


def test_single_stream_result_is_the_plain_p90_and_early_stopping_uses_tokens():
    n = 200
    issued = np.arange(n) * 30.0
    latency = np.linspace(1.0, 20.0, n)
    log = verdict.QueryLog(issued, issued + 0.1 * latency, issued + latency, np.full(n, 50))
    rules = verdict.RunRules(min_duration_s=10.0)
    summary = verdict.judge(log, "SingleStream", rules=rules)
    assert summary.result == pytest.approx(es.loadgen_percentile(latency, 0.90))
    assert summary.result < es.early_stopping_estimate(latency, 0.90)[0]
    assert [verdict.metric for verdict in summary.early] == ["tpot", "ttft"]
    ttft = summary.early_stopping("ttft")
    assert (ttft.estimate_s, ttft.discarded) == es.early_stopping_estimate(log.ttft_s, 0.90)
    short = verdict.judge(log.head(63), "SingleStream", rules=rules)
    assert not short.early_stopping_met and [v.metric for v in short.early] == ["tpot"]


def test_dispatch_deals_every_query_once_and_is_refused_by_name_when_unknown():
    rr = example_system()
    randomly = replace(rr, dispatch="random")
    for system in (rr, randomly):
        shares = system.shares(1000)
        assert np.array_equal(np.sort(np.concatenate(shares)), np.arange(1000))
    assert np.array_equal(rr.shares(20)[3], [3, 11, 19])
    # Seeded: the same system deals alike every time.
    assert all(np.array_equal(a, b) for a, b in zip(randomly.shares(500), randomly.shares(500),
                                                    strict=True))
    with pytest.raises(ValueError, match="dispatch: 'least-loaded' is not one of round-robin"):
        replace(rr, dispatch="least-loaded")


def test_an_offline_log_keeps_each_query_in_its_issue_place():
    # Every Offline query is issued at 0; the merged log must still put query k at k, so
    # that a replica's queries are found by position (predict.peak_batch).
    system = example_system()
    prompts, outputs = np.full(64, 300), np.arange(2, 66)
    log = lg._serve(system, np.zeros(64), prompts, outputs, "all_at_once")
    assert np.array_equal(log.output_tokens, outputs)
    from inferlab.benchmark.traffic import Requests
    from inferlab.serving.simulator import simulate
    run = simulate(system.replica, Requests(np.zeros(2), np.full(2, 300), np.full(2, 10),
                                            "all_at_once"), system.scheduler)
    with pytest.raises(ValueError, match=r"positions: give one array per run \(1\), not 2"):
        lg.log_of_runs([run], [np.arange(2), np.arange(2, 4)])
    # The round-robin rule predict.peak_batch reads by default is the system's own.
    assert all(np.array_equal(a, b) for a, b in zip(lg.dealt_in_turn(20, 8),
                                                    system.shares(20), strict=True))
    assert len(lg.dealt_in_turn(3, 8)) == 3  # replicas past the third query get none


def test_dealing_at_random_costs_the_tight_bound_more_than_the_loose_one():
    # Each replica of a random dispatch sees a Poisson stream of its own, burstier than
    # every eighth arrival: the Interactive rate falls further than the Server rate
    # (chapter 3 glues the size of this for its calibrated H200).
    rules = verdict.mlperf_rules(scale=0.1)
    rates = {}
    for dispatch in ("round-robin", "random"):
        system = replace(example_system(), dispatch=dispatch)
        for scenario in ("Server", "Interactive"):
            rates[dispatch, scenario] = lg.find_server_rate(
                system, scenario, rules=rules, iterations=6).rate_per_s
    loss = {s: 1 - rates["random", s] / rates["round-robin", s]
            for s in ("Server", "Interactive")}
    assert 0 <= loss["Server"] < loss["Interactive"]


def test_a_server_run_of_one_token_answers_is_refused_before_it_is_simulated():
    # Its TPOTs would all be nan: no trial could fail on them, and a search would report
    # a rate for a run LoadGen refuses outright.
    with pytest.raises(ValueError, match="produced 1 token"):
        lg.server_trial(example_system(), "Server", lg.Workload.fixed(200, 1), "llama2-70b",
                        500.0, verdict.mlperf_rules(scale=0.02))


def _stream(first_token_s, answer_s: float, rate: float = 1.0, seconds: float = 600.0):
    """A Server log: one query every ``1 / rate`` s, each first token at ``first_token_s``
    (times, one per query) and the answer ``answer_s`` after it."""
    arrival = np.arange(0.0, seconds, 1.0 / rate)
    first = np.asarray(first_token_s, dtype=float)
    return verdict.QueryLog(arrival, first, first + answer_s, np.full(arrival.size, 100))


def test_a_system_keeping_up_with_answers_of_minutes_starts_every_query():
    # Each answer runs 300 s, half the stream: counted by finishes, the answers issued in
    # the window's last 300 s would still be running at its end, though no query waits.
    arrival = np.arange(0.0, 600.0, 1.0)
    log = _stream(arrival + 0.05, 300.0)
    assert lg.started_share(log) == pytest.approx(1.0, abs=0.01)
    finished = np.count_nonzero((log.finish_s > 120.0) & (log.finish_s <= 599.0))
    assert finished / 479 < 0.7  # what a count of finishes would have said


def test_a_system_offered_twice_what_it_serves_starts_half_the_queries():
    # One first token every 2 s against a query every second: a queue that grows all run.
    log = _stream(np.arange(600) * 2.0 + 0.05, 1.0)
    assert lg.started_share(log) == pytest.approx(0.5, abs=0.02)


def test_started_share_needs_two_queries():
    with pytest.raises(ValueError, match="log"):
        lg.started_share(_stream([0.05], 1.0, seconds=1.0))
