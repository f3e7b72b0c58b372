"""MLPerf LoadGen's scenarios and validity rules, run against the serving simulator.

MLPerf Inference measures a system under test (SUT) through a load generator,
LoadGen, that decides *when* queries are sent and then judges whether the run
counts. The same machine gives a different number under each scenario:

- **Single-Stream**: the next query is sent when the previous one has finished
  (a closed loop of one user). The result is a latency: the plain 90th percentile
  of query latency (LLM benchmarks set ``use_token_latencies = 1``, so early
  stopping runs on TTFT and TPOT and only asks for enough queries; its
  percentile estimates are reported beside the result, not as it).
- **Offline**: every sample is sent at once; the result is output tokens per
  second, tokens over the time until the last sample finished. No latency bound.
- **Server**: queries arrive as a Poisson process at a target rate. The run is
  valid only if the 99th percentiles of time to first token (TTFT) and time per
  output token (TPOT) are within the model's bounds and the early-stopping test
  passes for each; the result is LoadGen's "completed tokens per second": every
  output token over the time at which the *last scheduled* query finished
  (``final_query_all_samples_done_time``), which can come before a long query
  scheduled earlier finishes. LoadGen also reports the completed and the
  scheduled samples per second, ``(n - 1)`` over that finish time and over the
  last query's scheduled time.
- **Interactive**: the Server scenario with tighter bounds (in MLPerf a separate
  benchmark, e.g. ``llama2-70b-interactive``, run in the Server scenario).

A run counts if it meets LoadGen's rules (minimum duration and query count, equal issue,
the p99 bounds and early stopping): :func:`inferlab.benchmark.verdict.judge` checks them, on
any :class:`~inferlab.benchmark.verdict.QueryLog`, simulated or measured. This module runs the
scenarios against the simulator and searches for the highest Server rate that passes.

The system is ``replicas`` copies of one :class:`inferlab.model.steptime.Replica`
(data parallel), or lanes of pipeline-parallel copies, ``replica.lanes`` to a copy;
queries are dealt to them round-robin, as a simple harness does, or at random
(:data:`DISPATCHES`), and the lanes of each copy are simulated together, in lock step
(:func:`inferlab.serving.simulator.simulate_lanes`).

Used in chapter 'Benchmark scenarios'.
"""

from __future__ import annotations

import math
from contextlib import closing
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from inferlab.benchmark.mlperf import (
    BOUNDED_SCENARIOS,
    BOUNDS,
    SCENARIOS,
    TARGET_PERCENTILE,
    LatencyBounds,
    bounds,
)
from inferlab.benchmark.traffic import Requests
from inferlab.benchmark.verdict import (
    MAX_QUERIES,
    QueryLog,
    RunRules,
    Summary,
    check_token_counts,
    judge,
    mlperf_rules,
)
from inferlab.benchmark.workload import Workload
from inferlab.common import checks
from inferlab.common.bisection import highest_passing
from inferlab.model.steptime import Replica
from inferlab.serving.simulator import (
    MIN_SEARCH_RATE_PER_S,
    Scheduler,
    SimResult,
    simulate,
    simulate_lanes,
)

#: How far past its compute ceiling (:meth:`System.ceiling_rate_per_s`) a Server or
#: Interactive run may be driven. Past the ceiling the queue only grows, so a run a
#: little over it still teaches something (every latency climbs); one ten times over is
#: a mistyped rate whose simulation would hold a mostly unserved queue.
MAX_OVERLOAD = 10.0

#: Queries whose mean lengths set the compute ceiling past which a rate is refused.
CEILING_SAMPLE = 10_000


# --------------------------------------------------------------------------------------
# Runs and rules
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# A modelled system, a workload, and the scenarios run against them
# --------------------------------------------------------------------------------------


#: How a system hands its queries to its replicas. ``"round-robin"`` deals them in turn, so
#: each replica sees every ``replicas``-th arrival, a smoother stream than the whole.
#: ``"random"`` sends each to a replica drawn uniformly (seeded, :data:`DISPATCH_SEED`):
#: each replica then sees a Poisson stream of its own, the burstiest a dispatcher that
#: ignores the replicas' load can give. A real harness sits between the two or beyond
#: them: NVIDIA's lets each engine take the queued queries when it next asks.
DISPATCHES = ("round-robin", "random")

