"""Choosing hardware: every lever of the book applied to one workload at once.

Four families of inference hardware, each with a reference chip from
``data/hardware.csv`` (:data:`FAMILY_CHIPS`):

- **GPU** (H100/H200, B200, MI300X): flexible, no compile step, continuous batching;
  latency is *statistical* because the batch is decided at run time.
- **Fixed-function** (AWS Inferentia2 with Neuron, Google TPU v5e with XLA): the
  model is compiled ahead of time for fixed shapes, so each change of model,
  precision or shape costs a recompilation and requests are padded to compiled
  lengths.
- **LPU** (Groq): weights in on-chip SRAM, a compile-time schedule, *deterministic*
  latency; tiny memory per chip, so hundreds of chips per model.
- **Dataflow and wafer-scale** (Cerebras WSE-3; SambaNova and Tenstorrent have no
  row in the data): weights in SRAM on very large parts; earlier stage, fewer
  published results.

The functions compute what each family does well and what it gives up, for a
workload: weights-only chip counts (:mod:`inferlab.capacity`), single-stream
ceilings (:mod:`inferlab.roofline`), the cost of recompiling fixed shapes,
padding waste for a prompt-length distribution, and the latency spread of a
runtime-scheduled against a fixed-shape server (:mod:`inferlab.simulator`).
:func:`decide` turns them into the families that fit, each reason carrying its
number; :func:`check_leaderboard` checks a published speed table row by row.

Used in chapter 'Choosing hardware'.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import cache

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from inferlab import specs
from inferlab.capacity import (
    ACTIVATION_RESERVE_FRACTION,
    BYTES_PER_PARAM,
    chips_to_hold,
    weight_bytes,
)
from inferlab.data import load_table
from inferlab.plotting import KIND_COLORS, PALETTE, figure, label_kind
from inferlab.roofline import model_decode_floor, throughput_at_max_batch
from inferlab.simulator import (
    EXPLORER_OUTPUT_MEAN,
    EXPLORER_PROMPT,
    FixedShape,
    Scheduler,
    explorer_replica,
    offline_throughput,
    simulate,
)
from inferlab.widgets import Explorer, register
from inferlab.workload import Lengths, make_requests

CHAPTER = "07_choosing_hardware"

#: The four families, in the order the chapter presents them.
FAMILIES = ("gpu", "fixed-function", "lpu", "dataflow")

#: How each family is named in prose and figures.
FAMILY_LABELS: dict[str, str] = {
    "gpu": "GPU",
    "fixed-function": "Fixed-function",
    "lpu": "Groq LPU",
    "dataflow": "Dataflow / wafer-scale",
}

#: The row of ``data/hardware.csv`` each family is computed with. TPU v5e is the other
#: fixed-function row; SambaNova and Tenstorrent have none, so the dataflow family is
#: computed with Cerebras WSE-3, the one SRAM dataflow part the table holds.
FAMILY_CHIPS: dict[str, str] = {
    "gpu": "NVIDIA H200 SXM",
    "fixed-function": "AWS Inferentia2 (per chip)",
    "lpu": "Groq LPU (GroqChip)",
    "dataflow": "Cerebras WSE-3",
}

#: The chips one serving node offers to a single stream (an ideal tensor-parallel split
#: over all of them): an 8-GPU server, an inf2.48xlarge with 12 Inferentia2 chips.
#: ``None``: the family spreads a model over as many chips as it takes to hold it.
NODE_CHIPS: dict[str, int | None] = {"gpu": 8, "fixed-function": 12, "lpu": None,
                                     "dataflow": None}

#: Whether a change of model, precision or shape needs an ahead-of-time compile.
NEEDS_COMPILE: dict[str, bool] = {"gpu": False, "fixed-function": True, "lpu": True,
                                  "dataflow": True}

#: Fraction of the single-stream ceiling a good stack reaches. The batching chapter's
#: calibration against MLPerf lands near 0.65 (``inferlab.simulator.EXPLORER_EFFICIENCY``);
#: the same figure is used for every family, an assumption.
ATTAINABLE_FRACTION = 0.65

#: Minutes to compile one shape (one prompt bucket or one batch size) of a large model.
#: An ASSUMPTION for the book's sweeps, not a measurement: replace it with your own
#: compiler logs. The conclusions are stated as a function of it.
COMPILE_S_PER_SHAPE = 5 * 60.0

#: Share of a month a fleet may spend recompiling before the guide says the change
#: rate is too high for a fixed-shape family (an assumption, 1 %).
MAX_COMPILE_FRACTION = 0.01

#: Share of one node's daily capacity a workload must fill before the cost-per-token
#: advantage of a fixed-function node counts (an assumption: a half-idle node
#: loses it).
MIN_NODE_UTILISATION = 0.5

MONTH_S = 30 * 86400.0
DAY_S = 86400.0

#: Groq's claim of deterministic latency, taken as a p99/p50 ratio of 1 (reported, not
#: modelled: the simulator does not model a compile-time schedule of every step).
LPU_TAIL_RATIO_REPORTED = 1.0


def _number(name: str, value, *, minimum: float = 0.0, strict: bool = False) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"{name}: {value!r} is not a finite number")
    if value < minimum or (strict and value == minimum):
        relation = ">" if strict else ">="
        raise ValueError(f"{name}: {value!r} is not allowed; give a number {relation} {minimum:g}")
    return float(value)


def _family(family: str) -> str:
    if family not in FAMILIES:
        raise ValueError(f"family: {family!r} is not one of {', '.join(FAMILIES)}")
    return family


# --------------------------------------------------------------------------------------
# What each family gives: chips to hold a model, and the single-stream ceiling
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FamilyFloor:
    """One model on one family: chips to hold its weights and the single-stream ceiling.

    ``chips_to_hold`` is the weights-only count (all ``params_total``, with
    :data:`inferlab.capacity.ACTIVATION_RESERVE_FRACTION` held back);
    ``chips_used`` the chips the ceiling is computed over (a node, or the chips to
    hold); ``ceiling_tok_s`` is ``1 / floor`` of one decode step at batch 1 and no
    context, reading the active weights over the summed bandwidth.
    """

    family: str
    chip: str
    precision: str
    weight_bytes: float
    chips_to_hold: int
    chips_used: int
    ceiling_tok_s: float

    @property
    def fits_node(self) -> bool:
        """Whether the weights fit in the chips the ceiling uses."""
        return self.chips_to_hold <= self.chips_used


def family_floor(model: str | specs.ModelSpec, family: str, precision: str = "fp8",
                 *, chip: str | None = None, chips: int | None = None) -> FamilyFloor:
    """Chips to hold ``model`` at ``precision`` on ``family`` and the single-stream ceiling.

    Formula: ``chips_to_hold = ceil(weight_bytes / (capacity x (1 - reserve)))``
    (:func:`inferlab.capacity.chips_to_hold`); ceiling ``= chips x bandwidth /
    active weight bytes`` (:func:`inferlab.roofline.model_decode_floor`, batch 1, no
    KV cache, an ideal split with no communication cost). The chips are ``chips`` if
    given, else a node (:data:`NODE_CHIPS`) or, for SRAM families, the chips to hold.
    ``chip`` overrides the family's reference row (:data:`FAMILY_CHIPS`).

    Used in chapter 'Choosing hardware'.
    """
    family = _family(family)
    spec = specs.model(model) if isinstance(model, str) else model
    hw = specs.chip(chip or FAMILY_CHIPS[family])
    weights = weight_bytes(spec.params_total, precision)
    hold = chips_to_hold(weights, hw.memory_capacity_bytes,
                         reserve_fraction=ACTIVATION_RESERVE_FRACTION)
    if chips is None:
        node = NODE_CHIPS[family]
        used = hold if node is None else node
    else:
        if not isinstance(chips, numbers.Integral) or isinstance(chips, bool) or chips < 1:
            raise ValueError(f"chips: {chips!r} is not allowed; give a whole number >= 1")
        used = int(chips)
    floor = model_decode_floor(spec, precision, used * hw.memory_bandwidth_bytes_per_s)
    return FamilyFloor(family, hw.name, precision, weights, hold, used, floor.per_user_tok_s)


# --------------------------------------------------------------------------------------
# What fixed shapes cost: recompilation and padding
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecompileCost:
    """The compile time a change rate costs a fixed-shape deployment, per month."""

    changes_per_month: float
    shapes: int
    compile_s_per_change: float

    @property
    def compile_s_per_month(self) -> float:
        """Seconds of compiling per month — changes x shapes x seconds per shape."""
        return self.changes_per_month * self.compile_s_per_change

    @property
    def fraction_of_month(self) -> float:
        """Compile time as a share of a 30-day month."""
        return self.compile_s_per_month / MONTH_S


def compiled_shapes(shapes: FixedShape) -> int:
    """Graphs a fixed-shape server compiles: one per prompt bucket plus one per batch size.

    Assumption: prefill is compiled per prompt bucket and decode per batch size, as
    AWS Neuron's bucketing does; a compiler that compiles every (prompt, batch) pair
    would need the product instead.

    Used in chapter 'Choosing hardware'.
    """
    return len(shapes.prompt_buckets) + len(shapes.batch_buckets)


def recompile_cost(changes_per_month: float, shapes: FixedShape | None = None,
                   compile_s_per_shape: float = COMPILE_S_PER_SHAPE) -> RecompileCost:
    """Compile time per month for ``changes_per_month`` changes of model, precision or shapes.

    Formula: ``changes x compiled_shapes(shapes) x compile_s_per_shape``. Every change
    of model, of number format or of the shape set invalidates every compiled graph.
    ``compile_s_per_shape`` defaults to :data:`COMPILE_S_PER_SHAPE`, an assumption. A
    GPU serving stack has no such step (its cost is 0).

    Used in chapter 'Choosing hardware'.
    """
    changes = _number("changes_per_month", changes_per_month)
    per_shape = _number("compile_s_per_shape", compile_s_per_shape)
    shapes = shapes or FixedShape()
    count = compiled_shapes(shapes)
    return RecompileCost(changes, count, count * per_shape)


@dataclass(frozen=True)
class PaddingWaste:
    """Prompt tokens asked for against prompt tokens computed after padding to buckets."""

    buckets: tuple[int, ...]
    requested_tokens: int
    computed_tokens: int

    @property
    def fraction(self) -> float:
        """Share of the computed prefill tokens that are padding."""
        return 1.0 - self.requested_tokens / self.computed_tokens


def padding_waste(prompt: Lengths | np.ndarray, buckets=(128, 256, 512, 1024, 2048), *,
                  n: int = 20_000, seed: int = 0) -> PaddingWaste:
    """Padding waste of a prompt-length distribution on compiled prompt ``buckets``.

    ``prompt`` is a :class:`inferlab.workload.Lengths` (``n`` lengths are drawn with
    ``seed``) or an array of lengths. Each prompt is padded up to the next bucket
    (:meth:`inferlab.simulator.FixedShape.pad_prompt`); the waste is
    ``1 - sum(lengths) / sum(padded)``. A prompt above the largest bucket raises
    ``ValueError``. Decode-batch padding is not counted here; the simulator counts it.

    Used in chapter 'Choosing hardware'.
    """
    shapes = FixedShape(prompt_buckets=tuple(buckets))
    if isinstance(prompt, Lengths):
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n: {n!r} is not allowed; give a whole number >= 1")
        lengths = prompt.sample(int(n), np.random.default_rng(seed))
    else:
        lengths = np.asarray(prompt)
        if lengths.size == 0 or lengths.ndim != 1 or np.any(lengths < 1):
            raise ValueError("prompt: give a non-empty 1-D array of lengths >= 1")
    top = shapes.prompt_buckets[-1]
    if lengths.max() > top:
        raise ValueError(f"prompt: a length of {int(lengths.max())} exceeds the largest bucket "
                         f"({top}); add a bucket or cap the lengths")
    index = np.searchsorted(np.asarray(shapes.prompt_buckets), lengths, side="left")
    padded = np.asarray(shapes.prompt_buckets)[index]
    return PaddingWaste(shapes.prompt_buckets, int(lengths.sum()), int(padded.sum()))


def power_of_two_buckets(smallest: int, largest: int, per_octave: int = 1) -> tuple[int, ...]:
    """Buckets from ``smallest`` to ``largest``, ``per_octave`` of them per doubling.

    ``per_octave=1`` gives 128, 256, 512, ...; ``per_octave=2`` adds the geometric
    midpoints. More buckets waste less padding and cost more compiles.

    Used in chapter 'Choosing hardware'.
    """
    for name, value in (("smallest", smallest), ("largest", largest),
                        ("per_octave", per_octave)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}: {value!r} is not allowed; give a whole number >= 1")
    if largest < smallest:
        raise ValueError(f"largest: {largest} is below smallest ({smallest})")
    octaves = math.log2(largest / smallest)
    steps = max(1, math.ceil(octaves * per_octave))
    values = np.unique(np.rint(smallest * 2 ** (np.arange(steps + 1) / per_octave)).astype(int))
    values = values[values < largest]
    return tuple(int(v) for v in values) + (int(largest),)


# --------------------------------------------------------------------------------------
# Deterministic against statistical latency (the batching chapter's simulator)
# --------------------------------------------------------------------------------------

#: The fixed-shape server of the batching chapter — four prompt buckets, one compiled batch.
SIM_FIXED_SHAPE = FixedShape(prompt_buckets=(128, 256, 512, 1024), batch_buckets=(64,),
                             context_tokens=2048)


@dataclass(frozen=True)
class LatencySpread:
    """Percentiles of one simulated run: decode-step time and time per output token."""

    server: str
    load: float
    step_p50_s: float
    step_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    ttft_p50_s: float
    ttft_p99_s: float

    @property
    def step_ratio(self) -> float:
        """p99 over p50 of decode-step time — 1 means every step takes the same time."""
        return self.step_p99_s / self.step_p50_s

    @property
    def tpot_ratio(self) -> float:
        """p99 over p50 of time per output token across requests."""
        return self.tpot_p99_s / self.tpot_p50_s


@cache
def latency_spread(load: float = 0.6, n: int = 1500, seed: int = 4) -> dict[str, LatencySpread]:
    """Simulate a GPU-style and a fixed-shape server on the same chip and arrivals.

    The server is the batching chapter's (Llama 2 70B, FP8, one H200,
    :func:`inferlab.simulator.explorer_replica`), at ``load`` times the fixed-shape
    server's saturation rate; GPU-style is continuous batching with chunked prefill
    and paged memory, fixed-shape is :data:`SIM_FIXED_SHAPE`. Returns the two runs'
    percentiles, keyed ``"gpu"`` and ``"fixed-function"``. Cached.

    Used in chapter 'Choosing hardware'.
    """
    load = _number("load", load, strict=True)
    if load >= 1:
        raise ValueError(f"load: {load!r} is not allowed; give a fraction in (0, 1)")
    server = explorer_replica()
    output = Lengths(EXPLORER_OUTPUT_MEAN, cv=1.0, min_tokens=2, max_tokens=1024)
    schedulers = {
        "gpu": Scheduler(max_batch=64),
        "fixed-function": Scheduler(max_batch=64, chunked_prefill=False, kv_policy="reserve",
                                    fixed_shape=SIM_FIXED_SHAPE),
    }
    saturating = make_requests(2000, EXPLORER_PROMPT, output, arrival="all_at_once", seed=seed)
    capacity = offline_throughput(server, saturating, schedulers["fixed-function"]).requests_per_s
    arrivals = make_requests(n, EXPLORER_PROMPT, output, rate_per_s=1.0, seed=seed + 1)
    spreads = {}
    for name, scheduler in schedulers.items():
        run = simulate(server, arrivals.at_rate(load * capacity), scheduler)
        steps = run.step_duration_s[run.step_prefill_tokens == 0]
        spreads[name] = LatencySpread(
            name, load, float(np.percentile(steps, 50)), float(np.percentile(steps, 99)),
            run.percentile("tpot", 50), run.percentile("tpot", 99),
            run.percentile("ttft", 50), run.percentile("ttft", 99))
    return spreads


def tail_ratio(family: str) -> tuple[float, str]:
    """p99/p50 of time per output token expected of ``family``, and where it comes from.

    GPU and fixed-function: :func:`latency_spread` (modelled). LPU: Groq's claim of
    deterministic latency, :data:`LPU_TAIL_RATIO_REPORTED` (reported). Dataflow:
    ``nan`` (no figure in the book).

    Used in chapter 'Choosing hardware'.
    """
    family = _family(family)
    if family in ("gpu", "fixed-function"):
        return latency_spread()[family].tpot_ratio, "modelled"
    if family == "lpu":
        return LPU_TAIL_RATIO_REPORTED, "reported"
    return math.nan, "unknown"


# --------------------------------------------------------------------------------------
# The decision guide
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reason:
    """One reason for or against a family, with the number behind it.

    ``value`` and ``unit`` are the number; ``computed_by`` names the function of the
    book that computed it; ``passes`` says whether this reason counts for the family.
    """

    text: str
    value: float
    unit: str
    computed_by: str
    passes: bool

    def __str__(self) -> str:
        mark = "+" if self.passes else "-"
        return f"{mark} {self.text} [{self.value:,.3g} {self.unit}; {self.computed_by}]"


@dataclass(frozen=True)
class Workload:
    """What a deployment needs.

    ``per_user_tok_s``: the decode rate each user must see; ``tail_ratio_max``: the
    largest p99/p50 of time per output token the service level allows;
    ``changes_per_month``: how often the model, precision or shapes change;
    ``tokens_per_day``: output tokens to serve per day; ``prompt``: the prompt-length
    distribution (for padding waste).
    """

    model: str = "Llama 3.1 70B"
    precision: str = "fp8"
    per_user_tok_s: float = 50.0
    tail_ratio_max: float = 3.0
    changes_per_month: float = 1.0
    tokens_per_day: float = 1e9
    prompt: Lengths = EXPLORER_PROMPT
    context_tokens: int = 2048

    def __post_init__(self) -> None:
        specs.model(self.model)
        if self.precision not in BYTES_PER_PARAM:
            raise ValueError(f"precision: {self.precision!r} is not one of "
                             f"{', '.join(BYTES_PER_PARAM)}")
        _number("per_user_tok_s", self.per_user_tok_s, strict=True)
        _number("tail_ratio_max", self.tail_ratio_max, minimum=1.0)
        _number("changes_per_month", self.changes_per_month)
        _number("tokens_per_day", self.tokens_per_day, strict=True)
        if (not isinstance(self.context_tokens, numbers.Integral)
                or isinstance(self.context_tokens, bool) or self.context_tokens < 1):
            raise ValueError(f"context_tokens: {self.context_tokens!r} is not allowed; "
                             "give a whole number >= 1")


@dataclass(frozen=True)
class Verdict:
    """One family's verdict for a workload: ``fits`` if every reason passes."""

    family: str
    floor: FamilyFloor
    reasons: tuple[Reason, ...]

    @property
    def fits(self) -> bool:
        """Whether every reason counts for the family."""
        return all(reason.passes for reason in self.reasons)

    @property
    def against(self) -> tuple[Reason, ...]:
        """The reasons that rule the family out."""
        return tuple(reason for reason in self.reasons if not reason.passes)


