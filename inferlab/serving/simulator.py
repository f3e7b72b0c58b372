"""A discrete-event simulation of requests served by one replica, step by step.

The replica is a :class:`inferlab.model.steptime.Replica`: it runs one step at a time,
and each step takes the time its step-time model says for the tokens in it. The
simulation decides *which* tokens go into each step, as a serving engine's
scheduler does, and records when every request arrived, got its first token,
got every later token, and finished.

Schedulers (:class:`~inferlab.serving.scheduler.Scheduler`, whose policies are the small objects of
:mod:`inferlab.serving.scheduler`):

- **static** batching waits until ``max_batch`` requests are queued (or the
  oldest has waited ``batch_timeout_s``, 10 ms by default as in Ray Serve, or no
  more will come), prefills them
  together with every prompt padded to the longest, then decodes until the
  *longest* output is done: finished requests keep their slot and their cache
  until then, and the slot computes padding. New requests wait for the next batch.
- **continuous** batching (Orca's iteration-level scheduling, as in vLLM and
  TensorRT-LLM) admits waiting requests and retires finished ones at every step.
  Without chunked prefill, admitted prompts are prefilled in a step of their own
  while running requests wait (their next token is delayed). With chunked
  prefill every step carries one decode token per running request and fills
  the rest of a ``token_budget`` with pieces of waiting prompts. With
  ``disaggregated`` (a :class:`~inferlab.serving.scheduler.PrefillPool`) prompts are prefilled
  elsewhere and
  the replica only decodes (DistServe, Splitwise, NVIDIA Dynamo).

KV-cache memory (``kv_policy``):

- ``"reserve"``: each admitted request holds room for its prompt plus
  ``reserve_output_tokens`` outputs from the start, as servers did before paged
  attention. Memory sits idle whenever outputs are shorter than the reservation.
- ``"paged"``: memory is taken as tokens are produced (PagedAttention; block
  rounding is ignored, a waste of under one block per request). If the cache
  would overflow, the most recently admitted request is preempted: its cache is
  dropped and it is queued again at the front, to be recomputed from its prompt
  and the tokens it already produced (vLLM's recompute policy).

A **fixed-shape** server (:class:`~inferlab.serving.scheduler.FixedShape`, an ahead-of-time compiled
accelerator) pads every prompt up to a compiled length bucket, pads the decode
batch up to a compiled batch size, and reserves and reads a full compiled
context for each slot, so its decode step time does not depend on what is in
the batch.

Speed. Between two events (an admission, a retirement, a preemption) a decode
step's time is an exact closed form of the context growth, ``m0 + m1 j`` for the
``j``-th step (the attention term grows with the context), so the simulation
advances over all those steps at once (:func:`inferlab.serving.engines.advance`). Only
steps that prefill are simulated one by one.

Assumptions: one replica; each step's time is the step-time model's, which
depends on what the step holds (its decode batch, its prompt chunks, the
contexts it attends over), so latency spreads come from the batch composition
and the queue; there is no other noise; the network and the client
add nothing; a request's first token is produced by the step that finishes its
prefill; TPOT of a request is ``(finish - first token) / (outputs - 1)``, the
definition MLPerf and vLLM use.

Used in chapter 'Batching'; the scenarios chapter runs MLPerf's LoadGen
scenarios over it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from inferlab.benchmark.mlperf import MLPERF_LLAMA2_70B_BOUNDS as MLPERF_LLAMA2_70B_BOUNDS
from inferlab.benchmark.traffic import Requests
from inferlab.benchmark.verdict import METRICS, QueryLog
from inferlab.common import checks
from inferlab.common.bisection import bisect, highest_passing
from inferlab.model.steptime import Replica
from inferlab.serving.engines import ContinuousEngine, Record, StaticEngine
from inferlab.serving.pipeline import LockStep
from inferlab.serving.scheduler import PAGED_WATERMARK_FRACTION, Scheduler

# The scheduling configuration lives in inferlab.serving.scheduler; chapters import it from here.
from inferlab.serving.scheduler import STATIC_BATCH_TIMEOUT_S as STATIC_BATCH_TIMEOUT_S
from inferlab.serving.scheduler import FixedShape as FixedShape
from inferlab.serving.scheduler import PrefillPool as PrefillPool

# --------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SimResult(QueryLog):
    """A simulated run: the request log every run gives
    (:class:`~inferlab.benchmark.verdict.QueryLog`: ``arrival_s``, ``first_token_s``,
    ``finish_s``, ``output_tokens`` and the latencies derived from them), plus what only
    a simulator sees.

    Per request: ``prompt_tokens`` and ``preemptions``; :meth:`token_times_s` gives every
    token's time for one request.

    Whole run: ``steps`` (forward passes), ``busy_s`` (time spent in them; see
    :attr:`utilisation` and :attr:`compute_utilisation`),
    ``computed_tokens`` (tokens pushed through the weights, padding included) and
    ``wasted_tokens`` (the padding and the slots of finished requests in a static
    batch), ``kv_capacity_tokens`` of the replica, and ``compute_s_per_token`` and
    ``head_s_per_token``, the time of one token's matrix multiplies through the layers
    and of one sampled token's through the output head.

    Used in chapter 'Batching' and by the scenarios chapter.
    """

    prompt_tokens: np.ndarray
    preemptions: np.ndarray
    steps: int
    busy_s: float
    computed_tokens: int
    wasted_tokens: int
    kv_capacity_tokens: int
    compute_s_per_token: float
    head_s_per_token: float
    scheduler: Scheduler
    replica_name: str
    _segments: list = field(repr=False)
    _join_step: np.ndarray = field(repr=False)
    _final_tokens: np.ndarray = field(repr=False)
    _history: dict = field(repr=False)

    # ---- whole-run figures ---------------------------------------------------------

    @property
    def makespan_s(self) -> float:
        """From the first arrival to the last finish."""
        return float(np.max(self.finish_s) - np.min(self.arrival_s))

    @property
    def throughput_tok_s(self) -> float:
        """Output tokens per second over the whole run (MLPerf's tokens/s)."""
        return float(np.sum(self.output_tokens)) / self.makespan_s

    @property
    def requests_per_s(self) -> float:
        """Completed requests per second over the whole run."""
        return len(self) / self.makespan_s

    @property
    def utilisation(self) -> float:
        """Share of the run during which the replica was running a step."""
        return self.busy_s / self.makespan_s

    @property
    def compute_utilisation(self) -> float:
        """Share of the replica's (efficiency-scaled) compute spent on useful tokens:
        every prompt and output token once through the layers and each output token
        through the output head, over the whole run. Padding, idle slots and
        memory-bound steps all lower it."""
        outputs = float(np.sum(self.output_tokens))
        useful = float(np.sum(self.prompt_tokens)) + outputs
        return (useful * self.compute_s_per_token
                + outputs * self.head_s_per_token) / self.makespan_s

    @property
    def wasted_fraction(self) -> float:
        """Share of the tokens pushed through the weights that were padding or idle slots."""
        return self.wasted_tokens / self.computed_tokens if self.computed_tokens else 0.0

    def summary(self, quantiles=(50, 99, 99.9)) -> dict[str, float]:
        """Throughput, utilisation and the TTFT/TPOT/e2e percentiles, as one flat dict."""
        out = {
            "requests": float(len(self)),
            "throughput_tok_s": self.throughput_tok_s,
            "utilisation": self.utilisation,
            "compute_utilisation": self.compute_utilisation,
            "wasted_fraction": self.wasted_fraction,
            "preemptions": float(np.sum(self.preemptions)),
        }
        for metric in METRICS:
            for q in quantiles:
                out[f"{metric}_p{q:g}_s"] = self.percentile(metric, q)
        return out

    # ---- step records --------------------------------------------------------------

    @cached_property
    def _steps(self) -> dict[str, np.ndarray]:
        """Every step's end time, duration, decode tokens and prefill tokens."""
        seg = np.array(self._segments, dtype=float).reshape(-1, 6)
        t0, k, m0, m1, n_dec, n_pre = (seg[:, i] for i in range(6))
        counts = k.astype(np.int64)
        total = int(counts.sum())
        starts = np.cumsum(counts) - counts
        j = np.arange(total) - np.repeat(starts, counts)
        durations = np.repeat(m0, counts) + np.repeat(m1, counts) * j
        # Each segment starts at its own recorded time: cumulative sums restart there.
        cumulative = np.cumsum(durations)
        before = np.repeat(cumulative[starts] - durations[starts], counts)
        ends = np.repeat(t0, counts) + cumulative - before
        return {
            "end_s": ends,
            "duration_s": durations,
            "decode_tokens": np.repeat(n_dec, counts),
            "prefill_tokens": np.repeat(n_pre, counts),
        }

    @property
    def step_end_s(self) -> np.ndarray:
        """End time of every step, in order."""
        return self._steps["end_s"]

    @property
    def step_duration_s(self) -> np.ndarray:
        """Duration of every step, in order."""
        return self._steps["duration_s"]

    @property
    def step_batch(self) -> np.ndarray:
        """Decode tokens (requests advanced by one token) in every step."""
        return self._steps["decode_tokens"]

    @property
    def step_prefill_tokens(self) -> np.ndarray:
        """Prompt tokens (padding included) prefilled in every step."""
        return self._steps["prefill_tokens"]

    @cached_property
    def decode_step_end_s(self) -> np.ndarray:
        """End times of the steps that advanced running requests, from index 1 (0 is nan)."""
        steps = self._steps
        ends = steps["end_s"][steps["decode_tokens"] > 0]
        return np.concatenate([[np.nan], ends])

    def token_times_s(self, i: int) -> np.ndarray:
        """When request ``i`` received each of its output tokens (the first: ``first_token_s``)."""
        i = int(i)
        if not 0 <= i < len(self):
            raise ValueError(f"i: {i} is not a request index in [0, {len(self) - 1}]")
        ends = self.decode_step_end_s
        # A preempted request's earlier stretches; otherwise just its first token.
        times = [np.array([a]) if kind == "prefill" else ends[int(a):int(b) + 1]
                 for kind, a, b in self._history.get(i, [("prefill", self.first_token_s[i], 0)])]
        join, count = int(self._join_step[i]), int(self._final_tokens[i])
        if join >= 0 and count:
            times.append(ends[join + 1:join + 1 + count])
        return np.concatenate(times)


# --------------------------------------------------------------------------------------
# The simulation
# --------------------------------------------------------------------------------------


def simulate(rep: Replica, requests: Requests, scheduler: Scheduler | None = None) -> SimResult:
    """Serve ``requests`` on the replica ``rep`` with ``scheduler`` and record what happened.

    Deterministic: the same inputs give the same result (the randomness is all in
    how ``requests`` were drawn). See the module docstring for the schedulers,
    the KV-cache policies and the assumptions. A pipeline-parallel replica is served
    here as one of its lanes alone (:func:`simulate_lanes` runs them together).

    Raises ``ValueError`` if a request can never fit in the KV cache (its prompt
    plus output, or its reservation, exceeds ``rep.kv_capacity_tokens``), or if
    a ``"reserve"`` policy reserves fewer outputs than a request produces.

    Used in chapter 'Batching'.
    """
    sch = _checked(rep, requests, scheduler)
    return _run(rep, requests, sch)


def _run(rep: Replica, requests: Requests, sch: Scheduler) -> SimResult:
    """:func:`simulate` of arguments already checked (:func:`_checked`)."""
    engine = (StaticEngine if sch.kind == "static" else ContinuousEngine)(rep, requests, sch)
    record = engine.run()
    if sch.disaggregated is not None:
        record.arrival = requests.arrival_s.tolist()  # the engine saw when caches arrived
    return _result(rep, requests, sch, record)


def simulate_lanes(rep: Replica, lanes, scheduler: Scheduler | None = None) -> list[SimResult]:
    """Serve each of ``lanes`` (a list of at most ``rep.lanes``
    :class:`~inferlab.benchmark.traffic.Requests`, one per micro-batch) on its own lane of
    the pipeline-parallel replica ``rep``, the lanes in lock step
    (:class:`~inferlab.serving.pipeline.LockStep`): every round of steps lasts as long as
    its slowest lane's. One result per lane, in order; one lane is :func:`simulate`.

    Continuous batching with open-loop arrivals only: a static batch or a prefill pool
    in front of a pipeline is not modelled, and a closed loop is one stream on one lane.
    """
    if isinstance(lanes, Requests) or not isinstance(lanes, (list, tuple)) or not lanes:
        raise ValueError("lanes: give a list of Requests, one per lane")
    sch = _checked(rep, lanes[0], scheduler)
    if len(lanes) > rep.lanes:
        raise ValueError(f"lanes: {len(lanes)} lanes given, but {rep.name} has "
                         f"{rep.lanes} (its pipeline stages); give 1 to {rep.lanes}")
    for requests in lanes[1:]:
        _checked(rep, requests, sch)
    # Refused for a pipelined replica however many of its lanes have work, so that a run
    # does not pass or fail with the traffic it was dealt.
    if rep.lanes > 1 and (sch.kind == "static" or sch.disaggregated is not None):
        raise ValueError("scheduler: lanes in lock step are simulated with continuous "
                         "batching and prefill on the replica itself")
    if rep.lanes > 1 and any(requests.kind == "closed" for requests in lanes):
        raise ValueError("lanes: a closed loop is simulated on one lane (simulate); give "
                         "open-loop (Poisson or all-at-once) arrivals")
    if len(lanes) == 1:
        return [_run(rep, lanes[0], sch)]
    if all(_same_queue(lanes[0], requests) for requests in lanes[1:]):
        # Lanes dealt the same queue take the same steps, so each round lasts exactly one
        # lane's step and one lane's run is every lane's (an even deal of fixed lengths
        # gives such lanes). The copies share the run's arrays, which nothing writes.
        one = _run(rep, lanes[0], sch)
        return [one] + [copy.copy(one) for _ in lanes[1:]]
    records = LockStep([ContinuousEngine(rep, requests, sch) for requests in lanes]).run()
    return [_result(rep, requests, sch, record)
            for requests, record in zip(lanes, records, strict=True)]


def _same_queue(a: Requests, b: Requests) -> bool:
    """Whether two lanes were dealt the same requests at the same times."""
    return (a.kind == b.kind and a.concurrency == b.concurrency
            and all(np.array_equal(x, y, equal_nan=True) for x, y in (
                (a.arrival_s, b.arrival_s), (a.prompt_tokens, b.prompt_tokens),
                (a.output_tokens, b.output_tokens))))


def _checked(rep: Replica, requests: Requests, scheduler: Scheduler | None) -> Scheduler:
    """The scheduler to run (the default one for ``None``), once ``rep``, ``requests`` and it
    are known to make a run that can finish (see :func:`simulate`'s errors)."""
    if not isinstance(rep, Replica):
        raise ValueError(f"rep: {rep!r} is not a Replica; build one with "
                         "inferlab.model.steptime.replica")
    if not isinstance(requests, Requests):
        raise ValueError("requests: give a Requests object "
                         "(inferlab.benchmark.traffic.make_requests)")
    sch = Scheduler() if scheduler is None else scheduler
    if not isinstance(sch, Scheduler):
        raise ValueError(f"scheduler: {scheduler!r} is not a Scheduler")
    prompts = np.asarray(requests.prompt_tokens, dtype=np.int64)
    outputs = np.asarray(requests.output_tokens, dtype=np.int64)
    capacity = rep.kv_capacity_tokens
    longest = int(np.max(prompts + outputs))
    if sch.fixed_shape is not None:
        shape = sch.fixed_shape
        if longest > shape.context_tokens:
            raise ValueError(f"requests: a request of {longest} tokens (prompt + output) exceeds "
                             f"the compiled context of {shape.context_tokens}")
        shape.pad_prompt(int(np.max(prompts)))
        if shape.context_tokens > capacity:
            raise ValueError(f"fixed_shape: one slot of {shape.context_tokens} tokens exceeds the "
                             f"KV capacity of {capacity} tokens")
    elif sch.kv_policy == "reserve":
        reserve = sch.reserve_output_tokens
        if reserve is not None and reserve < int(np.max(outputs)):
            raise ValueError(f"reserve_output_tokens: {reserve} is below the longest output "
                             f"({int(np.max(outputs))}); a reserving server would cut it off")
        need = int(np.max(prompts)) + (int(np.max(outputs)) if reserve is None else reserve)
        if need > capacity:
            raise ValueError(f"requests: a reservation of {need} tokens exceeds the KV capacity "
                             f"of {capacity} tokens of {rep.name}")
    elif longest > capacity or int(np.max(prompts)) + 1 + int(
            PAGED_WATERMARK_FRACTION * capacity) > capacity:
        raise ValueError(f"requests: a request of {longest} tokens (prompt + output) does not "
                         f"fit in the KV capacity of {capacity} tokens of {rep.name}")
    return sch


def _result(rep: Replica, requests: Requests, sch: Scheduler, record: Record) -> SimResult:
    return SimResult(
        arrival_s=np.asarray(record.arrival, dtype=float),
        first_token_s=np.asarray(record.first, dtype=float),
        finish_s=np.asarray(record.finish, dtype=float),
        prompt_tokens=np.asarray(requests.prompt_tokens, dtype=np.int64),
        output_tokens=np.asarray(requests.output_tokens, dtype=np.int64),
        preemptions=np.asarray(record.preempt, dtype=np.int64),
        steps=int(sum(segment[1] for segment in record.segments)),
        busy_s=float(record.busy),
        computed_tokens=int(record.computed),
        wasted_tokens=int(record.wasted),
        kv_capacity_tokens=rep.kv_capacity_tokens,
        compute_s_per_token=float(rep.matmul_s(1, 0)),
        head_s_per_token=float(rep.matmul_s(0, 1)),
        scheduler=sch,
        replica_name=rep.name,
        _segments=record.segments,
        _join_step=np.asarray(record.join, dtype=np.int64),
        _final_tokens=np.asarray(record.final_tokens, dtype=np.int64),
        _history=record.history,
    )


# --------------------------------------------------------------------------------------
# Throughput under a latency bound (MLPerf's Offline and Server scenarios, simplified)
# --------------------------------------------------------------------------------------

def offline_throughput(rep: Replica, requests: Requests, scheduler: Scheduler | None = None
                       ) -> SimResult:
    """Serve ``requests`` all at once (their arrival times are ignored) and return the run.

    Its :attr:`SimResult.throughput_tok_s` is the Offline figure: output tokens over
    the time to finish them all, with no latency bound. The last requests run in a
    shrinking batch, so use enough requests (thousands) that this drain is small.

    Used in chapter 'Batching'.
    """
    at_once = Requests(np.zeros(len(requests)), requests.prompt_tokens, requests.output_tokens,
                       "all_at_once")
    return simulate(rep, at_once, scheduler)


@dataclass(frozen=True)
class BoundedRate:
    """The highest Poisson arrival rate found to meet both 99th-percentile bounds.

    ``throughput_tok_s`` is that rate times the mean output length (output
    tokens per second offered and served); ``result`` is the run at that rate
    (``None`` if even the lowest rate tried failed, in which case the rate is 0).

    Used in chapter 'Batching'.
    """

    rate_per_s: float
    throughput_tok_s: float
    ttft_p99_bound_s: float
    tpot_p99_bound_s: float
    result: SimResult | None


def meets_bounds(result: SimResult, ttft_p99_s: float, tpot_p99_s: float) -> bool:
    """Whether the run's p99 TTFT and p99 TPOT are within the bounds (no early-stopping test).

    Used in chapter 'Batching'.
    """
    return (result.percentile("ttft", 99) <= ttft_p99_s
            and result.percentile("tpot", 99) <= tpot_p99_s)


def max_rate_within(
    rep: Replica,
    requests: Requests,
    ttft_p99_s: float,
    tpot_p99_s: float,
    scheduler: Scheduler | None = None,
    *,
    iterations: int = 10,
    upper_rate_per_s: float | None = None,
) -> BoundedRate:
    """The highest Poisson arrival rate at which p99 TTFT and p99 TPOT stay within bounds.

    ``requests`` must be Poisson arrivals; their gaps are rescaled for each rate
    tried (common random numbers: every rate sees the same sequence of requests,
    only faster or slower), so the answer moves smoothly with the inputs.
    Bisection over ``iterations`` steps between 0 and ``upper_rate_per_s``
    (default: the Offline request rate of the same requests, which no server can
    sustain for long; a short run above it can still look fine, because its queue
    has not had time to grow; if given, at least :data:`MIN_SEARCH_RATE_PER_S`).
    This is the idea of MLPerf's Server scenario
    without its minimum duration and early-stopping test.

    Used in chapter 'Batching'.
    """
    if requests.kind != "poisson":
        raise ValueError(f"requests: arrivals are {requests.kind!r}; give Poisson arrivals")
    ttft_p99_s = checks.positive("ttft_p99_s", ttft_p99_s)
    tpot_p99_s = checks.positive("tpot_p99_s", tpot_p99_s)
    iterations = checks.iterations("iterations", iterations)
    if upper_rate_per_s is None:
        offline = offline_throughput(rep, requests, scheduler)
        upper_rate_per_s = offline.requests_per_s
    else:
        upper_rate_per_s = checks.real("upper_rate_per_s", upper_rate_per_s,
                                       low=MIN_SEARCH_RATE_PER_S)
    def trial(rate: float) -> tuple[bool, SimResult]:
        run = simulate(rep, requests.at_rate(rate), scheduler)
        return meets_bounds(run, ttft_p99_s, tpot_p99_s), run

    low, best = highest_passing(trial, 0.0, float(upper_rate_per_s), iterations=iterations)
    mean_output = float(np.mean(requests.output_tokens))
    return BoundedRate(low, low * mean_output, ttft_p99_s, tpot_p99_s, best)


def fit_efficiency(measure, target: float, *, low: float = 0.05, high: float = 1.0,
                   iterations: int = 20) -> float:
    """The efficiency ``e`` in ``[low, high]`` at which ``measure(e)`` equals ``target``.

    ``measure`` must increase with ``e`` (throughput does, as efficiency rises).
    Bisection; raises ``ValueError`` if ``target`` lies outside
    ``[measure(low), measure(high)]``, naming the range that can be reached.

    Used in chapter 'Batching' (calibration against one published result).
    """
    checks.positive("target", target)
    low = checks.fraction("low", low, low_open=True)
    high = checks.fraction("high", high, low_open=True)
    if low >= high:
        raise ValueError(f"low: {low!r}, high: {high!r}; need 0 < low < high <= 1")
    return bisect(measure, target, low, high,
                  iterations=checks.iterations("iterations", iterations))


# --------------------------------------------------------------------------------------
# The limits of a load sweep and a rate search
# --------------------------------------------------------------------------------------

#: The lightest load a simulated load sweep runs. Below a thousandth of saturation every
#: request runs alone, so the tail is the unloaded one, and at loads near the smallest
#: float the arrival times overflow.
MIN_LOAD = 1e-3
#: The least upper end of a rate search (one request in eleven days). Halved
#: ``inferlab.common.checks.MAX_ITERATIONS`` times it is 6e-67 requests/s, whose arrival
#: times are still finite floats; an upper end nearer 0 leaves the search rates of 0.
MIN_SEARCH_RATE_PER_S = 1e-6
