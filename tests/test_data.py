"""The data tables load, carry their sources, and malformed rows are named precisely."""

from __future__ import annotations

import csv
import math

import pandas as pd
import pytest

from inferlab.common.data import DATA_DIR, MAX_CELL_CHARS, DataError, load_table, result
from inferlab.common.schemas import SCHEMAS
from inferlab.model.specs import chip, chips, model, models


@pytest.mark.parametrize("name", SCHEMAS)
def test_every_table_loads_and_every_row_has_a_source(name):
    frame = load_table(name)
    assert len(frame) > 0
    assert list(frame.columns) == list(SCHEMAS[name])
    assert frame["source"].str.len().min() > 5


def _table(name):
    """The header and rows of a real table, as the csv module reads them."""
    with (DATA_DIR / f"{name}.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def _write(tmp_path, name, header, rows):
    path = tmp_path / f"{name}.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows([header, *rows])
    return path


def _corrupt(tmp_path, name, row, column, value):
    """A copy of a real table with one cell replaced; returns the 1-based column."""
    header, rows = _table(name)
    rows[row][header.index(column)] = value
    _write(tmp_path, name, header, rows)
    return header.index(column) + 1


def _edited(tmp_path, name, old, new):
    """A copy of a real table with the first occurrence of some raw bytes replaced."""
    raw = (DATA_DIR / f"{name}.csv").read_bytes()
    assert old in raw
    (tmp_path / f"{name}.csv").write_bytes(raw.replace(old, new, 1))


def _error(tmp_path, name):
    with pytest.raises(DataError) as caught:
        load_table(name, data_dir=tmp_path)
    return str(caught.value)


def _at(name, line, index, column):
    """How an error names the file, the physical line and the column."""
    return f"{name}.csv, line {line}, column {index} ({column!r})"


@pytest.mark.parametrize(
    ("name", "column", "value", "message"),
    [
        ("hardware", "memory_bandwidth_gb_per_s", "fast", "'fast' is not a number"),
        ("hardware", "memory_capacity_gb", "-80", "outside the plausible range 4 to 1,000 GB"),
        ("hardware", "source", "", "empty, but required"),
        ("hardware", "source", "TODO", "'TODO' is a placeholder, not a source"),
        ("results", "source", " n/a ", "is a placeholder, not a source"),
        ("mlperf_llm_results", "source", "...", "is a placeholder, not a source"),
        ("prices", "source", "Unknown", "is a placeholder, not a source"),
        ("models", "source", "FIXME", "is a placeholder, not a source"),
        ("stacks", "source", "tbd", "is a placeholder, not a source"),
        ("hardware", "family", "toaster", "is not one of"),
        ("models", "layers", "80.5", "not a whole number"),
        ("results", "audited", "maybe", "is not one of yes, no, unverified"),
        ("results", "value", "inf", "not a finite number"),
        ("results", "value", "NaN", "not a finite number"),
    ],
)
def test_malformed_cell_is_named_by_file_line_and_column(tmp_path, name, column, value, message):
    index = _corrupt(tmp_path, name, 2, column, value)
    text = _error(tmp_path, name)
    # Row index 2 is the third record, below the header: line 4.
    assert _at(name, 4, index, column) in text
    assert message in text


def test_a_byte_order_mark_is_tolerated_and_the_table_loads_identically(tmp_path):
    # Excel's "CSV UTF-8" writes one; it carries no data.
    raw = (DATA_DIR / "hardware.csv").read_bytes()
    (tmp_path / "hardware.csv").write_bytes(b"\xef\xbb\xbf" + raw)
    pd.testing.assert_frame_equal(load_table("hardware", data_dir=tmp_path),
                                  load_table("hardware"))


def test_a_byte_order_mark_does_not_shift_where_errors_are_reported(tmp_path):
    index = _corrupt(tmp_path, "hardware", 0, "name", "")
    path = tmp_path / "hardware.csv"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert _at("hardware", 2, index, "name") in _error(tmp_path, "hardware")


@pytest.mark.parametrize(
    ("old", "new", "line", "index", "column", "message"),
    [
        # "Caf\N{LATIN SMALL LETTER E WITH ACUTE}" saved as Latin-1, in the rack's name.
        (b"NVIDIA GB200 NVL72 (rack)", b"NVIDIA GB200 NVL72 (Caf\xe9)", 6, 1, "name",
         "byte 0xE9 at character 24 of the cell is not UTF-8"),
        # The csv module would read 'NV"Link 5' silently. The first "NVLink 5" is the B200's.
        (b',"NVLink 5, 18 links",', b',NV"Link 5 18 links,', 4, 10, "scaleup",
         "a quote inside an unquoted cell at character"),
        (b'18 links",450', b'18 links"x,450', 2, 10, "scaleup",
         "text after the closing quote at character"),
    ],
)
def test_bad_bytes_and_broken_quoting_are_named_by_line_and_column(
        tmp_path, old, new, line, index, column, message):
    _edited(tmp_path, "hardware", old, new)
    text = _error(tmp_path, "hardware")
    assert _at("hardware", line, index, column) in text
    assert message in text


def test_a_header_that_is_not_utf8_is_named(tmp_path):
    _edited(tmp_path, "models", b"layers", b"l\xffyers")
    assert "models.csv, line 1, column 2: the header is not valid UTF-8" in _error(
        tmp_path, "models")


def test_a_huge_cell_is_named_with_the_limit_not_a_bare_csv_error(tmp_path):
    # The csv module would raise "_csv.Error: field larger than field limit".
    _corrupt(tmp_path, "hardware", 5, "note", "x" * 200_000)
    text = _error(tmp_path, "hardware")
    assert _at("hardware", 7, _table("hardware")[0].index("note") + 1, "note") in text
    assert "200,000 characters" in text
    assert f"at most {MAX_CELL_CHARS:,}" in text


def test_lines_are_physical_below_a_multi_line_note(tmp_path):
    header, rows = _table("hardware")
    rows[0][header.index("note")] = "first line\nsecond line\r\nthird line"
    rows[3][header.index("memory_bandwidth_gb_per_s")] = "fast"
    path = _write(tmp_path, "hardware", header, rows)
    physical = next(number for number, line in enumerate(
        path.read_text(encoding="utf-8").splitlines(), start=1) if line.startswith(rows[3][0]))
    assert physical == 7  # record 4 (line 5), pushed down by the note's two line breaks
    assert _at("hardware", physical, 5, "memory_bandwidth_gb_per_s") in _error(
        tmp_path, "hardware")


def test_a_multi_line_note_loads_with_its_line_breaks(tmp_path):
    header, rows = _table("hardware")
    rows[1][header.index("note")] = 'one "quoted" word,\nand a second line'
    _write(tmp_path, "hardware", header, rows)
    frame = load_table("hardware", data_dir=tmp_path)
    assert frame["note"][1] == 'one "quoted" word,\nand a second line'
    assert frame.drop(columns="note").equals(load_table("hardware").drop(columns="note"))


def test_a_trailing_comma_in_the_header_is_an_unnamed_column(tmp_path):
    header, rows = _table("models")
    _write(tmp_path, "models", [*header, ""], rows)
    assert (f"models.csv, line 1, column {len(header) + 1}: an unnamed column (a trailing "
            "comma") in _error(tmp_path, "models")


def test_a_duplicate_header_column_is_named_not_silently_overwritten(tmp_path):
    header, rows = _table("hardware")
    _write(tmp_path, "hardware", [*header, "memory_bandwidth_gb_per_s"],
           [[*row, "1"] for row in rows])
    assert (f"hardware.csv, line 1, column {len(header) + 1}: 'memory_bandwidth_gb_per_s' "
            "appears twice (also column 5)") in _error(tmp_path, "hardware")


def test_a_header_only_table_is_an_error(tmp_path):
    header, _ = _table("stacks")
    _write(tmp_path, "stacks", header, [])
    assert "stacks.csv, line 2: the header has no rows below it" in _error(tmp_path, "stacks")
    (tmp_path / "stacks.csv").write_bytes(b"")
    assert "stacks.csv, line 1: the file is empty" in _error(tmp_path, "stacks")


def test_missing_and_unexpected_columns_are_named(tmp_path):
    header, rows = _table("models")
    gone = header.index("kv_heads")
    _write(tmp_path, "models", header[:gone] + header[gone + 1:],
           [row[:gone] + row[gone + 1:] for row in rows])
    assert "models.csv, line 1: missing column(s) kv_heads" in _error(tmp_path, "models")
    _write(tmp_path, "models", [*header, "colour"], [[*row, "red"] for row in rows])
    assert f"unexpected column(s) 'colour' (column {len(header) + 1})" in _error(tmp_path,
                                                                                 "models")


@pytest.mark.parametrize("change", [-1, 1])
def test_a_row_with_too_few_or_too_many_cells_is_an_error(tmp_path, change):
    header, rows = _table("hardware")
    cells = len(header) + change
    rows[2] = (rows[2] + ["extra"])[:cells]
    _write(tmp_path, "hardware", header, rows)
    text = _error(tmp_path, "hardware")
    # Named at the first missing cell, or at the first cell too many.
    assert f"hardware.csv, line 4, column {cells} " in text
    assert f"the row has {cells} cells but the header has {len(header)} columns" in text


def test_a_quote_that_never_closes_is_named_where_it_opens(tmp_path):
    header, rows = _table("stacks")
    path = _write(tmp_path, "stacks", header, rows)
    with path.open("a", encoding="utf-8") as handle:
        handle.write('extra,0.5,10,0.8,1.0,5.0,0.2,x,"a source that never closes,\nnote\n')
    text = _error(tmp_path, "stacks")
    assert _at("stacks", len(rows) + 2, 9, "source") in text
    assert "this quoted cell is never closed" in text


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("1_000", "character '_', U+005F"),
        ("\N{ARABIC-INDIC DIGIT EIGHT}\N{ARABIC-INDIC DIGIT ZERO}", "U+0668"),
        ("\N{FULLWIDTH DIGIT EIGHT}\N{FULLWIDTH DIGIT ZERO}", "U+FF18"),
        ("8 0", "character ' ', U+0020"),
        ("1.2.3", "is not a number;"),
    ],
)
def test_numbers_python_would_accept_but_a_table_should_not(tmp_path, value, detail):
    index = _corrupt(tmp_path, "hardware", 0, "memory_capacity_gb", value)
    text = _error(tmp_path, "hardware")
    assert _at("hardware", 2, index, "memory_capacity_gb") in text
    assert f"{value!r} is not a number" in text
    assert detail in text