@dataclass(frozen=True)
class Decision:
    """The verdict of every family for one workload."""

    workload: Workload
    verdicts: tuple[Verdict, ...]

    @property
    def fits(self) -> tuple[str, ...]:
        """The families whose every reason passes, in :data:`FAMILIES` order."""
        return tuple(v.family for v in self.verdicts if v.fits)

    def verdict(self, family: str) -> Verdict:
        """The verdict of ``family``."""
        family = _family(family)
        return next(v for v in self.verdicts if v.family == family)

    def table(self) -> pd.DataFrame:
        """One row per reason: family, fits, reason, number, unit, computed by."""
        rows = [{"family": FAMILY_LABELS[v.family], "passes": r.passes, "reason": r.text,
                 "value": r.value, "unit": r.unit, "computed_by": r.computed_by}
                for v in self.verdicts for r in v.reasons]
        return pd.DataFrame(rows)


@cache
def node_daily_tokens(model: str, precision: str, context_tokens: int) -> float:
    """Output tokens one fixed-function node (12 Inferentia2 chips) can decode in a day.

    The roofline's aggregate rate at the largest batch that fits
    (:func:`inferlab.roofline.throughput_at_max_batch`), times
    :data:`ATTAINABLE_FRACTION`, times a day. Cached.

    Used in chapter 'Choosing hardware'.
    """
    chip = specs.chip(FAMILY_CHIPS["fixed-function"])
    best = throughput_at_max_batch(chip, specs.model(model), precision, context_tokens,
                                   chips=NODE_CHIPS["fixed-function"],
                                   reserve_fraction=ACTIVATION_RESERVE_FRACTION)
    return best.aggregate_tok_s * ATTAINABLE_FRACTION * DAY_S


