"""Load the book's sourced tables from ``data/`` through one checked loader.

Every table is a tidy CSV: one row per thing, units in the column names, and a
``source`` column. :func:`load_table` checks each table against its schema and
names the file, row and column of anything malformed, so that a bad row is
caught where it is added rather than as a wrong figure three chapters later.

Used by every chapter; the tables themselves are described in the data appendix.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


class DataError(ValueError):
    """A table in ``data/`` does not match its schema."""


@dataclass(frozen=True)
class Column:
    """What one column must hold.

    ``kind`` is ``"text"``, ``"number"`` or ``"integer"``. Numbers may be bounded
    by ``minimum`` (inclusive) and text restricted to ``allowed`` values.
    ``required`` columns may not be empty in any row.
    """

    kind: str
    required: bool = True
    minimum: float | None = None
    allowed: tuple[str, ...] | None = None


def _text(required: bool = True, allowed: tuple[str, ...] | None = None) -> Column:
    return Column("text", required=required, allowed=allowed)


def _number(required: bool = True, minimum: float | None = 0.0) -> Column:
    return Column("number", required=required, minimum=minimum)


def _integer(required: bool = True, minimum: float | None = 1) -> Column:
    return Column("integer", required=required, minimum=minimum)


AUDIT_STATES = ("yes", "no", "unverified")

#: The columns of each table in ``data/``, in file order.
SCHEMAS: dict[str, dict[str, Column]] = {
    "hardware": {
        "name": _text(),
        "family": _text(allowed=("gpu", "fixed-function", "lpu", "wafer-scale", "system", "cpu")),
        "chips": _integer(),
        "memory_capacity_gb": _number(),
        "memory_bandwidth_gb_per_s": _number(),
        "bf16_dense_tflop_per_s": _number(required=False),
        "fp8_dense_tflop_per_s": _number(required=False),
        "fp4_dense_tflop_per_s": _number(required=False),
        "int8_dense_top_per_s": _number(required=False),
        "scaleup": _text(required=False),
        "scaleup_gb_per_s_per_direction": _number(required=False),
        "scaleup_domain_chips": _integer(required=False),
        "scaleout_gb_per_s_per_direction": _number(required=False),
        "source": _text(),
        "note": _text(required=False),
    },
    "models": {
        "name": _text(),
        "layers": _integer(),
        "hidden_size": _integer(),
        "attention_heads": _integer(),
        "kv_heads": _integer(),
        "head_dim": _integer(),
        "intermediate_size": _integer(),
        "vocab_size": _integer(),
        "params_total": _number(minimum=1),
        "params_active": _number(minimum=1),
        "experts": _integer(),
        "experts_per_token": _integer(),
        "context_length_tokens": _integer(),
        "attention": _text(allowed=("mha", "gqa", "mla")),
        "source": _text(),
        "note": _text(required=False),
    },
    "results": {
        "id": _text(),
        "system": _text(),
        "accelerator": _text(required=False),
        "accelerator_count": _integer(required=False),
        "model": _text(),
        "scenario": _text(),
        "metric": _text(),
        "value": _number(),
        "unit": _text(),
        "date_or_round": _text(),
        "audited": _text(allowed=AUDIT_STATES),
        "source": _text(),
        "note": _text(required=False),
    },
    "mlperf_llama2_70b": {
        "id": _text(),
        "round": _text(allowed=("v4.1", "v5.0", "v5.1")),
        "submitter": _text(),
        "system": _text(),
        "accelerator": _text(),
        "accelerators": _integer(),
        "software": _text(),
        "precision": _text(allowed=("fp16", "bf16", "fp8", "fp4", "int4")),
        "division": _text(allowed=("closed", "open")),
        "category": _text(allowed=("available", "preview", "rdi")),
        "scenario": _text(allowed=("Offline", "Server", "Interactive")),
        "tokens_per_s": _number(minimum=1),
        "source": _text(),
        "note": _text(required=False),
    },
    "mlperf_engine_configs": {
        "round": _text(allowed=("v4.1", "v5.0", "v5.1")),
        "submitter": _text(),
        "system": _text(),
        "accelerator": _text(),
        "scenario": _text(allowed=("Offline", "Server", "Interactive")),
        "tp": _integer(),
        "pp": _integer(),
        "max_batch": _integer(),
        "max_tokens_per_step": _integer(),
        "chunked_prefill": _text(allowed=("yes", "no", "not recorded")),
        "weights": _text(allowed=("fp16", "bf16", "fp8", "fp4", "int4")),
        "kv_cache": _text(),
        "cuda_graphs": _text(allowed=("yes", "no")),
        "target_qps": _number(),
        "source": _text(),
        "note": _text(required=False),
    },
    "stacks": {
        "name": _text(),
        "compute_efficiency": _number(),
        "step_overhead_ms": _number(),
        "memory_efficiency": _number(),
        "overlap": _number(),
        "allreduce_latency_us": _number(),
        "fitted_on": _text(),
        "source": _text(),
        "note": _text(required=False),
    },
    "leaderboard": {
        "rank": _integer(),
        "model": _text(),
        "provider": _text(),
        "hardware_family": _text(),
        "output_tokens_per_s": _number(),
        "ttft_ms": _number(),
        "model_kind": _text(required=False),
        "source": _text(),
        "note": _text(required=False),
    },
}


#: The columns that identify a row of each table. No two rows may share them.
KEYS: dict[str, tuple[str, ...]] = {
    "hardware": ("name",),
    "models": ("name",),
    "results": ("id",),
    "mlperf_llama2_70b": ("id",),
    "mlperf_engine_configs": ("round", "submitter", "system", "scenario"),
    "stacks": ("name",),
    "leaderboard": ("rank", "model", "provider"),
}


def _parse(value: str, column: Column) -> object:
    """Turn one CSV cell into a Python value, or raise ValueError saying why not."""
    if column.kind == "text":
        if column.allowed is not None and value not in column.allowed:
            raise ValueError(f"{value!r} is not one of {', '.join(column.allowed)}")
        return value
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    if column.kind == "integer":
        if number != int(number):
            raise ValueError(f"{value!r} is not a whole number")
        number = int(number)
    if column.minimum is not None and number < column.minimum:
        raise ValueError(f"{value!r} is below the minimum {column.minimum:g}")
    return number


def load_table(name: str, data_dir: Path | str | None = None) -> pd.DataFrame:
    """Read ``data/<name>.csv``, check it against its schema, return a DataFrame.

    Parameters
    ----------
    name:
        One of the keys of :data:`SCHEMAS` (``"hardware"``, ``"models"``,
        ``"results"``, ``"leaderboard"``).
    data_dir:
        Folder holding the CSV files; the repository's ``data/`` by default.

    Raises
    ------
    ValueError
        For an unknown table name.
    DataError
        (a ``ValueError``) naming the file, the line and the column of a missing
        column, an empty required cell, a cell of the wrong type or out of range,
        or a duplicate name.
    """
    if name not in SCHEMAS:
        raise ValueError(f"name: unknown table {name!r}; allowed: {', '.join(sorted(SCHEMAS))}")
    schema = SCHEMAS[name]
    path = Path(data_dir) if data_dir is not None else DATA_DIR
    path = path / f"{name}.csv"
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [column for column in schema if column not in header]
        if missing:
            raise DataError(f"{path}: missing column(s) {', '.join(missing)}")
        extra = [column for column in header if column not in schema]
        if extra:
            raise DataError(f"{path}: unexpected column(s) {', '.join(extra)}")
        records = []
        # Line 1 is the header, so the first record is on line 2.
        for line, row in enumerate(reader, start=2):
            if None in row:
                raise DataError(f"{path}, line {line}: more cells than the header has columns")
            record = {}
            for column_name, column in schema.items():
                cell = (row[column_name] or "").strip()
                if cell == "":
                    if column.required:
                        raise DataError(
                            f"{path}, line {line}, column {column_name!r}: empty, but required"
                        )
                    record[column_name] = None if column.kind == "text" else math.nan
                    continue
                try:
                    record[column_name] = _parse(cell, column)
                except ValueError as error:
                    raise DataError(
                        f"{path}, line {line}, column {column_name!r}: {error}"
                    ) from None
            records.append(record)
    frame = pd.DataFrame.from_records(records, columns=list(schema))
    key = list(KEYS[name])
    duplicated = frame[frame.duplicated(subset=key)]
    if not duplicated.empty:
        value = tuple(duplicated.iloc[0][key]) if len(key) > 1 else duplicated.iloc[0][key[0]]
        columns = ", ".join(repr(column) for column in key)
        raise DataError(f"{path}, column {columns}: duplicate value {value!r}")
    return frame


def result(result_id: str, data_dir: Path | str | None = None) -> dict:
    """One published figure from ``data/results.csv``, as a dict of its columns.

    Chapters quote reported figures through this, so the value, its unit, its
    source and whether it was audited travel together. Raises ``ValueError``
    naming the known ids if ``result_id`` is not one of them.
    """
    frame = load_table("results", data_dir)
    rows = frame[frame["id"] == result_id]
    if rows.empty:
        raise ValueError(
            f"result_id: unknown id {result_id!r}; known: {', '.join(frame['id'])}"
        )
    return rows.iloc[0].to_dict()