#: The seed of ``"random"`` dispatch: two runs of the same system deal alike.
DISPATCH_SEED = 0


def log_of_runs(results, positions=None) -> QueryLog:
    """Merge simulator runs (one per replica) into one LoadGen log, ordered by issue time.

    ``positions``, one array per run, put each run's queries at those places of the
    log instead (:meth:`System.shares`), so that a position names the same query
    whatever the dispatch, ties of issue time included.
    """
    runs = list(results)
    if not runs or not all(isinstance(run, SimResult) for run in runs):
        raise ValueError("results: give one or more SimResult objects")
    names = ("arrival_s", "first_token_s", "finish_s", "output_tokens")
    if positions is None:
        parts = [np.concatenate([getattr(run, name) for run in runs]) for name in names]
        order = np.argsort(parts[0], kind="stable")
        return QueryLog(*(part[order] for part in parts))
    positions = list(positions)
    if len(positions) != len(runs):
        raise ValueError(f"positions: give one array per run ({len(runs)}), "
                         f"not {len(positions)}")
    n = sum(len(where) for where in positions)
    parts = []
    for name in names:
        part = np.empty(n, dtype=getattr(runs[0], name).dtype)
        for where, run in zip(positions, runs, strict=True):
            part[where] = getattr(run, name)
        parts.append(part)
    return QueryLog(*parts)


def dealt_in_turn(n: int, replicas: int) -> list[np.ndarray]:
    """The positions of ``n`` queries dealt round-robin: replica ``k`` gets ``k``,
    ``k + replicas``, ... Replicas beyond the ``n``-th are dealt none and left out."""
    n = checks.whole("n", n, minimum=0, maximum=MAX_QUERIES)
    replicas = checks.whole("replicas", replicas)
    return [np.arange(k, n, replicas) for k in range(min(replicas, n))]


@dataclass(frozen=True)
class System:
    """A system under test: ``replicas`` data-parallel copies of one replica, or for a
    pipeline-parallel replica ``replicas`` lanes, ``replica.lanes`` of them to a copy
    (the lanes of a copy run in lock step).

    ``accelerators`` is ``replicas x replica.tp``. ``dispatch`` says how queries reach
    the replicas (:data:`DISPATCHES`). Used in chapters 'Batching' and 'Benchmark
    scenarios'.
    """

    name: str
    replica: Replica
    replicas: int = 1
    scheduler: Scheduler = field(default_factory=lambda: Scheduler(max_batch=512,
                                                                   token_budget=2048))
    dispatch: str = "round-robin"

    def __post_init__(self) -> None:
        if not isinstance(self.replica, Replica):
            raise ValueError(f"replica: {self.replica!r} is not a Replica")
        checks.whole("replicas", self.replicas)
        if self.replicas % self.replica.lanes:
            raise ValueError(f"replicas: {self.replicas} lanes do not make whole copies of "
                             f"{self.replica.name}, whose {self.replica.lanes} pipeline stages "
                             f"run {self.replica.lanes} lanes; give a multiple of "
                             f"{self.replica.lanes}")
        if self.dispatch not in DISPATCHES:
            raise ValueError(f"dispatch: {self.dispatch!r} is not one of "
                             f"{', '.join(DISPATCHES)}")

    def shares(self, n: int) -> list[np.ndarray]:
        """The positions, in issue order, of the queries each replica gets of ``n``."""
        n = checks.whole("n", n, minimum=0, maximum=MAX_QUERIES)
        if self.dispatch == "round-robin":
            return dealt_in_turn(n, self.replicas)
        who = np.random.default_rng(DISPATCH_SEED).integers(self.replicas, size=n)
        return [np.flatnonzero(who == k) for k in range(self.replicas)]

    @property
    def accelerators(self) -> int:
        """Chips in the whole system."""
        return self.replicas * self.replica.tp

    def ceiling_rate_per_s(self, prompts, outputs) -> float:
        """Queries per second no schedule can beat for queries of these lengths: every
        prompt and output token goes once through the matrix multiplies (the output head
        once per output token), and a step takes at least their time
        (:meth:`inferlab.model.steptime.Replica.matmul_s`), so the replicas can do
        no more than that work per second. Weight reads, attention and overhead only
        lower the real rate.
        """
        answer = float(np.mean(checks.wholes("outputs", outputs, size=MAX_QUERIES)))
        tokens = float(np.mean(checks.wholes("prompts", prompts, size=MAX_QUERIES))) + answer
        return self.replicas / float(self.replica.matmul_s(tokens, answer))


