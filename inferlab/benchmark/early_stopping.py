"""MLPerf LoadGen's early stopping: how many queries a run needs before its percentile counts.

A run that reports a p99 latency from a few hundred queries could be lucky. LoadGen
therefore asks of every latency-bound run that, with ``confidence`` (99 %), the true
share of queries under the bound is at least the percentile, given how many it saw over
it (``results.cc``, ``EarlyStopping``): with ``t`` queries over the bound, the run must
hold at least :func:`min_passing_queries` under it. A Single-Stream run instead reports
the latency the same test lets it claim (:func:`early_stopping_estimate`). The binomial
tail is summed exactly (:func:`binomial_cdf`); percentiles are LoadGen's, the sorted
value at ``floor(n x p)`` with no interpolation (:func:`loadgen_percentile`).

:mod:`inferlab.serving.loadgen` judges its runs with these; they have no other dependency.

Used in chapter 'Benchmark scenarios' and its page 'Under the hood: LoadGen'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from inferlab.common import checks
from inferlab.common.bisection import least_integer

#: The early-stopping confidence LoadGen uses (``confidence = 0.99`` in ``results.cc``).
EARLY_STOPPING_CONFIDENCE = 0.99

def _probability(name: str, value) -> float:
    return checks.fraction(name, value, low_open=True, high_open=True)


def binomial_cdf(k: int, n: int, q: float) -> float:
    """``P[X <= k]`` for ``X ~ Binomial(n, q)``, summed exactly in log space.

    Each term's logarithm follows from the previous one by the ratio
    ``(n - x) / (x + 1) x q / (1 - q)``, so no factorial is formed. One term is
    computed per value up to ``k``, so ``k`` is at most ``inferlab.common.checks.MAX_ITEMS``.

    Used in chapter 'Benchmark scenarios'.
    """
    k = checks.whole("k", k, minimum=0, maximum=checks.MAX_ITEMS)
    n = checks.whole("n", n, minimum=0)
    return _binomial_cdf(k, n, _probability("q", q))


def _binomial_cdf(k: int, n: int, q: float) -> float:
    if k >= n:
        return 1.0
    if q == 1.0:
        # 1 - percentile rounds to 1 for a percentile below 1e-16: every query is slow.
        return 0.0
    x = np.arange(k)
    steps = np.log((n - x) / (x + 1.0)) + math.log(q) - math.log1p(-q)
    log_pmf = n * math.log1p(-q) + np.concatenate([[0.0], np.cumsum(steps)])
    top = log_pmf.max()
    return float(min(1.0, math.exp(top) * np.sum(np.exp(log_pmf - top))))


def early_stopping_odds(underlatency: int, overlatency: int, percentile: float) -> float:
    """The chance of ``overlatency`` or fewer slow queries among ``underlatency + overlatency``
    if each were slow with probability exactly ``1 - percentile``.

    LoadGen's ``odds(h, t, p, d)`` with tolerance ``d = 0``:
    ``P[Binomial(h + t, 1 - p) <= t]`` (``loadgen/early_stopping.cc``).

    Used in chapter 'Benchmark scenarios'.
    """
    h = checks.whole("underlatency", underlatency, minimum=0)
    t = checks.whole("overlatency", overlatency, minimum=0, maximum=checks.MAX_ITEMS)
    return _odds(h, t, _probability("percentile", percentile))


def _odds(h: int, t: int, p: float) -> float:
    return 1.0 if h == 0 else _binomial_cdf(t, h + t, 1.0 - p)


@cache
def _min_passing(t: int, p: float, c: float) -> int:
    def passes(h: int) -> bool:
        return _odds(h, t, p) < 1.0 - c

    high = max(1, math.ceil(math.log(1 - c) / math.log(p)))
    while high < checks.MAX_COUNT and not passes(high):
        high = min(2 * high, checks.MAX_COUNT)
    # A percentile within 1e-15 of 1 needs more fast queries than a count holds.
    if high > checks.MAX_COUNT or not passes(high):
        raise ValueError(f"percentile, confidence: {p!r} and {c!r} with overlatency {t:,} "
                         f"need more than {checks.MAX_COUNT:,} fast queries")
    return least_integer(passes, 0, high)  # zero fast queries prove nothing


def min_passing_queries(overlatency: int, percentile: float = 0.99,
                        confidence: float = EARLY_STOPPING_CONFIDENCE) -> int:
    """The fewest queries *within* the bound, ``h``, that let a run with ``overlatency``
    queries over the bound pass early stopping.

    The test (MLPerf Inference rules, "Early stopping"; LoadGen's
    ``MinPassingQueriesFinder``) asks whether the run shows, at ``confidence``,
    that the true share of queries over the bound is below ``1 - percentile``. It
    passes when ``P[Binomial(h + t, 1 - p) <= t] < 1 - c``: if the system were
    exactly at the percentile, so few slow queries would be a fluke. The
    probability falls as ``h`` grows, so ``h`` is found by doubling and bisection.

    With no slow query, ``h = ceil(log(1 - c) / log(p))``: 459 for p = c = 0.99.
    A run of ``n`` queries with ``t`` over the bound passes if ``n >= h + t``.

    Used in chapter 'Benchmark scenarios'.
    """
    t = checks.whole("overlatency", overlatency, minimum=0, maximum=checks.MAX_ITEMS)
    p = _probability("percentile", percentile)
    c = _probability("confidence", confidence)
    return _min_passing(t, p, c)


def min_queries_for_early_stopping(overlatency: int, percentile: float = 0.99,
                                   confidence: float = EARLY_STOPPING_CONFIDENCE) -> int:
    """Total queries a run needs to pass early stopping with ``overlatency`` of them over the bound:
    ``min_passing_queries(...) + overlatency``.

    Used in chapter 'Benchmark scenarios'.
    """
    return min_passing_queries(overlatency, percentile, confidence) + int(overlatency)


@dataclass(frozen=True)
class EarlyStopping:
    """The early-stopping verdict on one latency metric of one run.

    ``queries`` run, ``overlatency`` of them above ``bound_s``; ``needed`` is the
    total a run with that many slow queries must reach; ``more_queries`` how many
    more (all within the bound) this run would need, 0 if it ``passed``.

    Used in chapter 'Benchmark scenarios'.
    """

    metric: str
    queries: int
    overlatency: int
    bound_s: float
    needed: int
    passed: bool
    more_queries: int
    percentile: float = 0.99
    estimate_s: float | None = None
    discarded: int | None = None

    def text(self) -> str:
        """LoadGen's wording of the verdict."""
        if self.estimate_s is not None or not math.isfinite(self.bound_s):
            if not self.passed:
                return (f" * Only processed {self.queries} queries.\n * Need to process at "
                        f"least {self.needed} queries for early stopping.")
            return (f" * Processed at least {self.needed} queries ({self.queries}).\n"
                    f" * Would discard {self.discarded} highest latency queries.\n"
                    f" * Early stopping {self.percentile * 100:.1f}th percentile estimate: "
                    f"{self.estimate_s:.6f} s")
        if self.passed:
            return " * Run successful."
        return (f" * Run unsuccessful.\n * Processed {self.queries} queries.\n"
                f" * Would need to run at least {self.more_queries} more queries,\n"
                " with the run being successful if every additional query were under latency.")