def _speed(floor: FamilyFloor, need: float) -> Reason:
    attainable = floor.ceiling_tok_s * ATTAINABLE_FRACTION
    return Reason(f"single-stream ceiling x {ATTAINABLE_FRACTION:g} on {floor.chips_used} x "
                  f"{floor.chip} vs {need:g} tok/s needed",
                  attainable, "tok/s per user", "roofline.model_decode_floor", attainable >= need)


def _holds(floor: FamilyFloor) -> Reason:
    return Reason(f"weights ({floor.weight_bytes / 1e9:,.0f} GB) need {floor.chips_to_hold} "
                  f"chip(s); {floor.chips_used} used", floor.chips_to_hold, "chips",
                  "capacity.chips_to_hold", floor.fits_node)


def _tail(family: str, allowed: float) -> Reason:
    ratio, kind = tail_ratio(family)
    if math.isnan(ratio):
        return Reason("no published or modelled tail for this family: test it yourself",
                      ratio, "p99/p50 TPOT", "none", False)
    source = "simulator.simulate" if kind == "modelled" else "Groq's claim (reported)"
    return Reason(f"p99/p50 time per output token ({kind}) within {allowed:g}", ratio,
                  "p99/p50 TPOT", source, ratio <= allowed)


def _compile(workload: Workload) -> Reason:
    cost = recompile_cost(workload.changes_per_month)
    return Reason(f"recompiling {cost.shapes} shapes {workload.changes_per_month:g} times a "
                  f"month (at an assumed {COMPILE_S_PER_SHAPE / 60:g} min per shape) within "
                  f"{MAX_COMPILE_FRACTION:.0%} of the month", cost.fraction_of_month,
                  "of the month", "choosing.recompile_cost",
                  cost.fraction_of_month <= MAX_COMPILE_FRACTION)


