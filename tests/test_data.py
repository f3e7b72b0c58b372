"""The data tables load, carry their sources, and malformed rows are named precisely."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from inferlab.data import DATA_DIR, SCHEMAS, DataError, load_table, result
from inferlab.specs import chip, chips, model, models


@pytest.mark.parametrize("name", SCHEMAS)
def test_every_table_loads_and_every_row_has_a_source(name):
    frame = load_table(name)
    assert len(frame) > 0
    assert list(frame.columns) == list(SCHEMAS[name])
    assert frame["source"].str.len().min() > 5


def _write_broken(tmp_path, name, row, column, value):
    frame = pd.read_csv(DATA_DIR / f"{name}.csv", dtype=str, keep_default_na=False)
    frame.loc[row, column] = value
    frame.to_csv(tmp_path / f"{name}.csv", index=False)


@pytest.mark.parametrize(
    ("name", "column", "value", "message"),
    [
        ("hardware", "memory_bandwidth_gb_per_s", "fast", "'fast' is not a number"),
        ("hardware", "memory_capacity_gb", "-80", "below the minimum"),
        ("hardware", "source", "", "empty, but required"),
        ("hardware", "family", "toaster", "is not one of"),
        ("models", "layers", "80.5", "not a whole number"),
        ("results", "audited", "maybe", "is not one of yes, no, unverified"),
        ("results", "value", "inf", "not a finite number"),
    ],
)
def test_malformed_cell_is_named_by_file_line_and_column(tmp_path, name, column, value, message):
    _write_broken(tmp_path, name, 2, column, value)
    with pytest.raises(DataError) as caught:
        load_table(name, data_dir=tmp_path)
    text = str(caught.value)
    assert f"{name}.csv" in text
    assert "line 4" in text  # row index 2 is the third record, below the header
    assert repr(column) in text
    assert message in text


def test_missing_column_and_duplicate_names_are_errors(tmp_path):
    frame = pd.read_csv(DATA_DIR / "models.csv", dtype=str, keep_default_na=False)
    frame.drop(columns=["kv_heads"]).to_csv(tmp_path / "models.csv", index=False)
    with pytest.raises(DataError, match="missing column.*kv_heads"):
        load_table("models", data_dir=tmp_path)
    pd.concat([frame, frame.iloc[:1]]).to_csv(tmp_path / "models.csv", index=False)
    with pytest.raises(DataError, match="duplicate value"):
        load_table("models", data_dir=tmp_path)


def test_unknown_table_chip_model_and_result_raise_value_errors():
    with pytest.raises(ValueError, match="name: unknown table 'chips'.*hardware"):
        load_table("chips")
    with pytest.raises(ValueError, match="unknown chip 'H900'.*NVIDIA H100 SXM"):
        chip("H900")
    with pytest.raises(ValueError, match="unknown model 'Llama 9'.*Llama 2 70B"):
        model("Llama 9")
    with pytest.raises(ValueError, match="result_id: unknown id"):
        result("no-such-result")


def test_specs_are_converted_to_si_units():
    h100 = chip("NVIDIA H100 SXM")
    assert h100.memory_capacity_bytes == pytest.approx(80e9)
    assert h100.memory_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert h100.bf16_flop_per_s == pytest.approx(989.4e12, rel=1e-3)
    assert all(isinstance(name, str) for name in chips() + models())


def test_published_floors_for_70b_fp16_are_reproduced_from_the_data():
    # CONTENT: 70B at FP16 = 140 GB; H100 ~41.8 ms per token; H200 ~29.2 ms per token.
    weights_bytes = 70e9 * 2
    h100 = weights_bytes / chip("NVIDIA H100 SXM").memory_bandwidth_bytes_per_s
    h200 = weights_bytes / chip("NVIDIA H200 SXM").memory_bandwidth_bytes_per_s
    assert h100 == pytest.approx(41.8e-3, abs=0.05e-3)
    assert h200 == pytest.approx(29.2e-3, abs=0.05e-3)


def test_models_match_their_published_shapes():
    llama70 = model("Llama 2 70B")
    assert (llama70.layers, llama70.hidden_size, llama70.kv_heads, llama70.head_dim) == (
        80, 8192, 8, 128)
    assert model("Llama 3.1 405B").kv_heads == 8  # early configs said 16
    for name in models():
        spec = model(name)
        assert spec.params_active <= spec.params_total
        if spec.attention != "mla":
            assert spec.attention_heads % spec.kv_heads == 0


def test_corrected_results_are_used_and_audit_states_are_honest():
    b200_offline = result("mlperf-v5.0-nvidia-8xb200-offline")
    assert b200_offline["value"] == pytest.approx(98858, rel=1e-4)
    assert b200_offline["audited"] == "yes"
    assert "v5.0" in b200_offline["date_or_round"]
    rack = load_table("results")
    claims = rack[rack["value"].between(869_000, 869_400)]
    assert set(claims["audited"]) == {"unverified"}
    assert math.isclose(result("llmperf-groq-l2-70b-throughput")["value"], 185.05, rel_tol=1e-3)
