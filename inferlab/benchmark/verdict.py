"""How MLPerf LoadGen judges a run, whoever ran it: the query log it records, the rules a run
must meet, and the verdict in the shape of ``mlperf_log_summary.txt``.

A :class:`QueryLog` holds, per query, when it arrived (LoadGen issued it), when its first and
last token came back and how many tokens it produced, and derives every latency from those:
the one request log of the package. The serving simulator's result
(:class:`inferlab.serving.simulator.SimResult`) is one with the engine's records added, the
real LoadGen (:mod:`inferlab.serving.real_loadgen`) and a measured endpoint produce one.
:func:`judge` checks it as LoadGen does (``loadgen/results.cc``, ``loadgen/mlperf.conf`` and
the MLPerf Inference rules, section "Early stopping"):

- **minimum duration**: 600 s, measured to the last query *scheduled* (Server),
  the last query *issued* (Single-Stream) or the last sample *finished* (Offline);
- **minimum query count**: 100 queries (LoadGen's default ``min_query_count``)
  for Server and Single-Stream; for Offline the model's sample count (24,576 for
  llama2-70b);
- **equal issue** (``sample_concatenate_permutation = 1`` for the LLM benchmarks in
  ``mlperf.conf``): query and sample counts padded up to whole passes over the
  performance dataset (:class:`RunRules`);
- **performance constraints** (Server, Interactive): LoadGen's p99 of TTFT and of
  TPOT at most the bounds, where LoadGen's percentile is the sorted value at index
  ``floor(n x p)`` (:func:`~inferlab.benchmark.early_stopping.loadgen_percentile`);
- **early stopping** (:func:`~inferlab.benchmark.early_stopping.min_passing_queries`),
  applied to TPOT and then to TTFT; if TPOT fails LoadGen does not evaluate TTFT
  (``results.cc`` joins the two with ``&&``).

TPOT of a query is MLPerf's: ``(latency - first-token latency) / (tokens - 1)``.
A one-token answer has no TPOT (``nan`` in the log); LoadGen logs it as a runtime error
("Number of tokens need to be greater than 1"), and :func:`judge` raises ``ValueError``.

Nothing here runs a system: it depends on MLPerf's definitions alone, so a measured run
is judged without loading the simulator.

Used in chapter 'Benchmark scenarios'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from inferlab.benchmark.early_stopping import (
    EARLY_STOPPING_CONFIDENCE,
    EarlyStopping,
    early_stopping,
    loadgen_percentile,
    single_stream_early_stopping,
)
from inferlab.benchmark.mlperf import (
    BOUNDS,
    MLPERF_MIN_DURATION_S,
    MLPERF_MIN_QUERIES,
    OFFLINE_MIN_SAMPLES,
    PERFORMANCE_SAMPLE_COUNT,
    SCENARIOS,
    TARGET_PERCENTILE,
    LatencyBounds,
    bounds,
    time_per_output_token,
)
from inferlab.common import checks

#: The most queries a run holds, two million, which take the simulator about ten seconds. The
#: audited runs in ``data/`` issued up to 1,256,640 samples (Mixtral 8x7B on eight H200s
#: over 2,400 s), and one 2,323,200 (on eight B200s); the accuracy score runs such a run
#: as long as a run may hold (:func:`inferlab.accuracy.run_rules`).
MAX_QUERIES = 2 * 10**6



#: The longest minimum duration a run's rules may ask for, a day (144 times MLPerf's).
MAX_DURATION_S = 86_400.0

#: The per-request latencies a log gives percentiles of (time to first token, time per
#: output token and end-to-end latency).
METRICS = ("ttft", "tpot", "e2e")


def check_token_counts(output_tokens) -> None:
    """Refuse answers of fewer than two tokens, as LoadGen does for a run that measures
    token latencies: such an answer has no time per output token."""
    tokens = np.atleast_1d(checks.wholes("output_tokens", output_tokens, minimum=0))
    short = np.flatnonzero(tokens < 2)
    if short.size:
        raise ValueError(f"output_tokens: query {int(short[0])} produced {int(tokens[short[0]])} "
                         f"token(s) ({short.size} such queries); LoadGen's token latencies need "
                         "at least 2 per query (it logs 'Number of tokens need to be greater "
                         "than 1' as a runtime error)")


@dataclass(frozen=True, eq=False)
class QueryLog:
    """What a run records of each request, in seconds from its start, in request order.

    ``arrival_s`` is when the request reached the system (LoadGen issued it; for Server,
    its scheduled time); ``first_token_s`` and ``finish_s`` when its first and last token
    came back; ``output_tokens`` how many tokens it produced. Derived: :attr:`ttft_s`,
    :attr:`tpot_s`, :attr:`e2e_s` and :meth:`percentile` of each.

    Used in chapters 'Batching' and 'Benchmark scenarios'.
    """

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    output_tokens: np.ndarray

    def __post_init__(self) -> None:
        arrays = {name: np.asarray(getattr(self, name), dtype=float)
                  for name in ("arrival_s", "first_token_s", "finish_s")}
        # Checked before the int64 cast below, which turns NaN into -2**63 silently.
        tokens = checks.wholes("output_tokens", self.output_tokens)
        n = tokens.size
        for name, array in arrays.items():
            if array.shape != (n,) or not np.all(np.isfinite(array)):
                raise ValueError(f"{name}: give {n} finite times, one per query")
        if np.any(arrays["arrival_s"] < 0):
            raise ValueError("arrival_s: times are seconds from the start of the test, >= 0")
        if (np.any(arrays["first_token_s"] < arrays["arrival_s"])
                or np.any(arrays["finish_s"] < arrays["first_token_s"])):
            raise ValueError("finish_s: times must run arrival <= first token <= finish")
        for name, array in arrays.items():
            object.__setattr__(self, name, array)
        object.__setattr__(self, "output_tokens", tokens)

    def __len__(self) -> int:
        return int(self.output_tokens.size)

    def head(self, n: int) -> QueryLog:
        """The first ``n`` queries (by position) as a log of their own."""
        n = checks.whole("n", n)
        return QueryLog(self.arrival_s[:n], self.first_token_s[:n], self.finish_s[:n],
                        self.output_tokens[:n])

    @property
    def ttft_s(self) -> np.ndarray:
        """Time to first token of every query, queueing plus prefill."""
        return self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> np.ndarray:
        """End-to-end latency of every query, arrival to last token."""
        return self.finish_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        """MLPerf's time per output token, ``(finish - first token) / (tokens - 1)``;
        ``nan`` for a one-token answer, which has no gap to time (:func:`judge` refuses
        such a log, as LoadGen does)."""
        return time_per_output_token(self.first_token_s, self.finish_s, self.output_tokens)

    @property
    def tokens(self) -> int:
        """Output tokens over the whole run."""
        return int(np.sum(self.output_tokens))

    def percentile(self, metric: str, q) -> float | np.ndarray:
        """The ``q``-th percentile (0-100, number or array) of ``"ttft"``, ``"tpot"`` or
        ``"e2e"``, by linear interpolation (LoadGen's own is
        :func:`~inferlab.benchmark.early_stopping.loadgen_percentile`).

        Requests with no value (TPOT of one-token outputs) are left out.
        """
        checks.option("metric", metric, METRICS)
        q_arr = np.asarray(q, dtype=float)
        if not np.all((q_arr >= 0) & (q_arr <= 100)):
            raise ValueError(f"q: {q!r} is not allowed; give percentiles in [0, 100]")
        values = getattr(self, f"{metric}_s")
        values = values[np.isfinite(values)]
        if values.size == 0:
            return float("nan") if q_arr.ndim == 0 else np.full(q_arr.shape, np.nan)
        result = np.percentile(values, q_arr)
        return float(result) if np.ndim(result) == 0 else result


@dataclass(frozen=True)
class RunRules:
    """How long a run must be, by LoadGen's settings (see the module docstring).

    ``min_duration_s`` applies to every scenario; ``min_queries`` to Server,
    Interactive and Single-Stream; ``offline_min_samples`` to Offline;
    ``scale`` is the factor applied to MLPerf's duration and Offline sample count
    (1 for the real rules), kept so that a summary can say it was scaled down.
    ``equal_issue`` is LoadGen's equal-issue mode (``sample_concatenate_permutation``):
    query and sample counts padded to a multiple of ``dataset_samples``, the
    performance dataset's size. It is off by default, so that hand-built rules
    mean what their numbers say; :func:`mlperf_rules` turns it on as ``mlperf.conf``
    does for the LLM benchmarks.

    Used in chapter 'Benchmark scenarios'.
    """

    min_duration_s: float = MLPERF_MIN_DURATION_S
    min_queries: int = MLPERF_MIN_QUERIES
    offline_min_samples: int = OFFLINE_MIN_SAMPLES["llama2-70b"]
    confidence: float = EARLY_STOPPING_CONFIDENCE
    scale: float = 1.0
    equal_issue: bool = False
    dataset_samples: int = PERFORMANCE_SAMPLE_COUNT["llama2-70b"]

    def __post_init__(self) -> None:
        checks.non_negative("min_duration_s", self.min_duration_s, high=MAX_DURATION_S)
        checks.whole("min_queries", self.min_queries, maximum=MAX_QUERIES)
        checks.whole("offline_min_samples", self.offline_min_samples, maximum=MAX_QUERIES)
        checks.fraction("confidence", self.confidence, low_open=True, high_open=True)
        checks.fraction("scale", self.scale, low_open=True)
        if not isinstance(self.equal_issue, bool):
            raise ValueError(f"equal_issue: {self.equal_issue!r} is not allowed; give True or "
                             "False")
        checks.whole("dataset_samples", self.dataset_samples, maximum=MAX_QUERIES)

    def pad(self, count: int) -> int:
        """``count`` rounded up to a whole number of dataset passes under equal issue
        (unchanged without it, or if it is already a multiple), as ``GenerateQueries``
        pads ``min_queries`` and Offline's ``samples_per_query``."""
        count = checks.whole("count", count)
        if not self.equal_issue or count % self.dataset_samples == 0:
            return count
        return count + self.dataset_samples - count % self.dataset_samples


