"""The cheapest deployment of one chip kind, the search :func:`inferlab.plan.plan` runs per
chip (its module docstring describes the method): the layouts a chip allows, a bound on each
layout's rate, the fewest aggregated replicas or disaggregated units that meet the service
level in the simulator, what binds the plan found, and the reason a chip is refused.

A :class:`Plan` is one chip's answer, in pools of one layout each (:class:`Pool`); a chip the
search cannot plan gives a :class:`Refused` with its reason. Every figure is modelled.

Used in chapter 'Sizing a deployment'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from inferlab.benchmark.verdict import RunRules
from inferlab.benchmark.workload import Workload
from inferlab.common import checks
from inferlab.common.data import load_table
from inferlab.costs import ChipPrice
from inferlab.model import specs
from inferlab.model.feasibility import Infeasible, fitting_layouts
from inferlab.model.roofline import request_flop, sustained_flop_per_s
from inferlab.predict import (
    holding,
    predict,
    replica_for,
)
from inferlab.serving.calibration import Stack, stack_or_assumed
from inferlab.serving.scheduler import PrefillPool

#: Families whose chips keep the weights in on-chip SRAM, so that a replica spans hundreds
#: of chips, beyond the simulator's replicas (:data:`inferlab.predict.MAX_CHIPS`).
SRAM_FAMILIES = ("lpu", "wafer-scale")

#: The two ways a replica's work is split (:mod:`inferlab.plan`).
MODES = ("aggregated", "disaggregated")

#: What can bind a plan (:mod:`inferlab.plan`).
BINDINGS = ("TTFT", "TPOT", "weight bandwidth", "KV bandwidth", "KV capacity", "compute",
            "interconnect", "fixed step cost", "memory capacity")


#: The default weight formats in order of preference (the first the chip computes at is
#: used, 8 bits where it can). The book's data does not record the formats each model is
#: published at, so FP4 is asked for with ``precision="fp4"``, not assumed.
DEFAULT_PRECISIONS = ("fp8", "int8", "bf16")


#: The most chips a plan may need.
MAX_PLAN_CHIPS = 1_000_000


#: A batch at least this share of the most the cache holds is bound by the cache.
FULL_CACHE = 0.95


HOUR_S = 3600.0


@dataclass(frozen=True)
class Pool:
    """One pool of identical replicas in a plan.

    ``role`` is ``"prefill and decode"`` (aggregated), ``"prefill"`` or ``"decode"``;
    ``rate_per_replica_s`` the requests per second each replica carries in the plan;
    ``ttft_p99_s`` and ``tpot_p99_s`` at that rate (``nan`` where the role has none);
    ``batch`` the most requests a replica's lane holds; ``chunked_prefill`` the engine's
    setting (``None`` for a decode pool); ``method`` how the rate was found;
    ``binding`` what limits it (:data:`BINDINGS`).

    Used in chapter 'Sizing a deployment'.
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

    @property
    def chips(self) -> int:
        """The pool's chips, its replicas times ``tp x pp``."""
        return self.replicas * self.tp * self.pp

    def as_dict(self) -> dict:
        """The pool as JSON-ready values."""
        return {"role": self.role, "chips": self.chips, "tp": self.tp, "pp": self.pp,
                "ep": self.ep, "replicas": self.replicas,
                "rate_per_replica_s": self.rate_per_replica_s,
                "ttft_p99_s": json_number(self.ttft_p99_s),
                "tpot_p99_s": json_number(self.tpot_p99_s),
                "batch": self.batch, "chunked_prefill": self.chunked_prefill,
                "method": self.method, "binding": self.binding}


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

    Used in chapter 'Sizing a deployment'.
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
                "ttft_p99_s": json_number(self.ttft_p99_s),
                "tpot_p99_s": json_number(self.tpot_p99_s),
                "usd_per_mtok_input": json_number(self.usd_per_mtok_input),
                "usd_per_mtok_output": json_number(self.usd_per_mtok_output),
                "usd_per_mtok": json_number(self.usd_per_mtok), "binding": self.binding,
                "pools": [pool.as_dict() for pool in self.pools], "stack": self.stack,
                "fitted_on": self.fitted_on,
                "rate_per_s": self.rate_per_s,
                "usd_per_chip_hour": json_number(self.usd_per_chip_hour), "price": self.price,
                "prefill_share": self.prefill_share}


