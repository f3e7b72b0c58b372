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
  A Poisson stream split over ``n`` replicas gives each a Poisson stream of its share, so
  one replica is simulated at ``rate / n`` by :func:`~inferlab.predict.predict`
  (``scenario="Server"``, the bounds of one's own, ``rate_per_s`` given) over
  ``requests`` requests, judged as LoadGen judges a Server run; it passes if both p99s
  meet the bounds and it started answering as many queries as it was sent while the stream
  ran (:func:`~inferlab.serving.loadgen.started_share`: without a TTFT bound, a queue that
  grows for ever still meets a TPOT bound). The plan is the fewest replicas that pass, found
  from a lower bound up, growing then bisecting the count; its p99s are those of its own
  traffic, so a plan meets its service level in the simulator by construction.
- **disaggregated** (DistServe, Splitwise): one pool prefills, another decodes. A unit is one
  decode replica fed first come first served by the prefill servers that keep pace with its
  share of the traffic at :data:`~inferlab.sizing.PREFILL_LOAD`, each sending its prompt's KV
  cache over the scale-out network; the unit is simulated whole, and the plan is the fewest
  units that pass, as above. The decode layout's closed form (the largest batch whose step, at
  the mean context of a request half-way through its answer, meets the TPOT bound; Little's law)
  gives the first count tried. The pools may differ in layout; the decode pool's is
  tensor-parallel only (a pipelined decode replica's lanes move in lock step, and one
  prefill pool feeding all of them is not modelled).

The search per chip is branch and bound: each layout has an upper bound on its rate (all
FLOPs at the stack's compute rate, every step at least one read of the weights at the
largest batch the cache holds, the decode closed form within the TPOT bound), so a layout
whose fewest chips already cost more than the best plan found is not simulated, and a
disaggregated pair is tried only where it could cost less than the aggregated plan. No
rate search runs, so none can stop at a ceiling of its own: the only limit is
:data:`~inferlab.sizing.MAX_PLAN_CHIPS`, and a plan that would need more is refused.

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
``fixed step cost``), or ``memory capacity`` where one replica, the fewest chips that hold
the model and one request's cache, already carries the traffic (one larger replica is
labelled by the bound its p99 comes nearest).

