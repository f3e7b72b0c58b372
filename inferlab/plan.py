"""Size a deployment: from a model, a workload, a service level and traffic to chips and dollars.

::

    python -m inferlab.plan --model "Llama 3.1 8B" --input-tokens 1000 --output-tokens 200 \\
        --ttft-p99 2 --tpot-p99 0.05 --rate 20
    python -m inferlab.plan ... --chips "NVIDIA H200 SXM,NVIDIA B200" --json
    python -m inferlab.plan --model "Llama 3.1 405B" --dataset llama3.1-405b --tpot-p99 0.1 \\
        --tokens-per-day 2e9

``import inferlab; inferlab.plan(...)`` calls :func:`plan`.

**What it answers.** For each chip kind (by default every chip of ``data/hardware.csv``),
the cheapest deployment that serves the traffic within the service level, and, for each
chip it does not plan, why. It is built on :func:`inferlab.predict.predict`: the same
step-time model, the same stacks, the same LoadGen-judged rate search, run on one replica
of each layout the chip allows.

**Layouts.** A replica is ``tp x pp`` chips: ``tp`` a power of two inside the chip's
scale-up domain, ``pp`` the fewest pipeline stages (a power of two) that hold the weights
at that width, and for a mixture of experts also ``ep = tp`` (each chip holds whole
experts). Two modes:

- **aggregated**: every replica prefills and decodes, with chunked prefill on and off.
  The highest Poisson rate one replica sustains with both p99s within the bounds is
  found by :func:`~inferlab.predict.predict` (``scenario="Server"`` with the bounds of
  one's own) over ``requests`` requests, and never taken above the rate the replica
  completes (a short run with a loose TTFT bound passes above it while its queue grows).
  The traffic over that rate, rounded up, is the replicas needed: a Poisson stream split
  over replicas gives each a Poisson stream of its share.
- **disaggregated** (DistServe, Splitwise): one pool prefills, another decodes. The
  prefill pool is the same search on the prompts alone (one output token each), within
  the TTFT bound less the time to send the longest prompt's KV cache to the decode pool
  over the scale-out network. The decode pool is the step-time model in closed form: the
  largest batch whose step, at the mean context of a request half-way through its answer,
  meets the TPOT bound and whose cache fits; it holds that batch full (Little's law). The
  two pools are sized apart and may differ in layout.

The search per chip is branch and bound: each layout has an upper bound on its rate (all
FLOPs at the stack's compute rate, or every step at least one read of the weights at the
largest batch the cache holds), so a layout whose fewest chips already cost more than the
best plan found is not simulated.

**Cost.** Chips times dollars per chip-hour (the cheapest row for the chip in the price
file) over tokens served per hour. ``usd_per_mtok`` is per million *output* tokens, the
single figure most price tables quote. ``usd_per_mtok_input`` and ``usd_per_mtok_output``
split the same chip-hours the way an API's two list prices do: prefill time is charged to
input tokens. In an aggregated plan that is the share of a request's modelled time its
prompt takes (its tokens' matrix multiplies at the compute rate and its attention, against
its answer's share of the decode steps it rides in); in a disaggregated plan it is the
prefill pool's chip-hours.

**Binding** names what limits a plan: ``TTFT`` or ``TPOT`` (the bound nearer its p99 when
the rate search stopped), else the resource that dominates a step at the plan's batch
(``weight bandwidth``, ``KV bandwidth``, ``KV capacity``, ``compute``, ``interconnect``,
``fixed step cost``). ``at_ceiling`` flags a search that passed at every rate it tried.

**Refusals.** A chip that cannot hold the model, has no rate at the precision, is a whole
system rather than a chip, or keeps its weights in SRAM across hundreds of chips (a
pipeline longer than the simulator's replicas), and a service level below every layout's
floor (the bandwidth floor of a token, the compute floor of a prompt, each named with its
figures), is refused with the reason. Bad input raises ``ValueError`` naming the argument.

Every figure is modelled: the stacks are fitted on MLPerf Llama 2 70B (each plan says
where its stack's numbers came from) or assumed, and the appendix 'How far the model
carries' reports how far other models drift from their audited results.

Used in chapter 'Choosing hardware'.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import types
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import numpy as np

from inferlab import checks, specs
from inferlab.calibration import Stack, stack_or_assumed
from inferlab.data import DATA_DIR, load_table, read_table
from inferlab.feasibility import Infeasible, layout
from inferlab.loadgen import RunRules
from inferlab.predict import (
    MAX_BOUND_S,
    MAX_CHIPS,
    as_stack,
    as_workload,
    predict,
    replica_for,
)
from inferlab.roofline import sustained_flop_per_s
from inferlab.scheduler import PrefillPool
from inferlab.workload import Workload, check_fits_context

#: Requests each simulated rate search draws: enough that the queue a rate builds shows in
#: the p99 (4,000 requests give the rate MLPerf's 600-second runs give within 3 % for
#: Llama 3.1 8B on one H200, 1,000 in and 200 out), few enough to plan in seconds.
DEFAULT_REQUESTS = 4000

#: Halvings of each rate search (the rate to 2^-8 of its upper limit, 0.4 %).
DEFAULT_ITERATIONS = 8

#: The two ways a replica's work is split (module docstring).
MODES = ("aggregated", "disaggregated")

#: What can bind a plan (module docstring).
BINDINGS = ("TTFT", "TPOT", "weight bandwidth", "KV bandwidth", "KV capacity", "compute",
            "interconnect", "fixed step cost")

#: Families whose chips keep the weights in on-chip SRAM: a replica spans hundreds of
#: chips, beyond the simulator's replicas (:data:`inferlab.predict.MAX_CHIPS`).
SRAM_FAMILIES = ("lpu", "wafer-scale")

#: The default weight format, first that the chip computes at: 8 bits where it can. The
#: book's data does not record the formats each model is published at, so FP4 is asked for
#: with ``precision="fp4"``, not assumed.
DEFAULT_PRECISIONS = ("fp8", "int8", "bf16")

#: The most requests per second a plan takes, and the most chips it may need.
MAX_RATE_PER_S = 1e6
MAX_PLAN_CHIPS = 1_000_000

#: A batch at least this share of the most the cache holds is bound by the cache.
FULL_CACHE = 0.95

HOUR_S = 3600.0
DAY_S = 86400.0


# --------------------------------------------------------------------------------------
# What a plan is
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pool:
    """One pool of identical replicas in a plan.

    ``role`` is ``"prefill and decode"`` (aggregated), ``"prefill"`` or ``"decode"``;
    ``rate_per_replica_s`` the requests per second one replica sustains within the bounds;
    ``ttft_p99_s`` and ``tpot_p99_s`` at that rate (``nan`` where the role has none);
    ``batch`` the most requests a replica's lane holds; ``chunked_prefill`` the engine's
    setting (``None`` for a decode pool); ``method`` how the rate was found;
    ``binding`` what limits it (:data:`BINDINGS`); ``at_ceiling`` whether the search
    passed at every rate it tried.

    Used in chapter 'Choosing hardware'.
    """

    role: str
    tp: int
    pp: int
    ep: int
    replicas: int
    rate_per_replica_s: float
    ttft_p99_s: float
    tpot_p99_s: float
    batch: int
    chunked_prefill: bool | None
    method: str
    binding: str
    at_ceiling: bool = False

    @property
    def chips(self) -> int:
        """Chips of the pool: replicas times ``tp x pp``."""
        return self.replicas * self.tp * self.pp

    def as_dict(self) -> dict:
        """The pool as JSON-ready values."""
        return {"role": self.role, "chips": self.chips, "tp": self.tp, "pp": self.pp,
                "ep": self.ep, "replicas": self.replicas,
                "rate_per_replica_s": self.rate_per_replica_s,
                "ttft_p99_s": _finite(self.ttft_p99_s), "tpot_p99_s": _finite(self.tpot_p99_s),
                "batch": self.batch, "chunked_prefill": self.chunked_prefill,
                "method": self.method, "binding": self.binding,
                "at_ceiling": self.at_ceiling}


@dataclass(frozen=True)
class Plan:
    """The cheapest deployment found on one chip kind in one mode.

    ``chips`` is every chip of every pool; ``tp``, ``pp`` and ``replicas`` are the one
    pool's of an aggregated plan (``chips = tp x pp x replicas``) and ``None`` for a
    disaggregated one, whose ``pools`` give each. ``tokens_per_s_per_chip`` is output
    tokens per second per chip at the planned traffic; ``ttft_p99_s`` and ``tpot_p99_s``
    the modelled p99s; the three costs in US dollars per million tokens (module
    docstring), ``nan`` without a price; ``stack`` and ``fitted_on`` where the engine's
    numbers came from; ``price`` the price row used.

    Used in chapter 'Choosing hardware'.
    """

    chip: str
    chips: int
    tp: int | None
    pp: int | None
    replicas: int | None
    mode: str
    precision: str
    tokens_per_s_per_chip: float
    ttft_p99_s: float
    tpot_p99_s: float
    usd_per_mtok_input: float
    usd_per_mtok_output: float
    usd_per_mtok: float
    binding: str
    pools: tuple[Pool, ...]
    stack: str
    fitted_on: str
    at_ceiling: bool
    rate_per_s: float
    usd_per_chip_hour: float
    price: str
    prefill_share: float

    @property
    def usd_per_hour(self) -> float:
        """What the plan's chips cost an hour (``nan`` without a price)."""
        return self.chips * self.usd_per_chip_hour

    def as_dict(self) -> dict:
        """The plan as JSON-ready values (``nan`` as ``null``)."""
        return {"chip": self.chip, "chips": self.chips, "tp": self.tp, "pp": self.pp,
                "replicas": self.replicas, "mode": self.mode, "precision": self.precision,
                "tokens_per_s_per_chip": self.tokens_per_s_per_chip,
                "ttft_p99_s": _finite(self.ttft_p99_s), "tpot_p99_s": _finite(self.tpot_p99_s),
                "usd_per_mtok_input": _finite(self.usd_per_mtok_input),
                "usd_per_mtok_output": _finite(self.usd_per_mtok_output),
                "usd_per_mtok": _finite(self.usd_per_mtok), "binding": self.binding,
                "pools": [pool.as_dict() for pool in self.pools], "stack": self.stack,
                "fitted_on": self.fitted_on, "at_ceiling": self.at_ceiling,
                "rate_per_s": self.rate_per_s,
                "usd_per_chip_hour": _finite(self.usd_per_chip_hour), "price": self.price,
                "prefill_share": self.prefill_share}


