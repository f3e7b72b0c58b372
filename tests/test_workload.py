"""The one idea of a workload: fixed lengths, a distribution, an MLPerf data set, a trace."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.benchmark.traffic import Lengths, mlperf_input_lengths
from inferlab.benchmark.verdict import mlperf_rules
from inferlab.benchmark.workload import (
    MIN_OUTPUT_TOKENS,
    Workload,
    check_fits_context,
    dataset_lengths,
    datasets,
)
from inferlab.common.data import DATA_DIR
from inferlab.lab.tool_files import read_trace


def test_the_default_is_mlperfs_llama2_70b_mix_drawn_as_before():
    mix = Workload()
    assert mix.prompt == mlperf_input_lengths() and mix.benchmark == "llama2-70b"
    prompts, outputs = mix.lengths(mlperf_rules().dataset_samples)
    # One pass over the data set: every prompt once, in a seeded order.
    assert sorted(prompts) == sorted(mlperf_input_lengths().samples)
    assert outputs.min() >= MIN_OUTPUT_TOKENS and outputs.max() <= 1024
    # Prefix-consistent: a longer run only adds requests.
    more_prompts, more_outputs = mix.lengths(30_000)
    assert (more_prompts[:100] == prompts[:100]).all() and (more_outputs[:100]
                                                             == outputs[:100]).all()


def test_fixed_lengths_are_exact_and_refuse_nonsense_by_name():
    fixed = Workload.fixed(1000, 200)
    prompts, outputs = fixed.lengths(50)
    assert set(prompts) == {1000} and set(outputs) == {200}
    assert fixed.longest_request_tokens == 1200 and fixed.benchmark == ""
    for bad in (0, -3, 2.5, "100"):
        with pytest.raises(ValueError, match="input_tokens"):
            Workload.fixed(bad, 10)
        with pytest.raises(ValueError, match="output_tokens"):
            Workload.fixed(10, bad)


def test_each_mlperf_data_set_is_drawn_in_whole_passes_of_its_own_pairs():
    assert {"llama2-70b", "llama3.1-8b", "llama3.1-405b", "mixtral-8x7b"} <= set(datasets())
    for name in datasets():
        if name == "llama2-70b":
            continue
        data = Workload.dataset(name)
        size = len(data.pairs)
        prompts, outputs = data.lengths(size)
        # Joint pairs survive the draw: one pass holds every (prompt, output) sample once.
        assert sorted(zip(prompts, outputs, strict=True)) == sorted(data.pairs)
        assert sorted(prompts) == sorted(dataset_lengths(name).samples)
        assert data.benchmark == name and outputs.min() >= MIN_OUTPUT_TOKENS
    # The 405B set is the long-context one: its prompts average several thousand tokens.
    # DeepSeek-R1's recorded answers run past the benchmark's 20,000-token cap and are cut at
    # it, which gives the mean MLPerf publishes (3,886.2274 tokens an answer).
    reasoning = Workload.dataset("deepseek-r1")
    assert np.mean([o for _, o in reasoning.pairs]) == pytest.approx(3886.2274, abs=1e-4)
    long = Workload.dataset("llama3.1-405b").mean_tokens()[0]
    short = Workload.dataset("llama3.1-8b").mean_tokens()[0]
    assert long > 5 * short
    with pytest.raises(ValueError, match="name: 'imagenet' is not allowed; give one of llama2-70b"):
        Workload.dataset("imagenet")


def test_llama31_8b_answers_run_to_the_cap_at_the_checkers_character_count():
    from inferlab.benchmark.workload import (
        LLAMA31_8B_GENERATED_CHARS,
        LLAMA31_8B_OUTPUT,
        MAX_OUTPUT_TOKENS,
    )
    from inferlab.tokens.tokenizers import get_tokenizer

    text = (DATA_DIR / "texts" / "prose_en.txt").read_text(encoding="utf-8")
    chars_per_token = len(text) / len(get_tokenizer("llama3").encode(text))
    mean = LLAMA31_8B_GENERATED_CHARS / 13_368 / chars_per_token
    # The characters the checker holds answers to are 128 tokens within one: the cap.
    assert abs(mean - MAX_OUTPUT_TOKENS["llama3.1-8b"]) < 1.0
    assert LLAMA31_8B_OUTPUT.mean_tokens == MAX_OUTPUT_TOKENS["llama3.1-8b"]
    prompts, outputs = Workload.dataset("llama3.1-8b").lengths(13_368)
    assert set(outputs) == {128} and prompts.mean() == pytest.approx(870.7, abs=0.1)


def test_a_trace_gives_its_lengths_and_its_own_arrival_pattern():
    trace = read_trace(DATA_DIR / "traces" / "aiperf_chat_c2" / "profile_export_raw.jsonl")
    recorded = Workload.from_trace(trace)
    n = len(recorded.pairs)
    assert n == len(trace.succeeded) and recorded.is_trace
    prompts, outputs = recorded.lengths(n)
    assert [(p, o) for p, o in zip(prompts, outputs, strict=True)] == list(recorded.pairs)
    arrivals = recorded.unit_arrivals(3 * n)
    # Scaled to one request per second and repeated end to end: the second pass starts at n.
    assert np.all(np.diff(arrivals) >= 0)
    assert arrivals[n] == pytest.approx(n) and arrivals[2 * n] == pytest.approx(2 * n)
    assert recorded.native_rate_per_s == pytest.approx((n - 1) / recorded.arrival_s[-1])
    # guidellm's report reads the same way.
    guided = Workload.from_trace(read_trace(DATA_DIR / "traces" / "guidellm_chat_c2"
                                            / "benchmarks.json"))
    assert guided.pairs and guided.is_trace


def test_a_workload_longer_than_the_context_is_refused_with_the_limit():
    with pytest.raises(ValueError, match=r"input_tokens \+ output_tokens.*4,096"):
        check_fits_context(Workload.fixed(4000, 200), 4096, "Llama 2 70B")
    check_fits_context(Workload.fixed(3896, 200), 4096, "Llama 2 70B")
    unbounded = Workload(Lengths(300, cv=1.0), Lengths(100, cv=1.0))
    with pytest.raises(ValueError, match="unbounded"):
        check_fits_context(unbounded, 4096, "Llama 2 70B")
