"""Calibration: the few parameters of each software stack, fitted on named audited results.

The step-time model (:mod:`inferlab.model.steptime`) is physics plus six numbers that
describe software, not silicon: the share of peak bandwidth and of peak FLOP/s
the kernels reach, how far the weight reads hide under the matrix multiplies
(``overlap``), a fixed cost paid by every step whatever its batch
(``step_overhead_s``: kernel launches, sampling, scheduling, and whatever else does
not shrink with the batch), the share of that cost that is GPU time at the chip's
clock (``clock_share``), and the latency of one all-reduce hop.

A :class:`Stack` fixes them for one serving stack (TensorRT-LLM at FP8 on Hopper,
TensorRT-LLM at FP4 on Blackwell, vLLM on ROCm). Of the six, up to three are fitted
per stack and three are stated assumptions (a stack from a round without an
Interactive result fits only its efficiency and borrows its successor's fixed cost):

- ``compute_efficiency`` is fitted so that the stack's *Offline* anchor is
  reproduced (Offline is compute-bound on every GPU here, so it pins the FLOP/s);
- ``step_overhead_s`` is fitted so that the stack's *latency-bound* anchor
  (Interactive where the stack has one, else Server) is reproduced: a fixed cost
  is negligible in a 100 ms Server step and a large share of a 30 ms Interactive
  step, so it is what the latency bound measures;
- ``clock_share`` is fitted, for TensorRT-LLM at FP8, on a latency-bound result of
  a card that runs its full-power part's die at a lower clock (the H200 NVL): the
  fixed cost was fitted on full-clock chips, and on such a card the share of it
  spent in small kernels takes :func:`~inferlab.model.roofline.clock_slowdown` times as
  long (:meth:`Stack.step_overhead_on`). One row pins only the product of share
  and slowdown; reading it as a share takes the datasheet ratio for the clock
  ratio. The other stacks run on no such card and borrow it, the one share measured.
  The share also
  splits the fixed cost by what it grows with (:meth:`Stack.step_overhead_on`): the
  small kernels run once per layer, so a model of another depth pays that part in
  proportion, while the rest (the host's scheduling and bookkeeping, paid at the
  host's clock) is paid once per step whatever the depth, and once per stage in a
  pipeline, whose every stage runs the engine's loop (read in TensorRT-LLM's source,
  assumed of the others). An assumption about the
  cost's structure, read from the share's meaning, not a number fitted on another
  model;
- ``memory_efficiency`` 0.8, ``overlap`` 1 (the ideal roofline) and an all-reduce hop
  of 5 microseconds are assumed, not fitted (:data:`ASSUMED`).

An anchor is the median of every audited row of one configuration (accelerator,
count, format, scenario and stack, :func:`row_key`), whoever submitted it, so that no
single submitter's tuning sets a stack. A latency-bound anchor counts only the runs
that reached a bound (:func:`at_bound`): a Server or Interactive result is the rate
its submitter asked LoadGen for, and one whose p99s sat well inside the bounds says
only that the system can do at least that much, while the model predicts the most
it can do.

The fitted values live in ``data/stacks.csv`` with the ids of the rows they were
fitted on; ``python scripts/calibrate.py`` refits and rewrites them, and
``benchmarks/model_accuracy.py`` reports the error on every other audited row.

Used in chapter 'Batching'; :mod:`inferlab.predict` takes its stacks from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from inferlab.benchmark.mlperf import MLPERF_LLAMA2_70B_BOUNDS
from inferlab.common import checks
from inferlab.common.data import load_table
from inferlab.model import specs
from inferlab.model.capacity import ACTIVATION_RESERVE_FRACTION
from inferlab.model.roofline import clock_slowdown
from inferlab.model.steptime import ATTAINABLE_FRACTION

#: The model every stack is fitted on (MLPerf's Llama 2 70B benchmark); every other model
#: is a prediction.
FITTED_MODEL = "Llama 2 70B"

#: Parameters every stack shares, assumed rather than fitted (see the module docstring).
ASSUMED = {"memory_efficiency": 0.8, "overlap": 1.0, "allreduce_latency_s": 5e-6}


@dataclass(frozen=True)
class Stack:
    """The software parameters of one serving stack (see the module docstring).

    ``fitted_on`` names the rows of ``data/mlperf_llama2_70b.csv`` the fitted
    parameters reproduce; empty for a stack set by hand.

    The serving engine (batch limit, tokens per step, chunked prefill, scheduling
    rounds) is, by default, the one the reference submissions of the stack named
    ``engines_of`` ran (:func:`engine_settings`; default: this stack's own name), read
    per chip and scenario from their configuration files. ``custom_engine``, a
    :class:`~inferlab.serving.scheduler.Scheduler`, replaces them with one engine used as built on
    every chip and in every scenario. ``memory_fraction`` is the share of each chip's
    memory the engine gives to weights and KV cache (vLLM's ``gpu_memory_utilization``);
    the rest is left to activations and the runtime.

    Used in chapter 'Batching'.
    """

    name: str
    compute_efficiency: float
    step_overhead_s: float
    memory_efficiency: float = ASSUMED["memory_efficiency"]
    overlap: float = ASSUMED["overlap"]
    allreduce_latency_s: float = ASSUMED["allreduce_latency_s"]
    clock_share: float = 0.0
    fitted_on: tuple[str, ...] = ()
    custom_engine: object | None = None
    engines_of: str = ""
    memory_fraction: float = 1 - ACTIVATION_RESERVE_FRACTION

    def __post_init__(self) -> None:
        checks.text("name", self.name)
        checks.fraction("compute_efficiency", self.compute_efficiency, low_open=True)
        checks.non_negative("step_overhead_s", self.step_overhead_s)
        checks.fraction("memory_efficiency", self.memory_efficiency, low_open=True)
        checks.fraction("overlap", self.overlap)
        checks.non_negative("allreduce_latency_s", self.allreduce_latency_s)
        checks.fraction("clock_share", self.clock_share)
        checks.fraction("memory_fraction", self.memory_fraction, low_open=True)
        if self.custom_engine is not None:
            from inferlab.serving.scheduler import Scheduler

            checks.instance("custom_engine", self.custom_engine, Scheduler)

    @property
    def engine_source(self) -> str:
        """The stack whose reference submissions' engines this one runs."""
        return self.engines_of or self.name

    def scheduler(self, accelerator: str, scenario: str, benchmark: str = "llama2-70b"):
        """The serving engine this stack runs on ``accelerator`` for ``scenario``: its
        ``custom_engine`` as built, else a reference submission's own configuration
        (:func:`engine_settings`), for ``benchmark`` where the submitter tuned one for
        it."""
        if self.custom_engine is not None:
            return self.custom_engine
        return engine_scheduler(self.engine_source, accelerator, scenario, benchmark)

    def engine(self, accelerator: str, scenario: str, benchmark: str = "llama2-70b") -> dict:
        """The engine settings :meth:`scheduler` is built from (:func:`engine_settings`),
        with whose configuration they are (``source``) and the layout the reference ran
        (``tp``, ``pp``, ``ep``: ``None`` where the reference is another chip's or there is
        none, since a layout tuned for one chip's memory and links says nothing about
        another's)."""
        if self.custom_engine is not None:
            engine = self.custom_engine
            return {"max_batch": engine.max_batch, "token_budget": engine.token_budget,
                    "chunked_prefill": engine.chunked_prefill,
                    "scheduler_steps": engine.scheduler_steps,
                    "min_prefill_queries": engine.min_prefill_queries,
                    "tp": None, "pp": None, "ep": None, "attention_dp": False,
                    "source": f"the engine built into stack {self.name!r}"}
        return engine_settings(self.engine_source, accelerator, scenario, benchmark)

    def step_overhead_on(self, chip, precision: str, model=None, stages: int = 1) -> float:
        """The fixed cost per step of ``model`` on ``chip`` at ``precision``, for a replica
        of ``stages`` pipeline stages.

        ``step_overhead_s`` is fitted on :data:`FITTED_MODEL` on a full-clock chip. Its
        ``clock_share`` is the GPU time of the small kernels between the matrix
        multiplies: they run once per layer, so another model (a name or a
        :class:`~inferlab.model.specs.ModelSpec`; default the fitted one) pays that part for
        its own layers, and at the chip's clock, so a lower-clocked card stretches it by
        its :func:`~inferlab.model.roofline.clock_slowdown`. The rest is the host's work of a
        step (scheduling, bookkeeping, launching the step), paid once whatever the model's
        depth and the GPU's clock, but once *per stage*: in TensorRT-LLM's pipeline every
        stage's process runs the engine's loop for every micro-batch, and the last stage
        waits for each micro-batch's tokens before it schedules the next, so a round of
        ``stages`` micro-batches holds ``stages`` of them in a row (assumed of the other
        stacks too)::

            step_overhead_s x ((1 - clock_share) x stages
                               + clock_share x layers / fitted layers x slowdown)
        """
        share = checks.fraction("clock_share", self.clock_share)
        stages = checks.whole("stages", stages)
        slowdown = clock_slowdown(chip, precision)
        depth = specs.as_model(FITTED_MODEL if model is None else model).layers
        layers = depth / specs.model(FITTED_MODEL).layers
        return self.step_overhead_s * ((1 - share) * stages + share * layers * slowdown)

    def replica_parameters(self, chip, precision: str, model=None,
                           stages: int = 1) -> dict[str, float]:
        """The keyword arguments :func:`inferlab.model.steptime.replica` takes from a stack, for
        a replica of ``model`` (default :data:`FITTED_MODEL`) on ``chip`` at ``precision``
        in ``stages`` pipeline stages (:meth:`step_overhead_on`)."""
        return {"memory_efficiency": self.memory_efficiency,
                "compute_efficiency": self.compute_efficiency,
                "overlap": self.overlap,
                "step_overhead_s": self.step_overhead_on(chip, precision, model, stages),
                "allreduce_latency_s": self.allreduce_latency_s,
                "reserve_fraction": 1 - self.memory_fraction}


#: How the audited results name their software, mapped to the book's stacks, by vendor
#: and weight format. A row whose software is not here is not predicted.
STACK_OF = {
    ("TensorRT-LLM", "fp8"): "TensorRT-LLM FP8",
    ("TensorRT-LLM", "fp4"): "TensorRT-LLM FP4",
    ("vLLM (ROCm)", "fp8"): "vLLM ROCm FP8",
    # MangoBoost's LLMBoost is built on vLLM for ROCm: predicting it with AMD's own vLLM
    # stack is a test of how much its own work adds.
    ("MangoBoost LLMBoost (vLLM-based, ROCm)", "fp8"): "vLLM ROCm FP8",
    ("MangoBoost LLMBoost (ROCm)", "fp8"): "vLLM ROCm FP8",
}

#: The stack that serves a chip when none is named. NVIDIA chips run TensorRT-LLM (its
#: FP4 stack for 4-bit weights), AMD chips vLLM on ROCm.
VENDOR_STACK = {("NVIDIA", "fp4"): "TensorRT-LLM FP4", ("NVIDIA", None): "TensorRT-LLM FP8",
                ("AMD", None): "vLLM ROCm FP8"}


#: Rounds whose software is old enough to be a stack of its own. v4.1 ran TensorRT-LLM
#: and vLLM releases from mid-2024, and NVIDIA credits much of Hopper's gain on this
#: benchmark in the next rounds to software.
OLD_SOFTWARE_ROUNDS = ("v4.1",)


def row_stack(software: str, precision: str, rnd: str | None = None) -> str | None:
    """The book's stack for an audited row's software, format and round (``None`` if not
    modelled). Triton in front of TensorRT-LLM is still TensorRT-LLM; a row of an
    :data:`OLD_SOFTWARE_ROUNDS` round gets that round's stack, e.g.
    ``"TensorRT-LLM FP8 (v4.1)"``.
    """
    base = "TensorRT-LLM" if software.startswith("TensorRT-LLM") else software
    name = STACK_OF.get((base, precision))
    if name is not None and rnd in OLD_SOFTWARE_ROUNDS:
        return f"{name} ({rnd})"
    return name


#: Whose configuration files each stack's engine settings are read from (rows of
#: ``data/mlperf_engine_configs.csv``), by accelerator; ``None`` is the stack's default.
#: Several systems are searched in order for a scenario the first one did not run.
ENGINE_REFERENCE: dict[str, dict[str | None, tuple[tuple[str, str, str], ...]]] = {
    "TensorRT-LLM FP8": {
        None: (("v5.0", "NVIDIA", "H200-SXM-141GBx8_TRT"),),
        "NVIDIA H100 NVL": (("v5.0", "Fujitsu", "H100-NVL-94GBx8_TRT"),),
        # Dell's is the run the clock share is fitted on. QCT's files differ only in the
        # Interactive batch limit (512, which the 256-token budget caps at 256 anyway).
        "NVIDIA H200 NVL": (("v5.1", "Dell", "XE7745_H200_NVL_141GBx8_TRT"),),
        "NVIDIA L40S": (("v5.0", "Dell", "XE7745_L40Sx8_TRT"),),
    },
    "TensorRT-LLM FP4": {
        None: (("v5.0", "NVIDIA", "B200-SXM-180GBx8_TRT"),),
        # NVIDIA published no GB200 Interactive file; that scenario takes the B200's.
        "NVIDIA GB200 (per GPU)": (("v5.1", "NVIDIA", "GB200-NVL72_GB200-186GB_aarch64x4_TRT"),
                                   ("v5.0", "NVIDIA", "B200-SXM-180GBx8_TRT")),
    },
    "vLLM ROCm FP8": {
        None: (("v5.1", "AMD", "8xMI325X_2xEPYC_9575F_1"),
               ("v5.1", "AMD", "8xMI325X_2xEPYC_9575F_2")),
        "AMD MI300X": (("v5.1", "AMD", "8xMI300X_2xEPYC_9575F"),),
    },
    "TensorRT-LLM FP8 (v4.1)": {
        None: (("v4.1", "NVIDIA", "H200-SXM-141GBx8_TRT"),),
        "NVIDIA H100 SXM": (("v4.1", "NVIDIA", "DGX-H100_H100-SXM-80GBx8_TRT"),),
        "NVIDIA L40S": (("v4.1", "Fujitsu", "CDI_L40Sx8_TRT"),),
    },
}

#: The engine a stack without a reference runs, with continuous batching, chunked prefill,
#: up to 2,048 requests and 2,048 tokens per step per replica.
DEFAULT_ENGINE = {"max_batch": 2048, "token_budget": 2048, "chunked_prefill": True,
                  "scheduler_steps": 1, "min_prefill_queries": 1}


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value == ""


@cache
def _engine_rows() -> dict[tuple[str, str, str, str, str], dict]:
    frame = load_table("mlperf_engine_configs")
    return {(row["benchmark"], row["round"], row["submitter"], row["system"], row["scenario"]):
            row for row in frame.to_dict("records")}


def engine_settings(stack_name: str, accelerator: str, scenario: str,
                    benchmark: str = "llama2-70b") -> dict:
    """The engine settings ``stack_name`` runs ``scenario`` with on ``accelerator``.

    Read from the reference submission's configuration (:data:`ENGINE_REFERENCE`):
    ``max_batch`` (requests per engine), ``token_budget`` (tokens per step, decode and
    prompt together: TensorRT-LLM's ``max_num_tokens``, vLLM's
    ``max_num_batched_tokens``), ``chunked_prefill``, and where the engine has them
    ``scheduler_steps`` and ``min_prefill_queries``
    (:class:`~inferlab.serving.scheduler.Scheduler`),
    ``tp``, ``pp`` and ``ep``, the layout of each engine where the reference ran on
    ``accelerator`` itself (else ``None``), ``attention_dp`` (attention data-parallel over
    the engine's ranks, whose batch and token settings are per rank, so the engine's are
    ``tp`` times them), plus ``source``. A chunked
    engine can run at most one decode token per request per step, so its batch is
    capped at the token budget. "not recorded" chunking (v5.0 Interactive files) is
    taken as on, as the same engines' v5.1 files set it.

    For another MLPerf ``benchmark`` than Llama 2 70B, a submission's configuration for
    that benchmark on ``accelerator`` is taken where ``data/mlperf_engine_configs.csv`` has
    one (the reference submitter's first, then the newest round), else the same
    benchmark's on the stack's reference chip, else the reference's Llama 2 70B engine.
    Stacks or scenarios without a reference get :data:`DEFAULT_ENGINE`.
    """
    references = ENGINE_REFERENCE.get(stack_name, {})
    systems = references.get(accelerator, references.get(None, ()))
    rows = _engine_rows()
    candidates = []
    if benchmark != "llama2-70b":
        submitters = {submitter for _, submitter, _ in systems}
        # The reference submitter's own file first, then the newest of anyone's on this
        # chip (a chip's vendor stack is the only one its submitters run here).
        candidates = sorted(
            (row for key, row in rows.items()
             if key[0] == benchmark and key[4] == scenario and row["accelerator"] == accelerator),
            key=lambda row: (row["submitter"] in submitters, row["round"]), reverse=True)
        # A chip nobody tuned this benchmark for takes the benchmark's engine on the stack's
        # own reference chip: batch and step limits are tuned to the model more than to
        # the chip, and its width is searched anew (another chip's says nothing here).
        home = {row["accelerator"] for key, row in rows.items()
                if key[1:4] in set(references.get(None, ()))}
        candidates += sorted(
            (row for key, row in rows.items()
             if key[0] == benchmark and key[4] == scenario and row["accelerator"] in home
             and row["accelerator"] != accelerator),
            key=lambda row: (row["submitter"] in submitters, row["round"]), reverse=True)
    candidates += [row for rnd, submitter, system in systems
                   if (row := rows.get(("llama2-70b", rnd, submitter, system, scenario)))]
    for row in candidates:
        chunked = row["chunked_prefill"] != "no"
        # With attention data-parallel each of the engine's ranks schedules its own
        # requests, so the engine holds tp times the per-rank settings.
        ranks = int(row["tp"]) if row["attention_dp"] == "yes" else 1
        batch = int(row["max_batch"]) * ranks
        budget = int(row["max_tokens_per_step"]) * ranks
        rounds = {name: 1 if _blank(row[name]) else int(row[name])
                  for name in ("scheduler_steps", "min_prefill_queries")}
        own = row["accelerator"] == accelerator
        return {"max_batch": min(batch, budget) if chunked else batch,
                "token_budget": budget, "chunked_prefill": chunked, **rounds,
                **{name: int(row[name]) if own else None for name in ("tp", "pp", "ep")},
                "attention_dp": own and row["attention_dp"] == "yes",
                "source": (f"{row['round']} {row['submitter']} {row['system']} {scenario}"
                           + ("" if row["benchmark"] == benchmark
                              else f" ({row['benchmark']}'s engine)"))}
    return {**DEFAULT_ENGINE, "tp": None, "pp": None, "ep": None, "attention_dp": False,
            "source": "the book's default engine"}


def engine_scheduler(stack_name: str, accelerator: str, scenario: str,
                     benchmark: str = "llama2-70b"):
    """:func:`engine_settings` as the simulator's :class:`~inferlab.serving.scheduler.Scheduler`."""
    from inferlab.serving.scheduler import Scheduler

    settings = engine_settings(stack_name, accelerator, scenario, benchmark)
    return Scheduler(max_batch=settings["max_batch"], token_budget=settings["token_budget"],
                     chunked_prefill=settings["chunked_prefill"],
                     scheduler_steps=settings["scheduler_steps"],
                     min_prefill_queries=settings["min_prefill_queries"])


@cache
def stacks() -> dict[str, Stack]:
    """Every stack in ``data/stacks.csv``, by name."""
    frame = load_table("stacks")
    out = {}
    for row in frame.to_dict("records"):
        out[row["name"]] = Stack(
            name=row["name"], compute_efficiency=row["compute_efficiency"],
            step_overhead_s=row["step_overhead_ms"] / 1e3,
            memory_efficiency=row["memory_efficiency"], overlap=row["overlap"],
            allreduce_latency_s=row["allreduce_latency_us"] / 1e6,
            clock_share=row["clock_share"],
            fitted_on=tuple(part.strip() for part in row["fitted_on"].split(";")))
    return out


def stack(name: str) -> Stack:
    """The stack called ``name`` in ``data/stacks.csv``; ``ValueError`` names the known ones."""
    known = stacks()
    if name not in known:
        raise ValueError(f"name: unknown stack {name!r}; known: {', '.join(known)}")
    return known[name]


def stack_for(chip, precision: str) -> Stack:
    """The calibrated stack that serves ``chip`` (a name or a
    :class:`~inferlab.model.specs.Chip`) at ``precision`` (see :data:`VENDOR_STACK`).

    Raises ``ValueError`` for a chip of a vendor without a calibrated stack.
    """
    name = specs.as_chip(chip).name
    vendor = name.split()[0]
    key = (vendor, precision) if (vendor, precision) in VENDOR_STACK else (vendor, None)
    if key not in VENDOR_STACK:
        raise ValueError(f"chip: no calibrated software stack for {name!r} (stacks exist for "
                         "NVIDIA and AMD GPUs); pass stack= explicitly")
    return stack(VENDOR_STACK[key])


def assumed_stack() -> Stack:
    """The software stack assumed for chips without a calibrated one:
    :data:`~inferlab.model.steptime.ATTAINABLE_FRACTION` of peak bandwidth and compute, and
    the fixed cost per step fitted for TensorRT-LLM at FP8, the one fixed cost the audited
    results measure, split as that stack's is between the host and the small kernels
    (``clock_share``). An assumption.

    Used in chapter 'Choosing hardware'.
    """
    fitted = stack("TensorRT-LLM FP8")
    return Stack(f"assumed ({ATTAINABLE_FRACTION:.0%} of peak, "
                 f"{fitted.step_overhead_s * 1e3:.1f} ms per step)",
                 compute_efficiency=ATTAINABLE_FRACTION,
                 step_overhead_s=fitted.step_overhead_s,
                 memory_efficiency=ATTAINABLE_FRACTION, clock_share=fitted.clock_share)


def stack_or_assumed(chip, precision: str) -> Stack:
    """The calibrated stack of ``chip``'s vendor at ``precision`` (:func:`stack_for`), else
    :func:`assumed_stack`."""
    try:
        return stack_for(chip, precision)
    except ValueError:
        return assumed_stack()


# --------------------------------------------------------------------------------------
# The audited rows, grouped as the model sees them
# --------------------------------------------------------------------------------------


#: How near its bounds a run must come for its result to count as the system's limit:
#: a p99 within 5 % of its bound, an assumption. A run must pass with some margin, since
#: early stopping and run-to-run noise punish one that aims exactly at the bound.
AT_BOUND = 0.95


@cache
def _scenarios() -> dict[str, str]:
    return dict(load_table("mlperf_llama2_70b").set_index("id")["scenario"])


@cache
def _latencies() -> dict[str, dict]:
    return {row["id"]: row
            for row in load_table("mlperf_llama2_70b_latencies").to_dict("records")}


def bound_share(row_id: str) -> float:
    """How near the run of audited row ``row_id`` came to its scenario's bounds: the
    larger of its p99 TTFT and p99 TPOT, each as a share of its bound, from the run's
    LoadGen summary (``data/mlperf_llama2_70b_latencies.csv``); ``nan`` where that
    summary is not recorded. Used in chapter 'Batching'."""
    scenario = _scenarios().get(checks.text("row_id", row_id))
    if scenario is None:
        raise ValueError(f"row_id: {row_id!r} is not an id of data/mlperf_llama2_70b.csv")
    row = _latencies().get(row_id)
    if row is None:
        return math.nan
    ttft_s, tpot_s = MLPERF_LLAMA2_70B_BOUNDS[scenario]
    return max(row["ttft_p99_ms"] / (ttft_s * 1e3), row["tpot_p99_ms"] / (tpot_s * 1e3))


def at_bound(row_id: str) -> bool | None:
    """Whether the run of ``row_id`` reached a bound (:data:`AT_BOUND`): its result is
    then the most the system did under the rules, not a rate chosen short of it.
    ``None`` where the run's summary is not recorded. Used in chapter 'Batching'."""
    share = bound_share(row_id)
    return None if math.isnan(share) else share >= AT_BOUND


def row_key(row: dict) -> tuple[tuple | None, str]:
    """The model's key for an audited row, ``(accelerator, count, format, scenario, stack)``,
    or ``None`` and the reason it is not modelled (its software, or an unknown accelerator).

    Rows with equal keys cannot be told apart by the model: several submitters ran the
    same eight GPUs with the same stack. They are predicted once.
    """
    name = row_stack(row["software"], row["precision"], row["round"])
    if name is None:
        return None, (f"software {row['software']!r} at {row['precision']} is not a "
                      "modelled stack")
    if row["accelerator"] not in specs.chips():
        return None, f"accelerator {row['accelerator']!r} is not in data/hardware.csv"
    return (row["accelerator"], int(row["accelerators"]), row["precision"], row["scenario"],
            name), ""


def scenario_pairs(table) -> list[dict]:
    """Every system that ran both Server and Interactive in one round, with its drop.

    Each entry holds the round, submitter, system, the model's keys of both rows,
    both reported figures and ``drop = 1 - Interactive / Server``.
    """
    by_system: dict[tuple, dict] = {}
    for row in table.to_dict("records"):
        system = (row["round"], row["submitter"], row["accelerator"], int(row["accelerators"]),
                  row["precision"], row["software"])
        by_system.setdefault(system, {})[row["scenario"]] = row
    pairs = []
    for (rnd, submitter, chip, chips, precision, _), rows in sorted(by_system.items()):
        if not {"Server", "Interactive"} <= set(rows):
            continue
        server, inter = rows["Server"], rows["Interactive"]
        pairs.append({
            "round": rnd, "submitter": submitter, "accelerator": chip, "accelerators": chips,
            "precision": precision, "server_id": server["id"], "interactive_id": inter["id"],
            "server_key": row_key(server)[0], "interactive_key": row_key(inter)[0],
            "server_tok_s": server["tokens_per_s"], "interactive_tok_s": inter["tokens_per_s"],
            "drop": 1 - inter["tokens_per_s"] / server["tokens_per_s"],
        })
    return pairs
