"""Choosing hardware: every lever of the book applied to one workload at once.

Four families of inference hardware, each with a reference chip from
``data/hardware.csv`` (:data:`FAMILY_CHIPS`):

- **GPU** (H100/H200, B200, MI300X): flexible, no compile step, continuous batching;
  latency is *statistical* because the batch is decided at run time.
- **Fixed-shape** (AWS Inferentia2 with Neuron, Google TPU v5e with XLA; the data's
  family label is ``fixed-function``): programmable chips whose compilers build the
  model ahead of time for static shapes, so each change of model, precision or
  shape costs a recompilation and requests are padded to compiled lengths.
- **LPU** (Groq): weights in on-chip SRAM, a compile-time schedule, *deterministic*
  latency; tiny memory per chip, so hundreds of chips per model.
- **Dataflow and wafer-scale** (Cerebras WSE-3, SambaNova SN40L, Tenstorrent): the
  model's graph laid out over many compute units. Only Cerebras keeps the weights
  in SRAM (on the wafer); SambaNova's SN40L keeps them in HBM and DDR behind its
  on-chip SRAM, Tenstorrent's cards in GDDR6. Only Cerebras has a row in the data,
  so the family is computed with it.

The functions compute what each family does well and what it gives up, for a
workload: the layout that holds the model (:mod:`inferlab.model.feasibility`, which
refuses what does not fit), the batch-1 decode bounds of that layout
(:func:`inferlab.model.parallel.chip_spread`: the ideal tensor-parallel split inside
one scale-up domain for HBM nodes; for SRAM chips, the range between a pipeline
and an ideal split over every chip), the cost of recompiling fixed shapes and the
padding waste of a prompt-length distribution (:mod:`inferlab.serving.fixed_shapes`), and the
latency spread of a runtime-scheduled against a fixed-shape server
(:mod:`inferlab.serving.simulator`).
:func:`decide` turns them into the families that fit, each reason carrying its
number; :func:`~inferlab.leaderboard.check_leaderboard` checks a published speed table row by
row, and :mod:`inferlab.costs` prices what a family serves.

Used in chapter 'Choosing hardware'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from inferlab.benchmark.traffic import Lengths, make_requests
from inferlab.common import checks
from inferlab.model import specs
from inferlab.model.capacity import (
    ACTIVATION_RESERVE_FRACTION,
    BYTES_PER_PARAM,
    weight_bytes,
)
from inferlab.model.feasibility import Infeasible, Layout, fewest_chips, layout
from inferlab.model.parallel import ChipSpread, chip_spread
from inferlab.model.steptime import ATTAINABLE_FRACTION
from inferlab.serving.example import EXAMPLE_OUTPUT_MEAN, EXAMPLE_PROMPT, example_replica
from inferlab.serving.fixed_shapes import COMPILE_S_PER_SHAPE, padding_waste, recompile_cost
from inferlab.serving.simulator import (
    MIN_LOAD,
    FixedShape,
    Scheduler,
    offline_throughput,
    simulate,
)

#: The four families, in the order the chapter presents them.
FAMILIES = ("gpu", "fixed-function", "lpu", "dataflow")

#: How each family is named in prose and figures.
FAMILY_LABELS: dict[str, str] = {
    "gpu": "GPU",
    "fixed-function": "Fixed-shape",
    "lpu": "Groq LPU",
    "dataflow": "Dataflow / wafer-scale",
}

#: The row of ``data/hardware.csv`` each family is computed with: the B200 is the book's
#: one GPU reference (the H200 is the previous generation). TPU v5e is the other
#: fixed-shape row; SambaNova and Tenstorrent have none, so the dataflow family is
#: computed with Cerebras WSE-3, the one dataflow part the table holds (and the only one
#: of the three that keeps its weights in SRAM).
FAMILY_CHIPS: dict[str, str] = {
    "gpu": "NVIDIA B200",
    "fixed-function": "AWS Inferentia2 (per chip)",
    "lpu": "Groq LPU (GroqChip)",
    "dataflow": "Cerebras WSE-3",
}

#: The chips one serving node offers to a single stream, split tensor-parallel inside
#: its scale-up domain: an 8-GPU HGX board, an inf2.48xlarge with 12 Inferentia2 chips.
#: ``None``: the family spreads a model over as many chips as it takes to hold it.
NODE_CHIPS: dict[str, int | None] = {"gpu": 8, "fixed-function": 12, "lpu": None,
                                     "dataflow": None}

#: How each family lays a model out over the chips it uses. ``"tensor"``: every layer
#: split over the node, which :func:`inferlab.model.feasibility.layout` allows only inside
#: one scale-up domain. ``"pipeline"``: layers in stages, one stage per chip;
#: ``data/hardware.csv`` records no scale-up domain for Groq or Cerebras, so the
#: feasibility layer lays them out this way (a split of layers across their chips would
#: need a network model the book does not have).
SPLIT: dict[str, str] = {"gpu": "tensor", "fixed-function": "tensor", "lpu": "pipeline",
                         "dataflow": "pipeline"}

#: Whether a change of model, precision or shape needs an ahead-of-time compile.
NEEDS_COMPILE: dict[str, bool] = {"gpu": False, "fixed-function": True, "lpu": True,
                                  "dataflow": True}

#: Share of a month a fleet may spend recompiling before the guide says the change
#: rate is too high for a fixed-shape family (an assumption, 1 %).
MAX_COMPILE_FRACTION = 0.01

#: Share of one node's daily capacity a workload must fill before the cost-per-token
#: advantage of a fixed-function node counts (an assumption: a half-idle node
#: loses it).
MIN_NODE_UTILISATION = 0.5

DAY_S = 86400.0

#: Groq's claim of deterministic latency, taken as a p99/p50 ratio of 1 (reported, not
#: modelled: the simulator does not model a compile-time schedule of every step).
LPU_TAIL_RATIO_REPORTED = 1.0


def _family(family: str) -> str:
    return checks.option("family", family, FAMILIES)


# --------------------------------------------------------------------------------------
# What each family gives: chips to hold a model, and the single-stream ceiling
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FamilyFloor:
    """One model on one family: the layout that holds it and its batch-1 decode bounds.

    ``chips_to_hold`` is the fewest chips that hold all ``params_total`` and one
    request's cache after the reserve (:func:`inferlab.model.feasibility.fewest_chips`);
    ``layout`` the feasible layout over ``chips_used`` chips (tensor-parallel over a
    node, or a pipeline over the chips that hold the model, :data:`SPLIT`);
    ``spread`` its batch-1 bounds with no KV cache (:func:`inferlab.model.parallel.chip_spread`).

    Used in chapter 'Choosing hardware'.
    """

    family: str
    chip: str
    precision: str
    weight_bytes: float
    chips_to_hold: int
    layout: Layout
    spread: ChipSpread

    @property
    def chips_used(self) -> int:
        """Chips the layout occupies."""
        return self.layout.chips

    @property
    def fits_node(self) -> bool:
        """Whether the weights fit in the chips used (always, as the layout was checked)."""
        return self.chips_to_hold <= self.chips_used

    @property
    def pipeline_tok_s(self) -> float:
        """Per-user bound with the layers pipelined, one stage per chip."""
        return self.spread.pipeline_tok_s

    @property
    def tensor_parallel_tok_s(self) -> float:
        """Per-user bound with every layer split over all the chips, communication free."""
        return self.spread.tensor_parallel_tok_s

    @property
    def compute_tok_s(self) -> float:
        """Per-user bound from FLOPs alone in this family's split (``nan``: no published peak)."""
        seconds = (self.spread.compute_pipeline_s if self.layout.pp > 1
                   else self.spread.compute_tensor_parallel_s)
        return 1.0 / seconds if seconds == seconds else math.nan

    @property
    def ceiling_tok_s(self) -> float:
        """The bound the family's own split allows, which is the ideal tensor-parallel bound
        on a node inside its domain and the pipeline bound on a pipeline of SRAM chips."""
        return self.pipeline_tok_s if self.layout.pp > 1 else self.tensor_parallel_tok_s

    @property
    def ceiling_name(self) -> str:
        """What :attr:`ceiling_tok_s` is, in words."""
        return "pipeline bound" if self.layout.pp > 1 else "ideal tensor-parallel bound"

    @property
    def binds(self) -> str:
        """Which resource sets :attr:`ceiling_tok_s`, ``"memory"`` or ``"compute"``; where
        ``data/hardware.csv`` publishes no peak for the precision, ``"memory"`` with the
        caveat ``"memory (no compute peak published)"``."""
        compute = self.compute_tok_s
        if math.isnan(compute):
            return "memory (no compute peak published)"
        return "compute" if compute < self.ceiling_tok_s else "memory"


