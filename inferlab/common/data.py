"""Load the book's sourced tables from ``data/`` through one checked loader.

Every table is a tidy CSV: one row per thing, units in the column names, and a
``source`` column. :func:`load_table` checks each table against its schema and
names the file, the physical line and the column of anything malformed, so that
a bad row is caught where it is added rather than as a wrong figure three
chapters later.

The checks, in the order they run:

1. Bytes. The file must be UTF-8. A byte-order mark at the very start is
   tolerated and dropped: Excel's "CSV UTF-8" export writes one, it carries no
   data, and the table then loads exactly as it would without it. Any other
   undecodable byte is reported with its line, column and value.
2. Syntax. The CSV is split by a strict reader (RFC 4180 quoting): a quote
   inside an unquoted cell, text after a closing quote or a quote that never
   closes is an error, as is a cell longer than ``MAX_CELL_CHARS``. Lines
   are counted physically, so a quoted cell spanning several lines does not
   shift the line numbers of what follows.
3. Header. Every column of the schema, no other, none twice and none unnamed
   (a trailing comma), and at least one row below it.
4. Cells. Each row has as many cells as the header; each cell is empty only if
   its column allows it, one of the allowed values for text, and for numbers
   plain ASCII decimal notation (``1_000``, ``1,000`` or non-ASCII digits,
   which Python's ``float`` would accept, are refused).
5. Plausibility. Every number column declares the range a real value can take,
   with the reason (a TB/s figure typed into a GB/s column, a zero bandwidth);
   some ranges depend on another column (the hardware family, the unit) or are
   per chip (the value divided by the row's chip count).
6. Cross-field rules (``RULES``): active parameters at most the total,
   key/value heads dividing the attention heads, and the like.
7. Keys (``KEYS``): no two rows share a key.

Used by every chapter; the tables themselves are described in the data appendix.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import pandas as pd


def _tables_folder() -> Path:
    """The folder holding the tables: the package ``inferlab.tables``.

    ``pyproject.toml`` installs the repository's ``data/`` as that package, so a wheel
    or ``pip install .`` carries it inside ``inferlab``, and an editable install maps it
    to the repository's own ``data/`` (an edit to a CSV there counts at once). A source
    tree put on ``sys.path`` without installing has no such package; there the tables
    are the ``data/`` next to ``inferlab/``.
    """
    try:
        folder = resources.files("inferlab.tables")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "data"
    if not isinstance(folder, Path):  # e.g. imported from a zip archive
        raise ImportError(f"inferlab.tables: the tables must be files on disk, found {folder!r}; "
                          f"install inferlab with pip rather than importing it from an archive")
    return folder


#: The folder the tables are read from (``data/`` of the repository, installed as
#: ``inferlab.tables``); the sample texts are in its ``texts/`` and the benchmark
#: tools' traces in ``traces/``.
DATA_DIR = _tables_folder()

#: The longest cell the loader accepts, in characters. The longest real cell (a
#: hardware source list) is about 1,500 characters; a cell many times that is a
#: paste accident, such as a whole web page in a note.
MAX_CELL_CHARS = 10_000


class DataError(ValueError):
    """A table in ``data/`` does not match its schema."""


@dataclass(frozen=True)
class _Range:
    """The values a real number in a column can take, and why.

    ``low`` and ``high`` are inclusive. With ``per`` set, the value is first
    divided by that column of the same row (``"chips"``: a rack's bandwidth is
    checked per chip, against the same range as a single chip's).
    """

    low: float
    high: float
    unit: str
    why: str
    per: str | None = None


@dataclass(frozen=True)
class _ByColumn:
    """A plausible range that depends on the value of another column of the row."""

    column: str
    ranges: Mapping[str, _Range]


@dataclass(frozen=True)
class Column:
    """What one column must hold.

    ``kind`` is ``"text"``, ``"source"`` (text that may not be a placeholder such as
    ``TODO``), ``"number"`` or ``"integer"``. Text may be restricted
    to ``allowed`` values. Numbers must lie in their ``plausible`` range, which is
    either one range or one per value of another column. ``required`` columns may
    not be empty in any row.
    """

    kind: str
    required: bool = True
    allowed: tuple[str, ...] | None = None
    plausible: _Range | _ByColumn | None = None


#: What a ``source`` cell may not be, a note to fill it in later. Compared case-blind,
#: after stripping spaces; a cell of dots only ("...", "…") is one too.
PLACEHOLDER_SOURCES = ("todo", "tbd", "tbc", "fixme", "xxx", "n/a", "na", "unknown", "?")


def _text(required: bool = True, allowed: tuple[str, ...] | None = None) -> Column:
    return Column("text", required=required, allowed=allowed)


def _source() -> Column:
    """A required ``source`` cell, which must name where a figure was published."""
    return Column("source")


def _number(plausible: _Range | _ByColumn, required: bool = True) -> Column:
    return Column("number", required=required, plausible=plausible)


def _integer(plausible: _Range | _ByColumn, required: bool = True) -> Column:
    return Column("integer", required=required, plausible=plausible)


AUDIT_STATES = ("yes", "no", "unverified")
PRECISIONS = ("fp16", "bf16", "fp8", "fp4", "int4")
ROUNDS = ("v4.1", "v5.0", "v5.1")
SCENARIOS = ("Offline", "Server", "Interactive")

# Hardware ranges per chip. A row describes ``chips`` chips (a card, a server, a
# rack), so capacity, bandwidth and peak rates are divided by ``chips`` first.
_ACCELERATOR_MEMORY = _Range(
    4, 1_000, "GB",
    "DRAM per accelerator chip: 16 GB (TPU v5e) to 288 GB of HBM3e, with room for the "
    "next generations", per="chips")
_ACCELERATOR_BANDWIDTH = _Range(
    100, 50_000, "GB/s",
    "DRAM bandwidth per accelerator chip: ~450 GB/s for GDDR cards, 8,000 GB/s for "
    "HBM3e (B200), ~20,000 announced for HBM4; a value of a few units is TB/s typed "
    "into this GB/s column", per="chips")
_PEAK = _Range(
    10, 50_000, "TFLOP/s",
    "dense peak per chip: ~190 (Inferentia2, GroqChip) to 10,000 at FP4 (GB200); "
    "below 10 is PFLOP/s, above 50,000 GFLOP/s typed into this TFLOP/s column",
    per="chips")
_FAMILIES = ("gpu", "fixed-function", "lpu", "wafer-scale", "system", "cpu")

#: The columns of each table in ``data/``, in file order.
SCHEMAS: dict[str, dict[str, Column]] = {
    "hardware": {
        "name": _text(),
        "family": _text(allowed=_FAMILIES),
        "chips": _integer(_Range(
            1, 100_000, "chips", "a row is one chip, a card, a server or a rack (72 GPUs)")),
        "memory_capacity_gb": _number(_ByColumn("family", {
            "gpu": _ACCELERATOR_MEMORY,
            "fixed-function": _ACCELERATOR_MEMORY,
            "system": _ACCELERATOR_MEMORY,
            "lpu": _Range(0.01, 10, "GB", "on-chip SRAM only: a GroqChip holds 230 MB",
                          per="chips"),
            "wafer-scale": _Range(1, 1_000, "GB", "on-wafer SRAM: a WSE-3 holds 44 GB",
                                  per="chips"),
            "cpu": _Range(1, 10_000, "GB", "the RAM of a laptop, desktop or server",
                          per="chips"),
        })),
        "memory_bandwidth_gb_per_s": _number(_ByColumn("family", {
            "gpu": _ACCELERATOR_BANDWIDTH,
            "fixed-function": _ACCELERATOR_BANDWIDTH,
            "system": _ACCELERATOR_BANDWIDTH,
            "lpu": _Range(10_000, 1_000_000, "GB/s",
                          "on-chip SRAM: a GroqChip streams 80 TB/s", per="chips"),
            "wafer-scale": _Range(1_000_000, 100_000_000, "GB/s",
                                  "on-wafer SRAM: a WSE-3 streams 21 PB/s", per="chips"),
            "cpu": _Range(10, 2_000, "GB/s",
                          "system RAM: 51.2 GB/s for dual-channel DDR4-3200, ~550 for an "
                          "Apple M4 Max, ~800 for an M-series Ultra", per="chips"),
        })),
        "bf16_dense_tflop_per_s": _number(_PEAK, required=False),
        "fp8_dense_tflop_per_s": _number(_PEAK, required=False),
        "fp4_dense_tflop_per_s": _number(_PEAK, required=False),
        "int8_dense_top_per_s": _number(_Range(
            10, 50_000, "TOP/s", "dense INT8 peak per chip, the same span as the FLOP/s "
            "columns", per="chips"), required=False),
        "scaleup": _text(required=False),
        "scaleup_gb_per_s_per_direction": _number(_Range(
            1, 10_000, "GB/s", "per chip and direction: 32 GB/s (PCIe Gen4 x16) to 900 "
            "GB/s (NVLink 5)"), required=False),
        "scaleup_domain_chips": _integer(_Range(
            1, 100_000, "chips", "chips on one scale-up fabric: 1 (none) to 72 (NVL72) "
            "and 256 (a TPU v5e pod)"), required=False),
        "scaleout_gb_per_s_per_direction": _number(_Range(
            1, 1_000, "GB/s", "network per chip and direction: 25-50 GB/s for 200-400 "
            "Gb/s NICs"), required=False),
        "board_power_w": _number(_Range(
            1, 5_000, "W", "one chip's power limit: 350 W (H100 PCIe) to 1,200 W (GB200)",
            per="chips"), required=False),
        "full_power_part": _text(required=False),
        "source": _source(),
        "note": _text(required=False),
    },
    "models": {
        "name": _text(),
        "layers": _integer(_Range(1, 1_000, "layers", "126 in Llama 3.1 405B, the deepest here")),
        "hidden_size": _integer(_Range(64, 100_000, "", "4,096 to 16,384 in the table")),
        "attention_heads": _integer(_Range(1, 1_024, "heads", "32 to 128 in the table")),
        "kv_heads": _integer(_Range(1, 1_024, "heads", "1 (multi-query) to 128 in the table")),
        "head_dim": _integer(_Range(16, 1_024, "", "64 to 256 in published models")),
        "intermediate_size": _integer(_Range(64, 1_000_000, "", "11,008 to 53,248 in the table")),
        "moe_intermediate_size": _integer(_Range(
            64, 1_000_000, "", "one routed expert's width: 768 (Qwen3) to 14,336 (Mixtral)"),
            required=False),
        "vocab_size": _integer(_Range(
            256, 1_000_000, "tokens", "256 byte tokens to ~260,000 (Gemma); 32,000 to "
            "129,280 in the table")),
        "params_total": _number(_Range(
            1e6, 1e13, "parameters", "a toy model to ten trillion; write the count, not "
            "billions: 70 for 70e9 is an error")),
        "params_active": _number(_Range(
            1e6, 1e13, "parameters", "as params_total: the count, not billions")),
        "experts": _integer(_Range(
            1, 10_000, "experts", "1 for a dense model, 256 in DeepSeek-V3")),
        "experts_per_token": _integer(_Range(1, 1_000, "experts", "1 to 8 in the table")),
        "shared_experts": _integer(_Range(
            0, 64, "experts", "experts every token uses: 0, or 1 in DeepSeek-V3 and Llama 4")),
        "dense_layers": _integer(_Range(
            0, 1_000, "layers", "layers with an ordinary MLP: all of a dense model's, 3 in "
            "DeepSeek-V3")),
        "kv_lora_rank": _integer(_Range(
            1, 100_000, "", "multi-head latent attention's cached latent: 512 in DeepSeek-V3"),
            required=False),
        "qk_rope_head_dim": _integer(_Range(
            1, 1_024, "", "multi-head latent attention's rotary key: 64 in DeepSeek-V3"),
            required=False),
        "sliding_window": _integer(_Range(
            1, 10_000_000, "tokens", "the window of local attention: 128 (gpt-oss) to 8,192 "
            "(Llama 4's chunks)"), required=False),
        "sliding_layers": _integer(_Range(
            1, 1_000, "layers", "layers attending within the window"), required=False),
        "tied_embeddings": _text(allowed=("yes", "no")),
        "context_length_tokens": _integer(_Range(
            128, 100_000_000, "tokens", "2,048 (GPT-3) to 10 million (Llama 4 Scout)")),
        "attention": _text(allowed=("mha", "gqa", "mla")),
        "source": _source(),
        "note": _text(required=False),
    },
    "results": {
        "id": _text(),
        "system": _text(),
        "accelerator": _text(required=False),
        "accelerator_count": _integer(_Range(
            1, 1_000_000, "accelerators", "1 to a 72-GPU rack in the table; clusters reach "
            "~10^5"), required=False),
        "model": _text(),
        "scenario": _text(),
        "metric": _text(),
        "value": _number(_ByColumn("unit", {
            "tokens/s": _Range(0.1, 100_000_000, "tokens/s",
                               "one stream on a CPU (~1) to a rack (~10^6)"),
            "s": _Range(0.0001, 3_600, "s", "a latency: under a millisecond to an hour"),
            "x": _Range(0.01, 1_000, "x", "a ratio between two systems"),
            "%": _Range(0, 1_000, "%", "a share or a gain; 20-40 % in the table"),
        })),
        "unit": _text(allowed=("tokens/s", "s", "x", "%")),
        "date_or_round": _text(),
        "audited": _text(allowed=AUDIT_STATES),
        "source": _source(),
        "note": _text(required=False),
    },
    "mlperf_llama2_70b": {
        "id": _text(),
        "round": _text(allowed=ROUNDS),
        "submitter": _text(),
        "system": _text(),
        "accelerator": _text(),
        "accelerators": _integer(_Range(
            1, 10_000, "accelerators", "1 to 48 per submission in the table")),
        "software": _text(),
        "precision": _text(allowed=PRECISIONS),
        "division": _text(allowed=("closed", "open")),
        "category": _text(allowed=("available", "preview", "rdi")),
        "scenario": _text(allowed=SCENARIOS),
        "tokens_per_s": _number(_Range(
            5, 150_000, "tokens/s", "Llama 2 70B per accelerator: ~74 (L40S, Server) to "
            "~13,000 (GB200, Offline), with ten times margin either side",
            per="accelerators")),
        "source": _source(),
        "note": _text(required=False),
    },
    "mlperf_engine_configs": {
        "benchmark": _text(),
        "round": _text(allowed=ROUNDS),
        "submitter": _text(),
        "system": _text(),
        "accelerator": _text(),
        "scenario": _text(allowed=SCENARIOS),
        "tp": _integer(_Range(1, 64, "", "tensor parallelism: 1 to 8 within a node")),
        "pp": _integer(_Range(1, 64, "", "pipeline parallelism: 1 to 8 within a node")),
        "ep": _integer(_Range(1, 256, "", "expert parallelism within an engine: 1 for dense "
                                          "models")),
        # Attention data-parallel over the engine's ranks (TensorRT-LLM's enable_attention_dp):
        # each rank schedules its own requests, max_batch and max_tokens_per_step per rank.
        "attention_dp": _text(allowed=("yes", "no")),
        "max_batch": _integer(_Range(1, 100_000, "sequences", "512 to 3,840 in the table")),
        "max_tokens_per_step": _integer(_Range(
            1, 10_000_000, "tokens", "256 to 65,536 in the table")),
        "chunked_prefill": _text(allowed=("yes", "no", "not recorded")),
        "weights": _text(allowed=PRECISIONS),
        "kv_cache": _text(),
        # Recorded for the Llama 2 70B engines the stacks are fitted on; blank elsewhere.
        "cuda_graphs": _text(allowed=("yes", "no"), required=False),
        "target_qps": _number(_Range(
            0.01, 100_000, "queries/s", "LoadGen's target rate: 29.5 to 376 in the table"),
            required=False),
        # vLLM's num_scheduler_steps and AMD's MIN_REQUIRE_PREFILL_QUERY; blank where the
        # engine has no such setting (read as 1).
        "scheduler_steps": _integer(_Range(1, 64, "steps", "1 to 11 in the table"),
                                    required=False),
        "min_prefill_queries": _integer(_Range(1, 1_000, "queries", "1 to 10 in the table"),
                                        required=False),
        "source": _source(),
        "note": _text(required=False),
    },
    "stacks": {
        "name": _text(),
        "compute_efficiency": _number(_Range(
            0.01, 1, "", "a fraction of peak compute; above 1 beats the datasheet")),
        "step_overhead_ms": _number(_Range(
            0, 1_000, "ms", "a fixed cost per step: 14 to 18 ms as fitted")),
        "memory_efficiency": _number(_Range(
            0.01, 1, "", "a fraction of peak bandwidth; above 1 beats the datasheet")),
        "overlap": _number(_Range(0, 1, "", "the overlapped fraction of a step; 1 is ideal")),
        "allreduce_latency_us": _number(_Range(
            0, 10_000, "us", "one all-reduce hop: a few microseconds on NVLink")),
        "clock_share": _number(_Range(
            0, 1, "", "the share of the fixed cost that runs at the chip's clock")),
        "fitted_on": _text(),
        "source": _source(),
        "note": _text(required=False),
    },
    "leaderboard": {
        "rank": _integer(_Range(1, 10_000, "", "a position on the board")),
        "model": _text(),
        "provider": _text(),
        "hardware_family": _text(),
        "output_tokens_per_s": _number(_Range(
            1, 100_000, "tokens/s", "per-user speed: 35 to 2,100 in the snapshot")),
        "ttft_ms": _number(_Range(
            1, 600_000, "ms", "120 to 1,800 ms in the snapshot; ten minutes is a timeout")),
        "model_kind": _text(required=False),
        "source": _source(),
        "note": _text(required=False),
    },
    "mlperf_llama2_70b_input_lengths": {
        "input_tokens": _integer(_Range(
            1, 1_024, "tokens", "MLPerf keeps prompts of at most 1,024 tokens (48 to 1,021 here)")),
        "samples": _integer(_Range(
            1, 24_576, "samples", "how many of the data set's 24,576 samples have this length")),
        "source": _source(),
        "note": _text(required=False),
    },
    "mlperf_dataset_lengths": {
        "dataset": _text(),
        "input_tokens": _integer(_Range(
            1, 1_000_000, "tokens", "a prompt: a few tokens to 128k (Llama 3.1 405B's)")),
        # Empty where the data set does not record what the model answers (Llama 3.1 8B's).
        "output_tokens": _integer(_Range(
            1, 1_000_000, "tokens", "an answer: one token to a reasoning model's 32k"),
            required=False),
        "samples": _integer(_Range(
            1, 1_000_000, "samples", "how many of the data set's samples have these lengths")),
        "source": _source(),
        "note": _text(required=False),
    },
    "mlperf_llm_results": {
        "id": _text(),
        "round": _text(allowed=ROUNDS),
        "benchmark": _text(),
        "model": _text(),
        "submitter": _text(),
        "system": _text(),
        "accelerator": _text(),
        "accelerators": _integer(_Range(
            1, 10_000, "accelerators", "1 to 72 per submission in the table")),
        "software": _text(),
        "precision": _text(allowed=PRECISIONS),
        "division": _text(allowed=("closed", "open")),
        "category": _text(allowed=("available", "preview", "rdi")),
        "scenario": _text(allowed=SCENARIOS),
        "tokens_per_s": _number(_Range(
            1, 500_000, "tokens/s", "per accelerator: ~20 (Llama 3.1 405B Interactive on an "
            "H100) to ~20,000 (Llama 3.1 8B Offline on a B200), with margin either side",
            per="accelerators")),
        "source": _source(),
        "note": _text(required=False),
    },
    "mlperf_llama2_70b_latencies": {
        "id": _text(),
        "ttft_p99_ms": _number(_Range(
            1, 2_000, "ms", "a valid run's p99 TTFT is within its bound: 450 or 2,000 ms")),
        "tpot_p99_ms": _number(_Range(
            1, 200, "ms", "a valid run's p99 TPOT is within its bound: 40 or 200 ms")),
        "scheduled_samples_per_s": _number(_Range(
            0.1, 10_000, "queries/s", "7.7 to 528 in the table; a rack would do a few thousand")),
        "target_qps": _number(_Range(
            0.1, 10_000, "queries/s", "the rate the submitter asked LoadGen for, as above")),
        "min_duration_s": _number(_Range(
            600, 86_400, "s", "MLPerf's minimum is 600 s; submitters ask for up to 5,400")),
        "source": _source(),
        "note": _text(required=False),
    },
    "prices": {
        "id": _text(),
        "chip": _text(),
        "chips": _integer(_Range(1, 100_000, "chips", "one chip to a rack or a pod slice")),
        "provider": _text(),
        "offer": _text(allowed=("on-demand", "capacity block", "spot", "reserved")),
        "usd_per_hour": _number(_Range(
            0.01, 1_000, "USD per chip-hour", "a chip rents for tens of cents (a TPU v5e) to "
            "tens of dollars an hour; above 1,000 is a monthly price or a whole cluster's",
            per="chips")),
        "price_kind": _text(allowed=("list", "negotiated", "estimate")),
        "date": _text(),
        "source": _source(),
        "note": _text(required=False),
    },
}


#: The column sets that identify a row of each table. No two rows may share the
#: values of any one set (text compared without case and repeated spaces).
KEYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "hardware": (("name",),),
    "models": (("name",),),
    "results": (("id",),),
    "mlperf_llama2_70b": (("id",),),
    "mlperf_engine_configs": (("benchmark", "round", "submitter", "system", "scenario"),),
    "stacks": (("name",),),
    "leaderboard": (("rank",), ("model", "provider")),
    "mlperf_llama2_70b_input_lengths": (("input_tokens",),),
    "mlperf_llama2_70b_latencies": (("id",),),
    "mlperf_dataset_lengths": (("dataset", "input_tokens", "output_tokens"),),
    "mlperf_llm_results": (("id",),),
    "prices": (("id",),),
}


def _present(*values: object) -> bool:
    # NaN, an empty optional number, is the one value unequal to itself.
    return all(value == value for value in values)


def _peak_order(low: str, high: str) -> Callable[[dict], tuple[str, str] | None]:
    def rule(row: dict) -> tuple[str, str] | None:
        if _present(row[low], row[high]) and row[high] < row[low]:
            return high, (f"{_figure(row[high])} is below {low} {_figure(row[low])}; a chip's peak "
                          "rate does not fall at lower precision")
        return None
    return rule


def _active_within_total(row: dict) -> tuple[str, str] | None:
    active, total = _figure(row["params_active"]), _figure(row["params_total"])
    if row["params_active"] > row["params_total"]:
        return "params_active", (f"{active} is more than params_total {total}; the active "
                                 "parameters are a subset of all of them")
    if row["experts"] == 1 and row["params_active"] != row["params_total"]:
        return "params_active", (f"{active} differs from params_total {total}, but experts "
                                 "is 1: a dense model uses every parameter for every token")
    return None


def _experts_per_token(row: dict) -> tuple[str, str] | None:
    if row["experts_per_token"] > row["experts"]:
        return "experts_per_token", (
            f"{row['experts_per_token']} is more than experts {row['experts']}")
    return None


def _kv_heads(row: dict) -> tuple[str, str] | None:
    heads, kv = row["attention_heads"], row["kv_heads"]
    if kv > heads:
        return "kv_heads", (f"{kv} is more than attention_heads {heads}; each key/value "
                            "head serves one or more query heads")
    if heads % kv:
        return "kv_heads", (f"{kv} does not divide attention_heads {heads}; grouped "
                            "attention gives every key/value head the same number of query heads")
    if row["attention"] == "mha" and kv != heads:
        return "kv_heads", f"{kv} differs from attention_heads {heads}, but attention is 'mha'"
    if row["attention"] == "gqa" and kv == heads:
        return "kv_heads", (f"{kv} equals attention_heads {heads}, but attention is 'gqa' "
                            "(equal counts are 'mha')")
    return None


def _mixture_columns(row: dict) -> tuple[str, str] | None:
    if row["dense_layers"] > row["layers"]:
        return "dense_layers", f"{row['dense_layers']} is more than layers {row['layers']}"
    if row["experts"] == 1:
        if row["dense_layers"] != row["layers"]:
            return "dense_layers", (f"{row['dense_layers']} differs from layers {row['layers']}, "
                                    "but experts is 1: every layer of a dense model is dense")
        if row["shared_experts"]:
            return "shared_experts", "a dense model (experts 1) has no shared experts"
    elif not _present(row["moe_intermediate_size"]):
        return "moe_intermediate_size", "a mixture of experts needs its experts' width"
    return None


def _latent_columns(row: dict) -> tuple[str, str] | None:
    latent = _present(row["kv_lora_rank"]) and _present(row["qk_rope_head_dim"])
    if row["attention"] == "mla" and not latent:
        return "kv_lora_rank", ("multi-head latent attention caches a latent and a rotary key: "
                                "give kv_lora_rank and qk_rope_head_dim")
    if row["attention"] != "mla" and (_present(row["kv_lora_rank"])
                                      or _present(row["qk_rope_head_dim"])):
        return "kv_lora_rank", "only multi-head latent attention ('mla') has a latent rank"
    return None


def _window_columns(row: dict) -> tuple[str, str] | None:
    window, layers = row["sliding_window"], row["sliding_layers"]
    if _present(window) != _present(layers):
        return "sliding_layers", "give both sliding_window and sliding_layers, or neither"
    if _present(layers) and layers > row["layers"]:
        return "sliding_layers", f"{layers} is more than layers {row['layers']}"
    return None


#: Checks across the columns of one row, per table. Each takes the parsed row and
#: returns ``None`` or the column to blame and why.
RULES: dict[str, tuple[Callable[[dict], tuple[str, str] | None], ...]] = {
    "hardware": (
        _peak_order("bf16_dense_tflop_per_s", "fp8_dense_tflop_per_s"),
        _peak_order("fp8_dense_tflop_per_s", "fp4_dense_tflop_per_s"),
    ),
    "models": (_active_within_total, _experts_per_token, _kv_heads, _mixture_columns,
               _latent_columns, _window_columns),
}


class _Malformed(Exception):
    """A syntax error found by :func:`_records`, located for the caller to name."""

    def __init__(self, line: int, cell: int, char: int, reason: str) -> None:
        super().__init__(reason)
        self.line, self.cell, self.char, self.reason = line, cell, char, reason


_BARE = re.compile(r'[^,"\r\n]*')
_BREAK = re.compile(r"\r\n|\r|\n")


class _Cell(NamedTuple):
    # A tuple rather than a frozen dataclass: a table of 28,000 rows makes 150,000 cells.
    text: str
    line: int  # the physical line the cell starts on
    char: int  # its first character's position on that line, from 1


def _records(text: str) -> Iterator[list[_Cell]]:
    """Split CSV text into records of cells, strictly, counting physical lines.

    Blank lines are skipped. Raises :class:`_Malformed` for a quote inside an
    unquoted cell, text after a closing quote, or a quote that never closes.
    """
    pos, line, line_start, end = 0, 1, 0, len(text)
    while pos < end:
        blank = _BREAK.match(text, pos)
        if blank:
            pos, line, line_start = blank.end(), line + 1, blank.end()
            continue
        record: list[_Cell] = []
        while True:
            start_line, start_char = line, pos - line_start + 1  # where this cell begins
            quoted = pos < end and text[pos] == '"'
            if quoted:
                close = pos + 1
                while True:
                    close = text.find('"', close)
                    if close == -1:
                        raise _Malformed(line, len(record) + 1, start_char,
                                         "this quoted cell is never closed")
                    if text.startswith('""', close):
                        close += 2
                        continue
                    break
                inside = text[pos + 1:close]
                breaks = list(_BREAK.finditer(inside))
                if breaks:
                    line += len(breaks)
                    line_start = pos + 1 + breaks[-1].end()
                value = inside.replace('""', '"')
                pos = close + 1
            else:
                bare = _BARE.match(text, pos)
                value = bare.group()
                pos = bare.end()
            record.append(_Cell(value, start_line, start_char))
            if pos == end:
                yield record
                return
            if text[pos] == ",":
                pos += 1
                continue
            newline = _BREAK.match(text, pos)
            if newline:
                pos, line, line_start = newline.end(), line + 1, newline.end()
                yield record
                break
            where = pos - line_start + 1
            if quoted:
                reason = f"text after the closing quote at character {where}"
            else:
                reason = (f"a quote inside an unquoted cell at character {where}; quote the "
                          'whole cell and double the quote ("")')
            raise _Malformed(line, len(record), start_char, reason)


_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER_CHARS = set("0123456789+-.eE")
_UNDECODABLE = re.compile("[\udc80-\udcff]")


def _parse(value: str, column: Column) -> object:
    """Turn one CSV cell into a Python value, or raise ValueError saying why not."""
    if column.kind == "source":
        bare = value.strip().lower()
        if bare in PLACEHOLDER_SOURCES or not bare.strip(".…"):
            raise ValueError(f"{value!r} is a placeholder, not a source; name where the figure "
                             "was published (an address, a paper, a file)")
        return value
    if column.kind == "text":
        if column.allowed is not None and value not in column.allowed:
            raise ValueError(f"{value!r} is not one of {', '.join(column.allowed)}")
        return value
    if value.lstrip("+-").lower() in ("inf", "infinity", "nan"):
        raise ValueError(f"{value!r} is not a finite number")
    if not _NUMBER.fullmatch(value):
        odd = next((c for c in value if c not in _NUMBER_CHARS), None)
        detail = "" if odd is None else f" (character {odd!r}, U+{ord(odd):04X})"
        raise ValueError(
            f"{value!r} is not a number{detail}; write ASCII digits with an optional '.' "
            "and exponent, without '_', ',' or spaces")
    if column.kind == "integer":
        if not _INTEGER.fullmatch(value):
            raise ValueError(f"{value!r} is not a whole number; write digits only")
        return int(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number


def _figure(value: float) -> str:
    """A number as a reader would write it: 50,000 and 0.0001, not 5e+04 and 1e-04."""
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}" if abs(value) >= 1e-4 else f"{value:g}"


def _implausible(value: float, column: Column, row: dict) -> str | None:
    """Why ``value`` is out of its column's plausible range, or ``None``."""
    bounds = column.plausible
    context = ""
    if isinstance(bounds, _ByColumn):
        context = f" for {bounds.column} {row[bounds.column]!r}"
        bounds = bounds.ranges[row[bounds.column]]
    checked = value if bounds.per is None or row[bounds.per] == 1 else value / row[bounds.per]
    if bounds.low <= checked <= bounds.high:
        return None
    shown = _figure(value)
    if bounds.per is not None:
        context = f" per {bounds.per.removesuffix('s')}{context}"
        if row[bounds.per] != 1:
            shown = (f"{_figure(value)} over {row[bounds.per]} {bounds.per} is "
                     f"{_figure(checked)} per {bounds.per.removesuffix('s')}, which")
    unit = f" {bounds.unit}" if bounds.unit else ""
    return (f"{shown} is outside the plausible range {_figure(bounds.low)} to "
            f"{_figure(bounds.high)}{unit}{context} ({bounds.why})")


def _key_value(value: object) -> object:
    return " ".join(value.split()).casefold() if isinstance(value, str) else value


def load_table(name: str, data_dir: Path | str | None = None) -> pd.DataFrame:
    """Read ``data/<name>.csv``, check it against its schema, return a DataFrame.

    Parameters
    ----------
    name:
        One of the keys of :data:`SCHEMAS` (``"hardware"``, ``"models"``,
        ``"results"``, ``"leaderboard"``, ...).
    data_dir:
        Folder holding the CSV files; the repository's ``data/`` by default (tests
        point it at a corrupted copy).

    Raises
    ------
    ValueError
        For an unknown table name.
    DataError
        (a ``ValueError``) naming the file, the physical line and the column (its
        position and name) of anything the checks listed in the module docstring
        find, with the allowed values or range.
    """
    path = Path(data_dir) if data_dir is not None else DATA_DIR
    return read_table(name, path / f"{name}.csv")


def read_table(name: str, path: Path | str) -> pd.DataFrame:
    """Read the file ``path`` as a table of kind ``name`` (one of :data:`SCHEMAS`), with the
    checks of :func:`load_table`: a reader's own price file, say."""
    if name not in SCHEMAS:
        raise ValueError(f"name: unknown table {name!r}; allowed: {', '.join(sorted(SCHEMAS))}")
    schema = SCHEMAS[name]
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    text = path.read_bytes().decode("utf-8", errors="surrogateescape")
    text = text.removeprefix("\ufeff")  # Excel's byte-order mark: no data, see above

    header: list[str] = []

    def where(line: int, index: int) -> str:
        if not header:  # the header itself is being read
            return f"{path}, line {line}, column {index}"
        label = repr(header[index - 1]) if index <= len(header) else "beyond the header"
        return f"{path}, line {line}, column {index} ({label})"

    records = _records(text)
    try:
        head = next(records, None)
        if head is None:
            raise DataError(f"{path}, line 1: the file is empty; expected the header "
                            f"{','.join(schema)}")
        header = [cell.text for cell in head]
        _check_header(path, head, schema)
        rows = []
        rules = RULES.get(name, ())
        for cells in records:
            rows.append(_check_row(cells, header, schema, rules, where))
    except _Malformed as error:
        raise DataError(f"{where(error.line, error.cell)}: {error.reason}") from None
    if not rows:
        raise DataError(f"{path}, line {head[-1].line + 1}: the header has no rows below it")

    frame = pd.DataFrame.from_records([values for values, _ in rows], columns=list(schema))
    for key in KEYS[name]:
        seen: dict[tuple, int] = {}
        for values, lines in rows:
            value = tuple(_key_value(values[column]) for column in key)
            first = seen.setdefault(value, lines[key[0]])
            if first != lines[key[0]]:
                shown = tuple(values[c] for c in key) if len(key) > 1 else values[key[0]]
                columns = ", ".join(repr(c) for c in key)
                raise DataError(
                    f"{where(lines[key[0]], header.index(key[0]) + 1)}: duplicate value "
                    f"{shown!r} of the key {columns}, first on line {first}")
    return frame


def _check_header(path: Path, head: list[_Cell], schema: dict[str, Column]) -> None:
    """Raise DataError unless the header names each schema column exactly once."""
    names = [cell.text for cell in head]
    for index, cell in enumerate(head, start=1):
        if _UNDECODABLE.search(cell.text):
            raise DataError(f"{path}, line {cell.line}, column {index}: the header is not "
                            "valid UTF-8")
        if cell.text.strip() == "":
            raise DataError(f"{path}, line {cell.line}, column {index}: an unnamed column "
                            "(a trailing comma in the header?)")
        if cell.text in names[:index - 1]:
            raise DataError(f"{path}, line {cell.line}, column {index}: {cell.text!r} "
                            f"appears twice (also column {names.index(cell.text) + 1})")
    missing = [column for column in schema if column not in names]
    if missing:
        raise DataError(f"{path}, line 1: missing column(s) {', '.join(missing)}")
    extra = [(i, c) for i, c in enumerate(names, start=1) if c not in schema]
    if extra:
        listed = ", ".join(f"{c!r} (column {i})" for i, c in extra)
        raise DataError(f"{path}, line 1: unexpected column(s) {listed}; allowed: "
                        f"{', '.join(schema)}")


def _check_row(cells: list[_Cell], header: list[str], schema: dict[str, Column],
               rules: tuple[Callable[[dict], tuple[str, str] | None], ...],
               where: Callable[[int, int], str]) -> tuple[dict, dict]:
    """One record checked and parsed: its values and the line of each column."""
    width = len(header)
    if len(cells) != width:
        index = min(len(cells), width + 1)
        raise DataError(f"{where(cells[index - 1].line, index)}: the row has {len(cells)} "
                        f"cells but the header has {width} columns")
    values: dict[str, object] = {}
    lines: dict[str, int] = {}
    for index, (column_name, cell) in enumerate(zip(header, cells, strict=True), start=1):
        bad = _UNDECODABLE.search(cell.text)
        if bad:
            line = cell.line + len(_BREAK.findall(cell.text[:bad.start()]))
            byte = ord(bad.group()) - 0xDC00
            raise DataError(f"{where(line, index)}: byte 0x{byte:02X} at character "
                            f"{bad.start() + 1} of the cell is not UTF-8; save the file as "
                            "UTF-8")
        if len(cell.text) > MAX_CELL_CHARS:
            raise DataError(f"{where(cell.line, index)}: the cell is {len(cell.text):,} "
                            f"characters long; at most {MAX_CELL_CHARS:,} are allowed")
        column = schema[column_name]
        lines[column_name] = cell.line
        value = cell.text.strip()
        if value == "":
            if column.required:
                raise DataError(f"{where(cell.line, index)}: empty, but required")
            values[column_name] = None if column.kind in ("text", "source") else math.nan
            continue
        try:
            values[column_name] = _parse(value, column)
        except ValueError as error:
            raise DataError(f"{where(cell.line, index)}: {error}") from None
    for index, column_name in enumerate(header, start=1):
        column, value = schema[column_name], values[column_name]
        if column.plausible is None or not _present(value):
            continue
        reason = _implausible(value, column, values)
        if reason:
            raise DataError(f"{where(lines[column_name], index)}: {reason}")
    for rule in rules:
        broken = rule(values)
        if broken:
            column_name, reason = broken
            raise DataError(f"{where(lines[column_name], header.index(column_name) + 1)}: "
                            f"{reason}")
    return {column: values[column] for column in schema}, lines


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
