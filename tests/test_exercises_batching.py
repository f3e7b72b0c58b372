"""The answers to the batching chapter's exercises, computed as the solutions compute them."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab import specs
from inferlab.data import result
from inferlab.simulator import (
    EXPLORER_PROMPT,
    MLPERF_LLAMA2_70B_BOUNDS,
    Scheduler,
    explorer_replica,
    max_rate_within,
    offline_throughput,
    simulate,
    tail_explorer_compute,
)
from inferlab.steptime import MLPERF_PER_USER_TOK_S, curve_explorer_compute, replica
from inferlab.workload import Lengths, Requests, make_requests


def test_ex_batch_users():
    row = result("mlperf-v5.0-nvidia-8xh200-interactive")
    per_gpu = row["value"] / row["accelerator_count"]
    users = row["value"] / MLPERF_PER_USER_TOK_S["Interactive"]
    assert per_gpu == pytest.approx(2428.0, abs=0.1)
    assert users == pytest.approx(777.0, abs=0.1)


def test_ex_batch_ridge():
    peak = replica("Llama 2 70B", "NVIDIA H200 SXM", 1, "fp8")
    real = peak.with_efficiency(memory_efficiency=0.8, compute_efficiency=0.5)
    # FP8 peak over twice the bandwidth: 1978.9e12 / (2 x 4.8e12) = 206 requests.
    assert peak.ridge_tokens == pytest.approx(206.1, abs=0.1)
    assert real.ridge_tokens == pytest.approx(206.1 * 0.5 / 0.8, abs=0.1)


def test_ex_batch_overhead():
    server = result("mlperf-v5.1-nebius-8xb200-server")["value"]
    inter = result("mlperf-v5.1-nebius-8xb200-interactive")["value"]
    target = 1 - inter / server
    low, high = 0.0, 100.0
    for _ in range(30):
        middle = (low + high) / 2
        curve = curve_explorer_compute(efficiency=0.65, step_overhead_ms=middle)
        dropped = curve.drop("NVIDIA B200")
        low, high = (middle, high) if dropped < target else (low, middle)
    overhead = (low + high) / 2
    assert target == pytest.approx(0.413, abs=0.001)
    # Tens of milliseconds: far more than a serving engine's own cost per step.
    assert 15 < overhead < 30
    assert curve_explorer_compute(efficiency=0.65, step_overhead_ms=overhead).drop(
        "NVIDIA B200") == pytest.approx(target, abs=0.01)


def test_ex_batch_reserve():
    rep13 = replica("Llama 2 13B", "NVIDIA H100 SXM", 1, "fp16")
    limit = specs.model("Llama 2 13B").context_length_tokens
    reserved = rep13.kv_capacity_tokens // limit
    paged = rep13.kv_capacity_tokens // (300 + 294 // 2)
    assert rep13.kv_capacity_tokens == 56113
    assert (reserved, paged) == (13, 125)


def test_ex_batch_static():
    spread = Lengths(294, cv=1.0, min_tokens=1, max_tokens=1024)
    lengths = spread.sample(64, np.random.default_rng(0))
    slots = 64 * (lengths.max() - 1)
    idle = 1 - (lengths - 1).sum() / slots
    batch64 = Requests(np.zeros(64), np.full(64, 300), lengths, "all_at_once")
    run = simulate(explorer_replica(), batch64, Scheduler(kind="static", max_batch=64))
    assert run.wasted_tokens / slots == pytest.approx(idle, rel=1e-12)
    assert 0.5 < idle < 0.9


def test_ex_batch_little():
    view70 = tail_explorer_compute(load=0.7)
    base70 = make_requests(2000, EXPLORER_PROMPT, Lengths(294, cv=1.0, max_tokens=1024),
                           rate_per_s=1.0, seed=0)
    run70 = simulate(explorer_replica(), base70.at_rate(view70.rate_per_s),
                     Scheduler(max_batch=256, token_budget=2048))
    little = run70.requests_per_s * run70.e2e_s.mean()
    durations = run70.step_duration_s
    decode_batch = np.sum(run70.step_batch * durations) / durations.sum()
    assert little == pytest.approx(view70.mean_batch, rel=1e-9)
    assert 0.8 * little < decode_batch < little


def test_ex_batch_server():
    server = explorer_replica()
    probe_requests = make_requests(2000, EXPLORER_PROMPT, Lengths(294, cv=1.0, max_tokens=1024),
                                   rate_per_s=1.0, seed=5)
    offline_tok_s = offline_throughput(server, probe_requests).throughput_tok_s
    shares = {}
    for name, (ttft, tpot) in MLPERF_LLAMA2_70B_BOUNDS.items():
        found = max_rate_within(server, probe_requests, ttft, tpot, iterations=10)
        shares[name] = found.throughput_tok_s / offline_tok_s
    assert 0 < shares["Interactive"] < shares["Server"] <= 1
