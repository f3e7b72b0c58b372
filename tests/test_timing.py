"""Request timing and speculative decoding reproduce the published figures and obey their laws."""

from __future__ import annotations

import math

import numpy as np
import pytest

from inferlab.common.data import result
from inferlab.lab.timing import (
    clocks,
    decode_only_rate_tok_per_s,
    decode_rate_from_rate_with_ttft_tok_per_s,
    output_tokens_for_fraction,
    rate_with_ttft_tok_per_s,
    reading_rate_tok_per_s,
    reconcile,
    request_timeline,
    ttft_for_rate_s,
    words_per_minute,
)
from inferlab.serving.speculative import (
    acceptance_rate_for_speedup,
    best_draft_tokens,
    expected_tokens_per_step,
    least_acceptance_for_speedup,
    speculative_decoding,
    speedup,
)

# --- published figures ------------------------------------------------------------------------


def test_decode_only_rate_from_llmperf_medians_is_about_257():
    ttft = result("llmperf-groq-l2-70b-ttft")["value"]
    e2e = result("llmperf-groq-l2-70b-e2e")["value"]
    assert decode_only_rate_tok_per_s(150, ttft, e2e) == pytest.approx(257.3, abs=0.1)


def test_llmperf_medians_alone_give_the_published_185_only_approximately():
    # 150 / 0.805 is 186.3: medians of different quantities do not combine exactly,
    # which is why the published per-request median (185.05) is read from the data.
    e2e = result("llmperf-groq-l2-70b-e2e")["value"]
    published = result("llmperf-groq-l2-70b-throughput")["value"]
    assert clocks(150, 0.222, e2e).rate_with_ttft_tok_per_s == pytest.approx(published, rel=0.01)


def test_reconciliation_at_150_tokens_gives_about_193():
    assert rate_with_ttft_tok_per_s(150, 0.22, 270) == pytest.approx(193.4, abs=0.1)


def test_reconciliation_at_1000_tokens_gives_about_255():
    assert rate_with_ttft_tok_per_s(1000, 0.22, 270) == pytest.approx(254.9, abs=0.1)


def test_ttft_that_makes_185_is_about_255_ms():
    ttft = ttft_for_rate_s(185, 150, 270)
    assert ttft == pytest.approx(0.2553, abs=1e-4)
    assert rate_with_ttft_tok_per_s(150, ttft, 270) == pytest.approx(185)


def test_rate_with_ttft_is_exactly_n_over_e2e_when_decode_rate_is_decode_only():
    c = clocks(150, 0.222, 0.805)
    assert rate_with_ttft_tok_per_s(150, 0.222, c.decode_only_tok_per_s) == pytest.approx(
        c.rate_with_ttft_tok_per_s
    )


# --- properties -------------------------------------------------------------------------------

OUTPUTS = [1, 2, 5, 20, 150, 500, 1000, 5000, 100000]
TTFTS = [0.0, 0.01, 0.1, 0.22, 0.5, 2.0]
DECODES = [5.0, 30.0, 270.0, 2000.0]


@pytest.mark.parametrize("decode", DECODES)
@pytest.mark.parametrize("ttft", TTFTS[1:])
def test_rate_with_ttft_rises_toward_the_decode_rate_as_output_grows(ttft, decode):
    rates = rate_with_ttft_tok_per_s(np.array(OUTPUTS), ttft, decode)
    assert np.all(np.diff(rates) > 0)
    assert np.all(rates < decode)
    assert rates[-1] > 0.9 * decode  # 100,000 tokens outweigh any TTFT here


@pytest.mark.parametrize("decode", DECODES)
@pytest.mark.parametrize("n", OUTPUTS)
def test_a_larger_ttft_never_raises_the_rate(n, decode):
    rates = rate_with_ttft_tok_per_s(n, np.array(TTFTS), decode)
    assert np.all(np.diff(rates) < 0)
    assert rates[0] == pytest.approx(decode)  # no TTFT: the decode rate itself


@pytest.mark.parametrize("n", [1, 50, 150, 1000])
@pytest.mark.parametrize("ttft", TTFTS)
def test_decode_rate_from_rate_with_ttft_inverts_the_reconciliation(n, ttft):
    rate = rate_with_ttft_tok_per_s(n, ttft, 270)
    assert decode_rate_from_rate_with_ttft_tok_per_s(rate, n, ttft) == pytest.approx(270)


def test_published_median_rate_implies_a_decode_rate_near_the_e2e_estimate():
    published = result("llmperf-groq-l2-70b-throughput")["value"]
    ttft = result("llmperf-groq-l2-70b-ttft")["value"]
    r = decode_rate_from_rate_with_ttft_tok_per_s(published, 150, ttft)
    assert r == pytest.approx(257.3, rel=0.02)