def family_floor(model: str | specs.ModelSpec, family: str, precision: str = "fp8",
                 *, chip: str | None = None, chips: int | None = None,
                 context_tokens: int = 1) -> FamilyFloor:
    """The layout of ``model`` at ``precision`` on ``family`` and its single-stream bounds.

    Steps: the fewest chips that hold the weights and one request of
    ``context_tokens`` tokens (:func:`inferlab.model.feasibility.fewest_chips`, 10 %
    reserve); the chips used are ``chips`` if given, else a node
    (:data:`NODE_CHIPS`) or, for SRAM families, the chips to hold; the layout is
    :func:`inferlab.model.feasibility.layout` with the family's split (:data:`SPLIT`),
    checked for one request of ``context_tokens``, so a configuration that does not
    fit, or a tensor-parallel split beyond the chip's scale-up domain, raises
    :class:`inferlab.model.feasibility.Infeasible`. The bounds are
    :func:`inferlab.model.parallel.chip_spread` with the 10 % reserve (batch 1, no KV cache,
    communication free). ``chip`` overrides the family's
    reference row (:data:`FAMILY_CHIPS`).

    Used in chapter 'Choosing hardware'.
    """
    family = _family(family)
    spec = specs.model(model) if isinstance(model, str) else model
    hw = specs.chip(chip or FAMILY_CHIPS[family])
    hold = fewest_chips(spec, hw, precision, context_tokens=context_tokens)
    if chips is None:
        node = NODE_CHIPS[family]
        used = hold if node is None else node
    else:
        used = checks.whole("chips", chips)
    split = {"tp": used} if SPLIT[family] == "tensor" else {"pp": used}
    held = layout(spec, hw, precision, **split).check(1, context_tokens)
    return FamilyFloor(family, hw.name, precision, weight_bytes(spec.params_total, precision),
                       hold, held, chip_spread(spec, hw, precision, chips=used,
                                   reserve_fraction=ACTIVATION_RESERVE_FRACTION))


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