@dataclass(frozen=True)
class PlanResult:
    """Every chip kind's cheapest plan, cheapest first, and every chip not planned.

    ``plans`` holds one :class:`Plan` per chip kind (the cheaper mode; both modes of each
    are in ``by_mode``); ``refused`` ``(chip, reason)`` pairs. The inputs are kept as
    given, resolved: ``model``, ``workload`` (its name), the bounds (``inf`` for none) and
    ``rate_per_s``.

    Used in chapter 'Choosing hardware'.
    """

    model: str
    workload: str
    ttft_p99_s: float
    tpot_p99_s: float
    rate_per_s: float
    plans: tuple[Plan, ...]
    refused: tuple[tuple[str, str], ...]
    by_mode: tuple[Plan, ...] = field(default=(), repr=False)

    def best(self) -> Plan:
        """The cheapest plan (fewest chips where no chip has a price)."""
        if not self.plans:
            raise ValueError("plans: no chip meets the service level; see refused")
        return self.plans[0]

    def plan_for(self, chip: str, mode: str | None = None) -> Plan:
        """The plan of ``chip`` (its cheaper mode, or ``mode``)."""
        name = specs.chip(chip).name
        pool = self.plans if mode is None else [p for p in self.by_mode if p.mode == mode]
        for found in pool:
            if found.chip == name:
                return found
        reasons = dict(self.refused)
        raise ValueError(f"chip: no {mode or ''} plan for {name!r}"
                         + (f": {reasons[name]}" if name in reasons else ""))

    def as_dict(self) -> dict:
        """``{"plans": [...], "refused": [{"chip", "reason"}], "inputs": {...}}``."""
        return {"plans": [p.as_dict() for p in self.plans],
                "refused": [{"chip": chip, "reason": reason} for chip, reason in self.refused],
                "inputs": {"model": self.model, "workload": self.workload,
                           "ttft_p99_s": _finite(self.ttft_p99_s),
                           "tpot_p99_s": _finite(self.tpot_p99_s),
                           "rate_per_s": self.rate_per_s}}

    def table(self):
        """The plans as a pandas DataFrame, one row per chip kind, cheapest first."""
        import pandas as pd

        return pd.DataFrame([{
            "chip": p.chip, "mode": p.mode, "layout": _layout_text(p), "chips": p.chips,
            "precision": p.precision, "tok_s_per_chip": p.tokens_per_s_per_chip,
            "ttft_p99_ms": p.ttft_p99_s * 1e3, "tpot_p99_ms": p.tpot_p99_s * 1e3,
            "usd_per_mtok_input": p.usd_per_mtok_input,
            "usd_per_mtok_output": p.usd_per_mtok_output, "usd_per_mtok": p.usd_per_mtok,
            "binding": p.binding} for p in self.plans])


class Refused(ValueError):
    """A chip the planner does not plan, with the reason (a ``ValueError``)."""


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


# --------------------------------------------------------------------------------------
# Inputs, resolved once
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChipPrice:
    """One chip's price: dollars per chip-hour, and the row of the price file it is."""

    chip: str
    usd_per_chip_hour: float
    label: str