class Refused(ValueError):
    """A chip the planner does not plan, with the reason (a ``ValueError``)."""


def json_number(value: float) -> float | None:
    """``value``, or ``None`` (JSON's null) where it is not finite."""
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class PlanInputs:
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
    max_replica_chips: int

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.limit_ttft_s) or math.isfinite(self.limit_tpot_s)

    @property
    def rules(self) -> RunRules:
        # Each search draws a fixed number of requests, not MLPerf's 600 s.
        return RunRules(min_duration_s=0.0, min_queries=self.requests,
                        offline_min_samples=self.requests)


def default_precision(hw: specs.Chip) -> str:
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


def plan_chip(hw: specs.Chip, inputs: PlanInputs) -> list[Plan]:
    """Every mode's cheapest plan on one chip kind, or :class:`Refused` with the reason."""
    if hw.family == "system":
        raise Refused(f"{hw.name} is a whole system, not a chip; plan the chip it is built of")
    if hw.family in SRAM_FAMILIES:
        raise Refused(_sram_reason(hw, inputs))
    precision = inputs.precision or default_precision(hw)
    if not _computes(hw, precision):
        raise Refused(f"{hw.name} has no dense {precision} rate in data/hardware.csv; give "
                      "another precision")
    stack = inputs.stack or stack_or_assumed(hw, precision)
    context = _Chip(hw, precision, stack, inputs,
                    inputs.prices.get(hw.name, ChipPrice.unpriced(hw.name)))
    try:
        layouts = [layout for layout, _ in holding(
            replica_layouts(hw, inputs.model, precision, inputs.max_replica_chips),
            context.replica)]
    except Infeasible as reason:  # no lane's cache holds the longest request
        raise Refused(str(reason)) from None
    plans, reasons = [], []
    for mode in inputs.modes:
        # Disaggregated pairs are tried only where they could cost less than the
        # aggregated plan (each pair's lower bound, module docstring).
        beat = min((context.cost_per_hour(p.chips) for p in plans), default=math.inf)
        try:
            found = (_aggregated(context, layouts) if mode == "aggregated"
                     else _disaggregated(context, layouts, beat))
        except Refused as error:
            reasons.append((mode, str(error)))
            continue
        if found is not None:
            plans.append(found)
    if not plans:
        if len({reason for _, reason in reasons}) == 1:
            raise Refused(reasons[0][1])
        raise Refused("; ".join(f"{mode}: {reason}" for mode, reason in reasons))
    return plans


@dataclass(frozen=True)
class _Chip:
    """One chip kind's part of a plan: the chip, format, stack, shared inputs and price."""

    hw: specs.Chip
    precision: str
    stack: Stack
    inputs: PlanInputs
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


def replica_layouts(hw: specs.Chip, model: specs.ModelSpec, precision: str,
                     most: int) -> list[tuple[int, int, int]]:
    """``(tp, pp, ep)`` of every replica the planner tries on ``hw`` (module docstring)."""
    widths = [1 << k for k in range(8) if (1 << k) <= max(1, min(hw.domain_chips or 1, most))]
    stages = [1 << k for k in range(most.bit_length())]
    fitting, last = fitting_layouts(model, hw, precision, widths, stages,
                                    lambda tp, pp: tp * pp <= most)
    found = []
    for tp, pp in fitting:
        experts = {1}
        if model.experts > 1 and model.experts_per_token < model.experts \
                and model.experts % tp == 0:
            experts.add(tp)
        found.extend((tp, pp, ep) for ep in sorted(experts))
    if not found:
        if last is not None:
            raise Refused(str(last))
        raise Refused(f"no replica of at most {most} x {hw.name} holds {model.name}")
    return found