def test_digits_in_a_whole_number_column_must_be_ascii(tmp_path):
    index = _corrupt(tmp_path, "models", 0, "layers", "\N{ARABIC-INDIC DIGIT THREE}2")
    assert _at("models", 2, index, "layers") in _error(tmp_path, "models")


def test_duplicate_leaderboard_rank_is_named_with_both_lines(tmp_path):
    index = _corrupt(tmp_path, "leaderboard", 5, "rank", "3")
    text = _error(tmp_path, "leaderboard")
    assert _at("leaderboard", 7, index, "rank") in text
    assert "duplicate value 3 of the key 'rank', first on line 4" in text


def test_duplicate_names_differing_only_in_case_and_spaces_are_duplicates(tmp_path):
    header, rows = _table("models")
    copy = list(rows[2])
    copy[0] = " llama 2   70b"
    _write(tmp_path, "models", header, [*rows, copy])
    text = _error(tmp_path, "models")
    assert _at("models", len(rows) + 2, 1, "name") in text
    assert "first on line 4" in text


def test_duplicate_multi_column_key_is_an_error(tmp_path):
    header, rows = _table("mlperf_engine_configs")
    _write(tmp_path, "mlperf_engine_configs", header, [*rows, rows[0]])
    text = _error(tmp_path, "mlperf_engine_configs")
    # The copy of the first row is the last line: the header, then every row.
    assert _at("mlperf_engine_configs", len(rows) + 2, 1, "benchmark") in text
    assert ("of the key 'benchmark', 'round', 'submitter', 'system', 'scenario', first on "
            "line 2") in text