def _poisson_run(system: System, workload: Workload, rate: float, n: int,
                 hopeless=None) -> QueryLog | None:
    """``n`` queries of ``workload`` arriving as a Poisson stream at ``rate`` per second, served
    (see :func:`_serve` for ``hopeless``): a Server or Interactive run."""
    prompts, outputs = workload.lengths(n)
    # Refused before the run: its TPOTs would be nan, and no trial could tell it failed.
    check_token_counts(outputs)
    return _serve(system, workload.unit_arrivals(n) / rate, prompts, outputs, "poisson", hopeless)


def _serve(system: System, arrivals: np.ndarray, prompts, outputs, kind: str,
           hopeless=None, simulated=None) -> QueryLog | None:
    """Deal the queries to the replicas' lanes as the system dispatches
    (:meth:`System.shares`), simulate each pipeline's lanes together
    (:func:`~inferlab.serving.simulator.simulate_lanes`), merge the logs.

    ``hopeless``, if given, sees each pipeline's log as it is simulated; once it
    returns true the run is abandoned and ``None`` returned. ``simulated`` maps a
    pipeline's first lane to the runs of its lanes' shares, already simulated, which are
    used as they are.
    """
    simulated = {} if simulated is None else simulated
    shares, runs = [], []
    for first, group in _pipelines(system, len(prompts)):
        done = simulated.get(first)
        if done is None:
            done = simulate_lanes(system.replica, [
                Requests(arrivals[share], prompts[share], outputs[share], kind)
                for share in group], system.scheduler)
        shares += group
        runs += done
        if hopeless is not None and hopeless(log_of_runs(done)):
            return None
    # Each query keeps its place in the issue order (every Offline query is issued at 0).
    return log_of_runs(runs, shares)


def _pipelines(system: System, n: int) -> list[tuple[int, list[np.ndarray]]]:
    """The lanes' shares of ``n`` queries (:meth:`System.shares`) grouped by the pipeline
    they run in (``replica.lanes`` lanes a pipeline), each group with the index of its
    first lane; lanes dealt nothing are left out, and groups left empty."""
    shares, lanes = system.shares(n), system.replica.lanes
    groups = ((first, [share for share in shares[first:first + lanes] if share.size])
              for first in range(0, len(shares), lanes))
    return [(first, group) for first, group in groups if group]


def queries_to_issue(scheduled_s, rules: RunRules) -> int:
    """How many queries of a Server schedule LoadGen issues, given their scheduled times.

    ``GenerateQueries`` (``loadgen/loadgen.cc``) keeps adding queries while the last
    one is scheduled before the minimum duration or the count is below the minimum.
    Under equal issue the minimum starts padded to a whole number of dataset passes
    (``RunRules.pad``) and grows by one pass whenever it is reached before the
    minimum duration, so the count is the first ``pad(min_queries) + k x dataset``
    whose last query is scheduled at or after ``min_duration_s``.

    ``scheduled_s`` is the schedule in seconds, sorted, long enough to hold the
    answer; raises ``ValueError`` if it is not.

    Used in chapter 'Benchmark scenarios'.
    """
    times = np.asarray(scheduled_s, dtype=float)
    if times.ndim != 1 or times.size == 0 or np.any(np.diff(times) < 0):
        raise ValueError("scheduled_s: give a non-empty, sorted 1-D array of times")
    if not isinstance(rules, RunRules):
        raise ValueError(f"rules: {rules!r} is not a RunRules")
    reached = int(np.searchsorted(times, rules.min_duration_s, side="left"))
    if reached == times.size:
        raise ValueError(f"scheduled_s: {times.size} queries end at {times[-1]:.3f} s, "
                         f"before the minimum duration {rules.min_duration_s:g} s")
    first_past = reached + 1
    count = rules.pad(rules.min_queries)
    if rules.equal_issue and first_past > count:
        count += math.ceil((first_past - count) / rules.dataset_samples) * rules.dataset_samples
    count = max(count, first_past)
    if count > times.size:
        raise ValueError(f"scheduled_s: LoadGen would issue {count} queries; the schedule "
                         f"holds {times.size}")
    return count