#: The most requests :func:`latency_spread` simulates, twenty times its default. Each
#: request is simulated twice (two servers), and a few hundred thousand take seconds.
MAX_SPREAD_REQUESTS = 30_000


@cache
def latency_spread(load: float = 0.6, n: int = 1500, seed: int = 4) -> dict[str, LatencySpread]:
    """Simulate a GPU-style and a fixed-shape server on the same chip and arrivals.

    The server is the batching chapter's (Llama 2 70B, FP8, one H200,
    :func:`inferlab.serving.example.example_replica`), at ``load`` times the fixed-shape
    server's saturation rate; GPU-style is continuous batching with chunked prefill
    and paged memory, fixed-shape is :data:`SIM_FIXED_SHAPE`. Returns the two runs'
    percentiles, keyed ``"gpu"`` and ``"fixed-function"``. Cached.

    Used in chapter 'Choosing hardware'.
    """
    load = checks.real("load", load, low=MIN_LOAD, high=1.0, high_open=True)
    count = checks.whole("n", n, maximum=MAX_SPREAD_REQUESTS)
    server = example_replica()
    # The fixed-shape server holds a full compiled batch at the compiled context: refuse
    # (feasibility.Infeasible) a shape set the chip cannot hold.
    server.layout.check(SIM_FIXED_SHAPE.batch_buckets[-1], SIM_FIXED_SHAPE.context_tokens)
    output = Lengths(EXAMPLE_OUTPUT_MEAN, cv=1.0, min_tokens=2, max_tokens=1024)
    schedulers = {
        "gpu": Scheduler(max_batch=64),
        "fixed-function": Scheduler(max_batch=64, chunked_prefill=False, kv_policy="reserve",
                                    fixed_shape=SIM_FIXED_SHAPE),
    }
    saturating = make_requests(2000, EXAMPLE_PROMPT, output, arrival="all_at_once", seed=seed)
    capacity = offline_throughput(server, saturating, schedulers["fixed-function"]).requests_per_s
    arrivals = make_requests(count, EXAMPLE_PROMPT, output, rate_per_s=1.0, seed=seed + 1)
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
    book that computed it; ``passes`` says whether this reason counts for the family;
    ``label`` says it in a few words with its number, short enough for a figure's cell
    (chapter 'Choosing hardware' shows the first reason against each family that way).
    """

    text: str
    value: float
    unit: str
    computed_by: str
    passes: bool
    label: str

    def __str__(self) -> str:
        mark = "+" if self.passes else "-"
        return f"{mark} {self.text} [{self.value:,.3g} {self.unit}; {self.computed_by}]"


@dataclass(frozen=True)
class Requirements:
    """What a deployment needs (the traffic's lengths are an
    :class:`inferlab.benchmark.workload.Workload`; this is the service around them).

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
    prompt: Lengths = EXAMPLE_PROMPT
    context_tokens: int = 2048

    def __post_init__(self) -> None:
        specs.model(self.model)
        checks.option("precision", self.precision, BYTES_PER_PARAM)
        checks.positive("per_user_tok_s", self.per_user_tok_s)
        checks.real("tail_ratio_max", self.tail_ratio_max, low=1.0)
        checks.non_negative("changes_per_month", self.changes_per_month)
        checks.positive("tokens_per_day", self.tokens_per_day)
        checks.whole("context_tokens", self.context_tokens)