def _aggregated(chip: _Chip, layouts) -> Plan:
    """Replicas that prefill and decode: per layout, the fewest replicas whose share of the
    traffic one replica serves within the bounds (:func:`_fewest_replicas`). Layouts are
    tried with the stack's own engine, cheapest lower bound first, until no later one can
    be cheaper; the winner is then tried with chunked prefill switched the other way, and
    keeps whichever needs fewer chips."""
    inputs = chip.inputs
    work = inputs.workload
    mean_in, mean_out = work.mean_tokens()
    prompts = work.lengths(10_000)[0] if not work.pairs else [p for p, _ in work.pairs]
    own = chip.scheduler()
    smallest = min(tp * pp for tp, pp, _ in layouts)
    candidates, floors = [], []
    for tp, pp, ep in layouts:
        rep = chip.replica(tp, pp, ep)
        floor = _floor(rep, prompts, inputs.limit_ttft_s, inputs.limit_tpot_s)
        if floor:
            floors.append(floor)
            continue
        bound = _rate_bound(rep, own, mean_in, mean_out, inputs.limit_tpot_s)
        fewest = tp * pp * math.ceil(inputs.rate_per_s / bound[0])
        candidates.append((chip.cost_per_hour(fewest), tp, pp, ep, rep, bound))
    if not candidates:
        raise Refused(_floor_reason(floors))
    candidates.sort(key=lambda item: item[:4])
    best, winner = None, None
    for lowest, tp, pp, ep, rep, bound in candidates:
        if best is not None and lowest >= chip.cost_per_hour(best.chips):
            break  # sorted: no later layout can be cheaper
        pool = _aggregated_pool(chip, tp, pp, ep, own, rep, bound, best, smallest)
        if pool is not None and (best is None or pool.chips < best.chips):
            best, winner = pool, (tp, pp, ep, rep, bound)
    for engine in _engines(own):
        # Only a plan above its layout's lower bound can need fewer replicas.
        if winner is None or engine.chunked_prefill == own.chunked_prefill or \
                best.replicas <= math.ceil(inputs.rate_per_s / winner[4][0]):
            continue
        pool = _aggregated_pool(chip, *winner[:3], engine, *winner[3:], best, smallest)
        if pool is not None and pool.chips < best.chips:
            best = pool
    if best is None:
        raise Refused(f"no layout of {chip.hw.name} meets the bounds with up to "
                      f"{MAX_PLAN_CHIPS:,} chips")
    rep = chip.replica(best.tp, best.pp, best.ep)
    share = _prefill_share(rep, mean_in, mean_out, best.batch)
    return _priced(chip, "aggregated", (best,), share, best.ttft_p99_s, best.tpot_p99_s,
                   best.binding)


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


def _judge(chip: _Chip, tp: int, pp: int, ep: int, engine, rate: float):
    """:func:`~inferlab.predict.predict`'s Server run of one replica with ``engine`` at
    ``rate`` requests per second, judged against the plan's bounds; the
    :class:`~inferlab.predict.Prediction` and whether it meets them and keeps up."""
    inputs = chip.inputs
    found = predict(chip.hw, tp * pp, inputs.model, chip.precision, "Server",
                    workload=inputs.workload, stack=replace(chip.stack, custom_engine=engine),
                    rules=inputs.rules, tps=[tp], pp=pp, ep=ep,
                    ttft_p99_s=None if math.isinf(inputs.limit_ttft_s) else inputs.limit_ttft_s,
                    tpot_p99_s=None if math.isinf(inputs.limit_tpot_s) else inputs.limit_tpot_s,
                    rate_per_s=rate)
    return found, bool(found.valid and found.started_share >= 1 - RATE_TOLERANCE)


#: A run that started answering at least this share fewer queries than it was sent while
#: the stream ran has a queue that grows (:func:`inferlab.serving.loadgen.started_share`); and a p99
#: within this share of its bound is what binds a plan.
RATE_TOLERANCE = 0.05


#: Replicas grow by at least this factor between tries until one meets the bounds, then
#: the count is bisected (the lower bound is usually within a few replicas).
GROWTH = 1.25


#: A replica that misses the bounds at this share of its rate bound or less is nearly idle,
#: and more replicas would only idle it further, so the search stops (what fails is a
#: request's own floor, not a queue).
IDLE_SHARE = 0.1


def _fewest_replicas(trial, lowest: int, most: int, rate: float, bound: float):
    """The fewest replicas ``n`` in ``lowest..most`` for which ``trial(rate / n)`` passes,
    with that trial's result and the result of ``n - 1`` (``None`` where it was not run);
    ``None`` if no count passes. Tries ``lowest``, grows by :data:`GROWTH`, then bisects."""
    failed, failure = lowest - 1, None
    n = lowest
    while True:
        found, passed = trial(rate / n)
        if passed:
            break
        failed, failure = n, found
        if n >= most or rate / n <= IDLE_SHARE * bound:
            return None
        n = min(most, max(n + 1, math.ceil(n * GROWTH)))
    while n - failed > 1:
        middle = (n + failed) // 2
        result, passed = trial(rate / middle)
        if passed:
            n, found = middle, result
        else:
            failed, failure = middle, result
    return n, found, failure