def server_query_count(rate_per_s: float, workload: Workload, rules: RunRules) -> int:
    """How many queries LoadGen schedules at ``rate_per_s``: :func:`queries_to_issue` over
    the workload's arrival schedule.

    Used in chapter 'Benchmark scenarios'.
    """
    rate = checks.positive("rate_per_s", rate_per_s)
    checks.instance("workload", workload, Workload)
    checks.instance("rules", rules, RunRules)
    extra = rules.dataset_samples if rules.equal_issue else 0
    # Compared as a float first: a huge rate's count is no int to allocate for.
    expected = rate * rules.min_duration_s * 1.2 + 16
    n = rules.pad(rules.min_queries)
    while True:
        if max(n, expected) + extra > MAX_QUERIES:
            raise ValueError(f"rate_per_s: {rate:g} queries/s for {rules.min_duration_s:g} s "
                             f"(rules) is more than the {MAX_QUERIES:,} queries a run may hold")
        n = max(n, math.ceil(expected))
        arrivals = checks.finite_result(workload.unit_arrivals(n + extra) / rate, "rate_per_s")
        try:
            return queries_to_issue(arrivals, rules)
        except ValueError:
            expected = 2 * n


def single_stream_min_queries(rules: RunRules, expected_latency_s: float) -> int:
    """Single-Stream's minimum query count as ``TestSettingsInternal`` sets it.

    Without equal issue, ``rules.min_queries``. With it, LoadGen first raises the
    minimum to the queries the submitter's expected latency would fit in twice the
    minimum duration (``2 x min_duration / expected latency``, truncated), then adds
    ``dataset - count % dataset``: the next multiple of the dataset, a whole extra
    pass if the count already is one (``loadgen/test_settings_internal.cc``).

    Used in chapter 'Benchmark scenarios'.
    """
    checks.instance("rules", rules, RunRules)
    latency = checks.positive("expected_latency_s", expected_latency_s)
    count = rules.min_queries
    if not rules.equal_issue:
        return count
    fitted = 2 * rules.min_duration_s / latency
    if fitted > MAX_QUERIES:
        raise ValueError(f"expected_latency_s: {latency:g} s fits {fitted:.3g} queries in twice "
                         f"the minimum duration; at most {MAX_QUERIES:,} allowed")
    count = max(count, int(fitted))
    return count + rules.dataset_samples - count % rules.dataset_samples


def run_scenario(system: System, scenario: str, *, workload: Workload | None = None,
                 model: str = "llama2-70b", rate_per_s: float | None = None,
                 rules: RunRules | None = None, queries: int | None = None) -> Summary:
    """Run one LoadGen scenario against ``system`` and judge the run.

    - Single-Stream: a closed loop of one query at a time on one replica, run until
      both the minimum duration and the minimum query count are met.
    - Offline: the larger of the minimum sample count and enough samples to last
      the minimum duration (LoadGen pads with 10 % slack), all at time zero.
    - Server, Interactive: Poisson arrivals at ``rate_per_s`` until the minimum
      duration and count are met.

    ``queries`` overrides the count (to show what a short run does). Raises
    ``ValueError`` for an unknown scenario or model, a missing or non-positive
    rate for Server or Interactive, one over :data:`MAX_OVERLOAD` times the
    system's compute ceiling (:meth:`System.ceiling_rate_per_s`), or a count below 1.

    Used in chapter 'Benchmark scenarios'.
    """
    checks.option("scenario", scenario, SCENARIOS)
    if not isinstance(system, System):
        raise ValueError(f"system: {system!r} is not a System")
    workload = Workload() if workload is None else workload
    rules = mlperf_rules(model) if rules is None else rules
    if model not in BOUNDS:
        raise ValueError(f"model: {model!r} has no bounds here; give one of {', '.join(BOUNDS)}")
    if queries is not None:
        queries = checks.whole("queries", queries, maximum=MAX_QUERIES)
    rate = None
    if scenario in BOUNDED_SCENARIOS:
        if rate_per_s is None:
            raise ValueError(f"rate_per_s: the {scenario} scenario needs a target rate")
        rate = checks.positive("rate_per_s", rate_per_s)
        most = _most_rate_per_s(system, workload)
        if rate > most:
            raise ValueError(
                f"rate_per_s: {rate:,.1f} queries/s is more than {MAX_OVERLOAD:g} times the "
                f"{most / MAX_OVERLOAD:,.1f} queries/s {system.name} could complete even if "
                f"it only multiplied matrices; give at most {most:,.1f}")
        log = _poisson_run(system, workload, rate,
                           queries or server_query_count(rate, workload, rules))
    elif scenario == "Offline":
        if queries:
            prompts, outputs = workload.lengths(queries)
            log = _serve(system, np.zeros(queries), prompts, outputs, "all_at_once")
        else:
            log = _offline_run(system, workload, rules)
    else:
        n = queries or rules.min_queries
        log = _single_stream(system, workload, n)
        if not queries:
            # The submitter's expected latency: the mean over a pilot of min_queries queries.
            floor = single_stream_min_queries(rules, float(np.mean(log.e2e_s)))
            n = max(n, floor)
            while True:
                log = _single_stream(system, workload, n)
                last_issue = float(np.max(log.arrival_s))
                if last_issue >= rules.min_duration_s:
                    break
                n = max(n + 1, math.ceil(n * rules.min_duration_s / max(last_issue, 1e-9) * 1.05))
            # LoadGen stops issuing once both the count and the duration are met.
            past = int(np.searchsorted(log.arrival_s, rules.min_duration_s, side="left")) + 1
            log = log.head(max(floor, past))
    return judge(log, scenario, model, rules=rules, system=system.name, rate_per_s=rate)