@dataclass(frozen=True)
class Verdict:
    """One family's verdict for a workload: ``fits`` if every reason passes.

    ``floor`` is ``None`` where the family's node cannot hold the model at all
    (the first reason then carries the feasibility layer's refusal).
    """

    family: str
    floor: FamilyFloor | None
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

    requirements: Requirements
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
    """Output tokens one fixed-shape node (12 Inferentia2 chips) can decode in a day.

    The node's layout (:func:`inferlab.model.feasibility.layout`, tensor-parallel over the 12
    chips of its NeuronLink domain) gives the most requests of ``context_tokens`` tokens
    whose cache fits (:meth:`~inferlab.model.feasibility.Layout.max_batch`); the step-time
    model of an ideal stack (:func:`inferlab.model.steptime.replica`: weights, attention,
    all-reduces) times one decode step of that batch. The rate is the batch over the
    step, times :data:`~inferlab.model.steptime.ATTAINABLE_FRACTION`, times a day; 0 if the
    node cannot hold the model. Cached.

    Used in chapter 'Choosing hardware'.
    """
    from inferlab.model.steptime import replica

    chip = specs.chip(FAMILY_CHIPS["fixed-function"])
    tp = NODE_CHIPS["fixed-function"]
    try:
        node = layout(model, chip, precision, tp=tp)
    except Infeasible:
        return 0.0
    batch = node.max_batch(context_tokens)
    if batch == 0:
        return 0.0
    node.check(batch, context_tokens)
    step_s = replica(model, chip, tp, precision).decode_step_s(batch, context_tokens)
    return batch / float(step_s) * ATTAINABLE_FRACTION * DAY_S


def _speed(floor: FamilyFloor, need: float) -> Reason:
    attainable = floor.ceiling_tok_s * ATTAINABLE_FRACTION
    fast = attainable >= need
    return Reason(f"{floor.ceiling_name} x {ATTAINABLE_FRACTION:g} on {floor.chips_used} x "
                  f"{floor.chip}, bound by {floor.binds}, vs {need:g} tok/s needed",
                  attainable, "tok/s per user", "parallel.chip_spread", fast,
                  label=f"{'fast enough' if fast else 'too slow'}: {attainable:,.0f} of "
                        f"{need:,.0f} tok/s")