def _aggregated_pool(chip: _Chip, tp, pp, ep, engine, rep, bound, best,
                     smallest: int) -> Pool | None:
    """The fewest replicas of one layout that serve the traffic within the bounds (fewer
    than ``best``'s chips, if given), as a :class:`Pool`; ``None`` if none does.
    ``smallest`` is the fewest chips of any layout that holds the model."""
    inputs = chip.inputs
    work = inputs.workload
    mean_in, mean_out = work.mean_tokens()
    rate, size = inputs.rate_per_s, tp * pp
    lowest = max(1, math.ceil(rate / bound[0]))
    if not inputs.bounded:
        # Batch work: the replica's steady Offline rate sets the count.
        found = predict(chip.hw, size, inputs.model, chip.precision, "Offline", workload=work,
                        stack=replace(chip.stack, custom_engine=engine), tps=[tp], pp=pp,
                        ep=ep, rules=inputs.rules)
        if not found.valid or not found.tokens_per_s:
            return None
        replicas = math.ceil(rate * mean_out / found.tokens_per_s)
        method = "simulated: steady Offline (no latency bound)"
        binding = _resource(rep, found.batch, mean_in, mean_out)
    else:
        most = MAX_PLAN_CHIPS // size
        if best is not None:
            most = min(most, math.ceil(best.chips / size) - 1)
        if most < lowest:
            return None
        searched = _fewest_replicas(lambda r: _judge(chip, tp, pp, ep, engine, r), lowest,
                                    most, rate, bound[0])
        if searched is None:
            return None
        replicas, found, failure = searched
        method = (f"simulated: one replica at its share of the traffic, "
                  f"{inputs.requests:,} Poisson requests judged as LoadGen judges a Server "
                  f"run, the fewest replicas whose p99s meet the bounds")
        # One replica of more chips than the smallest layout needs is not there to hold
        # the model; it is labelled by the bound its own run comes nearest, a stand-in for
        # whatever ruled the smaller layouts out.
        single = "memory capacity" if size == smallest else _nearer_bound(found, inputs)
        binding = _binding(replicas, lowest, bound[1], found, failure, inputs, rep, single)
    return Pool("prefill and decode", tp, pp, ep, replicas, rate / replicas,
                found.ttft_p99_s, found.tpot_p99_s, found.batch, engine.chunked_prefill,
                method, binding)


def _binding(replicas: int, lowest: int, bound_term: str, found, failure, inputs: PlanInputs,
             rep, single: str = "memory capacity") -> str:
    """What sets a pool's replica count (module docstring): the rate bound's term if the
    count is that bound's; ``single`` if one is enough (for an aggregated pool, the
    smallest replica that holds the model); else what the run with one replica fewer
    missed: the resource that dominates the step where its queue grew, else the p99 bound
    it missed by the most."""
    if replicas == 1:
        return single
    if replicas == lowest:
        return bound_term
    if failure.started_share < 1 - RATE_TOLERANCE:
        # One replica fewer could not keep up: its queue grew (whatever bound caught it),
        # so the resource that dominates the step binds.
        return _resource(rep, failure.batch, *inputs.workload.mean_tokens())
    return _nearer_bound(failure, inputs)


def _nearer_bound(run, inputs: PlanInputs) -> str:
    """``"TTFT"`` or ``"TPOT"``: the bound whose limit ``run``'s p99 comes nearer."""
    over = {"TTFT": run.ttft_p99_s / inputs.limit_ttft_s,
            "TPOT": run.tpot_p99_s / inputs.limit_tpot_s}
    return max(over, key=over.get)


