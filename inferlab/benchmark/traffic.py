"""Requests for the serving simulator: when they arrive, and how long their prompts and outputs are.

Traffic is three arrays of equal length: arrival times, prompt lengths and
output lengths. They are drawn once, from a seeded ``numpy.random.Generator``,
so that two schedulers can be compared on *the same* requests.

Arrivals come in three kinds:

- ``"poisson"``: independent users at a mean ``rate_per_s``; the gaps are
  exponential. MLPerf's Server scenario generates its queries this way.
- ``"all_at_once"``: every request is there at time zero, as in MLPerf Offline.
- ``"closed"``: ``concurrency`` users who each send their next request the
  moment their previous one finishes (concurrency 1 is "one after another",
  MLPerf's Single-Stream). Arrival times then depend on the server, so the
  simulator fills them in; here they are ``nan`` after the first ``concurrency``.

Lengths follow a log-normal distribution with a given mean and coefficient of
variation (standard deviation over mean), rounded and clipped to
``[min_tokens, max_tokens]``; a coefficient of 0 makes every length equal. Or they
are a real data set's (:class:`DatasetLengths`): MLPerf's Llama 2 70B prompts are
:func:`mlperf_input_lengths`.

Used in chapter 'Batching' and by the scenarios chapter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from inferlab.common import checks
from inferlab.common.data import load_table

ARRIVAL_KINDS = ("poisson", "all_at_once", "closed")


@dataclass(frozen=True)
class Lengths:
    """A distribution of token counts: log-normal with mean ``mean_tokens`` and
    coefficient of variation ``cv``, rounded, clipped to ``[min_tokens, max_tokens]``.

    The log-normal is a common fit to prompt and completion lengths of chat
    traffic: most are short, a few are very long. Clipping moves the mean a
    little; :meth:`sample` returns what was drawn, so use its mean, not
    ``mean_tokens``, in any closed form you compare against.

    Used in chapter 'Batching'.
    """

    mean_tokens: float
    cv: float = 0.0
    min_tokens: int = 1
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        checks.real("mean_tokens", self.mean_tokens, low=1.0, high=checks.MAX_COUNT)
        checks.non_negative("cv", self.cv)
        low = checks.whole("min_tokens", self.min_tokens)
        if self.max_tokens is not None:
            checks.whole("max_tokens", self.max_tokens, minimum=low)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` lengths as an ``int64`` array, drawn from ``rng``."""
        n = checks.whole("n", n, maximum=checks.MAX_ITEMS)
        checks.instance("rng", rng, np.random.Generator)
        if self.cv == 0:
            values = np.full(n, float(self.mean_tokens))
        else:
            sigma2 = math.log1p(self.cv**2)
            mu = math.log(self.mean_tokens) - sigma2 / 2
            values = rng.lognormal(mu, math.sqrt(sigma2), size=n)
        # Clipped to MAX_COUNT before the cast: a far tail of a wide log-normal wraps round.
        high = checks.MAX_COUNT if self.max_tokens is None else self.max_tokens
        return np.clip(np.rint(values), self.min_tokens, high).astype(np.int64)