**Refusals.** A chip that cannot hold the model, has no rate at the precision, is a whole
system rather than a chip, or keeps its weights in SRAM across hundreds of chips (a
pipeline longer than the simulator's replicas), and a service level below every layout's
floor (the bandwidth floor of a token, the compute floor of a prompt, each named with its
figures), is refused with the reason, and so is the disaggregated mode where every layout
that holds the model needs pipeline stages. Bad input raises ``ValueError`` naming the
argument.

Every figure is modelled: the stacks are fitted on MLPerf Llama 2 70B (each plan says
where its stack's numbers came from) or assumed, and the appendix 'How far the model
carries' reports how far other models drift from their audited results.

Used in chapter 'Sizing a deployment'.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from inferlab import callable_module
from inferlab.benchmark.workload import Workload, check_fits_context
from inferlab.common import checks
from inferlab.common.data import DATA_DIR, load_table, read_table
from inferlab.costs import ChipPrice
from inferlab.model import specs
from inferlab.model.feasibility import Infeasible
from inferlab.predict import (
    MAX_BOUND_S,
    MAX_CHIPS,
    as_stack,
    as_workload,
    holding,
    replica_for,
)
from inferlab.serving.calibration import stack_or_assumed
from inferlab.serving.loadgen import MAX_RATE_PER_S
from inferlab.sizing import (
    MODES,
    SRAM_FAMILIES,
    Plan,
    PlanInputs,
    Refused,
    default_precision,
    json_number,
    milliseconds,
    plan_chip,
    replica_layouts,
)

#: Requests each simulated run draws, enough that the queue a rate builds shows in the p99
#: (4,000 requests give the rate MLPerf's 600-second runs give within 3 % for Llama 3.1 8B
#: on one H200, 1,000 in and 200 out) and few enough to plan in seconds.
DEFAULT_REQUESTS = 4000



DAY_S = 86400.0


# --------------------------------------------------------------------------------------
# What a plan is
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanResult:
    """Every chip kind's cheapest plan, cheapest first, and every chip not planned.

    ``plans`` holds one :class:`~inferlab.sizing.Plan` per chip kind (the cheaper mode; both
    modes of each are in ``by_mode``); ``refused`` ``(chip, reason)`` pairs. The inputs are kept
    as given, resolved: ``model``, ``workload`` (its name), the bounds (``inf`` for none) and
    ``rate_per_s``.

    Used in chapter 'Sizing a deployment'.
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
                           "ttft_p99_s": json_number(self.ttft_p99_s),
                           "tpot_p99_s": json_number(self.tpot_p99_s),
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


# --------------------------------------------------------------------------------------
# Inputs, resolved once
# --------------------------------------------------------------------------------------


def chip_prices(prices: str | Path | None = None) -> dict[str, ChipPrice]:
    """The cheapest price per chip in the price file ``prices`` (default
    ``data/prices.csv``), checked as :func:`inferlab.common.data.load_table` checks it; a file
    that cannot be read fails naming it, and a row naming a chip ``data/hardware.csv``
    does not know fails with its file and line."""
    if prices is None:
        frame, where = load_table("prices"), DATA_DIR / "prices.csv"
    else:
        if not isinstance(prices, (str, Path)) or not str(prices).strip():
            raise ValueError(f"prices: {prices!r}; give the path of a price file with the "
                             "columns of data/prices.csv")
        where = Path(prices)
        if not where.is_file():
            raise ValueError(f"prices: {where}: no such file; give the path of a price file "
                             "with the columns of data/prices.csv")
        frame = read_table("prices", where)
    found: dict[str, ChipPrice] = {}
    known = set(specs.chips())
    for line, row in enumerate(frame.to_dict("records"), start=2):
        if row["chip"] not in known:
            raise ValueError(f"{where}, line {line}, column 'chip': unknown chip "
                             f"{row['chip']!r}; give a name of data/hardware.csv")
        price = ChipPrice.from_row(row)
        if row["chip"] not in found or \
                price.usd_per_chip_hour < found[row["chip"]].usd_per_chip_hour:
            found[row["chip"]] = price
    return found


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
         seed: int = 0,
         max_replica_chips: int = MAX_CHIPS) -> PlanResult:
    """The cheapest deployment of ``model`` on each chip kind that serves the traffic within
    the service level (module docstring).

    ``model`` is a name of ``data/models.csv`` or a :class:`~inferlab.model.specs.ModelSpec`. The
    workload is ``input_tokens`` and ``output_tokens`` (every request exactly so), or
    ``workload``: a :class:`~inferlab.benchmark.workload.Workload` (a trace's included), an MLPerf
    data set's name, or by default the model's own MLPerf data set. The service level is
    any of ``ttft_p99_s``, ``tpot_p99_s`` and ``per_user_tok_s`` (a TPOT bound of its
    inverse); none is batch work, judged as Offline. The traffic is ``rate_per_s``
    (requests per second) or ``tokens_per_day`` (output tokens); a trace brings its own.
    ``precision`` is the weights' format (default: the first of
    :data:`~inferlab.sizing.DEFAULT_PRECISIONS` the chip computes); ``chips`` a list of chip
    names or
    :class:`~inferlab.model.specs.Chip` (default every chip of ``data/hardware.csv``);
    ``prices`` a price file (default ``data/prices.csv``) or a dict of
    :class:`~inferlab.costs.ChipPrice`; ``stack`` a stack name or
    :class:`~inferlab.serving.calibration.Stack` used on every chip (default: each vendor's
    calibrated stack, else the assumed one); ``modes`` any of :data:`~inferlab.sizing.MODES`;
    ``requests`` and ``seed`` set each simulated run (the replica count is searched in whole
    replicas, so there is no precision to set); ``max_replica_chips`` caps one replica's chips.

    Raises ``ValueError`` naming the argument for an unknown model or chip, a length of 0
    or beyond the context, a bound or rate of 0 or less, an unreadable price file.

    Used in chapter 'Sizing a deployment'.
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
    inputs = PlanInputs(spec, work, ttft, tpot, rate, precision,
                     None if stack is None else as_stack(stack, kinds[0], precision or "fp8"),
                     price_table, tuple(m for m in MODES if m in modes),
                     checks.whole("requests", requests, maximum=200_000),
                     checks.whole("max_replica_chips", max_replica_chips, maximum=MAX_CHIPS))
    planned, refused, every = [], [], []
    for hw in kinds:
        try:
            found = plan_chip(hw, inputs)
        except (Refused, Infeasible) as error:
            refused.append((hw.name, str(error)))
            continue
        every.extend(found)
        planned.append(min(found, key=_cost_key))
    planned.sort(key=_cost_key)
    return PlanResult(spec.name, work.name, ttft, tpot, rate, tuple(planned), tuple(refused),
                      tuple(every))


def fastest_stream_tok_s(model, chip, *, precision: str | None = None,
                         context_tokens: int = 1000, stack=None) -> tuple[float, str]:
    """The fastest one request decodes on ``chip``: tokens per second of a step of batch 1
    at ``context_tokens`` of context, on the fastest layout the planner tries (the widest
    tensor-parallel split that holds the model), and that replica's name.

    The same step the planner's TPOT floor is judged by, so a TPOT bound below its inverse
    is refused by :func:`plan`; ``precision`` and ``stack`` as there.

    Used in chapter 'Sizing a deployment'.
    """
    spec = specs.as_model(model)
    hw = specs.as_chip(chip)
    context = checks.whole("context_tokens", context_tokens, minimum=1,
                           maximum=spec.context_length_tokens)
    precision = checks.text("precision", precision) if precision is not None else \
        default_precision(hw)
    if hw.family == "system" or hw.family in SRAM_FAMILIES:
        raise ValueError(f"chip: {hw.name} is not a chip the step model describes; give an "
                         "HBM chip")
    used = as_stack(stack, hw, precision) if stack is not None else \
        stack_or_assumed(hw, precision)
    work = Workload.fixed(context, 1)
    best = None
    for _, rep in holding(replica_layouts(hw, spec, precision, MAX_CHIPS),
                          lambda tp, pp, ep: replica_for(hw, spec, precision, used, work,
                                                         tp, pp, ep)):
        rate = 1.0 / float(rep.step_s(float(context), 1))
        if best is None or rate > best[0]:
            best = (rate, rep.name)
    return best


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


# ---- aggregated -----------------------------------------------------------------------


# ---- disaggregated --------------------------------------------------------------------


# ---- pricing --------------------------------------------------------------------------


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
             f"{'chip':<30s} {'mode':<13s} {'layout':<34s} {'chips':>6s} {'prec':<5s} "
             f"{'tok/s/chip':>10s} {'TTFT ms':>8s} {'TPOT ms':>8s} {'$/M in':>8s} "
             f"{'$/M out':>8s} {'$/M':>8s}  binding"]
    if not result.plans:
        lines[1:] = ["no plan: every chip kind was refused, each for the reason below"]
    for p in result.plans:
        lines.append(
            f"{p.chip[:30]:<30s} {p.mode:<13s} {_layout_text(p):<34s} {p.chips:6d} "
            f"{p.precision:<5s} {p.tokens_per_s_per_chip:10,.0f} {p.ttft_p99_s * 1e3:8,.0f} "
            f"{p.tpot_p99_s * 1e3:8.1f} {money(p.usd_per_mtok_input)} "
            f"{money(p.usd_per_mtok_output)} {money(p.usd_per_mtok)}  {p.binding}"
            )
    if result.plans:
        best = result.plans[0]
        lines.append(f"stack of {best.chip}: {best.stack}; {best.fitted_on}")
        lines.append(f"price of {best.chip}: {best.price}")
    for chip, reason in result.refused:
        lines.append(f"refused {chip}: {reason}")
    return "\n".join(lines)


def _bound_text(value: float) -> str:
    return "any" if not math.isfinite(value) else milliseconds(value)


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
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        from inferlab.predict.cli import workload_of

        workload = workload_of(args)
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
                      requests=args.requests, seed=args.seed)
    except (ValueError, TypeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result.as_dict(), indent=1) if args.json else format_result(result))
    return 0 if result.plans else 1


callable_module(__name__, plan)


if __name__ == "__main__":
    sys.exit(main())
