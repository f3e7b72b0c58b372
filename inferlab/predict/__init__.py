"""Predict what a system serves, from the step-time model: any model, any workload, any layout.

::

    python -m inferlab.predict --chip "NVIDIA H200 SXM" --chips 8 --model "Llama 3.1 8B" \\
        --input-tokens 1000 --output-tokens 200          # fixed lengths, Offline
    python -m inferlab.predict --chip "NVIDIA H200 SXM" --chips 8 --model "Llama 2 70B" \\
        --precision fp8 --scenario Server                # MLPerf's own data set and rules
    python -m inferlab.predict ... --dataset llama3.1-405b   # another MLPerf data set
    python -m inferlab.predict ... --trace profile_export_raw.jsonl   # a recorded run
    python -m inferlab.predict ... --tp 4 --pp 2 --ep 4  # this layout only
    python -m inferlab.predict ... --json                # one JSON object
    python -m inferlab.predict --list-chips              # the chip names it accepts
    python -m inferlab.predict --list-models             # the model names it accepts
    python -m inferlab.predict --csv in.csv --out out.csv

``import inferlab; inferlab.predict(...)`` calls :func:`predict`; the command line is
:mod:`inferlab.predict.cli`.

**The workload** (:class:`inferlab.benchmark.workload.Workload`) is one of: fixed lengths, a length
distribution, an MLPerf data set, or a recorded trace. Without one, a model's own MLPerf
data set is used; a model MLPerf has no benchmark for needs lengths.

**The system** is ``chips`` accelerators split into replicas of ``tp x pp`` chips
(tensor-parallel within the chip's scale-up domain, pipeline stages across it, experts
spread over ``ep`` of the ``tp``; :func:`layout_options`), each modelled by
:func:`inferlab.model.steptime.replica` with the software stack's fitted parameters
(:mod:`inferlab.serving.calibration`) and the engine of a submission's own configuration files.
Without a given layout, a chip and scenario the stack's reference submission ran get that
submission's layout; any other system gets the best of every layout that fits.

**The run.** On an MLPerf data set the scenario runs under MLPerf's rules for that
benchmark (:mod:`inferlab.serving.loadgen`): Offline is every sample queued at once; Server and
Interactive are the highest Poisson rate whose run is valid (minimum duration, query
count, p99 TTFT and TPOT bounds, early stopping), found by bisection; Single-Stream is one
query at a time. Any other workload runs Offline as *steady Offline*: every request queued
at once on each replica, enough of them to fill its batch :data:`STEADY_WAVES` times over,
so that the throughput is the engine's sustained rate rather than a short run's ramp and
drain. Replicas given the same queue behave the same, so one is simulated (its lanes
together) and the system's rate is the replicas' count times its rate. Server and
Interactive on such a workload take the bounds of the model's MLPerf benchmark, where it
has one.

``tokens_per_s`` is output tokens per second of the whole system. No fitted number is
per model, data set or length: the stacks are fitted on Llama 2 70B and every other model
is a prediction (``benchmarks/model_accuracy.py`` scores both). A configuration that
cannot run raises :class:`~inferlab.model.feasibility.Infeasible` (the command line exits with
status 2 and the reason), never a number.

Used in chapters 'Batching' and 'Choosing hardware'.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from types import MappingProxyType

import numpy as np

from inferlab import callable_module
from inferlab.benchmark.early_stopping import loadgen_percentile
from inferlab.benchmark.mlperf import (
    BENCHMARK_MODELS,
    BOUNDS,
    SCENARIOS,
    LatencyBounds,
    benchmark_of,
)
from inferlab.benchmark.verdict import QueryLog, RunRules, mlperf_rules
from inferlab.benchmark.workload import Workload, check_fits_context, datasets
from inferlab.common import checks
from inferlab.common.memo import remembered
from inferlab.model import specs
from inferlab.model.feasibility import Infeasible, fitting_layouts, layout
from inferlab.model.steptime import replica
from inferlab.serving.calibration import Stack, stack, stack_for, stacks
from inferlab.serving.loadgen import (
    MAX_RATE_PER_S,
    MIN_SEARCH_RATE_PER_S,
    System,
    dealt_in_turn,
    find_server_rate,
    run_scenario,
    server_trial,
    started_share,
)

# The one place a replica's lanes are dealt their queries and simulated together.
from inferlab.serving.loadgen import _serve as _serve

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

#: How many times over a steady Offline run fills one replica's batch. The run's ramp and
#: drain cost about one batch's worth of time, so sixteen waves put the result within a
#: few per cent of the sustained rate (exactly on it for fixed lengths, whose requests move
#: in lockstep).
STEADY_WAVES = 16

#: The fewest and most requests a steady Offline run queues on each lane of its one
#: simulated replica.
STEADY_REQUESTS = (256, 200_000)

#: The longest p99 bound a service level may give, an hour: beyond it no queue is a bound.
MAX_BOUND_S = 3600.0

#: The rules of a Server or Interactive run on a workload that is not an MLPerf data set:
#: MLPerf's duration and query minimum, without its equal issue (there is no data set to
#: pass over).
OPEN_RULES = RunRules()


@dataclass(frozen=True)
class Prediction:
    """One modelled result.

    ``tokens_per_s`` is output tokens per second of the whole system (for
    Single-Stream, of its one stream); ``result`` and ``unit`` are what LoadGen
    reports (tokens/s, or the p90 latency in seconds for Single-Stream). ``tp``, ``pp``,
    ``ep`` and ``replicas`` are the layout chosen (``replicas`` copies of ``tp x pp``
    chips), ``tp_from`` why that layout (the submission's own, given, or the best of
    those tried); ``batch`` the most requests one replica's lane ran at once (a replica of
    ``pp`` stages runs ``pp`` lanes); ``rate_per_s`` the query rate of a Server or
    Interactive run; ``workload`` what was served; ``rules`` how the run was judged
    (``"MLPerf <benchmark>"``, ``"steady Offline"``, or the open rules); ``at_ceiling``
    whether a rate search passed at every rate it tried, so that its own upper limit, not
    a bound, stopped it; ``started_share`` for a Server or Interactive run, first
    tokens sent per query issued while the stream ran
    (:func:`~inferlab.serving.loadgen.started_share`: about 1 where the system keeps up).

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
    pp: int = 1
    ep: int = 1
    workload: str = ""
    rules: str = ""
    at_ceiling: bool = False
    started_share: float = math.nan

    def as_dict(self) -> dict:
        """The prediction as plain JSON-ready values."""
        return {key: (None if isinstance(value, float) and not math.isfinite(value) else value)
                for key, value in asdict(self).items()}