def _most_rate_per_s(system: System, workload: Workload) -> float:
    """The highest Server or Interactive rate a run may ask for: :data:`MAX_OVERLOAD`
    times the compute ceiling at the mean lengths of the workload's first queries."""
    return MAX_OVERLOAD * system.ceiling_rate_per_s(*workload.lengths(CEILING_SAMPLE))


def _held_rate_per_s(rules: RunRules) -> float:
    """The highest Server rate whose run, by :func:`server_query_count`'s estimate with a
    tenth to spare, holds no more than :data:`~inferlab.benchmark.verdict.MAX_QUERIES` queries."""
    if rules.min_duration_s == 0:
        return math.inf
    extra = rules.dataset_samples if rules.equal_issue else 0
    return 0.9 * (MAX_QUERIES - extra - 16) / (1.2 * rules.min_duration_s)


def _single_stream(system: System, workload: Workload, n: int) -> QueryLog:
    """The first ``n`` queries of the workload, one at a time on one replica."""
    prompts, outputs = workload.lengths(n)
    closed = Requests(np.full(n, np.nan), prompts, outputs, "closed", 1)
    closed.arrival_s[0] = 0.0
    return log_of_runs([simulate(system.replica, closed, system.scheduler)])


def _offline_run(system: System, workload: Workload, rules: RunRules) -> QueryLog:
    """An Offline run as LoadGen sizes it: the minimum sample count, or more if they finish
    before the minimum duration (scaled up from the last try, with LoadGen's 10 % slack,
    until they last), padded to whole dataset passes under equal issue.

    Each replica (a pipeline's lanes together) serves its share of the samples on its own,
    so a try simulates only the replica of the largest share: the whole run lasts at least
    as long. The other replicas then run once, at the count found, beside it.
    """
    n = rules.pad(rules.offline_min_samples)
    while True:
        prompts, outputs = workload.lengths(n)
        first, group = max(_pipelines(system, n),
                           key=lambda pipeline: max(share.size for share in pipeline[1]))
        runs = simulate_lanes(system.replica, [
            Requests(np.zeros(share.size), prompts[share], outputs[share], "all_at_once")
            for share in group], system.scheduler)
        took = max(float(np.max(run.finish_s)) for run in runs)
        if took >= rules.min_duration_s:
            return _serve(system, np.zeros(n), prompts, outputs, "all_at_once",
                          simulated={first: runs})
        n = rules.pad(max(n + 1, math.ceil(n / took * rules.min_duration_s * 1.1)))
        if n > MAX_QUERIES:
            raise ValueError(f"rules: an Offline run of {rules.min_duration_s:g} s needs more "
                             f"than the {MAX_QUERIES:,} samples a run may hold")


def offline_rate_per_s(system: System, workload: Workload | None = None,
                       rules: RunRules | None = None) -> float:
    """Queries per second the system completes with every sample queued at once.

    No Server rate above it can be sustained: the search's upper limit.
    """
    workload = Workload() if workload is None else workload
    rules = mlperf_rules() if rules is None else rules
    n = rules.offline_min_samples
    prompts, outputs = workload.lengths(n)
    log = _serve(system, np.zeros(n), prompts, outputs, "all_at_once")
    return n / float(np.max(log.finish_s))