def mlperf_rules(model: str = "llama2-70b", *, scale: float = 1.0) -> RunRules:
    """MLPerf's run rules for ``model``, with the duration and sample counts times ``scale``.

    Equal issue is on, with the model's :data:`~inferlab.benchmark.mlperf.PERFORMANCE_SAMPLE_COUNT`
    as the
    dataset (``mlperf.conf`` sets ``sample_concatenate_permutation = 1`` for every
    LLM benchmark here). ``scale`` in (0, 1] shortens runs for a page that must
    execute quickly: it multiplies the minimum duration, the Offline sample count
    and the dataset that equal issue pads to, so a scaled run is a scaled copy of a
    real one. The query minimum (100) and the early-stopping test are never scaled,
    because they are what makes a percentile trustworthy.

    Used in chapter 'Benchmark scenarios'.
    """
    if model not in OFFLINE_MIN_SAMPLES:
        raise ValueError(f"model: {model!r} has no rules here; give one of "
                         f"{', '.join(OFFLINE_MIN_SAMPLES)}")
    scale = checks.fraction("scale", scale, low_open=True)
    return RunRules(min_duration_s=MLPERF_MIN_DURATION_S * scale,
                    offline_min_samples=max(1, math.ceil(OFFLINE_MIN_SAMPLES[model] * scale)),
                    scale=scale, equal_issue=True,
                    dataset_samples=max(1, math.ceil(PERFORMANCE_SAMPLE_COUNT[model] * scale)))


