"""The benchmark client against the lab server over real HTTP on 127.0.0.1."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.lab.loadclient import LoadSpec, make_prompt, requests_within, run_load
from inferlab.lab.server import LabServer, ServerConfig
from inferlab.tokens.tokenizers import get_tokenizer

MODEL = "inferlab-tiny"


@pytest.fixture(scope="module")
def server():
    with LabServer(ServerConfig(size="tiny", stream_interval=1)) as running:
        yield running


def test_closed_loop_records_every_chunk_and_usage(server):
    trace = run_load(server.base_url, MODEL,
                     LoadSpec(requests=6, concurrency=3, prompt_tokens=20, output_tokens=9))
    assert trace.errors == 0 and len(trace.requests) == 6
    for r in trace.requests:
        assert r.completion_tokens == 9
        assert r.chunk_text[-1] is None  # the usage chunk carries no choice
        assert all(a <= b for a, b in zip(r.chunk_s, r.chunk_s[1:], strict=False))
        assert r.send_s <= r.chunk_s[0] <= r.end_s
        assert r.scheduled_s == pytest.approx(r.send_s, abs=0.05)
    # Three users: the first three requests start together.
    starts = sorted(r.send_s for r in trace.requests)
    assert starts[2] - starts[0] < starts[3] - starts[0]


def test_chat_and_distributed_lengths(server):
    spec = LoadSpec(requests=5, concurrency=2, chat=True, prompt_tokens=30,
                    prompt_tokens_sd=5.0, output_tokens=8, output_tokens_sd=3.0, seed=4)
    trace = run_load(server.base_url, MODEL, spec)
    assert trace.errors == 0
    lengths = [r.requested_output_tokens for r in trace.requests]
    assert [r.completion_tokens for r in trace.requests] == lengths
    assert len(set(lengths)) > 1
    assert all(r.chunk_text[0] == "" for r in trace.requests)  # the chat role chunk


def test_open_loop_with_a_cap_delays_sends_past_their_schedule(server):
    spec = LoadSpec(requests=8, concurrency=None, rate_per_s=200.0, max_in_flight=1,
                    prompt_tokens=10, output_tokens=20)
    trace = run_load(server.base_url, MODEL, spec)
    assert trace.errors == 0
    waits = [r.send_s - r.scheduled_s for r in trace.requests]
    # One slot and arrivals every 5 ms on average: later requests wait for the slot.
    assert max(waits) > 0.01
    assert all(w >= -1e-3 for w in waits)


def test_errors_are_recorded_not_raised(server):
    trace = run_load(server.base_url, "no-such-model", LoadSpec(requests=2, concurrency=1))
    assert trace.errors == 2
    assert all(r.status == 404 and "no-such-model" in r.error for r in trace.requests)


def test_prompts_have_the_asked_token_count_and_differ():
    rng = np.random.default_rng(0)
    first, second = make_prompt(50, rng), make_prompt(50, rng)
    tok = get_tokenizer("cl100k_base")
    assert abs(tok.count(first) - 50) <= 2 and first != second


def test_spec_is_checked():
    with pytest.raises(ValueError, match="concurrency, rate_per_s"):
        LoadSpec(concurrency=2, rate_per_s=1.0)
    with pytest.raises(ValueError, match="requests"):
        LoadSpec(requests=0)


def test_requests_within_a_budget_follow_the_measured_rate():
    assert requests_within(2.0, 10.0) == 20
    # A machine four times slower runs a quarter of the requests in the same time.
    assert requests_within(0.5, 10.0) == 5
    assert requests_within(0.01, 10.0, at_least=3) == 3
    assert requests_within(100.0, 10.0, at_least=3, at_most=24) == 24
    for bad in ({"rate_per_s": 0.0}, {"rate_per_s": float("inf")}, {"budget_s": -1.0}):
        args = {"rate_per_s": 1.0, "budget_s": 1.0, **bad}
        with pytest.raises(ValueError, match=next(iter(bad))):
            requests_within(**args)
    with pytest.raises(ValueError, match="at_most"):
        requests_within(1.0, 1.0, at_least=4, at_most=2)
