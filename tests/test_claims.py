"""The claim card: what a claim states, what it leaves out, and what that could change."""

from __future__ import annotations

from dataclasses import fields

import pytest

from inferlab.common.data import load_table
from inferlab.pages import claims as cl


def test_every_fact_is_a_field_with_an_effect():
    assert set(cl.FACTS) == set(cl.OMISSION_EFFECTS)
    assert set(cl.FACTS) <= {f.name for f in fields(cl.Claim)}


def test_a_bare_number_misses_all_nine_facts():
    one = cl.card(cl.Claim("bare", 500.0, "tokens/s"))
    assert one.missing == cl.FACTS
    assert len(one.effects) == 9 and one.per_chip is None
    assert not one.complete


def test_a_complete_claim_misses_nothing_and_divides_by_chips():
    full = cl.Claim("full", 800.0, "tokens/s", phase="after first token", output_tokens=1000,
                    concurrency=1, tokenizer="tiktoken", chip_count=8, precision="FP8",
                    speculative_decoding=False, context_tokens=1000, audited="yes")
    one = cl.card(full)
    assert one.complete and one.per_chip == 100.0
    assert (one.table()["stated"] != "not stated").all()


def test_mlperf_row_states_all_but_precision_and_speculation():
    one = cl.card(cl.claim_from_result("mlperf-v5.0-nvidia-8xb200-offline"))
    assert one.missing == ("precision", "speculative_decoding")
    assert one.per_chip == pytest.approx(98_858 / 8)
    assert one.claim.audited == "yes"


def test_rack_claim_states_chips_and_that_it_is_unverified_only():
    one = cl.card(cl.claim_from_result("nvidia-gb200-nvl72-l2-70b-rack"))
    assert dict(one.stated) == {"chip_count": 72, "audited": "unverified"}
    assert one.per_chip == pytest.approx(869_200 / 72)


def test_llmperf_row_reads_its_lengths_and_concurrency():
    claim = cl.claim_from_result("llmperf-groq-l2-70b-throughput")
    assert (claim.context_tokens, claim.output_tokens, claim.concurrency) == (550, 150, 5)
    assert claim.phase == "including TTFT"
    assert "chip_count" in cl.card(claim).missing


def test_specdec_rows_state_speculative_decoding():
    assert cl.claim_from_result("aa-groq-l31-70b-specdec").speculative_decoding is True
    assert cl.claim_from_result("cerebras-l31-70b-specdec").speculative_decoding is True
    assert cl.claim_from_result("aa-groq-l2-70b").speculative_decoding is None


def test_every_results_row_gets_a_card():
    for row in load_table("results").to_dict("records"):
        one = cl.card(cl.claim_from_result(row))
        assert len(one.stated) + len(one.missing) == 9


def test_evidence_ratios_are_the_rows_ratios():
    table = cl.omission_evidence().set_index("fact")
    assert table.loc["speculative_decoding", "ratio"] == pytest.approx(1665 / 250)
    assert table.loc["concurrency", "ratio"] == pytest.approx(101_611 / 59_622.7)
    assert (table["ratio"] > 1).all()


def test_cards_table_counts_facts():
    table = cl.cards_table(["mlperf-v5.0-nvidia-8xb200-offline", "groq-claim-l2-70b"])
    assert list(table["facts stated"]) == [7, 2]


def test_tables_name_rows_for_readers_not_by_id():
    table = cl.cards_table(["mlperf-v5.0-nvidia-8xb200-offline", "groq-claim-l2-70b"])
    assert list(table["claim"]) == ["NVIDIA DGX B200, Llama 2 70B, MLPerf Offline, v5.0",
                                    "Groq API, Llama 2 70B, vendor claim, 2024"]
    evidence = cl.omission_evidence()
    shown = set(evidence["higher"]) | set(evidence["lower"])
    assert not shown & set(load_table("results")["id"])
    # One endpoint before and after speculative decoding: two names.
    before, after = (cl.row_name(row_id) for row_id in
                     ("aa-groq-l31-70b-before-specdec", "aa-groq-l31-70b-specdec"))
    assert before != after and "speculative decoding" in after


@pytest.mark.parametrize(("kwargs", "word"), [
    ({"value": -1.0}, "value"), ({"value": 5.0, "chip_count": 0}, "chip_count"),
    ({"value": 5.0, "audited": "maybe"}, "audited"),
])
def test_bad_claims_raise(kwargs, word):
    with pytest.raises(ValueError, match=word):
        cl.Claim("bad", unit="tokens/s", **kwargs)


def test_card_rejects_non_claims():
    with pytest.raises(ValueError, match="claim"):
        cl.card({"value": 3})