@dataclass(frozen=True)
class Summary:
    """A run judged as LoadGen judges it, in the shape of ``mlperf_log_summary.txt``.

    ``result`` is in ``unit``: output tokens per second for Offline, Server and
    Interactive; seconds (the plain 90th percentile of query latency) for
    Single-Stream. ``valid`` is the verdict and ``reasons`` says why not.
    ``ttft_p99_s`` and ``tpot_p99_s`` are LoadGen's percentiles (p90 for
    Single-Stream). ``early`` holds the early-stopping verdicts in the order LoadGen
    evaluates them, TPOT then TTFT, and TTFT only if TPOT passed.
    ``scheduled_samples_per_s`` and ``completed_samples_per_s`` are Server's
    ``(n - 1)`` over the last query's scheduled and finish times. ``log`` is the run.

    Used in chapter 'Benchmark scenarios'.
    """

    scenario: str
    model: str
    system: str
    result: float
    unit: str
    valid: bool
    reasons: tuple[str, ...]
    queries: int
    duration_s: float
    min_duration_met: bool
    min_queries_met: bool
    perf_constraints_met: bool | None
    early_stopping_met: bool | None
    ttft_p99_s: float
    tpot_p99_s: float
    early: tuple[EarlyStopping, ...]
    rules: RunRules
    rate_per_s: float | None = None
    log: QueryLog | None = field(default=None, repr=False)
    scheduled_samples_per_s: float | None = None
    completed_samples_per_s: float | None = None

    def early_stopping(self, metric: str) -> EarlyStopping | None:
        """The early-stopping verdict on ``metric`` ("ttft" or "tpot"), or ``None`` if
        LoadGen did not evaluate it."""
        return next((verdict for verdict in self.early if verdict.metric == metric), None)

    def text(self) -> str:
        """The summary as LoadGen prints it (abridged; seconds where LoadGen prints ns)."""
        def yes(flag):
            return "Yes" if flag else "NO"

        lines = ["=" * 48, "MLPerf Results Summary (modelled)", "=" * 48,
                 f"SUT name : {self.system}", f"Scenario : {self.scenario}",
                 "Mode     : PerformanceOnly"]
        if self.scenario == "SingleStream":
            lines.append(f"90.0th percentile latency (s) : {self.result:.6f}")
            lines.append(f"90.0th first token percentile latency (s) : {self.ttft_p99_s:.6f}")
        elif self.scenario == "Offline":
            lines.append(f"Tokens per second: {self.result:,.2f}")
        else:
            lines.append(f"Completed samples per second    : {self.completed_samples_per_s:.2f}")
            lines.append(f"Completed tokens per second: {self.result:,.2f}")
        lines.append(f"Result is : {'VALID' if self.valid else 'INVALID'}")
        if self.perf_constraints_met is not None:
            lines.append(f"  Performance constraints satisfied : {yes(self.perf_constraints_met)}")
        lines.append(f"  Min duration satisfied : {yes(self.min_duration_met)}")
        lines.append(f"  Min queries satisfied : {yes(self.min_queries_met)}")
        if self.early_stopping_met is not None:
            lines.append(f"  Early stopping satisfied: {yes(self.early_stopping_met)}")
        if self.reasons:
            lines.append("Why not valid:")
            lines.extend(f" * {reason}" for reason in self.reasons)
        if self.early_stopping_met is not None:
            for metric in ("ttft", "tpot"):
                verdict = self.early_stopping(metric)
                lines.append(f"{metric.upper()} Early Stopping Result:")
                lines.append(verdict.text() if verdict is not None else "")
        if self.scheduled_samples_per_s is not None:
            lines.append(f"Scheduled samples per second : {self.scheduled_samples_per_s:.2f}")
        if self.rules.scale != 1:
            lines.append(f"(Run rules scaled by {self.rules.scale:g}: minimum duration "
                         f"{self.rules.min_duration_s:g} s.)")
        return "\n".join(lines)