def chip_prices(path: str | Path | None = None) -> dict[str, ChipPrice]:
    """The cheapest price per chip in a price file (default ``data/prices.csv``), checked
    as :func:`inferlab.data.load_table` checks it; a row naming a chip
    ``data/hardware.csv`` does not know fails with its file and line."""
    if path is None:
        frame, where = load_table("prices"), DATA_DIR / "prices.csv"
    else:
        where = Path(path)
        frame = read_table("prices", where)
    found: dict[str, ChipPrice] = {}
    known = set(specs.chips())
    for line, row in enumerate(frame.to_dict("records"), start=2):
        if row["chip"] not in known:
            raise ValueError(f"{where}, line {line}, column 'chip': unknown chip "
                             f"{row['chip']!r}; give a name of data/hardware.csv")
        per_chip = float(row["usd_per_hour"]) / int(row["chips"])
        label = f"{row['id']} (${per_chip:.2f}/chip-h, {row['offer']}, {row['date']})"
        if row["chip"] not in found or per_chip < found[row["chip"]].usd_per_chip_hour:
            found[row["chip"]] = ChipPrice(row["chip"], per_chip, label)
    return found


@dataclass(frozen=True)
class _Inputs:
    """What every chip's plan shares, resolved and checked."""

    model: specs.ModelSpec
    workload: Workload
    limit_ttft_s: float
    limit_tpot_s: float
    rate_per_s: float
    precision: str | None
    stack: Stack | None
    prices: dict
    modes: tuple[str, ...]
    requests: int
    iterations: int
    max_replica_chips: int

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.limit_ttft_s) or math.isfinite(self.limit_tpot_s)

    @property
    def rules(self) -> RunRules:
        # Each search draws a fixed number of requests, not MLPerf's 600 s.
        return RunRules(min_duration_s=0.0, min_queries=self.requests,
                        offline_min_samples=self.requests)


def _bound(name: str, value) -> float:
    if value is None:
        return math.inf
    return checks.real(name, value, low=1e-6, high=MAX_BOUND_S)


def _workload(model: specs.ModelSpec, workload, input_tokens, output_tokens, seed: int):
    if (input_tokens is None) != (output_tokens is None):
        raise ValueError("output_tokens: give both input_tokens and output_tokens, or neither")
    if input_tokens is not None:
        if workload is not None:
            raise ValueError("workload: give input_tokens and output_tokens or a workload, "
                             "not both")
        return Workload.fixed(input_tokens, output_tokens, seed=seed)
    if isinstance(workload, str):
        return Workload.dataset(workload, seed=seed)
    return as_workload(workload, model)


def _traffic(workload: Workload, rate_per_s, tokens_per_day) -> float:
    if rate_per_s is not None and tokens_per_day is not None:
        raise ValueError("tokens_per_day: give rate_per_s or tokens_per_day, not both")
    if rate_per_s is not None:
        return checks.real("rate_per_s", rate_per_s, low=1e-6, high=MAX_RATE_PER_S)
    if tokens_per_day is not None:
        per_day = checks.real("tokens_per_day", tokens_per_day, low=1.0,
                              high=MAX_RATE_PER_S * DAY_S)
        return per_day / DAY_S / workload.mean_tokens()[1]
    if workload.is_trace:
        return workload.native_rate_per_s
    raise ValueError("rate_per_s: give the traffic, as rate_per_s (requests per second) or "
                     "tokens_per_day (output tokens a day); a trace brings its own rate")


# --------------------------------------------------------------------------------------
# The planner
# --------------------------------------------------------------------------------------


def plan(model, *, input_tokens: int | None = None, output_tokens: int | None = None,
         workload=None, ttft_p99_s: float | None = None, tpot_p99_s: float | None = None,
         per_user_tok_s: float | None = None, rate_per_s: float | None = None,
         tokens_per_day: float | None = None, precision: str | None = None, chips=None,
         prices=None, stack=None, modes=MODES, requests: int = DEFAULT_REQUESTS,
         seed: int = 0, iterations: int = DEFAULT_ITERATIONS,
         max_replica_chips: int = MAX_CHIPS) -> PlanResult:
    """The cheapest deployment of ``model`` on each chip kind that serves the traffic within
    the service level (module docstring).

    ``model`` is a name of ``data/models.csv`` or a :class:`~inferlab.specs.ModelSpec`. The
    workload is ``input_tokens`` and ``output_tokens`` (every request exactly so), or
    ``workload``: a :class:`~inferlab.workload.Workload` (a trace's included), an MLPerf
    data set's name, or by default the model's own MLPerf data set. The service level is
    any of ``ttft_p99_s``, ``tpot_p99_s`` and ``per_user_tok_s`` (a TPOT bound of its
    inverse); none is batch work, judged as Offline. The traffic is ``rate_per_s``
    (requests per second) or ``tokens_per_day`` (output tokens); a trace brings its own.
    ``precision`` is the weights' format (default: the first of
    :data:`DEFAULT_PRECISIONS` the chip computes); ``chips`` a list of chip names or
    :class:`~inferlab.specs.Chip` (default every chip of ``data/hardware.csv``);
    ``prices`` a price file (default ``data/prices.csv``) or a dict of
    :class:`ChipPrice`; ``stack`` a stack name or :class:`~inferlab.calibration.Stack`
    used on every chip (default: each vendor's calibrated stack, else the assumed one);
    ``modes`` any of :data:`MODES`; ``requests``, ``seed`` and ``iterations`` set each
    simulated search; ``max_replica_chips`` caps one replica's chips.

    Raises ``ValueError`` naming the argument for an unknown model or chip, a length of 0
    or beyond the context, a bound or rate of 0 or less, an unreadable price file.

    Used in chapter 'Choosing hardware'.
    """
    spec = specs.as_model(model)
    seed = checks.seed("seed", seed)
    work = _workload(spec, workload, input_tokens, output_tokens, seed)
    check_fits_context(work, spec.context_length_tokens, spec.name)
    ttft = _bound("ttft_p99_s", ttft_p99_s)
    tpot = _bound("tpot_p99_s", tpot_p99_s)
    if per_user_tok_s is not None:
        tpot = min(tpot, 1.0 / checks.real("per_user_tok_s", per_user_tok_s, low=1 / MAX_BOUND_S,
                                           high=1e6))
    rate = _traffic(work, rate_per_s, tokens_per_day)
    if isinstance(modes, str) or not set(modes) <= set(MODES) or not modes:
        raise ValueError(f"modes: {modes!r}; give a list of {', '.join(MODES)}")
    if precision is not None:
        precision = checks.text("precision", precision)
    kinds = _chip_list(chips)
    price_table = prices if isinstance(prices, dict) else chip_prices(prices)
    inputs = _Inputs(spec, work, ttft, tpot, rate, precision,
                     None if stack is None else as_stack(stack, kinds[0], precision or "fp8"),
                     price_table, tuple(m for m in MODES if m in modes),
                     checks.whole("requests", requests, maximum=200_000),
                     checks.iterations("iterations", iterations),
                     checks.whole("max_replica_chips", max_replica_chips, maximum=MAX_CHIPS))
    planned, refused, every = [], [], []
    for hw in kinds:
        try:
            found = _plan_chip(hw, inputs)
        except (Refused, Infeasible) as error:
            refused.append((hw.name, str(error)))
            continue
        every.extend(found)
        planned.append(min(found, key=_cost_key))
    planned.sort(key=_cost_key)
    return PlanResult(spec.name, work.name, ttft, tpot, rate, tuple(planned), tuple(refused),
                      tuple(every))