def peak_batch(log: QueryLog, replicas: int, shares=None) -> int:
    """The most queries one replica held between first and last token, from a merged log.

    ``shares`` are the log positions of each replica's queries
    (:meth:`inferlab.serving.loadgen.System.shares`); by default queries were dealt
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


def accepted_models() -> list[str]:
    """The models :func:`predict` accepts: every row of ``data/models.csv``, in file order."""
    return specs.models()


#: The most chips a prediction takes: 72, one NVL72 rack, past the largest system in
#: data/mlperf_llama2_70b.csv (48 accelerators), the range the predictor is checked on.
#: A prediction under MLPerf's rules simulates every replica's schedule, so its time grows
#: with the chips: about 30 s for 72 H100s under MLPerf's full Offline rules on the book's
#: 2-core machine.
MAX_CHIPS = 72


def _chips(value) -> int:
    return checks.whole("chips", value, maximum=MAX_CHIPS)


def tp_options(chip: str | specs.Chip, chips: int, model: str | specs.ModelSpec,
               precision: str) -> list[int]:
    """Tensor-parallel widths that divide ``chips``, fit the weights and stay in one domain.

    Raises :class:`~inferlab.model.feasibility.Infeasible` with the reason of the widest
    width tried when none fits.

    Used in chapter 'Choosing hardware'.
    """
    return [tp for tp, _ in layout_options(chip, chips, model, precision, pipeline=False)]


def layout_options(chip: str | specs.Chip, chips: int, model: str | specs.ModelSpec,
                   precision: str, *, tps=None, pp: int | None = None,
                   pipeline: bool = True) -> list[tuple[int, int]]:
    """The ``(tp, pp)`` layouts of a replica that fit ``model`` on ``chips`` x ``chip``.

    ``tp`` runs over the powers of two (or ``tps``) that stay inside the chip's scale-up
    domain; for each, ``pp`` is the given one, else 1 if the weights fit on ``tp`` chips
    and otherwise (with ``pipeline``) the fewest stages, a power of two, that hold them.
    Every replica's ``tp x pp`` divides ``chips``. Raises
    :class:`~inferlab.model.feasibility.Infeasible` with the reason of the last layout tried
    when none fits (the weights' size and the chips they need, or the domain).
    """
    hw, spec = specs.as_chip(chip), specs.as_model(model)
    chips = _chips(chips)
    widths = (checks.wholes("tps", tps).tolist() if tps is not None
              else [1 << k for k in range(chips.bit_length())])
    stages = ([checks.whole("pp", pp, maximum=chips)] if pp is not None
              else [2**k for k in range(7)] if pipeline else [1])
    found, last = fitting_layouts(spec, hw, precision, widths, stages,
                                  lambda tp, pp: chips % (tp * pp) == 0)
    if not found:
        if last is None:
            raise ValueError(f"chips: no layout of {chips} chips has the given tp and pp; give "
                             "values whose product divides chips")
        raise last
    return found


def as_stack(value, chip, precision: str) -> Stack:
    """The stack a prediction runs: ``value`` if it is a
    :class:`~inferlab.serving.calibration.Stack` (used as built), the stack of
    ``data/stacks.csv`` it names, or by default the vendor's calibrated stack for ``chip``
    (a name or a :class:`~inferlab.model.specs.Chip`) at ``precision``."""
    if value is None:
        return stack_for(specs.as_chip(chip), precision)
    if isinstance(value, str):
        try:
            return stack(value)
        except ValueError:
            raise ValueError(f"stack: unknown stack {value!r}; known: "
                             f"{', '.join(stacks())}") from None
    checks.instance("stack", value, Stack)
    return value


def as_workload(value, model) -> Workload:
    """The workload a prediction serves: ``value`` if it is a
    :class:`~inferlab.benchmark.workload.Workload`, the MLPerf data set it names
    (:func:`inferlab.benchmark.workload.datasets`), or by default ``model``'s own MLPerf data set.

    Raises ``ValueError`` for a model MLPerf has no benchmark for and no workload given,
    naming the ways to give one.
    """
    model = specs.as_model(model)
    if value is None:
        own = benchmark_of(model.name)
        if own is None:
            raise ValueError(
                f"workload: {model.name} has no MLPerf data set to default to (those with one: "
                f"{', '.join(BENCHMARK_MODELS.values())}); give input and output tokens "
                f"(--input-tokens, --output-tokens), a data set (one of {', '.join(datasets())})"
                " or a trace")
        value = own
    if isinstance(value, str):
        return Workload.dataset(value)
    checks.instance("workload", value, Workload)
    return value


def predict(chip, chips: int, model="Llama 2 70B", precision: str = "fp8",
            scenario: str = "Offline", *, workload=None, stack=None,
            rules: RunRules | None = None, tps=None, pp: int | None = None, ep: int = 1,
            dispatch: str = "round-robin", ttft_p99_s: float | None = None,
            tpot_p99_s: float | None = None, iterations: int = SEARCH_ITERATIONS,
            rate_per_s: float | None = None) -> Prediction:
    """The modelled result of ``chips`` x ``chip`` serving ``model`` at ``precision``.

    ``chip``, ``model`` and ``stack`` are names or the objects themselves
    (:class:`~inferlab.model.specs.Chip`, :class:`~inferlab.model.specs.ModelSpec`,
    :class:`~inferlab.serving.calibration.Stack`); a stack built by hand is used as built.
    ``workload`` is a :class:`~inferlab.benchmark.workload.Workload` or an MLPerf data set's name;
    by default the model's own data set (module docstring). ``rules`` default to MLPerf's
    own for an MLPerf data set (pass ``mlperf_rules(scale=0.1)`` for a ten-times shorter
    run). ``tps`` lists the tensor-parallel widths to try, ``pp`` fixes the pipeline
    stages and ``ep`` the expert-parallel chips of each stage; by default a chip and
    scenario the stack's reference submission ran get that submission's layout, where it
    divides ``chips`` and fits, and any other system the best of every layout
    :func:`layout_options` allows. ``dispatch`` is how queries reach the replicas
    (:data:`inferlab.serving.loadgen.DISPATCHES`). ``ttft_p99_s`` and ``tpot_p99_s`` are a service
    level of one's own for a Server run (each optional; the other is then unbounded):
    the search finds the highest Poisson rate whose p99s meet them, judged otherwise as
    MLPerf judges a Server run, on any workload and any model. ``iterations`` is the
    number of halvings of that rate search. ``rate_per_s`` (requests per second to the
    whole system) runs the Server scenario at that rate instead of searching: one run,
    judged by the same rules and simulated whole, its verdict in ``valid`` and
    ``started_share`` telling whether the system kept up with the rate.

    Raises :class:`~inferlab.model.feasibility.Infeasible` if no layout fits (with the
    gigabytes it needs) and ``ValueError`` for an unknown chip, model, stack, format,
    data set or scenario, a workload longer than the model's context, or a scenario the
    workload has no bounds for.

    Used in chapters 'Batching' and 'Choosing hardware'.
    """
    checks.option("scenario", scenario, SCENARIOS)
    hw, spec = specs.as_chip(chip), specs.as_model(model)
    chips = _chips(chips)
    stack = as_stack(stack, hw, precision)
    workload = as_workload(workload, spec)
    check_fits_context(workload, spec.context_length_tokens, spec.name)
    ep = checks.whole("ep", ep)
    iterations = checks.iterations("iterations", iterations)
    if rate_per_s is not None:
        if scenario not in ("Server", "Interactive"):
            raise ValueError(f"rate_per_s: a {scenario} run has no rate to set; give "
                             "scenario='Server' or 'Interactive'")
        rate_per_s = checks.real("rate_per_s", rate_per_s, low=MIN_SEARCH_RATE_PER_S,
                                 high=MAX_RATE_PER_S)
    limit = _service_level(ttft_p99_s, tpot_p99_s, scenario)
    arguments = dict(hw=hw, chips=chips, spec=spec, precision=precision, scenario=scenario,
                     stack=stack, workload=workload, rules=rules, tps=tps, pp=pp, ep=ep,
                     dispatch=dispatch, limit=limit, iterations=iterations,
                     rate_per_s=rate_per_s)
    # Minutes of simulation for the book's pages, the same every build: remembered there
    # (inferlab.common.memo), computed afresh everywhere else.
    return remembered("inferlab.predict.predict", lambda: _predicted(**arguments), arguments,
                      to_json=asdict, from_json=lambda data: Prediction(**data))


def _predicted(hw: specs.Chip, chips: int, spec: specs.ModelSpec, precision: str,
               scenario: str, stack: Stack, workload: Workload, rules: RunRules | None, tps,
               pp: int | None, ep: int, dispatch: str, limit: LatencyBounds | None,
               iterations: int, rate_per_s: float | None) -> Prediction:
    """:func:`predict` of names already resolved and arguments already checked."""
    mlperf = workload.benchmark in BOUNDS
    benchmark = workload.benchmark if mlperf else benchmark_of(spec.name)
    rules, judged = _judging(spec, workload, scenario, rules, benchmark, limit, mlperf)
    engine_benchmark = workload.benchmark if mlperf else "llama2-70b"
    layouts, tp_from = _layouts(hw, chips, spec, precision, scenario, stack, tps, pp, ep,
                                engine_benchmark)
    held = holding(layouts, lambda tp, stages, experts, attention_dp: replica_for(
        hw, spec, precision, stack, workload, tp, stages, experts, attention_dp))
    best = None
    for (tp, stages, experts, _), rep in held:
        scheduler = stack.scheduler(hw.name, scenario, engine_benchmark)
        replicas = chips // (tp * stages)
        system = System(f"{chips} x {hw.name}, tp={tp}, pp={stages}", rep, replicas * stages,
                        scheduler, dispatch)
        rate, ceiling = None, False
        if not mlperf and scenario == "Offline":
            candidate = _steady_offline(system, workload, hw, spec, precision, scenario,
                                        stack, tp, stages, experts, replicas, tp_from, judged)
        else:
            if scenario in ("Server", "Interactive"):
                # With bounds of the caller's own the benchmark names nothing the run
                # uses, and a model with none (Qwen3, say) passes an empty name.
                if rate_per_s is None:
                    search = find_server_rate(system, scenario, workload=workload,
                                              model=benchmark or "", rules=rules,
                                              iterations=iterations, limit=limit)
                    summary, rate = search.best, search.rate_per_s
                    ceiling = search.at_ceiling
                else:
                    summary = server_trial(system, scenario, workload, benchmark or "",
                                           rate_per_s, rules, limit, abandon=False)
                    rate = rate_per_s
                if summary is None:
                    continue
            else:
                summary = run_scenario(system, scenario, workload=workload, model=benchmark,
                                       rules=rules)
            log = summary.log
            tokens_per_s = (summary.result if summary.unit == "tokens/s"
                            else log.tokens / float(np.max(log.finish_s)))
            candidate = Prediction(
                hw.name, chips, spec.name, precision, scenario, stack.name, tp, replicas,
                float(tokens_per_s), float(summary.result), summary.unit, summary.valid,
                summary.ttft_p99_s, summary.tpot_p99_s,
                peak_batch(log, system.replicas, system.shares(len(log))), rate, tp_from,
                stages, experts, workload.name, judged, ceiling,
                started_share(log) if scenario in ("Server", "Interactive") else math.nan)
        if best is None or _better(candidate, best):
            best = candidate
    if best is None:
        (tp, stages, experts, _), _ = held[0]
        return Prediction(hw.name, chips, spec.name, precision, scenario, stack.name, tp,
                          chips // (tp * stages), 0.0, 0.0, "tokens/s", False, math.nan,
                          math.nan, 0, rate_per_s or 0.0, tp_from, stages, experts,
                          workload.name, judged)
    return best


def _judging(spec: specs.ModelSpec, workload: Workload, scenario: str,
             rules: RunRules | None, benchmark: str | None,
             limit: LatencyBounds | None, mlperf: bool) -> tuple[RunRules | None, str]:
    """The rules a prediction's run is judged by, and the words that say how (``mlperf``:
    the workload is an MLPerf data set); ``ValueError`` for a scenario the workload has no
    bounds for."""
    # Bounds of the caller's own need no benchmark to take them from.
    if limit is None and scenario in ("Server", "Interactive"):
        if benchmark is None:
            raise ValueError(f"scenario: {scenario} needs latency bounds, and {spec.name} has "
                             "no MLPerf benchmark to take them from; give Offline, or "
                             "bounds of your own (ttft_p99_s, tpot_p99_s)")
        if scenario not in BOUNDS[benchmark]:
            raise ValueError(f"scenario: MLPerf's {benchmark} benchmark has no {scenario} "
                             f"scenario; give one of Offline, {', '.join(BOUNDS[benchmark])}")
    if limit is not None:
        rules = (mlperf_rules(workload.benchmark) if mlperf else OPEN_RULES) \
            if rules is None else rules
        return rules, ("Server at p99 TTFT <= " + _seconds(limit.ttft_s) + " and TPOT <= "
                       + _seconds(limit.tpot_s) + (f", MLPerf {workload.benchmark}'s rules"
                                                    if mlperf else ", MLPerf's duration"))
    if mlperf:
        return (mlperf_rules(workload.benchmark) if rules is None else rules,
                f"MLPerf {workload.benchmark}")
    if scenario == "Offline":
        return rules, "steady Offline"
    if scenario == "SingleStream":
        raise ValueError("scenario: Single-Stream is modelled on MLPerf data sets only; give "
                         "Offline for this workload, or a data set")
    return (OPEN_RULES if rules is None else rules,
            f"{scenario} at {benchmark}'s bounds, MLPerf's duration")


def replica_for(chip: specs.Chip, model: specs.ModelSpec, precision: str, stack: Stack,
                workload: Workload, tp: int, pp: int = 1, ep: int = 1,
                attention_dp: bool = False):
    """The step-time model :func:`predict` runs for one replica of ``tp x pp`` chips: the
    stack's parameters, the cache's rate at the workload's typical context, and a check
    that the workload's longest request fits one lane's cache (else
    :class:`~inferlab.model.feasibility.Infeasible`). Objects, not names: the callers resolve
    them once."""
    mean_prompt, mean_output = workload.mean_tokens()
    rep = replica(model, chip, tp, precision, pp=pp, ep=ep,
                  context_tokens=min(mean_prompt + mean_output / 2,
                                     model.context_length_tokens),
                  attention_dp=attention_dp,
                  **stack.replica_parameters(chip, precision, model, pp))
    _check_request_fits(rep, workload)
    return rep


def _service_level(ttft_p99_s, tpot_p99_s, scenario: str) -> LatencyBounds | None:
    """The caller's p99 bounds as one :class:`~inferlab.benchmark.mlperf.LatencyBounds` (an absent
    one unbounded), or ``None`` if neither is given."""
    if ttft_p99_s is None and tpot_p99_s is None:
        return None
    if scenario != "Server":
        raise ValueError(f"scenario: bounds of one's own (ttft_p99_s, tpot_p99_s) judge a "
                         f"Server run; give scenario='Server', not {scenario!r}")
    ttft = math.inf if ttft_p99_s is None else checks.real(
        "ttft_p99_s", ttft_p99_s, low=1e-6, high=MAX_BOUND_S)
    tpot = math.inf if tpot_p99_s is None else checks.real(
        "tpot_p99_s", tpot_p99_s, low=1e-6, high=MAX_BOUND_S)
    return LatencyBounds(ttft, tpot)


def _seconds(value: float) -> str:
    """A bound as a reader writes it: 2 s, 50 ms, or no bound."""
    if not math.isfinite(value):
        return "any"
    return f"{value:g} s" if value >= 1 else f"{value * 1e3:g} ms"


def holding(layouts, build) -> list[tuple[tuple, object]]:
    """``(layout, replica)`` for each of ``layouts`` whose replica ``build(*layout)`` can
    hold the workload's longest request in a lane's cache, in order. A layout whose lane
    cannot (:func:`replica_for` raises :class:`~inferlab.model.feasibility.Infeasible`) is
    skipped, since a wider one may; if none can, the last one's reason is raised. Shared
    by every layout search: :func:`predict`, the planner and its fastest stream."""
    held, refusal = [], None
    for shape in layouts:
        try:
            held.append((shape, build(*shape)))
        except Infeasible as reason:
            refusal = reason
    if refusal is not None and not held:
        raise refusal
    return held


def _check_request_fits(rep, workload: Workload) -> None:
    """Refuse a workload whose longest request outgrows one lane's KV cache."""
    longest = workload.longest_request_tokens
    if longest > rep.kv_capacity_tokens:
        per_token = rep.kv_bytes_per_token
        raise Infeasible("capacity", (
            f"workload: one request of {longest:,} tokens needs "
            f"{longest * per_token / 1e9:,.1f} GB of KV cache, but {rep.name} has "
            f"{rep.kv_capacity_tokens * per_token / 1e9:,.1f} GB free per lane after weights "
            "and reserve; use more chips per replica (tp, pp) or shorter requests"))


