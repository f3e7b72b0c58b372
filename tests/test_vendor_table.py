"""TensorRT-LLM's own throughput table, predicted row by row: a held-out test of the
fixed-lengths path, from 128 tokens in and out to 20,000 in and 2,000 out."""

from __future__ import annotations

import pandas as pd
import pytest

from inferlab.accuracy import median_abs_error, vendor_configurations, vendor_table
from inferlab.common.data import load_table
from inferlab.model import specs

DENSE = ("Llama 3.1 8B", "Llama 3.3 70B", "Llama 3.1 405B")


@pytest.fixture(scope="module")
def dense():
    return vendor_table(DENSE)


def test_every_dense_row_is_predicted_at_its_own_layout(dense):
    table = load_table("trtllm_throughput")
    assert [row.id for row in dense] == list(table[table["model"].isin(DENSE)]["id"])
    assert {specs.model(name).experts for name in DENSE} == {1}
    assert not any(row.mixture for row in dense)
    for row in dense:
        found = row.prediction
        assert (found.tp, found.pp, found.ep, found.replicas) == (row.tp, row.pp, 1, 1), row.id
        assert found.valid and found.tokens_per_s > 0, row.id
        assert found.workload == (f"fixed lengths: {row.input_tokens:,} in, "
                                  f"{row.output_tokens:,} out"), row.id


def test_the_dense_rows_are_predicted_within_the_held_out_target(dense):
    # No number was fitted on these rows; the bar for a held-out benchmark of
    # dense Llama models is a median absolute error of 15 %.
    assert median_abs_error(dense) <= 0.15


def test_each_dense_configuration_orders_the_lengths_as_the_table_does(dense):
    # Which shapes serve more output tokens a second on one configuration (a long answer
    # to a short prompt, or the reverse) is the prefill and decode physics of the book.
    for found in vendor_configurations(dense):
        assert found.rank_agreement >= 0.9, (found.model, found.accelerator, found.tp,
                                             found.pp, found.rank_agreement)


def test_a_configuration_gathers_its_lengths_and_ranks_them_by_spearman(dense):
    found = vendor_configurations(dense)
    assert sum(len(c.rows) for c in found) == len(dense)
    assert len({(c.model, c.accelerator, c.tp, c.pp, c.precision) for c in found}) == len(found)
    first = found[0]
    assert all((r.model, r.accelerator, r.tp, r.pp) == (first.model, first.accelerator,
                                                         first.tp, first.pp)
               for r in first.rows)
    reported = pd.Series([r.reported_tok_s for r in first.rows]).rank()
    modelled = pd.Series([r.prediction.tokens_per_s for r in first.rows]).rank()
    assert first.rank_agreement == pytest.approx(reported.corr(modelled))


def test_a_mixture_spreads_its_experts_over_every_chip_of_a_stage():
    rows = vendor_table(["Llama 4 Scout"])
    assert len(rows) == int((load_table("trtllm_throughput")["model"] == "Llama 4 Scout").sum())
    for row in rows:
        assert row.mixture
        assert (row.prediction.tp, row.prediction.ep, row.prediction.pp) == (
            row.tp, row.tp, row.pp), row.id


@pytest.mark.parametrize("models", ["Llama 3.1 8B", ["Llama 3.1 8B", "GPT-5"], [8]])
def test_models_not_in_the_table_are_refused_by_name(models):
    with pytest.raises(ValueError, match="models: give a list of names among"):
        vendor_table(models)