class Trial(NamedTuple):
    """One rate a search tried, and its verdict.

    A trial is ``cut_short`` once so many of its queries have missed a bound that
    the run's p99 must miss it too, whatever the queries not yet simulated do: the
    verdict (invalid) is then certain and its percentiles are not computed (NaN).

    Used in chapter 'Benchmark scenarios'.
    """

    rate_per_s: float
    valid: bool
    ttft_p99_s: float
    tpot_p99_s: float
    cut_short: bool = False


@dataclass(frozen=True)
class ServerSearch:
    """The highest valid rate found, its summary, and every rate tried.

    ``trials`` holds a :class:`Trial` for each rate, in the order tried. ``best``
    is ``None`` if no rate tried was valid.

    Used in chapter 'Benchmark scenarios'.
    """

    scenario: str
    rate_per_s: float
    best: Summary | None
    trials: tuple[Trial, ...]

    @property
    def result_tok_s(self) -> float:
        """The valid run's tokens per second (0 if none was valid)."""
        return self.best.result if self.best is not None else 0.0

    @property
    def at_ceiling(self) -> bool:
        """Whether every rate tried passed, so that the search's own upper limit stopped it,
        not a bound, and the system may sustain more (or, without a TTFT bound, its queue
        grows)."""
        return bool(self.trials) and all(trial.valid for trial in self.trials)


def server_trial(system: System, scenario: str, workload: Workload, model: str,
                 rate: float, rules: RunRules, limit: LatencyBounds | None = None,
                 abandon: bool = True) -> Summary | None:
    """A Server or Interactive run at ``rate``, as :func:`run_scenario` does it, abandoned
    (``None``) as soon as its verdict is certain to be invalid.

    LoadGen's p99 is the sorted value at ``floor(0.99 n)``, so it is over a bound
    once ``n - floor(0.99 n)`` queries are; near and past saturation the first
    replica or two usually show that many, and the rest need not be simulated.
    ``abandon=False`` runs it whole, for the p99s of a run that misses.

    Used in chapter 'Choosing hardware'.
    """
    rate = checks.real("rate", rate, low=MIN_SEARCH_RATE_PER_S, high=MAX_RATE_PER_S)
    n = server_query_count(rate, workload, rules)
    limit = bounds(model, scenario) if limit is None else limit
    enough = n - int(n * TARGET_PERCENTILE[scenario])
    over = [0, 0]

    def hopeless(part: QueryLog) -> bool:
        over[0] += int(np.count_nonzero(part.ttft_s > limit.ttft_s))
        over[1] += int(np.count_nonzero(part.tpot_s > limit.tpot_s))
        return max(over) >= enough

    log = _poisson_run(system, workload, rate, n, hopeless if abandon else None)
    if log is None:
        return None
    return judge(log, scenario, model, rules=rules, system=system.name, rate_per_s=rate,
                 limit=limit)


#: The most queries per second a Server run is asked for, far past any system modelled here.
MAX_RATE_PER_S = 1e6


#: The share of a run's queries issued before :func:`started_share` starts counting, the
#: time in which the system fills.
WARMUP_SHARE = 0.2


def started_share(log: QueryLog) -> float:
    """First tokens sent per query issued while the stream ran, after its first
    :data:`WARMUP_SHARE` of queries.

    About 1 for a system that keeps up with its rate, about ``1 / rho`` for one offered
    ``rho`` times the rate it serves: its queue of waiting queries grows for as long as the
    run lasts, and it starts them only as fast as it finishes others. A p99 bound on TTFT
    catches such a queue; without one, this share does.

    It counts first tokens, not finished answers, because an answer can take a sizeable
    part of the stream: finishes counted over the same window miss every answer still
    running at its end, and score a system that keeps up well below 1 (DeepSeek-R1's
    answers of thousands of tokens, two minutes and more each, in a stream of ten).
    A queue is waiting for a first token, so first tokens see it as finishes would.

    Used in chapter 'Choosing hardware'.
    """
    if len(log) < 2:
        raise ValueError("log: give a run of at least two queries")
    start = float(np.quantile(log.arrival_s, WARMUP_SHARE))
    end = float(np.max(log.arrival_s))
    issued = np.count_nonzero((log.arrival_s > start) & (log.arrival_s <= end))
    started = np.count_nonzero((log.first_token_s > start) & (log.first_token_s <= end))
    return float(started / issued) if issued else 1.0