def _holds(floor: FamilyFloor, context_tokens: int) -> Reason:
    return Reason(f"weights ({floor.weight_bytes / 1e9:,.0f} GB) and one {context_tokens:,}-token "
                  f"request need {floor.chips_to_hold} chip(s); {floor.chips_used} used",
                  floor.chips_to_hold, "chips", "feasibility.layout", floor.fits_node,
                  label=f"weights fit {floor.chips_to_hold:,} of {floor.chips_used:,} chips"
                  if floor.fits_node else
                  f"needs {floor.chips_to_hold:,} chips, has {floor.chips_used:,}")


def _refused(refusal: Infeasible, chips: int) -> Reason:
    return Reason(f"does not fit ({refusal.kind}): {refusal}", chips, "chips needed",
                  "feasibility.layout", False, label=f"does not fit ({refusal.kind})")


def _tail(family: str, allowed: float) -> Reason:
    ratio, kind = tail_ratio(family)
    if math.isnan(ratio):
        return Reason("no published or modelled tail for this family: test it yourself",
                      ratio, "p99/p50 TPOT", "none", False, label="no tail figure to check")
    source = "simulator.simulate" if kind == "modelled" else "Groq's claim (reported)"
    within = ratio <= allowed
    return Reason(f"p99/p50 time per output token ({kind}) within {allowed:g}", ratio,
                  "p99/p50 TPOT", source, within,
                  label=f"tail p99/p50 {ratio:.2f} {'within' if within else 'over'} {allowed:g}")


def _compile(requirements: Requirements) -> Reason:
    cost = recompile_cost(requirements.changes_per_month)
    return Reason(f"recompiling {cost.shapes} shapes {requirements.changes_per_month:g} times a "
                  f"month (at an assumed {COMPILE_S_PER_SHAPE / 60:g} min per shape) within "
                  f"{MAX_COMPILE_FRACTION:.0%} of the month", cost.fraction_of_month,
                  "of the month", "fixed_shapes.recompile_cost",
                  cost.fraction_of_month <= MAX_COMPILE_FRACTION,
                  label=f"compiling takes {cost.fraction_of_month:.1%} of the month")


def _fixed_shape_reasons(requirements: Requirements) -> list[Reason]:
    """Whether the volume keeps a fixed-shape node busy, and how much of its prefill is
    padding for the prompt lengths asked for (a cost, not a rule)."""
    capacity = node_daily_tokens(requirements.model, requirements.precision,
                                 requirements.context_tokens)
    share = requirements.tokens_per_day / capacity if capacity > 0 else math.inf
    top = SIM_FIXED_SHAPE.prompt_buckets[-1]
    prompt = requirements.prompt
    capped = Lengths(prompt.mean_tokens, prompt.cv, prompt.min_tokens,
                     min(prompt.max_tokens or top, top))
    waste = padding_waste(capped, SIM_FIXED_SHAPE.prompt_buckets, n=4000)
    return [Reason(f"volume fills one node (capacity {capacity:,.3g} tok/day) "
                   f"to at least {MIN_NODE_UTILISATION:.0%}", share,
                   "of a node", "choosing.node_daily_tokens",
                   share >= MIN_NODE_UTILISATION,
                   label=f"volume fills {share:.0%} of one node"),
            Reason("prefill tokens computed as padding (a cost, not a rule)",
                   waste.fraction, "of prefill", "fixed_shapes.padding_waste", True,
                   label=f"{waste.fraction:.0%} of prefill is padding")]


def _beyond_a_gpu(faster: bool, tighter: bool, gpu_attainable: float, gpu_ratio: float,
                  hold: int) -> Reason:
    """An LPU or dataflow system is chosen only for a speed or a tail a GPU node cannot give,
    since it takes ``hold`` chips a copy of the model."""
    return Reason(f"needs what a GPU node cannot give (speed above "
                  f"{gpu_attainable:,.0f} tok/s or tail below {gpu_ratio:.2f})",
                  hold, "chip(s) per copy",
                  "feasibility.fewest_chips", faster or tighter,
                  label=f"{hold:,} chips a copy; a GPU node would do"
                  if not (faster or tighter) else
                  f"gives what a GPU cannot, {hold:,} chips a copy")


