"""Requests for the serving simulator: when they arrive, and how long their prompts and outputs are.

A workload is three arrays of equal length: arrival times, prompt lengths and
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
``[min_tokens, max_tokens]``; a coefficient of 0 makes every length equal.

Used in chapter 'Batching' and by the scenarios chapter.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

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
        mean, cv = self.mean_tokens, self.cv
        if (not isinstance(mean, numbers.Real) or isinstance(mean, bool)
                or not math.isfinite(mean) or mean < 1):
            raise ValueError(f"mean_tokens: {mean!r} is not allowed; give a number >= 1")
        if (not isinstance(cv, numbers.Real) or isinstance(cv, bool)
                or not math.isfinite(cv) or cv < 0):
            raise ValueError(f"cv: {cv!r} is not allowed; give a finite number >= 0")
        low = self.min_tokens
        if not isinstance(low, numbers.Integral) or isinstance(low, bool) or low < 1:
            raise ValueError(f"min_tokens: {low!r} is not allowed; give a whole number >= 1")
        high = self.max_tokens
        if high is not None and (not isinstance(high, numbers.Integral) or isinstance(high, bool)
                                 or high < low):
            raise ValueError(f"max_tokens: {high!r} is not allowed; give None or a whole "
                             f"number >= min_tokens ({low})")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` lengths as an ``int64`` array, drawn from ``rng``."""
        n = _count("n", n)
        if self.cv == 0:
            values = np.full(n, float(self.mean_tokens))
        else:
            sigma2 = math.log1p(self.cv**2)
            mu = math.log(self.mean_tokens) - sigma2 / 2
            values = rng.lognormal(mu, math.sqrt(sigma2), size=n)
        high = np.inf if self.max_tokens is None else self.max_tokens
        return np.clip(np.rint(values), self.min_tokens, high).astype(np.int64)


def _count(name: str, value) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}: {value!r} is not allowed; give a whole number >= 1")
    return int(value)


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
        n = len(self.prompt_tokens)
        if n == 0:
            raise ValueError("prompt_tokens: give at least one request")
        if len(self.output_tokens) != n or len(self.arrival_s) != n:
            raise ValueError(
                f"output_tokens: arrays must have equal lengths; got {len(self.arrival_s)} "
                f"arrivals, {n} prompts, {len(self.output_tokens)} outputs"
            )
        if np.any(np.asarray(self.prompt_tokens) < 1) or np.any(np.asarray(self.output_tokens) < 1):
            raise ValueError("prompt_tokens: every prompt and output must be >= 1 token")
        if self.kind not in ARRIVAL_KINDS:
            raise ValueError(f"kind: {self.kind!r} is not one of {', '.join(ARRIVAL_KINDS)}")
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
        if (not isinstance(rate_per_s, numbers.Real) or isinstance(rate_per_s, bool)
                or not math.isfinite(rate_per_s) or rate_per_s <= 0):
            raise ValueError(f"rate_per_s: {rate_per_s!r} is not allowed; give a positive, "
                             "finite rate in requests per second")
        arrivals = np.asarray(self.arrival_s, dtype=float)
        if arrivals[-1] <= 0:
            raise ValueError("arrival_s: Poisson arrivals must span a positive time")
        unit = arrivals * (len(arrivals) / arrivals[-1])  # one request per second
        return Requests(unit / rate_per_s, self.prompt_tokens, self.output_tokens, "poisson")

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
    n = _count("n", n)
    if arrival not in ARRIVAL_KINDS:
        raise ValueError(f"arrival: {arrival!r} is not one of {', '.join(ARRIVAL_KINDS)}")
    rng = np.random.default_rng(seed)
    prompts = prompt.sample(n, rng)
    outputs = output.sample(n, rng)
    users = None
    if arrival == "poisson":
        if (rate_per_s is None or not isinstance(rate_per_s, numbers.Real)
                or isinstance(rate_per_s, bool) or not math.isfinite(rate_per_s)
                or rate_per_s <= 0):
            raise ValueError(f"rate_per_s: {rate_per_s!r} is not allowed; Poisson arrivals "
                             "need a positive, finite rate in requests per second")
        arrivals = np.cumsum(rng.exponential(1.0 / rate_per_s, size=n))
    elif arrival == "all_at_once":
        arrivals = np.zeros(n)
    else:
        users = _count("concurrency", concurrency)
        arrivals = np.full(n, np.nan)
        arrivals[: min(users, n)] = 0.0
    return Requests(arrivals, prompts, outputs, arrival, users)