def decide(workload: Workload | None = None, **values) -> Decision:
    """Which families fit ``workload`` (or a :class:`Workload` built from ``values``), and why.

    Rules, each reason carrying the number it was decided on (:class:`Reason`):

    - every family: the weights fit the chips used (:func:`family_floor`), and
      ``ATTAINABLE_FRACTION x`` its single-stream ceiling reaches ``per_user_tok_s``;
    - GPU and fixed-function: the modelled p99/p50 of time per output token
      (:func:`latency_spread`) is within ``tail_ratio_max``; LPU: Groq's reported
      deterministic latency; dataflow: no figure, so a tail bound below the GPU's
      modelled spread rules it out until you measure it;
    - families that compile ahead of time: recompiling on every change costs at most
      :data:`MAX_COMPILE_FRACTION` of the month (:func:`recompile_cost`);
    - fixed-function: the volume fills at least :data:`MIN_NODE_UTILISATION` of one
      node's daily capacity (:func:`node_daily_tokens`), else its cost-per-token
      advantage is idle; padding waste for the prompt distribution is reported;
    - LPU and dataflow: chosen only for what a GPU node cannot give (a speed above
      its attainable ceiling, or a tail bound tighter than its spread), since they
      need many chips per copy of the model.

    Used in chapter 'Choosing hardware'.
    """
    if workload is None:
        workload = Workload(**values)
    elif values:
        raise ValueError(f"values: give a workload or values, not both ({', '.join(values)})")
    need = workload.per_user_tok_s
    floors = {family: family_floor(workload.model, family, workload.precision)
              for family in FAMILIES}
    gpu_attainable = floors["gpu"].ceiling_tok_s * ATTAINABLE_FRACTION
    gpu_ratio, _ = tail_ratio("gpu")
    verdicts = []
    for family in FAMILIES:
        floor = floors[family]
        reasons = [_holds(floor), _speed(floor, need), _tail(family, workload.tail_ratio_max)]
        if family == "dataflow" and workload.tail_ratio_max >= gpu_ratio:
            reasons[-1] = Reason("tail bound is loose (no family's tail matters)",
                                 workload.tail_ratio_max, "p99/p50 TPOT allowed",
                                 "simulator.simulate", True)
        if NEEDS_COMPILE[family]:
            reasons.append(_compile(workload))
        if family == "fixed-function":
            capacity = node_daily_tokens(workload.model, workload.precision,
                                         workload.context_tokens)
            share = workload.tokens_per_day / capacity if capacity > 0 else math.inf
            reasons.append(Reason(f"volume fills one node (capacity {capacity:,.3g} tok/day) "
                                  f"to at least {MIN_NODE_UTILISATION:.0%}", share,
                                  "of a node", "roofline.throughput_at_max_batch",
                                  share >= MIN_NODE_UTILISATION))
            top = SIM_FIXED_SHAPE.prompt_buckets[-1]
            prompt = workload.prompt
            capped = Lengths(prompt.mean_tokens, prompt.cv, prompt.min_tokens,
                             min(prompt.max_tokens or top, top))
            waste = padding_waste(capped, SIM_FIXED_SHAPE.prompt_buckets, n=4000)
            reasons.append(Reason("prefill tokens computed as padding (a cost, not a rule)",
                                  waste.fraction, "of prefill", "choosing.padding_waste", True))
        if family in ("lpu", "dataflow"):
            faster = need > gpu_attainable
            tighter = workload.tail_ratio_max < gpu_ratio
            reasons.append(Reason(f"needs what a GPU node cannot give (speed above "
                                  f"{gpu_attainable:,.0f} tok/s or tail below {gpu_ratio:.2f})",
                                  floor.chips_to_hold, "chips per copy",
                                  "capacity.chips_to_hold", faster or tighter))
        verdicts.append(Verdict(family, floor, tuple(reasons)))
    return Decision(workload, tuple(verdicts))