def decide(requirements: Requirements | None = None, **values) -> Decision:
    """Which families fit ``requirements`` (or :class:`Requirements` built from ``values``).

    Rules, each reason carrying the number it was decided on (:class:`Reason`):

    - every family: the weights and one request of ``context_tokens`` fit the chips
      used (:func:`family_floor`, which asks the feasibility layer; a refusal is the
      reason against), and ``ATTAINABLE_FRACTION x`` its single-stream ceiling
      reaches ``per_user_tok_s``. The ceiling is the bound the family's split allows
      (:attr:`FamilyFloor.ceiling_tok_s`): the ideal tensor-parallel bound on a GPU or
      Inferentia2 node, the pipeline bound on SRAM chips (a split of layers across
      them could beat it; the book has no model of the network that would take);
    - GPU and fixed-shape: the modelled p99/p50 of time per output token
      (:func:`latency_spread`) is within ``tail_ratio_max``; LPU: Groq's reported
      deterministic latency; dataflow: no figure, so a tail bound below the GPU's
      modelled spread rules it out until you measure it;
    - families that compile ahead of time: recompiling on every change costs at most
      :data:`MAX_COMPILE_FRACTION` of the month
      (:func:`~inferlab.serving.fixed_shapes.recompile_cost`);
    - fixed-shape: the volume fills at least :data:`MIN_NODE_UTILISATION` of one
      node's daily capacity (:func:`node_daily_tokens`), else its cost-per-token
      advantage is idle; padding waste for the prompt distribution is reported;
    - LPU and dataflow: chosen only for what a GPU node cannot give (a speed above
      its attainable ceiling, or a tail bound tighter than its spread), since they
      need many chips per copy of the model.

    Used in chapter 'Choosing hardware'.
    """
    if requirements is None:
        requirements = Requirements(**values)
    elif values:
        raise ValueError(f"values: give requirements or values, not both ({', '.join(values)})")
    need = requirements.per_user_tok_s
    context = requirements.context_tokens
    floors, refusals = {}, {}
    for family in FAMILIES:
        try:
            floors[family] = family_floor(requirements.model, family, requirements.precision,
                                          context_tokens=context)
        except Infeasible as refusal:
            floors[family], refusals[family] = None, refusal
    gpu = floors["gpu"]
    gpu_attainable = gpu.ceiling_tok_s * ATTAINABLE_FRACTION if gpu else 0.0
    gpu_ratio, _ = tail_ratio("gpu")
    verdicts = []
    for family in FAMILIES:
        floor = floors[family]
        hold = fewest_chips(requirements.model, FAMILY_CHIPS[family], requirements.precision,
                            context_tokens=context)
        if floor is None:
            reasons = [_refused(refusals[family], hold)]
        else:
            reasons = [_holds(floor, context), _speed(floor, need)]
        reasons.append(_tail(family, requirements.tail_ratio_max))
        if family == "dataflow" and requirements.tail_ratio_max >= gpu_ratio:
            reasons[-1] = Reason("tail bound is loose (no family's tail matters)",
                                 requirements.tail_ratio_max, "p99/p50 TPOT allowed",
                                 "simulator.simulate", True, label="tail bound is loose")
        if NEEDS_COMPILE[family]:
            reasons.append(_compile(requirements))
        if family == "fixed-function":
            reasons.extend(_fixed_shape_reasons(requirements))
        if family in ("lpu", "dataflow"):
            reasons.append(_beyond_a_gpu(need > gpu_attainable,
                                         requirements.tail_ratio_max < gpu_ratio,
                                         gpu_attainable, gpu_ratio, hold))
        verdicts.append(Verdict(family, floor, tuple(reasons)))
    return Decision(requirements, tuple(verdicts))


# --------------------------------------------------------------------------------------
# What a deployment costs, and speculative decoding's arithmetic
# --------------------------------------------------------------------------------------

#: The draft step's cost as a share of a target step, for the speculative-decoding
#: estimates of chapter 'Choosing hardware': a 1B draft for a 70B target.
DRAFT_COST_RATIO = 0.05

#: The longest draft searched for a claimed speed-up (chapter 'Choosing hardware').
MAX_SPECULATIVE_DRAFT = 16