def find_server_rate(system: System, scenario: str = "Server", *,
                     workload: Workload | None = None, model: str = "llama2-70b",
                     rules: RunRules | None = None, upper_rate_per_s: float | None = None,
                     iterations: int = 10, limit: LatencyBounds | None = None,
                     progress=None) -> ServerSearch:
    """Bisect for the highest Poisson rate whose run LoadGen would judge valid.

    The p99 bounds are ``model``'s for ``scenario`` (:func:`~inferlab.benchmark.mlperf.bounds`), or
    ``limit``: a service level of one's own, judged by the same rules.

    Between 0 and ``upper_rate_per_s``, ``iterations`` halvings. The default upper
    limit starts at 1.2 x :func:`offline_rate_per_s` and doubles for as long as a run
    at it is still valid: a Server run can sit well above a finite Offline run's
    rate, whose last batches drain slowly, and a search whose every trial passes has
    found its limit, not the system's. It stops at :data:`MAX_OVERLOAD` times the
    compute ceiling (:meth:`System.ceiling_rate_per_s`), and a run valid even there
    is returned as found at that rate. Every trial is a full run judged with all the rules
    (duration, count, p99 bounds, early stopping), except that a run is abandoned
    once its p99 is certain to miss a bound (see :class:`Trial`); the rate found is
    the same either way. Validity is assumed to fall with the rate, which holds for
    these runs but not for every system.

    Without a TTFT bound (``limit`` with an infinite ``ttft_s``) a queue may grow for ever
    and every rate passes; no rate serves more than an Offline run completes, so the
    default upper limit is not doubled then.

    ``progress`` draws a bar over the trials in a notebook (pass
    :func:`inferlab.pages.progress.progress`; ``None`` shows nothing).

    Raises ``ValueError`` for a scenario without a bound, an unknown model, or a
    non-positive upper rate.

    Used in chapter 'Benchmark scenarios'.
    """
    if scenario not in BOUNDED_SCENARIOS:
        raise ValueError(f"scenario: {scenario!r} has no rate to search; give "
                         f"{' or '.join(BOUNDED_SCENARIOS)}")
    if limit is None:
        bounds(model, scenario)
    elif not isinstance(limit, LatencyBounds):
        raise ValueError(f"limit: {limit!r} is not a LatencyBounds")
    checks.iterations("iterations", iterations)
    workload = Workload() if workload is None else workload
    rules = mlperf_rules(model) if rules is None else rules
    given = upper_rate_per_s is not None
    high = (checks.real("upper_rate_per_s", upper_rate_per_s, low=MIN_SEARCH_RATE_PER_S,
                        high=MAX_RATE_PER_S)
            if given else 1.2 * offline_rate_per_s(system, workload, rules))
    endless_queue = limit is not None and not math.isfinite(limit.ttft_s)
    trials = []
    ticks = checks.shown("progress", progress, range(iterations),
                         label=f"{scenario} rate search, trials")

    def trial(rate: float) -> tuple[bool, Summary | None]:
        next(ticks, None)
        summary = server_trial(system, scenario, workload, model, rate, rules, limit)
        if summary is None:
            trials.append(Trial(rate, False, math.nan, math.nan, cut_short=True))
            return False, None
        trials.append(Trial(rate, summary.valid, summary.ttft_p99_s, summary.tpot_p99_s))
        return summary.valid, summary

    # A very short run can pass far past saturation; the doubling stops where
    # run_scenario would refuse the rate, or where its run would hold more queries
    # than a run may.
    most = min(_most_rate_per_s(system, workload), _held_rate_per_s(rules))
    with closing(ticks):
        low, passing = 0.0, None
        while not (given or endless_queue) and low < most:
            high = min(high, most)
            valid, summary = trial(high)
            if not valid:
                break
            low, passing, high = high, summary, 2 * high
        if low >= most:
            return ServerSearch(scenario, low, passing, tuple(trials))
        rate, best = highest_passing(trial, low, high, iterations=iterations)
    return ServerSearch(scenario, rate, passing if best is None else best, tuple(trials))