def _chip_list(chips) -> list[specs.Chip]:
    if chips is None:
        return [specs.chip(name) for name in specs.chips()]
    if isinstance(chips, (str, specs.Chip)):
        chips = [chips]
    kinds = [specs.as_chip(chip) for chip in chips]
    if not kinds:
        raise ValueError("chips: give at least one chip name")
    return kinds


def _cost_key(found: Plan) -> tuple:
    # Cheapest first; without a price, fewest chips.
    cost = found.usd_per_hour
    return (not math.isfinite(cost), cost if math.isfinite(cost) else found.chips, found.chips)


def _default_precision(hw: specs.Chip) -> str:
    for precision in DEFAULT_PRECISIONS:
        if _computes(hw, precision):
            return precision
    raise Refused(f"{hw.name}: data/hardware.csv gives it no dense rate at "
                  f"{', '.join(DEFAULT_PRECISIONS)}")


def _computes(hw: specs.Chip, precision: str) -> bool:
    try:
        rate = sustained_flop_per_s(hw, precision)
    except ValueError:
        return False
    return math.isfinite(rate) and rate > 0


def _plan_chip(hw: specs.Chip, inputs: _Inputs) -> list[Plan]:
    """Every mode's cheapest plan on one chip kind, or :class:`Refused` with the reason."""
    if hw.family == "system":
        raise Refused(f"{hw.name} is a whole system, not a chip; plan the chip it is built of")
    if hw.family in SRAM_FAMILIES:
        raise Refused(_sram_reason(hw, inputs))
    precision = inputs.precision or _default_precision(hw)
    if not _computes(hw, precision):
        raise Refused(f"{hw.name} has no dense {precision} rate in data/hardware.csv; give "
                      "another precision")
    stack = inputs.stack or stack_or_assumed(hw, precision)
    layouts = _replica_layouts(hw, inputs.model, precision, inputs.max_replica_chips)
    context = _Chip(hw, precision, stack, inputs,
                    inputs.prices.get(hw.name, ChipPrice(hw.name, math.nan, "no price")))
    plans, reasons = [], []
    for mode in inputs.modes:
        try:
            plans.append(_aggregated(context, layouts) if mode == "aggregated"
                         else _disaggregated(context, layouts))
        except Refused as error:
            reasons.append(f"{mode}: {error}")
    if not plans:
        raise Refused("; ".join(reasons))
    return plans


@dataclass(frozen=True)
class _Chip:
    """One chip kind's part of a plan: the chip, format, stack, shared inputs and price."""

    hw: specs.Chip
    precision: str
    stack: Stack
    inputs: _Inputs
    price: ChipPrice

    def replica(self, tp: int, pp: int, ep: int, workload: Workload | None = None):
        return replica_for(self.hw, self.inputs.model, self.precision, self.stack,
                           workload or self.inputs.workload, tp, pp, ep)

    def scheduler(self):
        return self.stack.scheduler(self.hw.name, "Server")

    def cost_per_hour(self, chips: int) -> float:
        # Without a price, rank by chips.
        price = self.price.usd_per_chip_hour
        return chips * (price if math.isfinite(price) else 1.0)


def _replica_layouts(hw: specs.Chip, model: specs.ModelSpec, precision: str,
                     most: int) -> list[tuple[int, int, int]]:
    """``(tp, pp, ep)`` of every replica the planner tries on ``hw`` (module docstring)."""
    found, last = [], None
    widths = [1 << k for k in range(8) if (1 << k) <= max(1, min(hw.domain_chips or 1, most))]
    for tp in widths:
        pp = 1
        while tp * pp <= most:
            try:
                layout(model, hw, precision, tp=tp, pp=pp)
            except Infeasible as error:
                last = error
                if error.kind == "domain":
                    break
                pp *= 2
                continue
            experts = {1}
            if model.experts > 1 and model.experts_per_token < model.experts \
                    and model.experts % tp == 0:
                experts.add(tp)
            found.extend((tp, pp, ep) for ep in sorted(experts))
            break
    if not found:
        if last is not None:
            raise Refused(str(last))
        raise Refused(f"no replica of at most {most} x {hw.name} holds {model.name}")
    return found


# ---- aggregated -----------------------------------------------------------------------


def _aggregated(chip: _Chip, layouts) -> Plan:
    """Replicas that prefill and decode: per layout, the search's rate over the traffic
    gives the replicas. Layouts are searched with the stack's own engine, cheapest upper
    bound first, until no later one can be cheaper; the winner is then searched with
    chunked prefill switched the other way, and keeps whichever needs fewer chips."""
    inputs = chip.inputs
    work = inputs.workload
    mean_in, mean_out = work.mean_tokens()
    candidates, floors = [], []
    for tp, pp, ep in layouts:
        rep = chip.replica(tp, pp, ep)
        floor = _floor(rep, work, inputs.limit_ttft_s, inputs.limit_tpot_s)
        if floor:
            floors.append(floor)
            continue
        bound = _rate_bound(rep, chip.scheduler(), mean_in, mean_out, inputs.limit_tpot_s)
        fewest = tp * pp * math.ceil(inputs.rate_per_s / bound)
        candidates.append((chip.cost_per_hour(fewest), tp, pp, ep, rep, bound))
    if not candidates:
        raise Refused(_floor_reason(floors))
    candidates.sort(key=lambda item: item[:4])
    own = chip.scheduler()
    best, winner = None, None
    for lowest, tp, pp, ep, rep, bound in candidates:
        if best is not None and lowest >= chip.cost_per_hour(best.chips):
            break  # sorted: no later layout can be cheaper
        pool = _aggregated_pool(chip, tp, pp, ep, own, rep, bound)
        if pool is not None and (best is None or pool.chips < best.chips):
            best, winner = pool, (tp, pp, ep, rep, bound)
    for engine in _engines(own):
        if winner is None or engine.chunked_prefill == own.chunked_prefill:
            continue
        pool = _aggregated_pool(chip, *winner[:3], engine, *winner[3:])
        if pool is not None and pool.chips < best.chips:
            best = pool
    if best is None:
        raise Refused(f"no layout of {chip.hw.name} meets the bounds at any rate the search "
                      "tried")
    rep = chip.replica(best.tp, best.pp, best.ep)
    share = _prefill_share(rep, mean_in, mean_out, best.batch)
    return _priced(chip, "aggregated", (best,), share, best.ttft_p99_s, best.tpot_p99_s,
                   best.binding, best.at_ceiling)