@pytest.mark.parametrize(
    ("row", "column", "value", "message"),
    [
        # Zero bandwidth or capacity.
        (0, "memory_bandwidth_gb_per_s", "0",
         "0 is outside the plausible range 100 to 50,000 GB/s"),
        (0, "memory_capacity_gb", "0", "0 is outside the plausible range 4 to 1,000 GB"),
        # 4.8 TB/s typed into the GB/s column of an HBM GPU (the H200).
        (1, "memory_bandwidth_gb_per_s", "4.8",
         "4.8 is outside the plausible range 100 to 50,000 GB/s per chip for family 'gpu'"),
        # A rack is checked per chip: 72 chips at 8 TB/s is 576,000 GB/s, not 57,600.
        (4, "memory_bandwidth_gb_per_s", "576",
         "576 over 72 chips is 8 per chip, which is outside the plausible range 100 to "
         "50,000 GB/s"),
        # A desktop is allowed far less bandwidth than a GPU, but not nothing.
        (20, "memory_bandwidth_gb_per_s", "5.12",
         "outside the plausible range 10 to 2,000 GB/s per chip for family 'cpu'"),
        (0, "bf16_dense_tflop_per_s", "989400", "outside the plausible range 10 to 50,000 TFLOP/s"),
        (18, "memory_capacity_gb", "230", "range 0.01 to 10 GB per chip for family 'lpu'"),
    ],
)
def test_implausible_hardware_figures_name_the_allowed_range(tmp_path, row, column, value, message):
    index = _corrupt(tmp_path, "hardware", row, column, value)
    text = _error(tmp_path, "hardware")
    assert _at("hardware", row + 2, index, column) in text
    assert message in text