@pytest.mark.parametrize("fraction", [0.5, 0.9, 0.95, 0.99])
@pytest.mark.parametrize("ttft", TTFTS[1:])
def test_output_tokens_for_fraction_inverts_the_rate(fraction, ttft):
    n = output_tokens_for_fraction(fraction, ttft, 270)
    assert rate_with_ttft_tok_per_s(n, ttft, 270) == pytest.approx(fraction * 270)


def test_timeline_clocks_agree_with_their_definitions():
    timeline = request_timeline(550, 150, 270, prefill_tok_per_s=3000, queue_s=0.05)
    times = timeline.token_times_s()
    assert len(times) == 150
    assert times[0] == pytest.approx(timeline.ttft_s) == pytest.approx(0.05 + 550 / 3000)
    assert times[-1] == pytest.approx(timeline.e2e_s)
    c = timeline.clocks()
    assert c.tpot_s == pytest.approx(1 / 270)
    assert c.llmperf_inter_token_latency_s == pytest.approx(timeline.e2e_s / 150)
    # n / (e2e - TTFT) counts n tokens over n - 1 gaps: a shade above 1 / TPOT.
    assert c.decode_only_tok_per_s == pytest.approx(270 * 150 / 149)
    assert c.rate_with_ttft_tok_per_s == pytest.approx(150 / timeline.e2e_s)


@pytest.mark.parametrize("prompt", [1, 100, 4000])
def test_longer_prompts_only_move_the_first_token(prompt):
    short = request_timeline(1, 50, 100, prefill_tok_per_s=1000)
    long = request_timeline(prompt, 50, 100, prefill_tok_per_s=1000)
    assert long.ttft_s - short.ttft_s == pytest.approx((prompt - 1) / 1000)
    assert long.decode_s == pytest.approx(short.decode_s)


def test_one_token_output_has_no_tpot():
    assert math.isnan(clocks(1, 0.2, 0.3).tpot_s)


def test_reconcile_gives_the_curve_and_the_ttft_for_the_target():
    r = reconcile(150, 0.22, 270, target_tok_per_s=185)
    assert r.rate_with_ttft_tok_per_s == pytest.approx(193.4, abs=0.1)
    assert r.ttft_for_target_s == pytest.approx(0.2553, abs=1e-4)
    assert np.all(np.diff(r.curve_rate_tok_per_s) > 0)
    assert math.isnan(reconcile(150, 0.22, 100, target_tok_per_s=185).ttft_for_target_s)


def test_reading_speed_conversions():
    assert reading_rate_tok_per_s(240, 0.8) == pytest.approx(5.0)
    assert words_per_minute(5.0, 0.75) == pytest.approx(225.0)
    assert words_per_minute(reading_rate_tok_per_s(300, 0.75), 0.75) == pytest.approx(300)


# --- speculative decoding ---------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, 1, 2, 4, 8])
@pytest.mark.parametrize("a", [0.0, 0.3, 0.6, 0.8, 0.95])
def test_expected_tokens_matches_the_closed_form(a, k):
    assert expected_tokens_per_step(a, k) == pytest.approx((1 - a ** (k + 1)) / (1 - a))


def test_expected_tokens_limits():
    assert expected_tokens_per_step(1.0, 4) == 5.0
    assert expected_tokens_per_step(0.0, 4) == 1.0
    assert expected_tokens_per_step(0.7, 0) == 1.0
    values = expected_tokens_per_step(np.linspace(0, 1, 11), 3)
    assert np.all(np.diff(values) > 0)


def test_speedup_from_leviathan_worked_setting():
    # a = 0.8, k = 4, free draft: 1 + .8 + .64 + .512 + .4096 = 3.3616.
    assert speedup(0.8, 4, 0.0) == pytest.approx(3.3616)
    assert speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)


@pytest.mark.parametrize("k", [1, 3, 6])
def test_a_costlier_draft_never_helps(k):
    gains = [speedup(0.8, k, c) for c in np.linspace(0, 1, 11)]
    assert np.all(np.diff(gains) < 0)


def test_acceptance_rate_for_speedup_inverts_speedup():
    a = acceptance_rate_for_speedup(3.0, 6, 0.05)
    assert speedup(a, 6, 0.05) == pytest.approx(3.0, rel=1e-9)
    assert acceptance_rate_for_speedup(0.5, 2, 0.1) == 0.0