def _engines(scheduler) -> list:
    """The stack's engine with chunked prefill on and off, where the engine allows both
    (an engine scheduling in rounds prefills whole prompts only)."""
    found = []
    for chunked in (True, False):
        try:
            found.append(replace(scheduler, chunked_prefill=chunked))
        except ValueError:
            continue
    return found or [scheduler]


def _search(chip: _Chip, tp: int, pp: int, ep: int, engine, workload: Workload,
            ttft: float, tpot: float, bound: float = math.inf):
    """:func:`~inferlab.predict.predict` on one replica with ``engine``: the Server search
    within the bounds, or steady Offline where there are none. ``bound`` (requests per
    second no replica exceeds, :func:`_rate_bound`) starts the search at
    :data:`BOUND_MARGIN` times it instead of at an Offline run; a search that passes there
    is run again from the Offline rate."""
    inputs = chip.inputs
    stack = replace(chip.stack, custom_engine=engine)
    if not (math.isfinite(ttft) or math.isfinite(tpot)):
        return predict(chip.hw, tp * pp, inputs.model, chip.precision, "Offline",
                       workload=workload, stack=stack, tps=[tp], pp=pp, ep=ep,
                       rules=inputs.rules)
    for upper in ((BOUND_MARGIN * bound, None) if math.isfinite(bound) else (None,)):
        found = predict(chip.hw, tp * pp, inputs.model, chip.precision, "Server",
                        workload=workload, stack=stack, rules=inputs.rules, tps=[tp], pp=pp,
                        ep=ep, ttft_p99_s=None if math.isinf(ttft) else ttft,
                        tpot_p99_s=None if math.isinf(tpot) else tpot,
                        iterations=inputs.iterations, upper_rate_per_s=upper)
        if not found.at_ceiling:
            break
    return found


#: The Server search starts this far above a replica's rate bound: the bound is of means
#: (a batch held steady), and a Poisson stream's p99 is judged below it.
BOUND_MARGIN = 1.1


#: A search whose rate is within this share of the rate the replica completed requests at,
#: or whose p99 is within it of its bound, is bound by that bound (else by a resource).
RATE_TOLERANCE = 0.05


def _aggregated_pool(chip: _Chip, tp, pp, ep, engine, rep, bound: float) -> Pool | None:
    """One replica's highest rate within the bounds, and the replicas the traffic needs."""
    inputs = chip.inputs
    work = inputs.workload
    mean_in, mean_out = work.mean_tokens()
    found = _search(chip, tp, pp, ep, engine, work, inputs.limit_ttft_s, inputs.limit_tpot_s,
                    bound)
    if not found.valid or not found.tokens_per_s:
        return None
    # A finite run passes above what the replica completes while its queue grows; the
    # rate it sustains is at most the rate it finished requests at.
    done = found.tokens_per_s / mean_out
    if inputs.bounded:
        rate = min(found.rate_per_s, done)
        method = (f"simulated: the highest Poisson rate whose p99s meet the bounds, "
                  f"{inputs.requests:,} requests judged as LoadGen judges a Server run")
        binding = _bound_binding(found, inputs)
        if binding is None or found.at_ceiling or rate < found.rate_per_s * (1 - RATE_TOLERANCE):
            binding = _resource(rep, found.batch, mean_in, mean_out)
    else:
        rate = done
        method = "simulated: steady Offline (no latency bound)"
        binding = _resource(rep, found.batch, mean_in, mean_out)
    if rate <= 0:
        return None
    replicas = math.ceil(inputs.rate_per_s / rate)
    if replicas * tp * pp > MAX_PLAN_CHIPS:
        raise Refused(f"the traffic needs more than {MAX_PLAN_CHIPS:,} chips")
    return Pool("prefill and decode", tp, pp, ep, replicas, rate, found.ttft_p99_s,
                found.tpot_p99_s, found.batch, engine.chunked_prefill, method, binding,
                found.at_ceiling)


def _bound_binding(found, inputs: _Inputs) -> str | None:
    """``"TTFT"`` or ``"TPOT"``, whichever p99 is nearer its bound, if within
    :data:`RATE_TOLERANCE` of it; else ``None``."""
    near = {}
    if math.isfinite(inputs.limit_ttft_s):
        near["TTFT"] = found.ttft_p99_s / inputs.limit_ttft_s
    if math.isfinite(inputs.limit_tpot_s):
        near["TPOT"] = found.tpot_p99_s / inputs.limit_tpot_s
    if not near:
        return None
    name = max(near, key=near.get)
    return name if near[name] >= 1 - RATE_TOLERANCE else None