# --- speculative decoding, for every family ------------------------------------------


@dataclass(frozen=True)
class SpeculationNeed:
    """What speculative decoding must do to lift ``plain_tok_s`` to ``target_tok_s``.

    ``speedup`` is the ratio; ``acceptance_rate`` and ``draft_tokens`` the most
    forgiving setting that reaches it under the acceptance model
    (:func:`inferlab.serving.speculative.least_acceptance_for_speedup`): 0 and 0 if plain
    decoding already does. :func:`speculation_needed` refuses a target no draft up to
    :data:`MAX_SPECULATIVE_DRAFT` tokens can reach.
    """

    plain_tok_s: float
    target_tok_s: float
    speedup: float
    acceptance_rate: float
    draft_tokens: int
    draft_cost_ratio: float


def speculation_needed(plain_tok_s: float = 60.0, target_tok_s: float = 400.0,
                       draft_cost_ratio: float = DRAFT_COST_RATIO) -> SpeculationNeed:
    """The acceptance rate and draft length that lift ``plain_tok_s`` to ``target_tok_s``.

    ``speedup = target / plain``; the least acceptance over draft lengths up to
    :data:`MAX_SPECULATIVE_DRAFT`
    (:func:`inferlab.serving.speculative.least_acceptance_for_speedup`,
    ``E(a, k) / (1 + k c)``, Leviathan et al. 2023); ``ValueError`` naming
    ``target_tok_s`` if even every guess accepted cannot reach it. Verification is taken to cost one
    decode step, which holds at batch 1 on HBM and flatters SRAM chips, where checking
    ``k + 1`` positions is compute-bound: there the acceptance is a lower bound.

    Used in chapter 'Choosing hardware'.
    """
    from inferlab.serving.speculative import least_acceptance_for_speedup

    plain = checks.positive("plain_tok_s", plain_tok_s, high=1e9)
    target = checks.positive("target_tok_s", target_tok_s, high=1e9)
    cost = checks.fraction("draft_cost_ratio", draft_cost_ratio)
    ratio = target / plain
    if ratio <= 1:
        return SpeculationNeed(plain, target, ratio, 0.0, 0, cost)
    try:
        rate, draft = least_acceptance_for_speedup(ratio, cost, MAX_SPECULATIVE_DRAFT)
    except ValueError:
        raise ValueError(f"target_tok_s: {target:g} is {ratio:.3g} times plain_tok_s "
                         f"{plain:g}, out of reach with at most {MAX_SPECULATIVE_DRAFT} draft "
                         f"tokens at draft_cost_ratio {cost:g}, even if every guess is "
                         "accepted") from None
    return SpeculationNeed(plain, target, ratio, rate, draft, cost)


# --- the leaderboard's time to first token and hidden tokens ---------------------------


def end_to_end_s(ttft_s: float = 0.2, tok_s: float = 100.0, output_tokens: int = 500) -> float:
    """Seconds to receive an answer of ``output_tokens`` tokens: ``TTFT + n / rate``.

    The leaderboard's two columns combined; it says when a higher rate beats a shorter
    wait (short answers favour a small TTFT, long ones a high rate).
    Used in chapter 'Choosing hardware'.
    """
    ttft = checks.non_negative("ttft_s", ttft_s, high=3600.0)
    rate = checks.rate("tok_s", tok_s, high=1e9)
    n = checks.whole("output_tokens", output_tokens, maximum=10**7)
    return ttft + n / rate


def generated_tok_s(visible_tok_s: float = 40.0, hidden_per_visible: float = 4.0) -> float:
    """The generated rate of a reasoning model whose visible rate is ``visible_tok_s``.

    ``visible x (1 + hidden_per_visible)``, where ``hidden_per_visible`` is the number of
    thinking tokens generated per token shown, an assumption the leaderboard does not
    give (providers bill the hidden tokens but do not stream them).
    Used in chapter 'Choosing hardware'.
    """
    visible = checks.positive("visible_tok_s", visible_tok_s, high=1e9)
    hidden = checks.non_negative("hidden_per_visible", hidden_per_visible, high=1e4)
    return visible * (1.0 + hidden)
