"""Query lengths: MLPerf's own prompt lengths, issued in passes as LoadGen issues them."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.benchmark.mlperf import LLAMA2_70B_MEAN_PROMPT_TOKENS
from inferlab.benchmark.traffic import DatasetLengths, mlperf_input_lengths
from inferlab.benchmark.verdict import mlperf_rules
from inferlab.common.data import load_table
from inferlab.serving.loadgen import Workload


def test_the_table_holds_every_sample_of_mlperfs_data_set_once():
    table = load_table("mlperf_llama2_70b_input_lengths")
    lengths = mlperf_input_lengths()
    # One count per length, summing to the data set LoadGen's equal-issue rule passes over.
    assert int(table["samples"].sum()) == len(lengths.samples) == mlperf_rules().dataset_samples
    assert table["input_tokens"].is_unique
    # MLPerf's preprocessing kept prompts of at most 1,024 tokens (processorca.py's limit).
    assert lengths.min_tokens >= 1
    assert lengths.max_tokens <= 1024
    # The statistics the class reports are the table's own, not an assumed shape.
    values = np.repeat(table["input_tokens"].to_numpy(), table["samples"].to_numpy())
    assert lengths.mean_tokens == pytest.approx(values.mean())
    assert lengths.cv == pytest.approx(values.std() / values.mean())


def test_the_mean_prompt_every_chapter_quotes_is_the_data_sets():
    # One figure for chapters 2 and 3 and the explorers (issue 31 found 222 and 300).
    assert round(mlperf_input_lengths().mean_tokens) == LLAMA2_70B_MEAN_PROMPT_TOKENS


def test_each_pass_issues_every_sample_once_in_a_fresh_order():
    lengths = mlperf_input_lengths()
    size = len(lengths.samples)
    drawn = lengths.sample(2 * size + 5, np.random.default_rng(0))
    first, second = drawn[:size], drawn[size:2 * size]
    assert sorted(first) == sorted(lengths.samples) == sorted(second)
    assert not np.array_equal(first, second)
    # Prefix-consistent: a shorter draw is the start of a longer one.
    assert np.array_equal(lengths.sample(100, np.random.default_rng(0)), drawn[:100])



def test_passes_are_drawn_as_one_permutation_after_another():
    # The order every stored MLPerf prediction was drawn in (one rng.permutation a pass),
    # kept when the passes became one call (a two-sample set at the largest draw allowed
    # is millions of passes; a Python call each took about eight seconds).
    lengths = DatasetLengths.from_counts([16, 64], [1, 1], "two")
    rng = np.random.default_rng(3)
    expected = np.concatenate([rng.permutation(np.array(lengths.samples)) for _ in range(4)])
    assert np.array_equal(lengths.sample(7, np.random.default_rng(3)), expected[:7])

def test_the_default_query_mix_draws_mlperfs_prompts():
    mix = Workload()
    assert mix.prompt == mlperf_input_lengths()
    prompts, outputs = mix.lengths(mlperf_rules().dataset_samples)
    assert sorted(prompts) == sorted(mlperf_input_lengths().samples)
    assert outputs.min() >= 2 and outputs.max() <= 1024


def test_counts_that_do_not_make_a_data_set_are_refused_by_name():
    with pytest.raises(ValueError, match="lengths, counts"):
        DatasetLengths.from_counts([10, 20], [1], "bad")
    with pytest.raises(ValueError, match="counts"):
        DatasetLengths.from_counts([10], [0], "bad")
    with pytest.raises(ValueError, match="samples"):
        DatasetLengths(10.0, 0.0, 1, 5, (10,), "longer than its max_tokens")
    with pytest.raises(ValueError, match="samples"):
        DatasetLengths(10.0, 0.0, 1, None, (), "empty")
