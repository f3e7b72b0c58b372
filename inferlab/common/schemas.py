"""What each table of ``data/`` must hold: its columns, the values and ranges each allows, the
rules that tie columns of a row together, and the keys no two rows may share.

Every column is a :class:`Column`: text (one of a list of values, or free), a source (text
that may not be a placeholder such as ``TODO``), or a number with the range a real value can
take and the reason for it. :data:`SCHEMAS` holds every table's columns, :data:`RULES` its
cross-field rules (active parameters at most the total, key/value heads dividing the
attention heads, and the like) and :data:`KEYS` its keys. The loader that applies them is
:mod:`inferlab.common.data`.

Used by every chapter; the tables themselves are described in the data appendix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


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


def _figure(value: float) -> str:
    """A number as a reader would write it: 50,000 and 0.0001, not 5e+04 and 1e-04."""
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}" if abs(value) >= 1e-4 else f"{value:g}"


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
        # How long the run was, from the same LoadGen log: a submitter may run longer than
        # mlperf.conf's minimum (user.conf), and a run of long answers gives another result
        # when it is longer. Empty where the row's source is a results table, not its log.
        "run_queries": _integer(_Range(
            1, 10_000_000, "queries", "Offline: the samples issued (8,313 to 2.3 million "
            "here); Server and Interactive: the query minimum (100, or a submitter's own)"),
            required=False),
        "run_duration_s": _integer(_Range(
            60, 86_400, "s", "the minimum duration: mlperf.conf's 600 s, or up to 30,000 "
            "that a submitter set"), required=False),
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
    "trtllm_throughput": {
        "id": _text(),
        "model": _text(),
        "accelerator": _text(),
        "tp": _integer(_Range(1, 64, "chips", "tensor-parallel width: 1 to 8 in the table")),
        "pp": _integer(_Range(1, 64, "stages", "pipeline stages: 1 to 8 in the table")),
        "accelerators": _integer(_Range(
            1, 4_096, "accelerators", "tp x pp, the chips one run used: 1 to 8 here")),
        "precision": _text(allowed=PRECISIONS),
        "input_tokens": _integer(_Range(
            1, 1_000_000, "tokens", "every request's prompt: 128 to 20,000 in the table")),
        "output_tokens": _integer(_Range(
            1, 1_000_000, "tokens", "every request's answer: 128 to 4,096 in the table")),
        "tokens_per_s": _number(_Range(
            1, 500_000, "tokens/s", "output tokens a second per chip: ~20 (Llama 3.1 405B "
            "at 20,000 tokens in on an H100) to ~30,000 (Llama 3.1 8B on one), with margin",
            per="accelerators")),
        "software": _text(),
        "source": _source(),
        "note": _text(required=False),
    },
    "mlperf_llm_latencies": {
        "id": _text(),
        "ttft_p99_ms": _number(_Range(
            1, 6_000, "ms", "a valid run's p99 TTFT is within its bound: 500 ms (Llama 3.1 "
            "8B Interactive) to 6 s (Llama 3.1 405B Server)")),
        "tpot_mean_ms": _number(_Range(
            1, 200, "ms", "the mean time per output token over a valid run's queries, "
            "below its p99")),
        "tpot_p50_ms": _number(_Range(
            1, 200, "ms", "the median time per output token of a valid run, below its p99")),
        "tpot_p99_ms": _number(_Range(
            1, 200, "ms", "a valid run's p99 TPOT is within its bound: 15 ms (DeepSeek-R1 "
            "Interactive) to 200 ms (Mixtral 8x7B Server)")),
        "mean_latency_s": _number(_Range(
            0.1, 10_000, "s", "a query's whole time, issue to last token: about a second for "
            "short answers to minutes for DeepSeek-R1's thousands of tokens")),
        "completed_samples_per_s": _number(_Range(
            0.01, 10_000, "queries/s", "0.3 to 1,000 in the table; a rack would do a few "
            "thousand")),
        "scheduled_samples_per_s": _number(_Range(
            0.01, 10_000, "queries/s", "the Poisson rate LoadGen issued at, as above")),
        "target_qps": _number(_Range(
            0.01, 10_000, "queries/s", "the rate the submitter asked LoadGen for, as above")),
        "min_duration_s": _number(_Range(
            600, 86_400, "s", "MLPerf's minimum is 600 s; submitters ask for up to 30,000")),
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
    "mlperf_llm_latencies": (("id",),),
    "trtllm_throughput": (("id",), ("model", "accelerator", "tp", "pp", "precision",
                                    "input_tokens", "output_tokens")),
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