def _rate_bound(rep, scheduler, mean_in: float, mean_out: float, tpot: float) -> float:
    """An upper bound on the requests per second one replica completes within the TPOT
    bound: every FLOP at the stack's compute rate, every step one read of the weights (and
    the fixed cost) at the largest batch its cache and engine hold, and no more than the
    decode steps alone allow within the bound (:func:`_decode_rate`)."""
    per_request = rep.flop_per_token * (mean_in + mean_out)
    compute = rep.lanes * rep.peak_flop_per_s * rep.compute_efficiency / per_request
    batch = max(1, min(scheduler.max_batch,
                       int(rep.kv_capacity_tokens // max(1.0, mean_in + mean_out))))
    step = float(rep.weights_s(batch)) + rep.step_overhead_s
    memory = rep.lanes * batch / (mean_out * step)
    decode = _decode_rate(rep, scheduler, mean_in, mean_out, tpot)
    return min(compute, memory, decode[2] if decode else math.inf)


def _decode_rate(rep, scheduler, mean_in: float, mean_out: float, tpot: float):
    """The decode steps' own limit: the largest batch whose step, at the mean context of a
    request half-way through its answer, is within ``tpot`` and whose cache fits and the
    engine admits, held full (Little's law). ``(batch, step_s, requests_per_s, most)``,
    or ``None`` if even one request's step is over the bound (or its cache does not fit);
    ``most`` is the largest batch cache and engine allow."""
    holds = int(rep.kv_capacity_tokens // max(1.0, mean_in + mean_out))
    most = min(scheduler.max_batch, holds)
    if most < 1:
        return None
    batch = np.arange(1, most + 1, dtype=float)
    step = rep.decode_step_s(batch, mean_in + mean_out / 2)
    within = np.flatnonzero(step <= tpot)
    if not within.size:
        return None
    size = int(within[-1]) + 1
    return size, float(step[size - 1]), rep.lanes * size / float(step[size - 1]) / mean_out, most


def _floor(rep, work: Workload, ttft: float, tpot: float) -> tuple | None:
    """Why no rate of this replica can meet the bounds, or ``None``: its fastest token (one
    request at the mean prompt's context) over the TPOT bound, or its longest prompt
    prefilled alone over the TTFT bound."""
    prompts = work.lengths(10_000)[0] if not work.pairs else [p for p, _ in work.pairs]
    token_s = float(rep.step_s(float(np.mean(prompts)), 1))
    if token_s > tpot:
        return ("TPOT", token_s, tpot, rep)
    prompt_s = float(rep.prefill_s(int(np.max(prompts))))
    if prompt_s > ttft:
        return ("TTFT", prompt_s, ttft, rep)
    return None


def _floor_reason(floors) -> str:
    """The refusal when every layout is below its floor, naming the best floor's figures."""
    kind = "TPOT" if any(f[0] == "TPOT" for f in floors) else "TTFT"
    relevant = [f for f in floors if f[0] == kind]
    best = min(relevant, key=lambda f: f[1])
    rep, bound = best[3], best[2]
    if kind == "TPOT":
        weights = rep.weight_bytes / rep.lanes
        ideal = weights / rep.bandwidth_bytes_per_s
        return (f"a TPOT p99 of {_ms(bound)} is below every layout's floor: the fastest, "
                f"{rep.name}, takes {_ms(best[1])} a token at batch 1 (its "
                f"{weights / 1e9:,.1f} GB of weights per lane over {rep.tp} chips' "
                f"{rep.bandwidth_bytes_per_s / 1e12:,.1f} TB/s alone take {_ms(ideal)})")
    return (f"a TTFT p99 of {_ms(bound)} is below every layout's floor: the fastest, "
            f"{rep.name}, prefills the longest prompt alone in {_ms(best[1])}")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3g} ms" if seconds < 1 else f"{seconds:,.3g} s"


def _sram_reason(hw: specs.Chip, inputs: _Inputs) -> str:
    precision = inputs.precision or _default_precision(hw)
    from inferlab.capacity import weight_bytes

    need = weight_bytes(inputs.model.params_total, precision)
    chips = math.ceil(need / hw.memory_capacity_bytes)
    floor = need / (chips * hw.memory_bandwidth_bytes_per_s)
    return (f"{hw.name} keeps the weights in SRAM: {inputs.model.name} at {precision} "
            f"({need / 1e9:,.0f} GB) spans at least {chips:,} chips, a pipeline past the "
            f"simulator's {MAX_CHIPS}-chip replicas; by its own bound a token takes at least "
            f"{_ms(floor)} (its weights over those chips' SRAM bandwidth), and chapter "
            "'Choosing hardware' models such pipelines in closed form")


def _resource(rep, batch: int, mean_in: float, mean_out: float) -> str:
    """The term that dominates a steady step at ``batch`` requests (module docstring)."""
    batch = max(1, int(batch))
    most = int(rep.kv_capacity_tokens // max(1.0, mean_in + mean_out))
    if batch >= FULL_CACHE * most:
        return "KV capacity"
    # A steady step carries each request's share of its prompt beside its next token.
    return _dominant(rep, batch * (1 + mean_in / mean_out), batch * (mean_in + mean_out / 2))


def _dominant(rep, tokens: float, context: float, pairs: float | None = None) -> str:
    """The largest term of a step of ``tokens`` tokens reading ``context`` cached tokens."""
    read, work = float(rep.weights_s(tokens)), float(rep.matmul_s(tokens))
    cache = float(rep.attention_s(context))
    # A prompt's attention is arithmetic on (query, key) pairs, not a read of the cache.
    work += max(0.0, float(rep.attention_s(context, pairs)) - cache) if pairs else 0.0
    terms = {"weight bandwidth": read if read >= work else 0.0,
             "compute": work if work > read else 0.0,
             "KV bandwidth": cache,
             "interconnect": float(rep.allreduce_s(tokens)),
             "fixed step cost": rep.step_overhead_s}
    return max(terms, key=terms.get)


def _prefill_share(rep, mean_in: float, mean_out: float, batch: int) -> float:
    """The share of a request's modelled time its prompt takes (module docstring)."""
    batch = max(1, int(batch))
    prompt_s = float(rep.matmul_s(mean_in)) + float(
        rep.attention_s(mean_in, mean_in * (mean_in + 1) / 2))
    step = float(rep.decode_step_s(batch, mean_in + mean_out / 2))
    answer_s = mean_out * step / batch
    return prompt_s / (prompt_s + answer_s)


# ---- disaggregated --------------------------------------------------------------------


def _disaggregated(chip: _Chip, layouts) -> Plan:
    """Decode replicas, each fed by prefill servers of its own, simulated as one unit.

    Per (decode layout, prefill layout) pair: the decode replicas the closed form needs
    (:func:`_decode_rates`), the prefill servers that keep pace with each at
    :data:`PREFILL_LOAD`, then :func:`~inferlab.predict.predict` searches the unit's highest
    rate within the bounds; a unit that falls short of its share of the traffic gets more
    replicas and is searched again. Pairs are tried cheapest lower bound first."""
    inputs = chip.inputs
    hw, work = chip.hw, inputs.workload
    if not (math.isfinite(hw.scaleout_bytes_per_s) and hw.scaleout_bytes_per_s > 0):
        raise Refused(f"data/hardware.csv gives {hw.name} no scale-out bandwidth to send the "
                      "KV cache from the prefill pool to the decode pool")
    mean_in, mean_out = work.mean_tokens()
    prompts = work.lengths(min(inputs.requests, 10_000))[0]
    decoders, floors = _decode_rates(chip, layouts, mean_in, mean_out)
    candidates = []
    for tp, pp, ep in layouts:
        rep = chip.replica(tp, pp, ep)
        prefill_s = float(np.mean(rep.prefill_s(prompts)))
        longest = float(rep.prefill_s(int(np.max(prompts)))) + _transfer_s(
            rep, hw, int(np.max(prompts)))
        if longest > inputs.limit_ttft_s:
            floors.append(("TTFT", longest, inputs.limit_ttft_s, rep))
            continue
        for decode in decoders:
            # Chips per request per second: a decode replica's share plus its prefill.
            per_request = decode.tp * decode.pp / decode.rate_per_replica_s + tp * pp * prefill_s
            # At least one decode replica and one prefill server, whatever the traffic.
            lower = max(decode.tp * decode.pp + tp * pp,
                        math.ceil(per_request * inputs.rate_per_s))
            candidates.append((lower, (tp, pp, ep), rep, prefill_s, decode))
    if not decoders or not candidates:
        raise Refused(_floor_reason(floors) if floors else
                      "no decode layout holds one request's cache")
    candidates.sort(key=lambda item: (item[0], item[1]))
    best = None
    for lower, (tp, pp, ep), rep, prefill_s, decode in candidates:
        if best is not None and chip.cost_per_hour(lower) >= \
                chip.cost_per_hour(best[0].chips + best[1].chips):
            break  # sorted: no later pair can be cheaper
        found = _disaggregated_unit(chip, (tp, pp, ep), rep, prefill_s, decode)
        if found is None:
            continue
        if best is None or chip.cost_per_hour(found[0].chips + found[1].chips) < \
                chip.cost_per_hour(best[0].chips + best[1].chips):
            best = found
    if best is None:
        raise Refused("no pair of prefill and decode layouts meets the bounds at any rate "
                      "the search tried")
    prefill, decode, search = best
    share = prefill.chips / (prefill.chips + decode.chips)
    binding = decode.binding if search.tpot_p99_s / inputs.limit_tpot_s >= (
        search.ttft_p99_s / inputs.limit_ttft_s) else "TTFT"
    return _priced(chip, "disaggregated", (prefill, decode), share, search.ttft_p99_s,
                   search.tpot_p99_s, binding, search.at_ceiling)


#: The share of its time a prefill server is planned busy: below 1, so its queue (and the
#: TTFT it adds) stays short; the simulation then judges the TTFT it gives.
PREFILL_LOAD = 0.85

#: How many times a disaggregated unit is resized after a search that fell short.
RESIZES = 4


def _transfer_s(rep, hw: specs.Chip, prompt_tokens: int) -> float:
    """Seconds to send one prompt's KV cache from a prefill replica over its chips'
    scale-out links."""
    return prompt_tokens * rep.kv_bytes_per_token / (rep.tp * rep.lanes * hw.scaleout_bytes_per_s)


def _decode_rates(chip: _Chip, layouts, mean_in: float, mean_out: float):
    """Each decode layout's closed-form rate (:func:`_decode_rate`) as a one-replica
    :class:`Pool`, the two cheapest per request first, and the TPOT floors of the layouts
    too slow for the bound."""
    inputs = chip.inputs
    found, floors = [], []
    for tp, pp, ep in layouts:
        rep = chip.replica(tp, pp, ep)
        decode = _decode_rate(rep, chip.scheduler(), mean_in, mean_out, inputs.limit_tpot_s)
        if decode is None:
            floors.append(("TPOT", float(rep.decode_step_s(1, mean_in)), inputs.limit_tpot_s,
                           rep))
            continue
        size, step, rate, most = decode
        holds = rep.kv_capacity_tokens // max(1.0, mean_in + mean_out)
        binding = ("KV capacity" if size >= FULL_CACHE * holds else
                   "TPOT" if size < most else _resource(rep, size, mean_in, mean_out))
        found.append(Pool("decode", tp, pp, ep, 1, rate, math.nan, step, size, None, "",
                          binding))
    found.sort(key=lambda pool: pool.tp * pool.pp / pool.rate_per_replica_s)
    # The two cheapest per request are enough: a wider decode replica only pays off
    # where its cache holds a larger batch, which the ordering already weighs.
    return found[:2], floors


def _disaggregated_unit(chip: _Chip, prefill_layout, prefill_rep, prefill_s: float,
                        decode: Pool):
    """The pools of one (prefill, decode) pair sized for the traffic and searched, or
    ``None`` if no size meets the bounds."""
    inputs = chip.inputs
    hw = chip.hw
    tp, pp, ep = prefill_layout
    prefill_tokens = inputs.workload.mean_tokens()[0]
    replicas = max(1, math.ceil(inputs.rate_per_s / decode.rate_per_replica_s))
    for _ in range(RESIZES):
        share = inputs.rate_per_s / replicas
        servers = max(1, math.ceil(share * prefill_s / PREFILL_LOAD))
        pool = PrefillPool(prefill_rep.prefill_s, prefill_rep.kv_bytes_per_token,
                           tp * pp * hw.scaleout_bytes_per_s, servers)
        engine = replace(chip.scheduler(), chunked_prefill=False, scheduler_steps=1,
                         min_prefill_queries=1, fixed_shape=None, disaggregated=pool)
        search = _search(chip, decode.tp, decode.pp, decode.ep, engine, inputs.workload,
                         inputs.limit_ttft_s, inputs.limit_tpot_s,
                         min(decode.rate_per_replica_s, servers / prefill_s))
        if search is None or not search.valid or not search.rate_per_s:
            return None
        rate = min(search.rate_per_s, search.tokens_per_s / inputs.workload.mean_tokens()[1])
        if rate >= share * (1 - RATE_TOLERANCE):
            break
        replicas = math.ceil(inputs.rate_per_s / rate)
    else:
        return None
    if replicas * (decode.tp * decode.pp + servers * tp * pp) > MAX_PLAN_CHIPS:
        raise Refused(f"the traffic needs more than {MAX_PLAN_CHIPS:,} chips")
    method = (f"simulated as one unit: a decode replica fed by {servers} prefill server(s) "
              f"first come first served, the highest Poisson rate within the bounds over "
              f"{inputs.requests:,} requests")
    prefill = Pool("prefill", tp, pp, ep, replicas * servers, rate / servers,
                   search.ttft_p99_s, math.nan, 1, False, method,
                   _dominant(prefill_rep, prefill_tokens, 0.0, prefill_tokens ** 2 / 2))
    decode_pool = replace(decode, replicas=replicas, rate_per_replica_s=rate,
                          ttft_p99_s=math.nan, tpot_p99_s=search.tpot_p99_s,
                          batch=search.batch, method=method, at_ceiling=search.at_ceiling)
    return prefill, decode_pool, search


# ---- pricing --------------------------------------------------------------------------


def _priced(chip: _Chip, mode: str, pools: tuple[Pool, ...], prefill_share: float,
            ttft_p99: float, tpot_p99: float, binding: str, at_ceiling: bool) -> Plan:
    inputs = chip.inputs
    mean_in, mean_out = inputs.workload.mean_tokens()
    chips = sum(pool.chips for pool in pools)
    rate = inputs.rate_per_s
    per_hour = chips * chip.price.usd_per_chip_hour
    output_per_hour = rate * mean_out * HOUR_S
    input_per_hour = rate * mean_in * HOUR_S
    one = pools[0] if mode == "aggregated" else None
    return Plan(
        chip.hw.name, chips, one.tp if one else None, one.pp if one else None,
        one.replicas if one else None, mode, chip.precision, rate * mean_out / chips,
        ttft_p99, tpot_p99, per_hour * prefill_share / input_per_hour * 1e6,
        per_hour * (1 - prefill_share) / output_per_hour * 1e6,
        per_hour / output_per_hour * 1e6, binding, pools, chip.stack.name,
        fitted_on(chip.stack), at_ceiling, rate, chip.price.usd_per_chip_hour,
        chip.price.label, prefill_share)


def fitted_on(stack: Stack) -> str:
    """Where a stack's numbers came from, in a sentence: the audited rows it was fitted on
    (model, chips, rounds), or that it is assumed or set by hand."""
    checks.instance("stack", stack, Stack)
    if not stack.fitted_on:
        if stack.name.startswith("assumed"):
            return ("assumed, not fitted: a share of peak and TensorRT-LLM FP8's fixed cost "
                    "per step (inferlab.calibration.assumed_stack)")
        return f"set by hand (stack {stack.name!r}); nothing fitted"
    rows = _llama2_rows()
    chips = sorted({rows[row_id] for row_id in stack.fitted_on if row_id in rows})
    rounds = sorted({row_id.split("-")[0] for row_id in stack.fitted_on})
    span = rounds[0] if len(rounds) == 1 else f"{rounds[0]}-{rounds[-1]}"
    return (f"compute efficiency and fixed cost per step fitted on Llama 2 70B, "
            f"{' and '.join(chips)}, MLPerf {span} ({len(stack.fitted_on)} audited rows)")


@cache
def _llama2_rows() -> dict[str, str]:
    frame = load_table("mlperf_llama2_70b")
    return {row["id"]: f"{row['accelerators']} x {row['accelerator']}"
            for row in frame.to_dict("records")}


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def _layout_text(found: Plan) -> str:
    parts = []
    for pool in found.pools:
        text = f"tp{pool.tp}" + (f"xpp{pool.pp}" if pool.pp > 1 else "") + (
            f" ep{pool.ep}" if pool.ep > 1 else "") + f" x{pool.replicas}"
        parts.append(text if found.mode == "aggregated" else f"{pool.role[0].upper()}: {text}")
    return " + ".join(parts)


def format_result(result: PlanResult) -> str:
    """The plans as a terminal table, then the refusals."""
    def money(value: float) -> str:
        return f"{value:8.3f}" if math.isfinite(value) else "       -"

    lines = [f"{result.model}, {result.workload}; TTFT p99 <= "
             f"{_bound_text(result.ttft_p99_s)}, TPOT p99 <= {_bound_text(result.tpot_p99_s)}, "
             f"{result.rate_per_s:,.3g} requests/s (modelled)",
             f"{'chip':<30s} {'mode':<13s} {'layout':<24s} {'chips':>6s} {'prec':<5s} "
             f"{'tok/s/chip':>10s} {'TTFT ms':>8s} {'TPOT ms':>8s} {'$/M in':>8s} "
             f"{'$/M out':>8s} {'$/M':>8s}  binding"]
    for p in result.plans:
        lines.append(
            f"{p.chip[:30]:<30s} {p.mode:<13s} {_layout_text(p)[:24]:<24s} {p.chips:6d} "
            f"{p.precision:<5s} {p.tokens_per_s_per_chip:10,.0f} {p.ttft_p99_s * 1e3:8,.0f} "
            f"{p.tpot_p99_s * 1e3:8.1f} {money(p.usd_per_mtok_input)} "
            f"{money(p.usd_per_mtok_output)} {money(p.usd_per_mtok)}  {p.binding}"
            + (" (search at its ceiling)" if p.at_ceiling else ""))
    if result.plans:
        best = result.plans[0]
        lines.append(f"stack of {best.chip}: {best.stack}; {best.fitted_on}")
        lines.append(f"price of {best.chip}: {best.price}")
    for chip, reason in result.refused:
        lines.append(f"refused {chip}: {reason}")
    return "\n".join(lines)


def _bound_text(value: float) -> str:
    return "any" if not math.isfinite(value) else _ms(value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m inferlab.plan",
        description="Plan the cheapest deployment per chip kind for a model, a workload, a "
                    "service level and traffic (modelled).")
    parser.add_argument("--model", required=True, help="a model from "
                        "python -m inferlab.predict --list-models")
    parser.add_argument("--input-tokens", type=int, metavar="I")
    parser.add_argument("--output-tokens", type=int, metavar="O")
    parser.add_argument("--dataset", metavar="NAME", help="an MLPerf data set")
    parser.add_argument("--trace", metavar="FILE", help="an aiperf, guidellm or vllm bench "
                        "export: lengths and arrival pattern")
    parser.add_argument("--ttft-p99", type=float, metavar="S")
    parser.add_argument("--tpot-p99", type=float, metavar="S")
    parser.add_argument("--per-user-tok-s", type=float, metavar="R",
                        help="the slowest stream allowed (a TPOT bound of 1/R)")
    parser.add_argument("--rate", type=float, metavar="REQ_PER_S")
    parser.add_argument("--tokens-per-day", type=float, metavar="N",
                        help="output tokens a day")
    parser.add_argument("--precision", help="weights' format (default: 8 bits where the chip "
                        "computes it)")
    parser.add_argument("--chips", help="comma-separated chip names (default: every chip)")
    parser.add_argument("--prices", metavar="FILE", help="a price file with the columns of "
                        "data/prices.csv (default: that file)")
    parser.add_argument("--stack", metavar="NAME", help="one stack of data/stacks.csv for "
                        "every chip")
    parser.add_argument("--mode", choices=(*MODES, "both"), default="both")
    parser.add_argument("--requests", type=int, default=DEFAULT_REQUESTS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        from inferlab.predict import _workload_of

        workload = _workload_of(args)
        if isinstance(workload, Workload) and args.input_tokens is not None:
            workload = None  # plan builds fixed lengths itself, with the seed
        chips = None if args.chips is None else [c.strip() for c in args.chips.split(",")
                                                 if c.strip()]
        if chips is not None and not chips:
            raise ValueError("--chips: give at least one chip name")
        result = plan(args.model, input_tokens=args.input_tokens,
                      output_tokens=args.output_tokens, workload=workload,
                      ttft_p99_s=args.ttft_p99, tpot_p99_s=args.tpot_p99,
                      per_user_tok_s=args.per_user_tok_s, rate_per_s=args.rate,
                      tokens_per_day=args.tokens_per_day, precision=args.precision,
                      chips=chips, prices=args.prices, stack=args.stack,
                      modes=MODES if args.mode == "both" else (args.mode,),
                      requests=args.requests, seed=args.seed, iterations=args.iterations)
    except (ValueError, TypeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result.as_dict(), indent=1) if args.json else format_result(result))
    return 0 if result.plans else 1


class _CallableModule(types.ModuleType):
    """This module, callable: ``inferlab.plan(...)`` is :func:`plan`."""

    def __call__(self, *args, **kwargs) -> PlanResult:
        return plan(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule


if __name__ == "__main__":
    sys.exit(main())