def test_the_cpu_range_is_not_granted_to_a_gpu(tmp_path):
    # 51.2 GB/s is a real desktop's bandwidth; on a GPU row it is a typo.
    _corrupt(tmp_path, "hardware", 0, "memory_bandwidth_gb_per_s", "51.2")
    assert "family 'gpu'" in _error(tmp_path, "hardware")


@pytest.mark.parametrize(
    ("name", "row", "column", "value", "message"),
    [
        ("models", 2, "params_total", "70",
         "70 is outside the plausible range 1,000,000 to 10,000,000,000,000 parameters"),
        ("results", 3, "value", "7200", "range 0.0001 to 3,600 s for unit 's'"),
        ("results", 0, "unit", "tokens/min", "is not one of tokens/s, s, x, %"),
        ("mlperf_llama2_70b", 0, "tokens_per_s", "3062720000", "per accelerator"),
        ("stacks", 0, "compute_efficiency", "91.14", "range 0.01 to 1 (a fraction of peak"),
        ("stacks", 0, "clock_share", "1.5", "range 0 to 1 (the share of the fixed cost"),
        ("leaderboard", 0, "ttft_ms", "0", "range 1 to 600,000 ms"),
        ("mlperf_engine_configs", 0, "tp", "0", "range 1 to 64"),
    ],
)
def test_implausible_figures_in_other_tables(tmp_path, name, row, column, value, message):
    index = _corrupt(tmp_path, name, row, column, value)
    text = _error(tmp_path, name)
    assert _at(name, row + 2, index, column) in text
    assert message in text


@pytest.mark.parametrize(
    ("name", "row", "changes", "column", "message"),
    [
        # Mixtral: active parameters above the total.
        ("models", 7, {"params_active": "93405585408"}, "params_active",
         "93,405,585,408 is more than params_total 46,702,792,704"),
        # A dense model whose active count differs from its total.
        ("models", 0, {"params_active": "6000000000"}, "params_active", "experts is 1"),
        ("models", 2, {"kv_heads": "128"}, "kv_heads", "128 is more than attention_heads 64"),
        ("models", 2, {"kv_heads": "48"}, "kv_heads", "48 does not divide attention_heads 64"),
        ("models", 0, {"kv_heads": "8"}, "kv_heads", "but attention is 'mha'"),
        ("models", 2, {"kv_heads": "64"}, "kv_heads", "but attention is 'gqa'"),
        ("models", 7, {"experts_per_token": "9"}, "experts_per_token", "more than experts 8"),
        ("hardware", 0, {"fp8_dense_tflop_per_s": "500"}, "fp8_dense_tflop_per_s",
         "500 is below bf16_dense_tflop_per_s 989.4"),
    ],
)
def test_cross_field_rules_name_the_column_to_blame(tmp_path, name, row, changes, column, message):
    header, rows = _table(name)
    for changed, value in changes.items():
        rows[row][header.index(changed)] = value
    _write(tmp_path, name, header, rows)
    text = _error(tmp_path, name)
    assert _at(name, row + 2, header.index(column) + 1, column) in text
    assert message in text


