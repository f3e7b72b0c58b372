"""Predict an MLPerf Inference result from the step-time model, under LoadGen's rules.

::

    python -m inferlab.predict --chip "NVIDIA H200 SXM" --chips 8 --model "Llama 2 70B" \\
        --precision fp8 --scenario Server
    python -m inferlab.predict ... --json           # one JSON object
    python -m inferlab.predict --list-chips         # the chip names it accepts
    python -m inferlab.predict --csv in.csv --out out.csv
    python -m inferlab.predict ... --tp 2            # only this tensor-parallel width

For a system of ``chips`` accelerators the prediction takes the tensor-parallel
width the stack's reference submission ran on that chip in that scenario, or, for a
chip it never ran on, tries every width that fits and stays inside the chip's
scale-up domain (:mod:`inferlab.feasibility`); it splits the system into ``chips / tp``
data-parallel replicas, and runs the scenario on the modelled system with the serving simulator
(:mod:`inferlab.simulator`) and the LoadGen rules of :mod:`inferlab.loadgen`:
Offline is every sample queued at once; Server and Interactive are the highest
Poisson rate whose run is valid (minimum duration, query count, p99 TTFT and
TPOT bounds, early stopping), found by bisection; Single-Stream is one query at a
time. Where it tries several widths it keeps, like a submitter tuning a
configuration, the one with the best valid result.

The software stack's parameters (efficiencies, fixed cost per step) come from
:mod:`inferlab.calibration` unless a :class:`~inferlab.calibration.Stack` is given;
its engine settings per scenario (batch limit, tokens per step, chunked prefill)
come from a submission's own configuration files
(:func:`inferlab.calibration.engine_settings`).
A configuration that cannot run exits with status 2 and the feasibility layer's
reason.

Used in chapters 'Batching' and 'Choosing hardware'; ``benchmarks/model_accuracy.py``
scores it against every audited result in ``data/mlperf_llama2_70b.csv``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import asdict, dataclass
from types import MappingProxyType

import numpy as np

from inferlab import checks, specs
from inferlab.calibration import Stack, stack_for
from inferlab.feasibility import Infeasible, layout
from inferlab.loadgen import (
    SCENARIOS,
    QueryLog,
    QueryMix,
    RunRules,
    System,
    dealt_in_turn,
    find_server_rate,
    mlperf_rules,
    run_scenario,
)
from inferlab.steptime import replica

#: The LoadGen benchmark of each model the predictor knows a query mix for.
BENCHMARKS = {"Llama 2 70B": "llama2-70b"}

#: The rules the calibration and the accuracy benchmark run in each scenario, which are
#: MLPerf's own (600 s minimum) in every one. Shorter runs mislead twice over. LoadGen's Server
#: result divides the tokens by the time the last *issued* query finishes, so a long
#: last answer stretches a short run: at 120 s the modelled 8x H200 Server result swung
#: from 30,121 to 38,487 tok/s between rates 2 % apart, where at 600 s it moves by 2 %.
#: And a short run passes above the rate the system sustains, because the queue it
#: builds has no time to reach the TTFT bound (144 q/s valid at 120 s, 127 at 600 s).
#: An Offline run queues every sample at once and its last batch drains at a falling
#: batch size, a tail whose share shrinks only as the run grows.
FIT_RULES = MappingProxyType({scenario: mlperf_rules() for scenario in
                              ("Offline", "Server", "Interactive")})

#: Bisection halvings in the Server and Interactive rate search (the rate is found
#: to 2^-10 of the upper limit, 0.1 %).
SEARCH_ITERATIONS = 10


@dataclass(frozen=True)
class Prediction:
    """One modelled MLPerf result.

    ``tokens_per_s`` is output tokens per second of the whole system (for
    Single-Stream, of its one stream); ``result`` and ``unit`` are what LoadGen
    reports (tokens/s, or the p90 latency in seconds for Single-Stream). ``tp`` and
    ``replicas`` are the layout chosen, ``tp_from`` why that width (the submission's
    own, or the best of those tried); ``batch`` the most requests one replica ran
    at once; ``rate_per_s`` the query rate of a Server or Interactive run.

    Used in chapters 'Batching' and 'Choosing hardware'.
    """

    chip: str
    chips: int
    model: str
    precision: str
    scenario: str
    stack: str
    tp: int
    replicas: int
    tokens_per_s: float
    result: float
    unit: str
    valid: bool
    ttft_p99_s: float
    tpot_p99_s: float
    batch: int
    rate_per_s: float | None
    tp_from: str = ""

    def as_dict(self) -> dict:
        """The prediction as plain JSON-ready values."""
        return {key: (None if isinstance(value, float) and not math.isfinite(value) else value)
                for key, value in asdict(self).items()}


def peak_batch(log: QueryLog, replicas: int, shares=None) -> int:
    """The most queries one replica held between first and last token, from a merged log.

    ``shares`` are the log positions of each replica's queries
    (:meth:`inferlab.loadgen.System.shares`); by default queries were dealt
    round-robin, so replica ``k`` holds every ``replicas``-th query.
    """
    checks.instance("log", log, QueryLog)
    replicas = checks.whole("replicas", replicas)
    if shares is None:
        shares = dealt_in_turn(len(log), replicas)
    elif len(shares) > replicas:
        raise ValueError(f"shares: give at most one array of positions per replica "
                         f"({replicas}), not {len(shares)}")
    best = 0
    for share in shares:
        starts, ends = log.first_token_s[share], log.finish_s[share]
        if starts.size == 0:  # a replica dealt no query
            continue
        times = np.concatenate([starts, ends])
        steps = np.concatenate([np.ones(starts.size), -np.ones(ends.size)])
        # At equal times a finish comes before a start.
        order = np.lexsort((steps, times))
        best = max(best, int(np.max(np.cumsum(steps[order]))))
    return best


def accepted_chips() -> list[str]:
    """The chips :func:`predict` accepts: single accelerators (not whole systems) whose
    vendor has a calibrated software stack, in ``data/hardware.csv`` order."""
    names = []
    for name in specs.chips():
        if specs.chip(name).family == "system":
            continue
        try:
            stack_for(name, "fp8")
        except ValueError:
            continue
        names.append(name)
    return names


#: The most chips a prediction takes: 72, one NVL72 rack, past the largest system in
#: data/mlperf_llama2_70b.csv (48 accelerators), the range the predictor is checked on.
#: A prediction simulates every replica's schedule, so its time grows with the chips:
#: about 30 s for 72 H100s under MLPerf's full Offline rules on the book's 2-core machine.
MAX_CHIPS = 72


def _chips(value) -> int:
    return checks.whole("chips", value, maximum=MAX_CHIPS)


def tp_options(chip: str | specs.Chip, chips: int, model: str | specs.ModelSpec,
               precision: str) -> list[int]:
    """Tensor-parallel widths that divide ``chips``, fit the weights and stay in one domain.

    Raises :class:`~inferlab.feasibility.Infeasible` with the reason of the widest
    width tried when none fits.

    Used in chapter 'Choosing hardware'.
    """
    chips = _chips(chips)
    widths, last = [], None
    tp = 1
    while tp <= chips:
        if chips % tp == 0:
            try:
                layout(model, chip, precision, tp=tp)
                widths.append(tp)
            except Infeasible as error:
                last = error
        tp *= 2
    if not widths:
        raise last
    return widths


def predict(chip: str, chips: int, model: str = "Llama 2 70B", precision: str = "fp8",
            scenario: str = "Offline", *, stack: Stack | None = None,
            rules: RunRules | None = None, mix: QueryMix | None = None,
            tps=None, dispatch: str = "round-robin") -> Prediction:
    """The modelled MLPerf result of ``chips`` x ``chip`` serving ``model`` at ``precision``.

    ``rules`` default to MLPerf's own (:func:`inferlab.loadgen.mlperf_rules`); pass
    ``mlperf_rules(scale=0.1)`` for a ten-times shorter run. ``tps`` lists the
    tensor-parallel widths to try. By default a chip and scenario the stack's reference
    submission ran (:meth:`~inferlab.calibration.Stack.engine`) get that
    submission's width, where it divides ``chips`` and fits, and any other system the
    best of every width :func:`tp_options` allows. ``dispatch`` is how queries reach
    the replicas (:data:`inferlab.loadgen.DISPATCHES`).
    Raises :class:`~inferlab.feasibility.Infeasible` if no layout fits and
    ``ValueError`` for an unknown chip, model, format or scenario.

    Used in chapters 'Batching' and 'Choosing hardware'.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario: {scenario!r} is not one of {', '.join(SCENARIOS)}")
    if model not in BENCHMARKS:
        raise ValueError(f"model: {model!r} has no MLPerf query mix here; give one of "
                         f"{', '.join(BENCHMARKS)}")
    hw = specs.chip(chip)
    chips = _chips(chips)
    stack = stack_for(hw.name, precision) if stack is None else stack
    if not isinstance(stack, Stack):
        raise TypeError(f"stack: {stack!r} is not a Stack")
    benchmark = BENCHMARKS[model]
    rules = mlperf_rules(benchmark) if rules is None else rules
    mix = QueryMix() if mix is None else mix
    widths, tp_from = _widths(hw, chips, model, precision, scenario, stack, tps)
    best = None
    for tp in widths:
        rep = replica(model, hw, tp, precision, **stack.replica_parameters(hw, precision))
        system = System(f"{chips} x {hw.name}, tp={tp}", rep, chips // tp,
                        stack.scheduler(hw.name, scenario), dispatch)
        rate = None
        if scenario in ("Server", "Interactive"):
            search = find_server_rate(system, scenario, mix=mix, model=benchmark,
                                      rules=rules, iterations=SEARCH_ITERATIONS)
            summary, rate = search.best, search.rate_per_s
            if summary is None:
                continue
        else:
            summary = run_scenario(system, scenario, mix=mix, model=benchmark,
                                   rules=rules)
        log = summary.log
        tokens_per_s = (summary.result if summary.unit == "tokens/s"
                        else log.tokens / float(np.max(log.finish_s)))
        candidate = Prediction(hw.name, chips, model, precision, scenario, stack.name, tp,
                               chips // tp, float(tokens_per_s), float(summary.result),
                               summary.unit, summary.valid, summary.ttft_p99_s,
                               summary.tpot_p99_s,
                               peak_batch(log, chips // tp, system.shares(len(log))), rate,
                               tp_from)
        if best is None or _better(candidate, best):
            best = candidate
    if best is None:
        return Prediction(hw.name, chips, model, precision, scenario, stack.name, widths[0],
                          chips // widths[0], 0.0, 0.0, "tokens/s", False, math.nan, math.nan,
                          0, 0.0, tp_from)
    return best


def _widths(hw: specs.Chip, chips: int, model: str, precision: str, scenario: str,
            stack: Stack, tps) -> tuple[list[int], str]:
    """The tensor-parallel widths a prediction tries, and where they come from."""
    if tps is not None:
        if isinstance(tps, (str, bytes)) or not hasattr(tps, "__iter__"):
            raise TypeError(f"tps: {tps!r} is not a list of widths")
        widths = [checks.whole("tps", tp) for tp in tps]
        if not widths:
            raise ValueError("tps: give at least one tensor-parallel width")
        for tp in widths:
            if chips % tp:
                raise ValueError(f"tps: width {tp} does not divide chips={chips}; give a "
                                 "divisor of the chip count")
            layout(model, hw, precision, tp=tp)
        return widths, "given"
    widths = tp_options(hw, chips, model, precision)
    engine = stack.engine(hw.name, scenario)
    if engine["tp"] in widths:
        return [engine["tp"]], f"the width {engine['source']} ran"
    return widths, "the best of " + ", ".join(str(tp) for tp in widths)


def _better(a: Prediction, b: Prediction) -> bool:
    if a.valid != b.valid:
        return a.valid
    if a.scenario == "SingleStream":
        return a.result < b.result
    return a.tokens_per_s > b.tokens_per_s


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------

CSV_COLUMNS = ("chip", "chips", "model", "precision", "scenario")


def _format(prediction: Prediction) -> str:
    lines = [f"{prediction.chips} x {prediction.chip}, {prediction.model} at "
             f"{prediction.precision}, MLPerf {prediction.scenario} (modelled; stack: "
             f"{prediction.stack})"]
    if prediction.unit == "s":
        lines.append(f"  p90 latency: {prediction.result:.3f} s "
                     f"({prediction.tokens_per_s:,.0f} tokens/s in one stream)")
    else:
        lines.append(f"  tokens/s: {prediction.tokens_per_s:,.0f}")
    lines.append(f"  valid: {'yes' if prediction.valid else 'NO'}")
    lines.append(f"  layout: tp={prediction.tp} x {prediction.replicas} replica(s) "
                 f"({prediction.tp_from}); peak batch per replica {prediction.batch:,}")
    if prediction.rate_per_s is not None:
        lines.append(f"  query rate: {prediction.rate_per_s:,.2f} per second")
    if math.isfinite(prediction.ttft_p99_s):
        label = "p90" if prediction.scenario == "SingleStream" else "p99"
        lines.append(f"  TTFT {label}: {prediction.ttft_p99_s * 1e3:,.0f} ms; "
                     f"TPOT {label}: {prediction.tpot_p99_s * 1e3:,.1f} ms")
    return "\n".join(lines)


def _rows(path: str) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [column for column in CSV_COLUMNS if column not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; "
                             f"give {','.join(CSV_COLUMNS)}")
        rows = []
        for line, row in enumerate(reader, start=2):
            try:
                row["chips"] = int(row["chips"])
            except (TypeError, ValueError):
                raise ValueError(f"{path}, line {line}, column 'chips': {row['chips']!r} is not "
                                 "a whole number") from None
            rows.append((line, row))
        return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m inferlab.predict",
        description="Predict an MLPerf Inference result from the book's step-time model.")
    parser.add_argument("--chip", help="a chip name from --list-chips")
    parser.add_argument("--chips", type=int, default=8, help="accelerators in the system")
    parser.add_argument("--model", default="Llama 2 70B")
    parser.add_argument("--precision", default="fp8", help="weights: fp8, fp4, bf16, ...")
    parser.add_argument("--scenario", default="Offline", choices=SCENARIOS)
    parser.add_argument("--tp", type=int, metavar="N",
                        help="try only this tensor-parallel width (default: the submission's "
                        "own for a chip it ran, else the best that fits)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="scale MLPerf's minimum duration and Offline samples (0, 1]")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--list-chips", action="store_true", help="print the chip names")
    parser.add_argument("--csv", metavar="IN", help="configurations, one per row: "
                        + ",".join(CSV_COLUMNS))
    parser.add_argument("--out", metavar="OUT", help="where --csv writes its results")
    args = parser.parse_args(argv)
    if args.list_chips:
        print("\n".join(accepted_chips()))
        return 0
    try:
        rules = mlperf_rules(scale=args.scale)
        tps = None if args.tp is None else [args.tp]
        if args.csv:
            if not args.out:
                parser.error("--csv needs --out")
            rows = _rows(args.csv)
            written = []
            for line, row in rows:
                try:
                    found = predict(row["chip"], row["chips"], row["model"], row["precision"],
                                    row["scenario"], rules=rules, tps=tps)
                except ValueError as error:
                    raise ValueError(f"{args.csv}, line {line}: {error}") from None
                written.append({**{key: row[key] for key in CSV_COLUMNS},
                                "tokens_per_s": f"{found.tokens_per_s:.1f}",
                                "valid": "yes" if found.valid else "no",
                                "tp": found.tp, "ttft_p99_s": f"{found.ttft_p99_s:.4f}",
                                "tpot_p99_s": f"{found.tpot_p99_s:.5f}"})
                print(f"line {line}: {found.tokens_per_s:,.0f} tok/s "
                      f"({'valid' if found.valid else 'INVALID'})", file=sys.stderr)
            with open(args.out, "w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(written[0]) if written
                                        else [*CSV_COLUMNS, "tokens_per_s", "valid"])
                writer.writeheader()
                writer.writerows(written)
            return 0
        if not args.chip:
            parser.error("give --chip (or --list-chips, or --csv)")
        found = predict(args.chip, args.chips, args.model, args.precision, args.scenario,
                        rules=rules, tps=tps)
    except (ValueError, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(found.as_dict()) if args.json else _format(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