# --------------------------------------------------------------------------------------
# Reading the leaderboard snapshot row by row
# --------------------------------------------------------------------------------------

#: How a leaderboard model name maps to a row of ``data/models.csv``, with the assumption.
#: ``None``: the table has no architecture for it, so no floor can be computed.
LEADERBOARD_MODELS: dict[str, tuple[str | None, str]] = {
    "Llama 3.3 70B": ("Llama 3.1 70B", "Llama 3.3 70B has the Llama 3.1 70B architecture "
                      "(Meta's model card); only the weights differ"),
    "Llama 3.3 8B": ("Llama 3.1 8B", "ASSUMED: no Llama 3.3 8B config in data/models.csv; "
                     "taken as the Llama 3.1 8B shape"),
    "DeepSeek V3.2": ("DeepSeek-V3", "ASSUMED: V3.2 keeps DeepSeek-V3's 671B total / 37B "
                      "active parameters; its sparse attention changes only the KV reads"),
    "DeepSeek R1": ("DeepSeek-V3", "DeepSeek-R1 is post-trained from DeepSeek-V3-Base: the "
                    "same architecture"),
}

#: How a leaderboard hardware family maps to a family of this module (``None``: unknown).
LEADERBOARD_FAMILIES: dict[str, str | None] = {
    "GPU cloud": "gpu",
    "LPU": "lpu",
    "wafer-scale (WSE-3)": "dataflow",
    "reconfigurable dataflow": "dataflow",
    "first-party API": None,
}