def _steady_offline(system: System, workload: Workload, hw, spec, precision, scenario, stack,
                    tp, stages, experts, replicas, tp_from, judged) -> Prediction:
    """Steady Offline (module docstring): one replica, each of its lanes queued full
    ``STEADY_WAVES`` times over, scaled to the system."""
    rep, scheduler = system.replica, system.scheduler
    mean_prompt, mean_output = workload.mean_tokens()
    concurrency = max(1, min(scheduler.max_batch,
                             int(rep.kv_capacity_tokens // (mean_prompt + mean_output))))
    low, high = STEADY_REQUESTS
    n = int(min(high, max(low, STEADY_WAVES * concurrency)))
    lanes = rep.lanes
    prompts, outputs = workload.lengths(n * lanes)
    one = replace(system, replicas=lanes)
    log = _serve(one, np.zeros(n * lanes), prompts, outputs, "all_at_once")
    copy_tok_s = log.tokens / float(np.max(log.finish_s))
    tokens_per_s = copy_tok_s * replicas
    decoding = log.output_tokens > 1
    tpot = loadgen_percentile(log.tpot_s[decoding], 0.99) if decoding.any() else math.nan
    return Prediction(hw.name, system.accelerators, spec.name, precision, scenario, stack.name,
                      tp, replicas, float(tokens_per_s), float(tokens_per_s), "tokens/s", True,
                      float(loadgen_percentile(log.ttft_s, 0.99)), float(tpot),
                      peak_batch(log, lanes, one.shares(len(log))), None, tp_from, stages,
                      experts, workload.name, judged)


def _layouts(hw: specs.Chip, chips: int, spec: specs.ModelSpec, precision: str, scenario: str,
             stack: Stack, tps, pp, ep: int, benchmark: str) -> tuple[list[tuple], str]:
    """The ``(tp, pp, ep, attention_dp)`` layouts a prediction tries, and where they come
    from."""
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
        # A given width without stages means no pipeline: the layout is the one asked for.
        stages = pp or 1
        for tp in widths:
            if chips % (tp * stages):
                raise ValueError(f"pp: {tp} x {stages} chips per replica do not divide "
                                 f"chips={chips}; give stages whose product with tp divides it")
            layout(spec, hw, precision, tp=tp, pp=stages)  # refuses with its reason
        return [(tp, stages, ep, False) for tp in widths], "given"
    found = layout_options(hw, chips, spec, precision, pp=pp)
    engine = stack.engine(hw.name, scenario, benchmark)
    if engine["tp"] is not None and (pp is None or pp == (engine["pp"] or 1)):
        own = (engine["tp"], engine["pp"] or 1)
        try:
            if chips % (own[0] * own[1]) == 0:
                layout(spec, hw, precision, tp=own[0], pp=own[1])
                experts = (engine["ep"] or 1) if ep == 1 else ep
                return ([(*own, experts, engine["attention_dp"])],
                        f"the layout {engine['source']} ran")
        except Infeasible:
            pass  # the submitter's layout does not fit this system: search instead
    if all(stages == 1 for _, stages in found):
        label = ", ".join(str(tp) for tp, _ in found)
    else:
        label = "tp x pp " + ", ".join(f"{tp}x{stages}" for tp, stages in found)
    return [(tp, stages, ep, False) for tp, stages in found], "the best of " + label


def _better(a: Prediction, b: Prediction) -> bool:
    if a.valid != b.valid:
        return a.valid
    if a.scenario == "SingleStream":
        return a.result < b.result
    return a.tokens_per_s > b.tokens_per_s


# ``inferlab.predict(...)`` calls :func:`predict`, while ``python -m inferlab.predict``
# and ``from inferlab.predict import predict`` keep working.
callable_module(__name__, predict)