def judge(log: QueryLog, scenario: str, model: str = "llama2-70b", *,
          rules: RunRules | None = None, system: str = "modelled system",
          rate_per_s: float | None = None, limit: LatencyBounds | None = None) -> Summary:
    """Judge a run as LoadGen would, and compute its result.

    Checks, per scenario: minimum duration, minimum query (or sample) count,
    and for Server and Interactive the p99 TTFT and TPOT against
    :func:`~inferlab.benchmark.mlperf.bounds` (or ``limit``, for a run with bounds of its own) and
    early
    stopping on TPOT, then on TTFT if TPOT passed; for Single-Stream the same
    order of early-stopping tests at the 90th percentile, which ask only for
    enough queries. Every scenario uses token latencies, so a one-token answer
    raises ``ValueError``, as do an unknown scenario or model, or a log that is not
    a :class:`QueryLog`.

    Used in chapter 'Benchmark scenarios'.
    """
    checks.option("scenario", scenario, SCENARIOS)
    if not isinstance(log, QueryLog):
        raise ValueError("log: give a QueryLog (inferlab.serving.loadgen.log_of_runs or "
                         "run_scenario)")
    # A run with bounds and rules of its own needs no benchmark to take them from.
    if model not in BOUNDS and (limit is None or rules is None):
        raise ValueError(f"model: {model!r} has no bounds here; give one of {', '.join(BOUNDS)}")
    if limit is not None and not isinstance(limit, LatencyBounds):
        raise ValueError(f"limit: {limit!r} is not a LatencyBounds")
    if rate_per_s is not None:
        rate_per_s = checks.positive("rate_per_s", rate_per_s)
    check_token_counts(log.output_tokens)
    rules = mlperf_rules(model) if rules is None else rules
    n = len(log)
    start = 0.0  # LoadGen's clock starts with the test, not with the first query
    reasons: list[str] = []
    if scenario == "Offline":
        duration = float(np.max(log.finish_s)) - start
        min_queries_met = n >= rules.offline_min_samples
        if not min_queries_met:
            reasons.append(f"{n:,} samples, fewer than the minimum {rules.offline_min_samples:,}")
        checked = _Checks(log.tokens / duration, "tokens/s")
    else:
        duration = float(np.max(log.arrival_s)) - start
        min_queries_met = n >= rules.min_queries
        if not min_queries_met:
            reasons.append(f"{n:,} queries, fewer than the minimum {rules.min_queries:,}")
        checked = (_single_stream_checks(log, rules, reasons) if scenario == "SingleStream"
                   else _bounded_checks(log, scenario, model, limit, rules, reasons))
    min_duration_met = duration >= rules.min_duration_s
    if not min_duration_met:
        reasons.insert(0, f"ran {duration:,.1f} s, short of the minimum "
                          f"{rules.min_duration_s:,.0f} s")
    valid = min_duration_met and min_queries_met and checked.perf_met is not False \
        and checked.early_met is not False
    return Summary(scenario, model, system, float(checked.result), checked.unit, valid,
                   tuple(reasons), n, duration, min_duration_met, min_queries_met,
                   checked.perf_met, checked.early_met, float(checked.ttft_p99_s),
                   float(checked.tpot_p99_s), checked.early, rules, rate_per_s, log,
                   checked.scheduled_rate, checked.completed_rate)