def _rate_bound(rep, scheduler, mean_in: float, mean_out: float,
                tpot: float) -> tuple[float, str]:
    """An upper bound on the requests per second one replica completes within the TPOT
    bound, and its term: every FLOP at the stack's compute rate (``compute``), every step
    one read of the weights and the fixed cost at the largest batch its cache and engine
    hold (``weight bandwidth``, or ``KV capacity`` where the cache caps the batch), and no
    more than the decode steps alone allow within the bound (``TPOT``,
    :func:`_decode_rate`)."""
    per_request = request_flop(rep.layout.model, mean_in, mean_out)
    compute = rep.lanes * rep.peak_flop_per_s * rep.compute_efficiency / per_request
    holds = int(rep.kv_capacity_tokens // max(1.0, mean_in + mean_out))
    batch = max(1, min(scheduler.max_batch, holds))
    step = float(rep.weights_s(batch)) + rep.step_overhead_s
    memory = rep.lanes * batch / (mean_out * step)
    decode = _decode_rate(rep, scheduler, mean_in, mean_out, tpot)
    # The decode closed form is the TPOT bound's only where the bound, not the cache or
    # the engine, caps its batch.
    held = "TPOT" if decode and decode[0] < decode[3] else (
        _resource(rep, decode[0], mean_in, mean_out) if decode else "TPOT")
    terms = {"compute": compute,
             "KV capacity" if holds <= scheduler.max_batch else "weight bandwidth": memory}
    terms[held] = min(terms.get(held, math.inf), decode[2] if decode else math.inf)
    name = min(terms, key=terms.get)
    return terms[name], name


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


def _floor(rep, prompts, ttft: float, tpot: float) -> tuple | None:
    """Why no rate of this replica can meet the bounds on the workload's ``prompts``, or
    ``None``: its fastest token (one request at the mean prompt's context) over the TPOT
    bound, or its longest prompt prefilled alone over the TTFT bound."""
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
        # A token passes every pipeline stage in turn, each reading its share of the
        # weights at its lane's bandwidth: the whole weights over one lane's bandwidth.
        ideal = rep.weight_bytes / rep.bandwidth_bytes_per_s
        stages = f"{rep.lanes} stages of {rep.tp}" if rep.lanes > 1 else f"{rep.tp}"
        return (f"a TPOT p99 of {milliseconds(bound)} is below every layout's floor: the fastest, "
                f"{rep.name}, takes {milliseconds(best[1])} a token at batch 1 (reading its "
                f"{rep.weight_bytes / 1e9:,.1f} GB of weights alone, {stages} chip(s) at "
                f"{rep.bandwidth_bytes_per_s / 1e12:,.1f} TB/s, takes {milliseconds(ideal)}; the "
                f"stack's fixed cost per step is {milliseconds(rep.step_overhead_s)})")
    return (f"a TTFT p99 of {milliseconds(bound)} is below every layout's floor: the fastest, "
            f"{rep.name}, prefills the longest prompt alone in {milliseconds(best[1])}")


def milliseconds(seconds: float) -> str:
    """A duration as a reader writes it: milliseconds below a second, else seconds, to
    three significant figures (whole seconds from 1,000 s on, never powers of ten)."""
    if seconds < 1:
        return f"{seconds * 1e3:,.3g} ms"
    return f"{seconds:,.3g} s" if seconds < 1000 else f"{seconds:,.0f} s"


def _sram_reason(hw: specs.Chip, inputs: PlanInputs) -> str:
    """Why an SRAM machine is not planned, judged by its own bound: the fewest chips whose
    SRAM holds the weights, and the time to read them once across all of those chips."""
    from inferlab.model.capacity import weight_bytes

    precision = inputs.precision or "int8"
    need = weight_bytes(inputs.model.params_total, precision)
    chips = math.ceil(need / hw.memory_capacity_bytes)
    floor = need / (chips * hw.memory_bandwidth_bytes_per_s)
    head = (f"{hw.name} keeps the weights in on-chip SRAM: {inputs.model.name} at "
            f"{precision} ({need / 1e9:,.0f} GB) spans at least {chips:,} chip(s), whose "
            f"SRAM reads them once in {milliseconds(floor)} at best")
    if floor > inputs.limit_tpot_s:
        return f"{head}, over the TPOT p99 of {milliseconds(inputs.limit_tpot_s)}"
    return (f"{head}; the planner's step model describes replicas of HBM chips, not "
            "pipelines of SRAM chips, so it prices none (chapter 'Choosing hardware' "
            "bounds those with the family's ceiling, inferlab.choosing.family_floor)")


def _resource(rep, batch: int, mean_in: float, mean_out: float) -> str:
    """The term that dominates a steady step at ``batch`` requests (module docstring)."""
    batch = max(1, int(batch))
    most = int(rep.kv_capacity_tokens // max(1.0, mean_in + mean_out))
    if batch >= FULL_CACHE * most:
        return "KV capacity"
    # A steady step carries each request's share of its prompt beside its next token.
    return _dominant(rep, batch * (1 + mean_in / mean_out), batch * (mean_in + mean_out / 2),
                     logits=batch)


def _dominant(rep, tokens: float, context: float, pairs: float | None = None, *,
              logits: float) -> str:
    """The largest term of a step of ``tokens`` tokens, ``logits`` of them through the
    output head, reading ``context`` cached tokens."""
    read, work = float(rep.weights_s(tokens)), float(rep.matmul_s(tokens, logits))
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
    prompt_s = float(rep.matmul_s(mean_in, 1)) + float(
        rep.attention_s(mean_in, mean_in * (mean_in + 1) / 2))
    step = float(rep.decode_step_s(batch, mean_in + mean_out / 2))
    answer_s = mean_out * step / batch
    return prompt_s / (prompt_s + answer_s)


def _disaggregated(chip: _Chip, layouts, beat: float = math.inf) -> Plan | None:
    """Decode replicas, each fed by prefill servers of its own, simulated as one unit.

    Per (decode layout, prefill layout) pair: each unit is a decode replica and the prefill
    servers that keep pace with its share of the traffic at :data:`PREFILL_LOAD`; the
    fewest units whose share :func:`~inferlab.predict.predict` serves within the bounds
    (:func:`_fewest_replicas`, from the decode closed form's count,
    :func:`_decode_rates`). Pairs are tried cheapest lower bound first; ``None`` if no pair
    can cost less an hour than ``beat`` (the aggregated plan's)."""
    inputs = chip.inputs
    hw, work = chip.hw, inputs.workload
    if not (math.isfinite(hw.scaleout_bytes_per_s) and hw.scaleout_bytes_per_s > 0):
        raise Refused(f"data/hardware.csv gives {hw.name} no scale-out bandwidth to send the "
                      "KV cache from the prefill pool to the decode pool")
    mean_in, mean_out = work.mean_tokens()
    prompts = work.lengths(min(inputs.requests, 10_000))[0]
    # A decode replica of pipeline stages runs its lanes in lock step, all fed by one
    # prefill pool: a pairing the simulator does not model, so decode is tensor-parallel.
    flat = [layout for layout in layouts if layout[1] == 1]
    if not flat:
        raise Refused(f"every layout of {hw.name} that holds {inputs.model.name} needs "
                      "pipeline stages, and a decode pool of pipeline stages fed by a "
                      "prefill pool is not modelled")
    decoders, floors = _decode_rates(chip, flat, mean_in, mean_out)
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
        limit = beat if best is None else min(beat, chip.cost_per_hour(best[0].chips
                                                                      + best[1].chips))
        if chip.cost_per_hour(lower) >= limit:
            break  # sorted: no later pair can be cheaper
        found = _disaggregated_unit(chip, (tp, pp, ep), rep, prefill_s, decode, limit)
        if found is not None:
            best = found
    if best is None:
        if math.isfinite(beat):
            return None
        raise Refused(f"no pair of prefill and decode layouts meets the bounds with up to "
                      f"{MAX_PLAN_CHIPS:,} chips")
    prefill, decode, judged = best
    share = prefill.chips / (prefill.chips + decode.chips)
    return _priced(chip, "disaggregated", (prefill, decode), share, judged.ttft_p99_s,
                   judged.tpot_p99_s, decode.binding)


#: The share of its time a prefill server is planned busy, below 1 so that its queue (and
#: the TTFT it adds) stays short; the simulation then judges the TTFT it gives.
PREFILL_LOAD = 0.85


def _transfer_s(rep, hw: specs.Chip, prompt_tokens: int) -> float:
    """Seconds to send one prompt's KV cache from a prefill replica over its chips'
    scale-out links."""
    return prompt_tokens * rep.kv_bytes_per_token / (rep.tp * rep.lanes * hw.scaleout_bytes_per_s)


def _decode_rates(chip: _Chip, layouts, mean_in: float, mean_out: float):
    """Each decode layout's closed-form rate (:func:`_decode_rate`) as a one-replica
    :class:`Pool`, the two cheapest per request first, and the TPOT floors of the layouts
    too slow for the bound."""
    inputs = chip.inputs
    scheduler = chip.scheduler()
    found, floors = [], []
    for tp, pp, ep in layouts:
        rep = chip.replica(tp, pp, ep)
        decode = _decode_rate(rep, scheduler, mean_in, mean_out, inputs.limit_tpot_s)
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
                        decode: Pool, limit: float):
    """The pools of one (prefill, decode) pair, the fewest units that serve the traffic
    within the bounds and cost less an hour than ``limit``, and the judged run of one unit;
    ``None`` if no count does."""
    inputs = chip.inputs
    hw = chip.hw
    tp, pp, ep = prefill_layout
    rate = inputs.rate_per_s
    # Prompts go whole to the prefill pool; the decode replica's steps carry next tokens.
    decoding = replace(chip.scheduler(), chunked_prefill=False, scheduler_steps=1,
                       min_prefill_queries=1, fixed_shape=None)

    def servers(share: float) -> int:
        return max(1, math.ceil(share * prefill_s / PREFILL_LOAD))

    def trial(share: float):
        pool = PrefillPool(prefill_rep.prefill_s, prefill_rep.kv_bytes_per_token,
                           tp * pp * hw.scaleout_bytes_per_s, servers(share))
        engine = replace(decoding, disaggregated=pool)
        return _judge(chip, decode.tp, decode.pp, decode.ep, engine, share)

    def chips(units: int) -> int:
        return units * (decode.tp * decode.pp + servers(rate / units) * tp * pp)

    lowest = max(1, math.ceil(rate / decode.rate_per_replica_s))
    most = lowest
    # The most units worth trying: past them the plan costs at least ``limit``.
    while chips(most + 1) <= MAX_PLAN_CHIPS and chip.cost_per_hour(chips(most + 1)) < limit \
            and most < MAX_PLAN_CHIPS:
        most = max(most + 1, math.ceil(most * GROWTH))
    if chip.cost_per_hour(chips(lowest)) >= limit:
        return None
    searched = _fewest_replicas(trial, lowest, most, rate, decode.rate_per_replica_s)
    if searched is None:
        return None
    units, judged, failure = searched
    if chip.cost_per_hour(chips(units)) >= limit:
        return None
    count = servers(rate / units)
    method = (f"simulated as one unit: a decode replica fed by {count} prefill server(s) "
              f"first come first served, at its share of the traffic over "
              f"{inputs.requests:,} Poisson requests, the fewest units whose p99s meet the "
              "bounds")
    prefill_tokens = inputs.workload.mean_tokens()[0]
    prefill = Pool("prefill", tp, pp, ep, units * count, rate / (units * count),
                   judged.ttft_p99_s, math.nan, 1, False, method,
                   _dominant(prefill_rep, prefill_tokens, 0.0, prefill_tokens ** 2 / 2,
                             logits=1))
    decode_rep = chip.replica(decode.tp, decode.pp, decode.ep)
    binding = _binding(units, lowest, decode.binding, judged, failure, inputs, decode_rep,
                       decode.binding)
    decode_pool = replace(decode, replicas=units, rate_per_replica_s=rate / units,
                          ttft_p99_s=math.nan, tpot_p99_s=judged.tpot_p99_s,
                          batch=judged.batch, method=method, binding=binding)
    return prefill, decode_pool, judged


def _priced(chip: _Chip, mode: str, pools: tuple[Pool, ...], prefill_share: float,
            ttft_p99: float, tpot_p99: float, binding: str) -> Plan:
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
        fitted_on(chip.stack), rate, chip.price.usd_per_chip_hour,
        chip.price.label, prefill_share)


def fitted_on(stack: Stack) -> str:
    """Where a stack's numbers came from, in a sentence: the audited rows it was fitted on
    (model, chips, rounds), or that it is assumed or set by hand."""
    checks.instance("stack", stack, Stack)
    if not stack.fitted_on:
        if stack.name.startswith("assumed"):
            return ("assumed, not fitted: a share of peak and TensorRT-LLM FP8's fixed cost "
                    "per step (inferlab.serving.calibration.assumed_stack)")
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