#: The HBM node the leaderboard is checked against — 8 x B200 at FP8, an ideal split with
#: no communication cost (larger NVLink domains such as NVL72, or 4-bit weights, raise it).
HBM_NODE_CHIP = "NVIDIA B200"
HBM_NODE_CHIPS = 8
HBM_NODE_PRECISION = "fp8"

#: The precision each SRAM family's own ceiling is computed at (Cerebras serves native
#: 16-bit weights per its launch claim in data/results.csv; Groq is assumed 8-bit).
SRAM_PRECISION: dict[str, str] = {"lpu": "int8", "dataflow": "fp16"}

VERDICTS = ("unknown model", "single-stream on HBM", "beyond HBM: SRAM or speculation",
            "beyond HBM on GPUs: speculative decoding")


@dataclass(frozen=True)
class RowCheck:
    """One leaderboard row against the floors.

    ``hbm_ceiling_tok_s``: the single-stream ceiling of the reference HBM node
    (``HBM_NODE_CHIPS`` x :data:`HBM_NODE_CHIP` at FP8); ``family_ceiling_tok_s``
    and ``chips_to_hold``: the row's own family, where the data has a chip for it
    (``nan`` otherwise); ``verdict``: one of ``VERDICTS``.
    """

    rank: int
    model: str
    provider: str
    hardware_family: str
    claimed_tok_s: float
    architecture: str | None
    hbm_ceiling_tok_s: float
    family_ceiling_tok_s: float
    chips_to_hold: float
    verdict: str
    assumption: str

    @property
    def ratio_to_hbm(self) -> float:
        """Claimed rate over the HBM node's ceiling (above 1 — plain HBM decoding cannot do it)."""
        return self.claimed_tok_s / self.hbm_ceiling_tok_s