class _Checks(NamedTuple):
    """What a scenario's result and latency checks found; the defaults are a scenario's
    that has no such check (Offline)."""

    result: float
    unit: str
    ttft_p99_s: float = math.nan
    tpot_p99_s: float = math.nan
    perf_met: bool | None = None
    early: tuple[EarlyStopping, ...] = ()
    early_met: bool | None = None
    scheduled_rate: float | None = None
    completed_rate: float | None = None


def _single_stream_checks(log: QueryLog, rules: RunRules, reasons: list[str]) -> _Checks:
    """Single-Stream: the plain 90th percentile of latency as the result, and early stopping
    on TPOT, then TTFT, asking only for enough queries. Appends why it fails to ``reasons``."""
    p = TARGET_PERCENTILE["SingleStream"]
    early = [single_stream_early_stopping(log.tpot_s, p, rules.confidence, metric="tpot")]
    if early[0].passed:
        early.append(single_stream_early_stopping(log.ttft_s, p, rules.confidence,
                                                  metric="ttft"))
    early_met = all(verdict.passed for verdict in early)
    if not early_met:
        reasons.append(f"early stopping needs at least {early[0].needed} queries; the run "
                       f"has {len(log)}")
    return _Checks(loadgen_percentile(log.e2e_s, p), "s",
                   loadgen_percentile(log.ttft_s, p), loadgen_percentile(log.tpot_s, p),
                   None, tuple(early), early_met)


def _bounded_checks(log: QueryLog, scenario: str, model: str, limit: LatencyBounds | None,
                    rules: RunRules, reasons: list[str]) -> _Checks:
    """Server and Interactive: the p99 bounds, early stopping on TPOT and then TTFT, and
    LoadGen's completed tokens per second. Appends why the run fails to ``reasons``."""
    limit = bounds(model, scenario) if limit is None else limit
    p = TARGET_PERCENTILE[scenario]
    n = len(log)
    ttft_p99 = loadgen_percentile(log.ttft_s, p)
    tpot_p99 = loadgen_percentile(log.tpot_s, p)
    perf_met = True
    if ttft_p99 > limit.ttft_s:
        perf_met = False
        reasons.append(f"p99 TTFT {ttft_p99 * 1e3:,.0f} ms is over the "
                       f"{limit.ttft_s * 1e3:,.0f} ms bound")
    if tpot_p99 > limit.tpot_s:
        perf_met = False
        reasons.append(f"p99 TPOT {tpot_p99 * 1e3:,.1f} ms is over the "
                       f"{limit.tpot_s * 1e3:,.0f} ms bound")
    # TPOT first; LoadGen evaluates TTFT only if TPOT passed (results.cc, `&&`).
    early = [early_stopping(log.tpot_s, limit.tpot_s, p, rules.confidence, metric="tpot")]
    if early[0].passed:
        early.append(early_stopping(log.ttft_s, limit.ttft_s, p, rules.confidence,
                                    metric="ttft"))
    early_met = all(verdict.passed for verdict in early)
    for verdict in early:
        if not verdict.passed:
            reasons.append(f"early stopping on {verdict.metric.upper()}: "
                           f"{verdict.overlatency:,} of {n:,} over the bound; needs "
                           f"{verdict.needed:,} ({verdict.more_queries:,} more)")
    # LoadGen's "Completed tokens per second": every token over the time at which the
    # last *scheduled* query finished (final_query_all_samples_done_time in
    # loadgen/results.cc), not the latest finish of any query. The clock starts at 0.
    last = int(np.argmax(log.arrival_s))
    done = float(log.finish_s[last])
    scheduled = float(log.arrival_s[last])
    return _Checks(log.tokens / done, "tokens/s", ttft_p99, tpot_p99, perf_met, tuple(early),
                   early_met, (n - 1) / scheduled if scheduled > 0 else math.nan,
                   (n - 1) / done if done > 0 else math.nan)

