"""The serving simulator: closed forms it reproduces, properties it keeps, errors it raises."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.benchmark.traffic import Lengths, Requests, make_requests
from inferlab.model.steptime import replica, steady_state
from inferlab.pages.explorers import batching
from inferlab.serving import simulator as sim

H200 = "NVIDIA H200 SXM"


@pytest.fixture(scope="module")
def rep():
    return replica("Llama 2 70B", H200, 1, "fp8", memory_efficiency=0.65,
                   compute_efficiency=0.65, step_overhead_s=0.001)


# ---- closed forms ---------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 16, 64, 400])
def test_a_full_static_batch_takes_exactly_the_step_time_models_sum(rep, batch):
    prompt, output = 500, 200
    requests = make_requests(batch, Lengths(prompt), Lengths(output), arrival="all_at_once")
    run = sim.simulate(rep, requests, sim.Scheduler(kind="static", max_batch=batch))
    # The prefill computes logits at each prompt's last position only.
    prefill = rep.step_s(batch * prompt, batch * prompt, batch * prompt * (prompt + 1) // 2,
                         logits=batch)
    expected = prefill + sum(
        rep.step_s(batch * (prompt + 1 + j), batch) for j in range(output - 1))
    assert run.makespan_s == pytest.approx(expected, rel=1e-12)
    assert run.throughput_tok_s == pytest.approx(batch * output / expected, rel=1e-12)
    assert np.all(run.ttft_s == pytest.approx(prefill))


def test_continuous_batching_of_a_full_batch_is_the_same_closed_form(rep):
    batch, prompt, output = 64, 500, 200
    requests = make_requests(batch, Lengths(prompt), Lengths(output), arrival="all_at_once")
    static = sim.simulate(rep, requests, sim.Scheduler(kind="static", max_batch=batch))
    continuous = sim.simulate(rep, requests, sim.Scheduler(
        max_batch=batch, chunked_prefill=False, token_budget=batch * prompt))
    assert continuous.makespan_s == pytest.approx(static.makespan_s, rel=1e-12)


@pytest.mark.parametrize("chunked", [False, True])
def test_a_lightly_loaded_server_gives_ttft_of_one_prefill_and_tpot_of_one_decode_step(
        rep, chunked):
    prompt, output = 500, 200
    requests = make_requests(200, Lengths(prompt), Lengths(output), rate_per_s=0.02, seed=3)
    run = sim.simulate(rep, requests, sim.Scheduler(chunked_prefill=chunked))
    assert np.median(run.ttft_s) == pytest.approx(rep.prefill_s(prompt), rel=1e-9)
    # Alone in the batch, every decode step reads the weights and a growing cache.
    steps = [rep.decode_step_s(1, prompt + 1 + j) for j in range(output - 1)]
    assert np.median(run.tpot_s) == pytest.approx(np.mean(steps), rel=1e-9)


def test_steady_closed_loop_agrees_with_the_closed_form_when_every_step_is_compute_bound(rep):
    # Above the ridge even a decode-only step is compute-bound, so step times add up exactly
    # as the closed form's: only the start and the end of the run differ.
    concurrency = 2 * int(rep.ridge_tokens)
    requests = make_requests(20000, Lengths(500, 0.5), Lengths(200, 0.5), arrival="closed",
                             concurrency=concurrency, seed=3)
    run = sim.simulate(rep, requests, sim.Scheduler(max_batch=512, token_budget=2048))
    closed = steady_state(rep, concurrency, requests.prompt_tokens.mean(),
                          requests.output_tokens.mean())
    assert run.throughput_tok_s == pytest.approx(closed.aggregate_tok_s[0], rel=0.02)


@pytest.mark.parametrize("concurrency", [4, 16, 64, 128, 256])
def test_the_closed_form_is_an_upper_bound_on_simulated_throughput(rep, concurrency):
    # Spreading prefill evenly over steps (the closed form) is the best any schedule can do:
    # a real step that carries a prompt chunk is compute-bound while the others are not.
    requests = make_requests(4000, Lengths(500, 0.5), Lengths(200, 0.5), arrival="closed",
                             concurrency=concurrency, seed=5)
    run = sim.simulate(rep, requests, sim.Scheduler(max_batch=256, token_budget=2048))
    closed = steady_state(rep, concurrency, requests.prompt_tokens.mean(),
                          requests.output_tokens.mean())
    assert run.throughput_tok_s <= closed.aggregate_tok_s[0] * 1.02


def test_one_user_one_request_after_another(rep):
    requests = make_requests(20, Lengths(300), Lengths(50), arrival="closed", concurrency=1)
    run = sim.simulate(rep, requests)
    assert np.all(run.arrival_s[1:] == run.finish_s[:-1])
    assert np.all(run.ttft_s == pytest.approx(rep.prefill_s(300)))


# ---- token times ----------------------------------------------------------------------


def _check_token_times(run, indices):
    for i in indices:
        times = run.token_times_s(i)
        assert len(times) == run.output_tokens[i]
        assert times[0] == run.first_token_s[i]
        assert times[-1] == pytest.approx(run.finish_s[i], rel=1e-9)
        assert np.all(np.diff(times) > 0)


def test_every_token_has_a_time_from_first_token_to_finish(rep):
    requests = make_requests(1500, Lengths(300, 1.0, 1, 1024), Lengths(294, 1.0, 1, 1024),
                             rate_per_s=10, seed=1)
    for scheduler in (sim.Scheduler(), sim.Scheduler(chunked_prefill=False),
                      sim.Scheduler(kind="static", max_batch=32)):
        _check_token_times(sim.simulate(rep, requests, scheduler), range(0, 1500, 31))


def test_preempted_requests_still_produce_every_token(rep):
    small = replica("Llama 2 13B", "NVIDIA H100 SXM", 1, "fp16", memory_efficiency=0.65,
                    compute_efficiency=0.65, step_overhead_s=0.001)
    requests = make_requests(1500, Lengths(300, 1.0, 1, 1024), Lengths(294, 1.0, 1, 1024),
                             arrival="all_at_once", seed=2)
    run = sim.simulate(small, requests, sim.Scheduler(max_batch=256))
    preempted = np.flatnonzero(run.preemptions)
    assert preempted.size > 0
    _check_token_times(run, preempted[:40])
    assert np.all(np.isfinite(run.finish_s))


# ---- determinism and properties ---------------------------------------------------------


def test_same_seed_same_result_and_another_seed_another(rep):
    def run(seed):
        requests = make_requests(800, Lengths(300, 1.0, 1, 1024), Lengths(294, 1.0, 1, 1024),
                                 rate_per_s=8, seed=seed)
        return sim.simulate(rep, requests)

    first, again, other = run(7), run(7), run(8)
    for name in ("arrival_s", "first_token_s", "finish_s", "output_tokens"):
        assert np.array_equal(getattr(first, name), getattr(again, name))
    assert not np.array_equal(first.finish_s, other.finish_s)


def test_more_batch_never_lowers_throughput_while_memory_bound(rep):
    ridge = int(rep.ridge_tokens)
    rates = []
    for batch in range(1, ridge // 2, 4):
        requests = make_requests(batch, Lengths(64), Lengths(128), arrival="all_at_once")
        rates.append(sim.simulate(rep, requests, sim.Scheduler(kind="static", max_batch=batch))
                     .throughput_tok_s)
    assert np.all(np.diff(rates) > 0)


def test_higher_load_never_lowers_p99_ttft(rep):
    base = make_requests(3000, Lengths(300, 1.0, 1, 1024), Lengths(294, 1.0, 1, 1024),
                         rate_per_s=1.0, seed=11)
    saturation = sim.offline_throughput(rep, base).requests_per_s
    for scheduler in (sim.Scheduler(max_batch=128), sim.Scheduler(chunked_prefill=False)):
        p99 = [sim.simulate(rep, base.at_rate(load * saturation), scheduler)
               .percentile("ttft", 99) for load in np.linspace(0.1, 1.1, 11)]
        assert np.all(np.diff(p99) >= -1e-9), p99


def test_continuous_batching_beats_static_on_the_same_arrivals(rep):
    requests = make_requests(2000, Lengths(300, 1.0, 1, 1024), Lengths(294, 1.0, 1, 1024),
                             rate_per_s=5, seed=4)
    static = sim.simulate(rep, requests, sim.Scheduler(kind="static", max_batch=64))
    continuous = sim.simulate(rep, requests, sim.Scheduler(max_batch=64))
    assert continuous.percentile("ttft", 50) < static.percentile("ttft", 50) / 10
    assert static.wasted_fraction > 0.3
    assert continuous.wasted_fraction == 0


def test_paged_memory_fits_more_requests_than_reserving_for_the_longest_output():
    small = replica("Llama 2 13B", "NVIDIA H100 SXM", 1, "fp16", memory_efficiency=0.65,
                    compute_efficiency=0.65, step_overhead_s=0.001)
    requests = make_requests(3000, Lengths(300, 1.0, 1, 1024), Lengths(294, 1.0, 1, 1024),
                             arrival="all_at_once", seed=3)
    reserve = sim.simulate(small, requests, sim.Scheduler(kv_policy="reserve",
                                                          reserve_output_tokens=3072))
    paged = sim.simulate(small, requests, sim.Scheduler())
    assert paged.step_batch.mean() > 2 * reserve.step_batch.mean()
    assert paged.throughput_tok_s > 2 * reserve.throughput_tok_s


def test_a_fixed_shape_server_wastes_work_and_runs_identical_decode_steps(rep):
    requests = make_requests(1500, Lengths(300, 1.0, 1, 1024), Lengths(294, 1.0, 1, 1024),
                             rate_per_s=3, seed=6)
    shape = sim.FixedShape(prompt_buckets=(128, 256, 512, 1024), batch_buckets=(64,),
                           context_tokens=2048)
    fixed = sim.simulate(rep, requests, sim.Scheduler(max_batch=64, chunked_prefill=False,
                                                      kv_policy="reserve", fixed_shape=shape))
    gpu = sim.simulate(rep, requests, sim.Scheduler(max_batch=64))
    assert fixed.wasted_fraction > 0.2
    decode = fixed.step_duration_s[fixed.step_prefill_tokens == 0]
    assert np.ptp(decode) < 1e-12  # deterministic: every decode step the same
    gpu_decode = gpu.step_duration_s[gpu.step_prefill_tokens == 0]
    assert np.ptp(gpu_decode) > 1e-4
    assert fixed.percentile("ttft", 99) > gpu.percentile("ttft", 99)


# ---- latency-bounded throughput ---------------------------------------------------------


def test_the_highest_rate_within_bounds_meets_them_and_tighter_bounds_allow_less(rep):
    base = make_requests(2000, Lengths(300, 1.0, 1, 1024), Lengths(294, 1.0, 1, 1024),
                         rate_per_s=1.0, seed=2)
    server = sim.max_rate_within(rep, base, 2.0, 0.2, iterations=8)
    interactive = sim.max_rate_within(rep, base, 0.45, 0.04, iterations=8)
    assert sim.meets_bounds(server.result, 2.0, 0.2)
    assert sim.meets_bounds(interactive.result, 0.45, 0.04)
    assert 0 < interactive.rate_per_s < server.rate_per_s
    assert server.throughput_tok_s == pytest.approx(
        server.rate_per_s * base.output_tokens.mean())


def test_fit_efficiency_recovers_the_efficiency_that_made_the_target():
    requests = make_requests(2000, Lengths(300, 1.0, 1, 1024), Lengths(294, 1.0, 1, 1024),
                             rate_per_s=1.0, seed=2)

    def measure(efficiency):
        rep = replica("Llama 2 70B", H200, 1, "fp8", memory_efficiency=efficiency,
                      compute_efficiency=efficiency)
        return sim.offline_throughput(rep, requests).throughput_tok_s

    assert sim.fit_efficiency(measure, measure(0.42), iterations=25) == pytest.approx(0.42,
                                                                                      abs=1e-4)
    with pytest.raises(ValueError, match="target"):
        sim.fit_efficiency(measure, measure(1.0) * 2)


# ---- errors -----------------------------------------------------------------------------


def test_bad_input_raises_clear_errors(rep):
    lengths = Lengths(300)
    with pytest.raises(ValueError, match="rate_per_s"):
        make_requests(10, lengths, lengths, rate_per_s=-1)
    with pytest.raises(ValueError, match="rate_per_s"):
        make_requests(10, lengths, lengths)
    with pytest.raises(ValueError, match="n"):
        make_requests(0, lengths, lengths, rate_per_s=1)
    with pytest.raises(ValueError, match="arrival"):
        make_requests(10, lengths, lengths, arrival="bursty")
    with pytest.raises(ValueError, match="concurrency"):
        make_requests(10, lengths, lengths, arrival="closed", concurrency=0)
    with pytest.raises(ValueError, match="mean_tokens"):
        Lengths(0)
    with pytest.raises(ValueError, match="cv"):
        Lengths(100, cv=-0.5)
    with pytest.raises(ValueError, match="max_tokens"):
        Lengths(100, min_tokens=10, max_tokens=5)
    with pytest.raises(ValueError, match="max_batch"):
        sim.Scheduler(max_batch=0)
    with pytest.raises(ValueError, match="kind"):
        sim.Scheduler(kind="greedy")
    with pytest.raises(ValueError, match="kv_policy"):
        sim.Scheduler(kv_policy="swap")
    with pytest.raises(ValueError, match="token_budget"):
        sim.Scheduler(max_batch=512, token_budget=256)
    with pytest.raises(ValueError, match="batch_timeout_s"):
        sim.Scheduler(kind="static", batch_timeout_s=-1)
    with pytest.raises(ValueError, match="fixed_shape"):
        sim.Scheduler(fixed_shape=sim.FixedShape())
    with pytest.raises(ValueError, match="prompt_buckets"):
        sim.FixedShape(prompt_buckets=(512, 256))


def test_requests_that_cannot_fit_the_kv_budget_are_refused(rep):
    huge = make_requests(5, Lengths(rep.kv_capacity_tokens), Lengths(10), rate_per_s=1)
    with pytest.raises(ValueError, match="KV capacity"):
        sim.simulate(rep, huge)
    long_output = make_requests(5, Lengths(100), Lengths(2000), rate_per_s=1)
    with pytest.raises(ValueError, match="reserve_output_tokens"):
        sim.simulate(rep, long_output, sim.Scheduler(kv_policy="reserve",
                                                     reserve_output_tokens=1000))
    too_long = make_requests(5, Lengths(3000), Lengths(10), rate_per_s=1)
    shape = sim.Scheduler(max_batch=64, chunked_prefill=False, kv_policy="reserve",
                          fixed_shape=sim.FixedShape())
    with pytest.raises(ValueError, match="compiled"):
        sim.simulate(rep, too_long, shape)


def test_result_helpers_check_their_arguments(rep):
    run = sim.simulate(rep, make_requests(50, Lengths(100), Lengths(20), rate_per_s=1))
    with pytest.raises(ValueError, match="metric"):
        run.percentile("latency", 99)
    with pytest.raises(ValueError, match="q"):
        run.percentile("ttft", 101)
    with pytest.raises(ValueError, match="i"):
        run.token_times_s(50)
    summary = run.summary()
    assert summary["ttft_p99_s"] >= summary["ttft_p50_s"]


def test_the_tail_explorer_refuses_bad_sliders_and_its_tail_grows_with_load():
    with pytest.raises(ValueError, match="load"):
        batching.tail_explorer_compute(load=-0.5)
    with pytest.raises(ValueError, match="max_batch"):
        batching.tail_explorer_compute(max_batch=0)
    with pytest.raises(ValueError, match="output_cv"):
        batching.tail_explorer_compute(output_cv=-1)
    low, high = batching.tail_explorer_compute(load=0.3), batching.tail_explorer_compute(load=1.1)
    assert high.percentiles["ttft_p99"] > 3 * low.percentiles["ttft_p99"]
    assert high.percentiles["ttft_p99.9"] >= high.percentiles["ttft_p99"]


def test_rescaling_poisson_arrivals_keeps_the_requests_and_sets_the_rate():
    base = make_requests(1000, Lengths(300, 1.0), Lengths(200, 1.0), rate_per_s=3.0, seed=9)
    faster = base.at_rate(12.0)
    assert np.array_equal(faster.prompt_tokens, base.prompt_tokens)
    assert len(faster) / faster.arrival_s[-1] == pytest.approx(12.0)
    assert np.allclose(faster.arrival_s * 4, base.at_rate(3.0).arrival_s)
    with pytest.raises(ValueError, match="rate_per_s"):
        base.at_rate(0)
    with pytest.raises(ValueError, match="kind"):
        make_requests(10, Lengths(10), Lengths(10), arrival="all_at_once").at_rate(1.0)


def test_static_batching_with_a_timeout_finishes_under_overload():
    """(a + b) - a can fall short of b: the wait for a timed-out batch must not loop for ever."""
    rep = replica("Llama 2 70B", "NVIDIA H200 SXM", 1, "fp8", memory_efficiency=0.65,
                  compute_efficiency=0.65, step_overhead_s=1e-3)
    requests = make_requests(3000, Lengths(300, cv=1.0, max_tokens=1024),
                             Lengths(294, cv=1.0, max_tokens=1024), rate_per_s=30.0, seed=3)
    run = sim.simulate(rep, requests, sim.Scheduler(kind="static", max_batch=64,
                                                    batch_timeout_s=0.5))
    assert np.all(np.isfinite(run.finish_s))


def test_a_static_batch_launches_when_its_oldest_request_has_waited_the_timeout(rep):
    """Real static batchers (Ray Serve, Triton) do not wait for a full batch for ever."""
    assert sim.Scheduler().batch_timeout_s == sim.STATIC_BATCH_TIMEOUT_S == 0.01
    prompt, output = 500, 50
    # One request every ten minutes: each finds the server idle and the queue empty.
    requests = make_requests(20, Lengths(prompt), Lengths(output), rate_per_s=1 / 600, seed=5)
    assert np.diff(requests.arrival_s).min() > 10
    for timeout in (sim.STATIC_BATCH_TIMEOUT_S, 2.0):
        run = sim.simulate(rep, requests, sim.Scheduler(kind="static", max_batch=64,
                                                        batch_timeout_s=timeout))
        # Every request but the last waits out the timeout alone, then is prefilled alone.
        assert run.ttft_s[:-1] == pytest.approx(timeout + rep.prefill_s(prompt), rel=1e-9)
    # Waiting for a full batch, the first request waits for the nineteen after it.
    full = sim.simulate(rep, requests, sim.Scheduler(kind="static", max_batch=64,
                                                     batch_timeout_s=float("inf")))
    assert full.ttft_s[0] > requests.arrival_s[-1] - requests.arrival_s[0]


def _pool(rep, servers=1):
    return sim.PrefillPool(prefill_s=rep.prefill_s, kv_bytes_per_token=rep.kv_bytes_per_token,
                           transfer_bytes_per_s=50e9, servers=servers)


def test_disaggregated_decode_steps_carry_no_prompt_work_and_ttft_is_queue_plus_prefill():
    rep = replica("Llama 2 70B", "NVIDIA H200 SXM", 1, "fp8", memory_efficiency=0.8,
                  compute_efficiency=0.8, step_overhead_s=1e-3)
    requests = make_requests(400, Lengths(300, cv=1.0, max_tokens=1024),
                             Lengths(200, cv=1.0, max_tokens=1024), rate_per_s=4.0, seed=5)
    run = sim.simulate(rep, requests, sim.Scheduler(disaggregated=_pool(rep)))
    assert np.all(run.step_prefill_tokens == 0)
    # A request alone on an idle pool gets its first token after exactly its own prefill.
    first = 0
    assert run.ttft_s[first] == pytest.approx(float(rep.prefill_s(requests.prompt_tokens[first])))
    assert np.all(run.ttft_s >= rep.prefill_s(requests.prompt_tokens) - 1e-12)
    assert np.array_equal(run.arrival_s, requests.arrival_s)


def test_disaggregation_protects_tpot_from_prefill_interference():
    rep = replica("Llama 2 70B", "NVIDIA H200 SXM", 1, "fp8", memory_efficiency=0.8,
                  compute_efficiency=0.8, step_overhead_s=1e-3)
    requests = make_requests(1500, Lengths(1000, cv=0.5, max_tokens=4000),
                             Lengths(150, cv=0.5, max_tokens=1000), rate_per_s=6.0, seed=6)
    mixed = sim.simulate(rep, requests, sim.Scheduler(max_batch=256, token_budget=4096))
    split = sim.simulate(rep, requests, sim.Scheduler(max_batch=256, disaggregated=_pool(rep, 2)))
    assert split.percentile("tpot", 99) < mixed.percentile("tpot", 99)


def test_a_prefill_pool_refuses_what_it_cannot_use():
    rep = replica("Llama 2 70B", "NVIDIA H200 SXM", 1, "fp8")
    with pytest.raises(ValueError, match="transfer_bytes_per_s"):
        sim.PrefillPool(rep.prefill_s, rep.kv_bytes_per_token, 0.0)
    with pytest.raises(ValueError, match="servers"):
        sim.PrefillPool(rep.prefill_s, rep.kv_bytes_per_token, 1e9, servers=0)
    with pytest.raises(ValueError, match="disaggregated"):
        sim.Scheduler(kind="static", disaggregated=_pool(rep))
    closed = make_requests(10, Lengths(100), Lengths(10), arrival="closed", concurrency=2)
    with pytest.raises(ValueError, match="open-loop"):
        sim.simulate(rep, closed, sim.Scheduler(disaggregated=_pool(rep)))


# ---- scheduling rounds (vLLM's multi-step scheduling, AMD's MLPerf prefill rule) -------


def test_a_scheduling_round_admits_prompts_only_at_its_end_and_waits_for_enough_of_them(rep):
    steps, least, prompt = 4, 6, 300
    requests = make_requests(3000, Lengths(prompt), Lengths(200), rate_per_s=8.0, seed=4)
    whole = {"max_batch": 512, "chunked_prefill": False, "token_budget": 40960}
    run = sim.simulate(rep, requests, sim.Scheduler(**whole, scheduler_steps=steps,
                                                    min_prefill_queries=least))
    prefill = np.flatnonzero(run.step_prefill_tokens > 0)
    gaps = np.diff(prefill) - 1  # decode steps between two prefill steps
    prompts = run.step_prefill_tokens[prefill[1:]] // prompt
    assert np.all(gaps >= steps) and np.all(gaps % steps == 0)
    # One round after a prefill, the next needs enough prompts; fewer go only after a
    # round's end that ran none (or at the first round's end, as in AMD's patch).
    assert np.all(prompts[1:][gaps[1:] == steps] >= least)
    assert np.any(prompts < least)
    # Without rounds the same arrivals are prefilled sooner, in more and smaller steps.
    plain = sim.simulate(rep, requests, sim.Scheduler(**whole))
    assert len(prefill) < np.count_nonzero(plain.step_prefill_tokens > 0)
    assert np.median(run.ttft_s) > np.median(plain.ttft_s)
    assert np.array_equal(run.output_tokens, plain.output_tokens)


def test_scheduling_rounds_are_refused_where_they_are_not_modelled():
    with pytest.raises(ValueError, match="scheduler_steps"):
        sim.Scheduler(scheduler_steps=4)  # chunked prefill, the default
    with pytest.raises(ValueError, match="min_prefill_queries"):
        sim.Scheduler(chunked_prefill=False, min_prefill_queries=0)
    with pytest.raises(ValueError, match="scheduler_steps"):
        sim.Scheduler(kind="static", chunked_prefill=False, scheduler_steps=2)


# ---- the lanes of a pipeline, in lock step --------------------------------------------


@pytest.fixture(scope="module")
def piped():
    """Llama 2 70B in two pipeline stages of one H200 each: two lanes."""
    return replica("Llama 2 70B", H200, 1, "fp8", pp=2, memory_efficiency=0.65,
                   compute_efficiency=0.65, step_overhead_s=0.001)


def test_two_lanes_with_the_same_work_run_as_one_lane_alone(piped):
    # Every round pairs two equal steps, so lock step costs nothing: the rounds run
    # step for step as one lane alone (which is why simulate_lanes runs one lane then).
    from inferlab.serving.engines import ContinuousEngine
    from inferlab.serving.pipeline import LockStep

    requests = make_requests(300, Lengths(500, 0.6), Lengths(200, 0.6), rate_per_s=3.0, seed=4)
    scheduler = sim.Scheduler(max_batch=64, token_budget=1024)
    alone = sim.simulate(piped, requests, scheduler)
    rounds = LockStep([ContinuousEngine(piped, requests, scheduler) for _ in range(2)]).run()
    for record in rounds:
        np.testing.assert_allclose(record.first, alone.first_token_s, rtol=1e-9)
        np.testing.assert_allclose(record.finish, alone.finish_s, rtol=1e-9)
    for lane in sim.simulate_lanes(piped, [requests, requests], scheduler):
        np.testing.assert_array_equal(lane.finish_s, alone.finish_s)
    # A lane dealt other work is run in lock step, not copied.
    other = make_requests(300, Lengths(500, 0.6), Lengths(200, 0.6), rate_per_s=3.0, seed=5)
    paired = sim.simulate_lanes(piped, [requests, other], scheduler)
    assert not np.array_equal(paired[0].finish_s, alone.finish_s)


def test_a_lane_of_short_prompts_waits_for_a_lane_of_long_ones(piped):
    scheduler = sim.Scheduler(max_batch=64, token_budget=2048)
    light = make_requests(200, Lengths(50), Lengths(200), arrival="all_at_once", seed=1)
    heavy = make_requests(200, Lengths(2000), Lengths(20), arrival="all_at_once", seed=2)
    paired = sim.simulate_lanes(piped, [light, heavy], scheduler)
    alone = [sim.simulate(piped, requests, scheduler) for requests in (light, heavy)]
    # The light lane's steps are stretched to the heavy lane's while both run ...
    assert paired[0].makespan_s > 1.2 * alone[0].makespan_s
    both = min(paired[0].makespan_s, paired[1].makespan_s)
    light_ends = paired[0].step_end_s[paired[0].step_end_s < both]
    heavy_ends = paired[1].step_end_s
    nearest = np.abs(light_ends[:, None] - heavy_ends[None, :]).min(axis=1)
    assert np.all(nearest <= 1e-9 * both)
    # ... and never made shorter: no step of a lane is faster than it is alone.
    for lane, solo in zip(paired, alone, strict=True):
        assert lane.makespan_s >= solo.makespan_s * (1 - 1e-12)


def test_lanes_that_cannot_run_in_lock_step_are_refused_by_name(piped, rep):
    requests = make_requests(8, Lengths(100), Lengths(20), arrival="all_at_once")
    with pytest.raises(ValueError, match="lanes: 3 lanes given.*give 1 to 2"):
        sim.simulate_lanes(piped, [requests] * 3)
    with pytest.raises(ValueError, match="lanes: 2 lanes given.*give 1 to 1"):
        sim.simulate_lanes(rep, [requests] * 2)
    with pytest.raises(ValueError, match="lanes: give a list"):
        sim.simulate_lanes(piped, requests)
    with pytest.raises(ValueError, match="scheduler"):
        sim.simulate_lanes(piped, [requests] * 2, sim.Scheduler(kind="static"))
    closed = make_requests(8, Lengths(100), Lengths(20), arrival="closed", concurrency=2)
    with pytest.raises(ValueError, match="lanes: a closed loop"):
        sim.simulate_lanes(piped, [closed] * 2)


def test_a_lane_paired_with_a_lighter_one_runs_as_alone_preemptions_included(piped):
    # 300 requests of 2,000 + 2,000 tokens overfill the paged cache, so the lane preempts;
    # beside it a lane of one short request never has the longer step. A preempting lane
    # decides again at once, as a lone engine does, instead of sitting out a run of rounds.
    scheduler = sim.Scheduler(max_batch=512, token_budget=8192)
    full = Requests(np.zeros(300), np.full(300, 2000), np.full(300, 2000), "all_at_once")
    light = Requests(np.zeros(1), np.array([100]), np.array([3000]), "all_at_once")
    alone = sim.simulate(piped, full, scheduler)
    paired = sim.simulate_lanes(piped, [full, light], scheduler)[0]
    assert alone.preemptions.sum() > 0
    np.testing.assert_array_equal(paired.finish_s, alone.finish_s)
    np.testing.assert_array_equal(paired.preemptions, alone.preemptions)


def test_an_idle_lane_is_served_within_a_round_of_its_arrival(piped):
    # One lane decodes a long answer; the other gets a request half a second in. Its
    # first token comes within one of the busy lane's steps of when it would alone.
    scheduler = sim.Scheduler(max_batch=64, token_budget=1024)
    busy = Requests(np.array([0.0]), np.array([100]), np.array([3000]), "poisson")
    late = Requests(np.array([0.5]), np.array([100]), np.array([10]), "poisson")
    alone = sim.simulate(piped, late, scheduler)
    paired = sim.simulate_lanes(piped, [busy, late], scheduler)
    longest = paired[0].step_duration_s.max()
    assert paired[1].ttft_s[0] <= alone.ttft_s[0] + longest * (1 + 1e-9)


def test_lock_step_decode_runs_follow_the_longest_lane_step_by_step():
    # The closed form over crossing step lines against a sum of the longest, step by step.
    from inferlab.serving.pipeline import _in_step

    rng = np.random.default_rng(5)
    for _ in range(300):
        lines = [(float(rng.uniform(0.01, 0.05)), float(rng.choice([0.0, rng.uniform(0, 1e-4)])))
                 for _ in range(int(rng.integers(2, 5)))]
        k_max = int(rng.integers(1, 400))
        tau = float(rng.choice([np.inf, rng.uniform(0.01, 10.0)]))
        steps, took, pieces = _in_step(lines, k_max, tau)
        ends = np.cumsum([max(m0 + m1 * j for m0, m1 in lines) for j in range(k_max)])
        expected = min(k_max, int(np.searchsorted(ends, tau, side="left")) + 1)
        assert steps == expected
        assert took == pytest.approx(ends[steps - 1], rel=1e-9)
        assert sum(piece[1] for piece in pieces) == steps


def test_a_pipelined_replica_refuses_what_lock_step_cannot_run_however_many_lanes_work(piped):
    # One lane with work is refused as two would be: the answer must not hang on the
    # traffic a replica was dealt.
    requests = make_requests(8, Lengths(100), Lengths(20), arrival="all_at_once")
    with pytest.raises(ValueError, match="scheduler"):
        sim.simulate_lanes(piped, [requests], sim.Scheduler(kind="static"))
    from inferlab.serving.loadgen import System
    with pytest.raises(ValueError, match="replicas: 3 lanes .* give a multiple of 2"):
        System("odd", piped, 3)