@pytest.mark.parametrize("name", SCHEMAS)
def test_every_number_column_declares_a_plausible_range_with_a_reason(name):
    for column_name, column in SCHEMAS[name].items():
        if column.kind in ("text", "source"):
            assert column.plausible is None
            continue
        plausible = column.plausible
        ranges = (plausible.ranges.values() if hasattr(plausible, "ranges") else [plausible])
        if hasattr(plausible, "ranges"):
            # One range for every value the other column may take, no more.
            other = SCHEMAS[name][plausible.column]
            assert set(plausible.ranges) == set(other.allowed), column_name
            assert other.required
        for bounds in ranges:
            assert bounds.low <= bounds.high, column_name
            assert len(bounds.why) > 10, column_name
            if bounds.per is not None:
                assert SCHEMAS[name][bounds.per].required, column_name


@pytest.mark.parametrize("name", SCHEMAS)
def test_the_strict_reader_reads_every_real_table_as_the_csv_module_does(name):
    header, rows = _table(name)
    frame = load_table(name)
    assert list(frame.columns) == header
    for column in header:
        if SCHEMAS[name][column].kind in ("text", "source"):
            expected = [row[header.index(column)].strip() for row in rows]
            assert list(frame[column].fillna("")) == expected, column


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


def test_each_held_out_latency_row_is_a_valid_run_within_its_benchmarks_bounds():
    from inferlab.benchmark.mlperf import bounds
    results = load_table("mlperf_llm_results").set_index("id")
    latencies = load_table("mlperf_llm_latencies")
    assert set(latencies["id"]) <= set(results.index)
    assert len(latencies) == len(set(latencies["id"]))
    for row in latencies.to_dict("records"):
        result = results.loc[row["id"]]
        assert result["scenario"] in ("Server", "Interactive"), row["id"]
        limit = bounds(result["benchmark"], result["scenario"])
        assert row["ttft_p99_ms"] <= limit.ttft_s * 1e3, row["id"]
        assert row["tpot_p50_ms"] <= row["tpot_p99_ms"] <= limit.tpot_s * 1e3, row["id"]
        # One query's outlier can lift the mean past the p99; the row's note must say so.
        assert (row["tpot_mean_ms"] <= row["tpot_p99_ms"]
                or "outlier" in str(row["note"])), row["id"]
        # A run completes what it was issued, within LoadGen's Poisson luck and its tail.
        assert abs(row["completed_samples_per_s"] / row["scheduled_samples_per_s"] - 1) < 0.05
        # Each query's tokens after the first take at least the median TPOT each.
        assert row["mean_latency_s"] * 1e3 > row["tpot_p50_ms"], row["id"]


def test_each_latency_row_is_an_audited_bounded_result_within_its_bounds():
    from inferlab.benchmark.mlperf import bounds
    results = load_table("mlperf_llama2_70b").set_index("id")
    latencies = load_table("mlperf_llama2_70b_latencies")
    assert set(latencies["id"]) <= set(results.index)
    for row in latencies.to_dict("records"):
        result = results.loc[row["id"]]
        limit = bounds("llama2-70b", result["scenario"])
        # Every row is a valid run, so its p99s meet the scenario's own bounds.
        assert row["ttft_p99_ms"] <= limit.ttft_s * 1e3, row["id"]
        assert row["tpot_p99_ms"] <= limit.tpot_s * 1e3, row["id"]
        # LoadGen schedules at the target the submitter set, within its Poisson luck.
        assert abs(row["scheduled_samples_per_s"] / row["target_qps"] - 1) < 0.02, row["id"]
        assert result["round"] == "v5.1" and result["scenario"] in ("Server", "Interactive")