def test_cerebras_claim_needs_high_acceptance():
    after = result("cerebras-l31-70b-specdec")["value"]
    claimed = after / result("cerebras-l31-70b-launch")["value"]
    assert claimed == pytest.approx(4.667, abs=0.001)
    with pytest.raises(ValueError, match="out of reach"):
        acceptance_rate_for_speedup(claimed, 3, 0.05)  # at most 4 / 1.15 = 3.48
    assert acceptance_rate_for_speedup(claimed, 8, 0.05) > 0.9


def test_least_acceptance_is_the_minimum_over_draft_lengths():
    target = 2100 / 450
    a, k = least_acceptance_for_speedup(target, 0.05)
    assert (round(a, 3), k) == (0.9, 13)
    for other in range(17):
        if target <= (other + 1) / (1 + other * 0.05):
            assert acceptance_rate_for_speedup(target, other, 0.05) >= a
    with pytest.raises(ValueError, match="target_speedup"):
        least_acceptance_for_speedup(20, 0.05, max_draft_tokens=16)


def test_best_draft_tokens_grows_with_acceptance():
    ks = [best_draft_tokens(a, 0.05) for a in (0.3, 0.6, 0.8, 0.9, 0.95)]
    assert ks == sorted(ks)
    assert best_draft_tokens(0.0, 0.05) == 0


def test_speculative_estimate_multiplies_the_base_rate():
    estimate = speculative_decoding(0.8, 4, 0.05, 450)
    assert estimate.decode_tok_per_s == pytest.approx(450 * 3.3616 / 1.2)


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: rate_with_ttft_tok_per_s(0, 0.2, 270), "output_tokens"),
        (lambda: rate_with_ttft_tok_per_s(150, -0.1, 270), "ttft_s"),
        (lambda: rate_with_ttft_tok_per_s(150, 0.2, 0), "decode_tok_per_s"),
        (lambda: rate_with_ttft_tok_per_s(150, 0.2, float("nan")), "decode_tok_per_s"),
        (lambda: ttft_for_rate_s(300, 150, 270), "rate_with_ttft_tok_per_s"),
        (lambda: clocks(150, 0.9, 0.8), "e2e_s"),
        (lambda: clocks(1.5, 0.2, 0.8), "output_tokens"),
        (lambda: request_timeline(0, 10, 100, prefill_tok_per_s=1000), "prompt_tokens"),
        (lambda: request_timeline(10, 10, 100, prefill_tok_per_s=-1), "prefill_tok_per_s"),
        (lambda: output_tokens_for_fraction(1.0, 0.2, 270), "fraction"),
        (lambda: reading_rate_tok_per_s(240, 0), "words_per_token"),
        (lambda: expected_tokens_per_step(1.2, 4), "acceptance_rate"),
        (lambda: expected_tokens_per_step(0.5, -1), "draft_tokens"),
        (lambda: speedup(0.5, 4, 1.5), "draft_cost_ratio"),
        (lambda: speculative_decoding(0.5, 4, 0.1, 0), "base_decode_tok_per_s"),
        (lambda: decode_rate_from_rate_with_ttft_tok_per_s(1000, 150, 0.222),
         "rate_with_ttft_tok_per_s"),
        (lambda: least_acceptance_for_speedup(3, -0.1), "draft_cost_ratio"),
    ],
)
def test_bad_arguments_raise_errors_naming_them(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()


def test_error_message_gives_the_value_and_the_allowed_range():
    with pytest.raises(ValueError, match=r"ttft_s: -0.1 .*\[0, inf\)"):
        rate_with_ttft_tok_per_s(150, -0.1, 270)
    with pytest.raises(ValueError, match=r"draft_cost_ratio: 1.5 .*\[0, 1\]"):
        speedup(0.5, 4, 1.5)


def test_the_explorers_functions_give_the_chapters_example_and_reject_bad_values():
    from inferlab.pages.explorers.phases import (
        reconcile_explorer_compute,
        timeline_explorer_compute,
    )

    timeline = timeline_explorer_compute(550, 150, 270)
    assert timeline.ttft_s == pytest.approx(0.05 + 550 / 3000)
    with pytest.raises(ValueError, match="output_tokens"):
        timeline_explorer_compute(550, 0, 270)
    r = reconcile_explorer_compute(150, 0.22, 270)
    # The chapter's reconciliation: 193.4 tok/s at a TTFT of 0.22 s, 185.05 at about 255 ms.
    assert r.rate_with_ttft_tok_per_s == pytest.approx(193.4, abs=0.05)
    assert r.target_tok_per_s == 185.05
    assert r.ttft_for_target_s * 1000 == pytest.approx(255, abs=0.5)
