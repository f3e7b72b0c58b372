"""The timing helpers return tidy DataFrames with finite floors, on a tiny engine."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.lab.engine import Engine
from inferlab.lab.engine_sizes import SIZES, decode_bytes, prefill_flop
from inferlab.lab.measure import decode_step_times, spread, time_repeats, ttft_by_prompt_length


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(SIZES["tiny"], seed=0, show=None)


def test_ttft_table(engine):
    table = ttft_by_prompt_length(engine, [4, 16], flop_per_s=1e10, repeats=3)
    assert list(table.columns) == [
        "prompt_tokens", "batch", "repeats", "median_s", "p10_s", "p90_s",
        "flop", "floor_s", "floor_fraction", "achieved_flop_per_s",
    ]
    assert list(table["prompt_tokens"]) == [4, 16]
    assert table["flop"].iloc[1] == prefill_flop(engine.config, 16)
    assert np.isfinite(table["floor_fraction"]).all() and (table["floor_fraction"] > 0).all()
    assert (table["p10_s"] <= table["median_s"]).all()
    assert (table["median_s"] <= table["p90_s"]).all()


def test_decode_table(engine):
    table = decode_step_times(engine, [1, 2], [0, 8], bandwidth_bytes_per_s=1e10, repeats=3)
    assert list(table.columns) == [
        "batch", "context_tokens", "repeats", "median_s", "p10_s", "p90_s",
        "bytes_read", "floor_s", "floor_fraction", "tokens_per_s", "achieved_bytes_per_s",
    ]
    assert list(zip(table["batch"], table["context_tokens"], strict=True)) == [
        (1, 0), (1, 8), (2, 0), (2, 8)
    ]
    assert table["bytes_read"].iloc[3] == decode_bytes(engine.config, 2, 8)
    assert np.isfinite(table["floor_fraction"]).all() and (table["floor_fraction"] > 0).all()
    assert (table["tokens_per_s"] > 0).all()


def test_bad_sweeps_are_refused(engine):
    with pytest.raises(ValueError, match=r"batch_sizes: \[0\] is not allowed"):
        decode_step_times(engine, [0], [8], bandwidth_bytes_per_s=1e10)
    with pytest.raises(ValueError, match="bandwidth_bytes_per_s: nan is not allowed"):
        decode_step_times(engine, [1], [8], bandwidth_bytes_per_s=float("nan"))
    with pytest.raises(ValueError, match=r"prompt_tokens: \[\] is empty"):
        ttft_by_prompt_length(engine, [], flop_per_s=1e10)


def test_time_repeats_runs_setup_outside_the_timing():
    calls = []
    seconds = time_repeats(lambda: calls.append("run"), repeats=3,
                           setup=lambda: calls.append("setup"), warmup=1)
    assert calls == ["setup", "run"] * 4
    assert seconds.shape == (3,) and (seconds >= 0).all()
    assert spread(np.array([1.0, 2.0, 3.0]))["median_s"] == 2.0
    with pytest.raises(ValueError, match="repeats: 0 is not allowed"):
        time_repeats(lambda: None, repeats=0)