def check_row(model: str, hardware_family: str, claimed_tok_s: float, *, rank: int = 0,
              provider: str = "") -> RowCheck:
    """Check one leaderboard row (model name, hardware family, output tok/s per user).

    Steps: map the model to an architecture (:data:`LEADERBOARD_MODELS`; unknown
    models cannot be checked); compute the HBM node's single-stream ceiling
    (:func:`family_floor` on 8 x B200 at FP8, active weights, no KV cache: the most
    generous plain-decoding figure any HBM node in the data allows); if the claim is
    above it, the row needs SRAM-resident weights (LPU, wafer-scale) or speculative
    decoding, and on a GPU family it can only be speculative decoding (or a smaller
    model than named). All leaderboard rates are per user, for one request's stream.

    Used in chapter 'Choosing hardware'.
    """
    claimed = _number("claimed_tok_s", claimed_tok_s, strict=True)
    if hardware_family not in LEADERBOARD_FAMILIES:
        raise ValueError(f"hardware_family: {hardware_family!r} is not one of "
                         f"{', '.join(LEADERBOARD_FAMILIES)}")
    family = LEADERBOARD_FAMILIES[hardware_family]
    architecture, note = LEADERBOARD_MODELS.get(
        model, (None, "no architecture in data/models.csv: size unknown, no floor"))
    if architecture is None:
        return RowCheck(rank, model, provider, hardware_family, claimed, None, math.nan,
                        math.nan, math.nan, VERDICTS[0], note)
    hbm = family_floor(architecture, "gpu", HBM_NODE_PRECISION, chip=HBM_NODE_CHIP,
                       chips=HBM_NODE_CHIPS)
    own_ceiling = own_chips = math.nan
    if family in SRAM_PRECISION:
        row = hardware_family if family == "lpu" else "Cerebras WSE-3"
        if hardware_family == "reconfigurable dataflow":
            note += "; SambaNova has no row in data/hardware.csv, so no own ceiling"
        else:
            own = family_floor(architecture, family, SRAM_PRECISION[family])
            own_ceiling, own_chips = own.ceiling_tok_s, float(own.chips_to_hold)
            note += f"; own ceiling on {own.chip} at {own.precision} ({row})"
    if claimed <= hbm.ceiling_tok_s:
        verdict = VERDICTS[1]
    elif family == "gpu":
        verdict = VERDICTS[3]
    else:
        verdict = VERDICTS[2]
    return RowCheck(rank, model, provider, hardware_family, claimed, architecture,
                    hbm.ceiling_tok_s, own_ceiling, own_chips, verdict, note)