@dataclass(frozen=True)
class DatasetLengths(Lengths):
    """The lengths of a real data set's samples, drawn as LoadGen issues them.

    LoadGen issues a data set's samples in a seeded random order, and MLPerf's
    equal-issue rule for language models makes a run a whole number of passes over
    the data set. So :meth:`sample` returns pass after pass, each every sample once in
    a fresh random order; the first ``n`` draws are the same whatever the total.
    ``mean_tokens``, ``cv``, ``min_tokens`` and ``max_tokens`` are the data set's own,
    so code that reads them reads the real distribution. Build one with
    :meth:`from_counts`.

    Used in chapter 'Benchmark scenarios'.
    """

    samples: tuple[int, ...] = field(default=(), repr=False)
    name: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        values = checks.wholes("samples", self.samples)
        if values.min() < self.min_tokens or (self.max_tokens is not None
                                             and values.max() > self.max_tokens):
            raise ValueError(f"samples: lengths {values.min()} to {values.max()} are outside "
                             f"min_tokens {self.min_tokens} and max_tokens {self.max_tokens}")

    @classmethod
    def from_counts(cls, lengths, counts, name: str) -> DatasetLengths:
        """The data set in which ``counts[i]`` samples are ``lengths[i]`` tokens long."""
        lengths = checks.wholes("lengths", lengths, size=checks.MAX_ITEMS)
        counts = checks.wholes("counts", counts, size=checks.MAX_ITEMS)
        if len(lengths) != len(counts):
            raise ValueError(f"lengths, counts: {len(lengths)} lengths but {len(counts)} counts;"
                             " give one count per length")
        if int(counts.sum()) > checks.MAX_ITEMS:
            raise ValueError(f"counts: {int(counts.sum()):,} samples; at most "
                             f"{checks.MAX_ITEMS:,} allowed")
        values = np.repeat(lengths, counts)
        return cls(float(values.mean()), float(values.std() / values.mean()), int(values.min()),
                   int(values.max()), tuple(int(v) for v in values), name)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` lengths as an ``int64`` array: whole passes over the data set, each in a
        random order drawn from ``rng``, cut at ``n``."""
        n = checks.whole("n", n, maximum=checks.MAX_ITEMS)
        checks.instance("rng", rng, np.random.Generator)
        values = np.asarray(self.samples, dtype=np.int64)
        passes = -(-n // len(values))
        # One row a pass, each shuffled in turn: the stream of a loop of permutations
        # without a Python call per pass (a two-sample set may need millions).
        return rng.permuted(np.tile(values, (passes, 1)), axis=1).ravel()[:n]


@cache
def mlperf_input_lengths() -> DatasetLengths:
    """The prompt lengths of MLPerf's Llama 2 70B data set, 24,576 samples of Open Orca in
    Llama 2 tokens (``data/mlperf_llama2_70b_input_lengths.csv``, with its source).

    Used in chapter 'Benchmark scenarios'.
    """
    table = load_table("mlperf_llama2_70b_input_lengths")
    return DatasetLengths.from_counts(table["input_tokens"], table["samples"],
                                      "MLPerf Llama 2 70B (Open Orca) prompts")


@dataclass(frozen=True, eq=False)
class Requests:
    """What the simulator serves: one entry per request, in arrival order.

    ``arrival_s`` is ``nan`` for requests of a closed loop that have not been sent
    yet (the simulator sends each when a user's previous request finishes).
    ``concurrency`` is the number of users of a closed loop, ``None`` otherwise.

    Used in chapter 'Batching'.
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    kind: str
    concurrency: int | None = None

    def __post_init__(self) -> None:
        # Stored as checked int64 arrays: NaN cast to int64 is -2**63 with no error.
        for name in ("prompt_tokens", "output_tokens"):
            object.__setattr__(self, name, checks.wholes(name, getattr(self, name)))
        n = len(self.prompt_tokens)
        if len(self.output_tokens) != n or len(self.arrival_s) != n:
            raise ValueError(
                f"arrival_s, output_tokens: arrays must have equal lengths; got "
                f"{len(self.arrival_s)} arrivals, {n} prompts, {len(self.output_tokens)} outputs"
            )
        checks.option("kind", self.kind, ARRIVAL_KINDS)
        if self.kind != "closed":
            arrivals = np.asarray(self.arrival_s, dtype=float)
            if not np.all(np.isfinite(arrivals)) or np.any(arrivals < 0):
                raise ValueError("arrival_s: give finite arrival times >= 0")
            if np.any(np.diff(arrivals) < 0):
                raise ValueError("arrival_s: arrival times must not decrease")

    def __len__(self) -> int:
        return len(self.prompt_tokens)

    def at_rate(self, rate_per_s: float) -> Requests:
        """The same Poisson requests with their gaps rescaled to a mean of ``rate_per_s``.

        Lengths and the pattern of gaps stay the same (common random numbers), so
        runs at different rates differ only in how fast the requests come. Raises
        ``ValueError`` for other arrival kinds or a rate that is not positive.

        Used in chapter 'Batching'.
        """
        if self.kind != "poisson":
            raise ValueError(f"kind: arrivals are {self.kind!r}; only Poisson arrivals rescale")
        rate = checks.positive("rate_per_s", rate_per_s)
        arrivals = np.asarray(self.arrival_s, dtype=float)
        if arrivals[-1] <= 0:
            raise ValueError("arrival_s: Poisson arrivals must span a positive time")
        unit = arrivals * (len(arrivals) / arrivals[-1])  # one request per second
        rescaled = checks.finite_result(unit / rate, "rate_per_s")
        return Requests(rescaled, self.prompt_tokens, self.output_tokens, "poisson")

    @property
    def offered_tokens(self) -> int:
        """Output tokens asked for, summed over all requests."""
        return int(np.sum(self.output_tokens))


def make_requests(
    n: int,
    prompt: Lengths,
    output: Lengths,
    *,
    arrival: str = "poisson",
    rate_per_s: float | None = None,
    concurrency: int = 1,
    seed: int = 0,
) -> Requests:
    """Draw ``n`` requests with the given length distributions and arrival kind.

    ``arrival`` is ``"poisson"`` (needs ``rate_per_s`` > 0), ``"all_at_once"`` or
    ``"closed"`` (``concurrency`` users, each sending the next request when the
    previous one finishes). Lengths and arrival gaps come from
    ``np.random.default_rng(seed)``, so the same seed gives the same requests.

    Raises ``ValueError`` naming the argument for ``n < 1``, an unknown arrival
    kind, a missing, negative or zero rate, or ``concurrency < 1``.

    Used in chapter 'Batching'.
    """
    n = checks.whole("n", n, maximum=checks.MAX_ITEMS)
    checks.option("arrival", arrival, ARRIVAL_KINDS)
    checks.instance("prompt", prompt, Lengths)
    checks.instance("output", output, Lengths)
    rng = np.random.default_rng(checks.seed("seed", seed))
    prompts = prompt.sample(n, rng)
    outputs = output.sample(n, rng)
    users = None
    if arrival == "poisson":
        if rate_per_s is None:
            raise ValueError("rate_per_s: None is not allowed; Poisson arrivals need a "
                             "positive, finite rate in requests per second")
        gap = checks.finite_result(1.0 / checks.positive("rate_per_s", rate_per_s), "rate_per_s")
        arrivals = np.cumsum(rng.exponential(gap, size=n))
    elif arrival == "all_at_once":
        arrivals = np.zeros(n)
    else:
        users = checks.whole("concurrency", concurrency)
        arrivals = np.full(n, np.nan)
        arrivals[: min(users, n)] = 0.0
    return Requests(arrivals, prompts, outputs, arrival, users)