def early_stopping(latencies_s, bound_s: float, percentile: float = 0.99,
                   confidence: float = EARLY_STOPPING_CONFIDENCE, *,
                   metric: str = "latency") -> EarlyStopping:
    """Apply the Server scenario's early-stopping test to one array of latencies.

    Counts the queries strictly above ``bound_s`` (as LoadGen does) and compares
    the run's length with :func:`min_queries_for_early_stopping`.

    Used in chapter 'Benchmark scenarios'.
    """
    values = _latencies(latencies_s)
    # math.inf is a bound every query meets.
    bound_s = bound_s if bound_s == math.inf else checks.positive("bound_s", bound_s)
    n = int(values.size)
    t = int(np.sum(values > bound_s))
    needed = min_queries_for_early_stopping(t, percentile, confidence)
    return EarlyStopping(metric, n, t, bound_s, needed, n >= needed, max(0, needed - n),
                         float(percentile))


def single_stream_early_stopping(latencies_s, percentile: float = 0.90,
                                 confidence: float = EARLY_STOPPING_CONFIDENCE, *,
                                 metric: str = "latency") -> EarlyStopping:
    """Single-Stream's early-stopping verdict on one latency metric, with its estimate.

    The test has no bound: it passes if the run holds at least
    ``min_queries_for_early_stopping(1, percentile)`` queries (64 at p90), and then
    reports :func:`early_stopping_estimate` and how many top latencies it discards
    (``EarlyStopping`` in ``loadgen/results.cc``). ``bound_s`` is NaN.

    Used in chapter 'Benchmark scenarios'.
    """
    values = _latencies(latencies_s)
    n = int(values.size)
    p = _probability("percentile", percentile)
    needed = min_queries_for_early_stopping(1, p, confidence)
    if n < needed:
        return EarlyStopping(metric, n, 0, math.nan, needed, False, needed - n, p)
    estimate, discarded = early_stopping_estimate(values, p, confidence)
    return EarlyStopping(metric, n, 0, math.nan, needed, True, 0, p, estimate, discarded)


def early_stopping_estimate(latencies_s, percentile: float = 0.90,
                            confidence: float = EARLY_STOPPING_CONFIDENCE) -> tuple[float, int]:
    """Single-Stream's early-stopping percentile estimate and how many top latencies it discards.

    LoadGen looks for the largest ``t`` with ``min_passing_queries(t) + t <= n``
    and reports the ``t``-th largest latency, so a short run reports a higher
    (more cautious) latency than its plain percentile. Returns ``(estimate, t - 1)``.
    Raises ``ValueError`` if the run is too short for even ``t = 1``.

    Used in chapter 'Benchmark scenarios'.
    """
    values = np.sort(_latencies(latencies_s))
    n = int(values.size)
    p, c = _probability("percentile", percentile), _probability("confidence", confidence)
    need_one = _min_passing(1, p, c) + 1
    if n < need_one:
        raise ValueError(f"latencies_s: {n} queries are too few for early stopping at the "
                         f"{p:.0%} percentile; LoadGen needs at least {need_one}")
    # min_queries(t) grows with t: the largest t that fits in n is one below the first that
    # does not (t = n + 1 never does: it needs more than n queries).
    low = least_integer(lambda t: _min_passing(t, p, c) + t > n, 1, n + 1) - 1
    return float(values[n - low]), low - 1


def _latencies(latencies_s) -> np.ndarray:
    values = checks.reals("latencies_s", latencies_s, low=0.0)
    if values.ndim != 1:
        raise ValueError("latencies_s: give a 1-D array of latencies")
    return values


def loadgen_percentile(values, percentile: float) -> float:
    """LoadGen's percentile: the sorted value at index ``floor(n x percentile)``, no interpolation.

    Used in chapter 'Benchmark scenarios'.
    """
    array = np.sort(checks.reals("values", values).ravel())
    p = _probability("percentile", percentile)
    return float(array[min(array.size - 1, int(array.size * p))])