def check_leaderboard(data_dir=None) -> pd.DataFrame:
    """:func:`check_row` for every row of ``data/leaderboard.csv``, as a table.

    Used in chapter 'Choosing hardware'.
    """
    board = load_table("leaderboard", data_dir)
    rows = []
    for _, row in board.iterrows():
        check = check_row(row["model"], row["hardware_family"], float(row["output_tokens_per_s"]),
                          rank=int(row["rank"]), provider=row["provider"])
        rows.append({"rank": check.rank, "model": check.model, "provider": check.provider,
                     "hardware": check.hardware_family, "claimed_tok_s": check.claimed_tok_s,
                     "ttft_ms": float(row["ttft_ms"]), "architecture": check.architecture,
                     "hbm_ceiling_tok_s": check.hbm_ceiling_tok_s,
                     "family_ceiling_tok_s": check.family_ceiling_tok_s,
                     "chips_to_hold": check.chips_to_hold, "verdict": check.verdict,
                     "assumption": check.assumption})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# Explorer: a workload -> the families that fit
# --------------------------------------------------------------------------------------


def decide_explorer_compute(model: str = "Llama 3.1 70B", precision: str = "fp8",
                            per_user_tok_s: float = 50.0, tail_ratio_max: float = 3.0,
                            changes_per_month: float = 1.0,
                            log10_tokens_per_day: float = 9.0) -> Decision:
    """The decision explorer's pure function: :func:`decide` with the volume on a log scale.

    Used in chapter 'Choosing hardware'.
    """
    volume = _number("log10_tokens_per_day", log10_tokens_per_day)
    return decide(model=model, precision=precision, per_user_tok_s=per_user_tok_s,
                  tail_ratio_max=tail_ratio_max, changes_per_month=changes_per_month,
                  tokens_per_day=10.0**volume)


def _decide_render_factory(ax):
    y = np.arange(len(FAMILIES))
    bars = ax.barh(y, np.ones(len(FAMILIES)), color=PALETTE[0])
    need = ax.axvline(1.0, color=KIND_COLORS["reported"], linestyle="--", label="needed")
    ax.set_yticks(y, [FAMILY_LABELS[f] for f in FAMILIES])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(1, 1e7)
    ax.set_xlabel("attainable single-stream tok/s per user (log)")
    ax.legend(loc="lower right", fontsize=8)
    label_kind(ax, "modelled")
    texts = [ax.text(1.2, i, "", va="center", fontsize=8, color="white", fontweight="bold")
             for i in y]

    def render(decision: Decision) -> str:
        for bar, text, verdict in zip(bars, texts, decision.verdicts, strict=True):
            bar.set_width(verdict.floor.ceiling_tok_s * ATTAINABLE_FRACTION)
            bar.set_color(PALETTE[2] if verdict.fits else "#999999")
            text.set_text("fits" if verdict.fits else verdict.against[0].text[:48])
        need.set_xdata([decision.workload.per_user_tok_s] * 2)
        lines = []
        for verdict in decision.verdicts:
            lines.append(f"{FAMILY_LABELS[verdict.family]}: "
                         + ("fits" if verdict.fits else "ruled out by "
                            + "; ".join(str(r) for r in verdict.against)))
        return " | ".join(lines)

    return render


@register("hw_decide", "analytic", CHAPTER)
def decide_explorer() -> Explorer:
    """Sliders: model, precision, speed per user, tail bound, change rate, volume."""
    import ipywidgets as w

    controls = {
        "model": w.Dropdown(options=specs.models(), value="Llama 3.1 70B", description="model"),
        "precision": w.Dropdown(options=["fp16", "fp8", "int8", "int4"], value="fp8",
                                description="precision"),
        "per_user_tok_s": w.FloatLogSlider(value=50, base=10, min=0, max=4, step=0.05,
                                           description="tok/s/user"),
        "tail_ratio_max": w.FloatSlider(value=3.0, min=1.0, max=5.0, step=0.05,
                                        description="p99/p50 max"),
        "changes_per_month": w.FloatSlider(value=1.0, min=0, max=60, step=0.5,
                                           description="changes/mo"),
        "log10_tokens_per_day": w.FloatSlider(value=9.0, min=6.0, max=12.0, step=0.1,
                                              description="log10 tok/day"),
    }
    fig, ax = figure(figsize=(8, 3.2))
    render = _decide_render_factory(ax)
    render(decide_explorer_compute(**{k: c.value for k, c in controls.items()}))
    plt.close(fig)
    return Explorer(decide_explorer_compute, render, controls, fig)
