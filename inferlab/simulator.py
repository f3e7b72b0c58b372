"""A discrete-event simulation of requests served by one replica, step by step.

The replica is a :class:`inferlab.steptime.Replica`: it runs one step at a time,
and each step takes the time its step-time model says for the tokens in it. The
simulation decides *which* tokens go into each step, as a serving engine's
scheduler does, and records when every request arrived, got its first token,
got every later token, and finished.

Schedulers (:class:`Scheduler`):

- **static** batching waits until ``max_batch`` requests are queued (or the
  oldest has waited ``batch_timeout_s``, or no more will come), prefills them
  together with every prompt padded to the longest, then decodes until the
  *longest* output is done: finished requests keep their slot and their cache
  until then, and the slot computes padding. New requests wait for the next batch.
- **continuous** batching (Orca's iteration-level scheduling, as in vLLM and
  TensorRT-LLM) admits waiting requests and retires finished ones at every step.
  Without chunked prefill, admitted prompts are prefilled in a step of their own
  while running requests wait (their next token is delayed). With chunked
  prefill every step carries one decode token per running request and fills
  the rest of a ``token_budget`` with pieces of waiting prompts.

KV-cache memory (``kv_policy``):

- ``"reserve"``: each admitted request holds room for its prompt plus
  ``reserve_output_tokens`` outputs from the start, as servers did before paged
  attention. Memory sits idle whenever outputs are shorter than the reservation.
- ``"paged"``: memory is taken as tokens are produced (PagedAttention; block
  rounding is ignored, a waste of under one block per request). If the cache
  would overflow, the most recently admitted request is preempted: its cache is
  dropped and it is queued again at the front, to be recomputed from its prompt
  and the tokens it already produced (vLLM's recompute policy).

A **fixed-shape** server (:class:`FixedShape`, an ahead-of-time compiled
accelerator) pads every prompt up to a compiled length bucket, pads the decode
batch up to a compiled batch size, and reserves and reads a full compiled
context for each slot, so its decode step time does not depend on what is in
the batch.

Speed. Between two events (an admission, a retirement, a preemption) a decode
step's time is an exact closed form of the context growth, ``max(m0 + m1 j, c) + f``
for the ``j``-th step, so the simulation advances over all those steps at once
(``_advance``). Only steps that prefill are simulated one by one.

Assumptions: one replica; each step's time is the step-time model's (no noise,
so every spread in latency comes from scheduling); the network and the client
add nothing; a request's first token is produced by the step that finishes its
prefill; TPOT of a request is ``(finish - first token) / (outputs - 1)``, the
definition MLPerf and vLLM use.

Used in chapter 'Batching'; the scenarios chapter runs MLPerf's LoadGen
scenarios over it.
"""

from __future__ import annotations

import heapq
import math
import numbers
from collections import deque
from dataclasses import dataclass, field
from functools import cache, cached_property

import matplotlib.pyplot as plt
import numpy as np

from inferlab.plotting import PALETTE, figure, label_kind
from inferlab.roofline import _freeze_layout
from inferlab.steptime import Replica, replica
from inferlab.widgets import Explorer, register
from inferlab.workload import Lengths, Requests, make_requests

SCHEDULER_KINDS = ("continuous", "static")
KV_POLICIES = ("paged", "reserve")
METRICS = ("ttft", "tpot", "e2e")

#: Share of the KV cache a paged server keeps free when admitting (vLLM's default watermark).
PAGED_WATERMARK_FRACTION = 0.01


def _whole(name: str, value, minimum: int = 1) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name}: {value!r} is not allowed; give a whole number >= {minimum}")
    return int(value)


def _buckets(name: str, values) -> tuple[int, ...]:
    try:
        items = tuple(values)
    except TypeError:
        raise ValueError(f"{name}: {values!r} is not a sequence of whole numbers") from None
    if not items:
        raise ValueError(f"{name}: give at least one bucket")
    for item in items:
        _whole(name, item)
    if list(items) != sorted(set(items)):
        raise ValueError(f"{name}: {values!r} must be strictly increasing")
    return tuple(int(item) for item in items)


@dataclass(frozen=True)
class FixedShape:
    """The compiled shapes of an ahead-of-time compiled accelerator.

    ``prompt_buckets``: prompt lengths compiled for prefill (a prompt is padded up
    to the next one). ``batch_buckets``: decode batch sizes compiled (the running
    batch is padded up). ``context_tokens``: the compiled sequence length; every
    slot reserves and every decode step reads a cache this long. A request whose
    prompt plus output exceeds it, or whose prompt exceeds the largest bucket, is
    refused with ``ValueError``.

    Used in chapter 'Batching'.
    """

    prompt_buckets: tuple[int, ...] = (128, 256, 512, 1024, 2048)
    batch_buckets: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    context_tokens: int = 2048

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt_buckets", _buckets("prompt_buckets", self.prompt_buckets))
        object.__setattr__(self, "batch_buckets", _buckets("batch_buckets", self.batch_buckets))
        _whole("context_tokens", self.context_tokens)

    def pad_prompt(self, tokens: int) -> int:
        """The compiled prompt length ``tokens`` is padded to."""
        for bucket in self.prompt_buckets:
            if bucket >= tokens:
                return bucket
        raise ValueError(f"prompt_tokens: {tokens} is longer than the largest compiled prompt "
                         f"bucket ({self.prompt_buckets[-1]})")

    def pad_batch(self, batch: int) -> int:
        """The compiled batch size a running batch of ``batch`` is padded to."""
        for bucket in self.batch_buckets:
            if bucket >= batch:
                return bucket
        return batch  # max_batch is checked against the largest bucket up front


@dataclass(frozen=True)
class Scheduler:
    """How a replica picks the tokens of each step (see the module docstring).

    ``max_batch`` is the most requests in flight (running or being prefilled);
    ``token_budget`` the most tokens in one step (for chunked prefill, decode
    tokens included; without chunking, the most prompt tokens prefilled in one
    step, though one prompt is always admitted whole). ``reserve_output_tokens``
    is the output room a ``"reserve"`` policy holds per request (``None``: the
    longest output among the requests, as if the server knew the cap).

    Raises ``ValueError`` naming the argument for an unknown kind or policy,
    ``max_batch < 1``, a token budget below ``max_batch`` with chunked prefill,
    a negative timeout, or a fixed shape combined with chunked prefill or a
    ``max_batch`` above its largest batch bucket.

    Used in chapter 'Batching'.
    """

    kind: str = "continuous"
    max_batch: int = 256
    chunked_prefill: bool = True
    token_budget: int = 2048
    kv_policy: str = "paged"
    reserve_output_tokens: int | None = None
    batch_timeout_s: float = math.inf
    fixed_shape: FixedShape | None = None

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULER_KINDS:
            raise ValueError(f"kind: {self.kind!r} is not one of {', '.join(SCHEDULER_KINDS)}")
        if self.kv_policy not in KV_POLICIES:
            raise ValueError(f"kv_policy: {self.kv_policy!r} is not one of "
                             f"{', '.join(KV_POLICIES)}")
        _whole("max_batch", self.max_batch)
        _whole("token_budget", self.token_budget)
        if self.reserve_output_tokens is not None:
            _whole("reserve_output_tokens", self.reserve_output_tokens)
        timeout = self.batch_timeout_s
        if not isinstance(timeout, numbers.Real) or math.isnan(timeout) or timeout < 0:
            raise ValueError(f"batch_timeout_s: {timeout!r} is not allowed; give a number >= 0 "
                             "(math.inf waits for a full batch)")
        if self.kind == "continuous" and self.chunked_prefill and self.fixed_shape is None \
                and self.token_budget < self.max_batch:
            raise ValueError(f"token_budget: {self.token_budget} is below max_batch "
                             f"({self.max_batch}); chunked prefill needs room for one decode "
                             "token per running request")
        if self.fixed_shape is not None:
            if self.kind != "continuous" or self.chunked_prefill:
                raise ValueError("fixed_shape: a fixed-shape server is modelled with continuous "
                                 "batching and chunked_prefill=False")
            if self.max_batch > self.fixed_shape.batch_buckets[-1]:
                raise ValueError(f"max_batch: {self.max_batch} is above the largest compiled "
                                 f"batch ({self.fixed_shape.batch_buckets[-1]})")


# --------------------------------------------------------------------------------------
# The closed form of a run of decode steps
# --------------------------------------------------------------------------------------


def _compute_bound_steps(m0: float, m1: float, c: float) -> float:
    """How many steps, from the first, have compute ``c`` above memory ``m0 + m1 j``."""
    if c <= m0:
        return 0
    if m1 <= 0:
        return math.inf
    return math.ceil((c - m0) / m1)


def _elapsed(k: int, m0: float, m1: float, c: float, f: float, js: float) -> float:
    """Total time of steps ``j = 0 .. k-1`` of ``max(m0 + m1 j, c) + f``."""
    first = min(k, js)
    total = first * (c + f)
    if k > js:
        m = k - js
        total += m * (m0 + f + m1 * js) + m1 * m * (m - 1) / 2
    return total


def _advance(m0: float, m1: float, c: float, f: float, k_max: int, tau: float) -> tuple[int, float]:
    """Run up to ``k_max`` decode steps, stopping early at the first step that ends at or
    after ``tau`` seconds from now. Returns the steps run and the time they took.

    Step ``j`` takes ``max(m0 + m1 j, c) + f``: memory time grows by ``m1`` per step
    as every running request's cache grows by one token; compute ``c`` and the
    rest ``f`` are fixed while the batch is. The sum is piecewise quadratic in
    ``k`` and is inverted exactly, so a long run costs as little as a short one.
    """
    js = _compute_bound_steps(m0, m1, c)
    total = _elapsed(k_max, m0, m1, c, f, js)
    if total < tau:
        return k_max, total
    # The first k with elapsed(k) >= tau: solve in whichever regime tau falls.
    if js >= 1 and tau <= min(js, k_max) * (c + f):
        k = max(1, math.ceil(tau / (c + f)))
    else:
        rest = tau - js * (c + f)
        linear = m0 + f + m1 * js - m1 / 2
        if m1 > 0:
            k = js + math.ceil((-linear + math.sqrt(linear * linear + 2 * m1 * rest)) / m1)
        else:
            k = js + math.ceil(rest / linear)
    k = int(min(max(k, 1), k_max))
    while k > 1 and _elapsed(k - 1, m0, m1, c, f, js) >= tau:
        k -= 1
    while k < k_max and _elapsed(k, m0, m1, c, f, js) < tau:
        k += 1
    return k, _elapsed(k, m0, m1, c, f, js)


# --------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SimResult:
    """What happened to every request, as NumPy arrays in request order, plus step records.

    Per request: ``arrival_s``, ``first_token_s``, ``finish_s`` (seconds from the
    start), ``prompt_tokens``, ``output_tokens`` and ``preemptions``. Derived:
    :attr:`ttft_s`, :attr:`tpot_s`, :attr:`e2e_s`, and :meth:`percentile` of
    each; :meth:`token_times_s` gives every token's time for one request.

    Whole run: ``steps`` (forward passes), ``busy_s`` (time spent in them; see
    :attr:`utilisation` and :attr:`compute_utilisation`),
    ``computed_tokens`` (tokens pushed through the weights, padding included) and
    ``wasted_tokens`` (the padding and the slots of finished requests in a static
    batch), ``kv_capacity_tokens`` of the replica.

    Used in chapter 'Batching' and by the scenarios chapter.
    """

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    preemptions: np.ndarray
    steps: int
    busy_s: float
    computed_tokens: int
    wasted_tokens: int
    kv_capacity_tokens: int
    compute_s_per_token: float
    scheduler: Scheduler
    replica_name: str
    _segments: list = field(repr=False)
    _join_step: np.ndarray = field(repr=False)
    _final_tokens: np.ndarray = field(repr=False)
    _history: dict = field(repr=False)

    def __len__(self) -> int:
        return len(self.arrival_s)

    # ---- per-request latencies -----------------------------------------------------

    @property
    def ttft_s(self) -> np.ndarray:
        """Time to first token — queueing plus prefill."""
        return self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> np.ndarray:
        """End-to-end latency — arrival to last token."""
        return self.finish_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        """Time per output token after the first — ``(finish - first) / (outputs - 1)``;
        ``nan`` for one-token outputs."""
        with np.errstate(divide="ignore", invalid="ignore"):
            gaps = (self.finish_s - self.first_token_s) / (self.output_tokens - 1)
        return np.where(self.output_tokens > 1, gaps, np.nan)

    def percentile(self, metric: str, q) -> float | np.ndarray:
        """The ``q``-th percentile (0-100, number or array) of ``"ttft"``, ``"tpot"`` or ``"e2e"``.

        Requests with no value (TPOT of one-token outputs) are left out.
        """
        if metric not in METRICS:
            raise ValueError(f"metric: {metric!r} is not one of {', '.join(METRICS)}")
        q_arr = np.asarray(q, dtype=float)
        if not np.all((q_arr >= 0) & (q_arr <= 100)):
            raise ValueError(f"q: {q!r} is not allowed; give percentiles in [0, 100]")
        values = getattr(self, f"{metric}_s")
        values = values[np.isfinite(values)]
        if values.size == 0:
            return float("nan") if q_arr.ndim == 0 else np.full(q_arr.shape, np.nan)
        result = np.percentile(values, q_arr)
        return float(result) if np.ndim(result) == 0 else result

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
        every prompt and output token once, over the whole run. Padding, idle slots and
        memory-bound steps all lower it."""
        useful = float(np.sum(self.prompt_tokens) + np.sum(self.output_tokens))
        return useful * self.compute_s_per_token / self.makespan_s

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
        seg = np.array(self._segments, dtype=float).reshape(-1, 9)
        t0, k, m0, m1, c, f, n_dec, n_pre = (seg[:, i] for i in range(8))
        counts = k.astype(np.int64)
        total = int(counts.sum())
        starts = np.cumsum(counts) - counts
        j = np.arange(total) - np.repeat(starts, counts)
        durations = np.maximum(np.repeat(m0, counts) + np.repeat(m1, counts) * j,
                               np.repeat(c, counts)) + np.repeat(f, counts)
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
    the KV-cache policies and the assumptions.

    Raises ``ValueError`` if a request can never fit in the KV cache (its prompt
    plus output, or its reservation, exceeds ``rep.kv_capacity_tokens``), or if
    a ``"reserve"`` policy reserves fewer outputs than a request produces.

    Used in chapter 'Batching'.
    """
    if not isinstance(rep, Replica):
        raise ValueError(f"rep: {rep!r} is not a Replica; build one with inferlab.steptime.replica")
    if not isinstance(requests, Requests):
        raise ValueError("requests: give a Requests object (inferlab.workload.make_requests)")
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
    if sch.kind == "static":
        return _simulate_static(rep, requests, sch)
    return _simulate_continuous(rep, requests, sch)


def _result(rep, requests, sch, arrival, first, finish, preempt, segments, busy,
            computed, wasted, join, final_tokens, history) -> SimResult:
    return SimResult(
        arrival_s=np.asarray(arrival, dtype=float),
        first_token_s=np.asarray(first, dtype=float),
        finish_s=np.asarray(finish, dtype=float),
        prompt_tokens=np.asarray(requests.prompt_tokens, dtype=np.int64),
        output_tokens=np.asarray(requests.output_tokens, dtype=np.int64),
        preemptions=np.asarray(preempt, dtype=np.int64),
        steps=int(sum(segment[1] for segment in segments)),
        busy_s=float(busy),
        computed_tokens=int(computed),
        wasted_tokens=int(wasted),
        kv_capacity_tokens=rep.kv_capacity_tokens,
        compute_s_per_token=float(rep.matmul_s(1)),
        scheduler=sch,
        replica_name=rep.name,
        _segments=segments,
        _join_step=np.asarray(join, dtype=np.int64),
        _final_tokens=np.asarray(final_tokens, dtype=np.int64),
        _history=history,
    )


def _simulate_continuous(rep: Replica, requests: Requests, sch: Scheduler) -> SimResult:
    step_time = rep.step_function()
    kv_s = rep.kv_s_per_token
    n = len(requests)
    prompt = requests.prompt_tokens.tolist()
    out = requests.output_tokens.tolist()
    arrival = [math.nan] * n
    first = [math.nan] * n
    finish = [math.nan] * n
    preempt = [0] * n
    join_step = [-1] * n
    final_tokens = [0] * n
    history: dict[int, list] = {}

    capacity = rep.kv_capacity_tokens
    max_batch = sch.max_batch
    budget = sch.token_budget
    chunked = sch.chunked_prefill
    shape = sch.fixed_shape
    paged = sch.kv_policy == "paged" and shape is None
    # Like vLLM, admit only while a sliver of the cache stays free for the running requests
    # to grow into; without it a paged server thrashes, admitting and preempting in turn.
    watermark = int(PAGED_WATERMARK_FRACTION * capacity)
    if shape is not None:
        slot_tokens = shape.context_tokens
    else:
        reserve_out = (sch.reserve_output_tokens if sch.reserve_output_tokens is not None
                       else int(np.max(requests.output_tokens)))
        slot_tokens = 0

    # Arrivals: a queue of (time, index). A closed loop sends request k + users when one finishes.
    incoming: deque = deque()
    if requests.kind == "closed":
        users = min(requests.concurrency, n)
        for i in range(users):
            incoming.append((0.0, i))
        next_closed = users
    else:
        incoming.extend(zip(requests.arrival_s.tolist(), range(n), strict=True))
        next_closed = n

    cur_prompt = list(prompt)    # tokens to prefill at the next admission (grows on preemption)
    remaining = list(out)        # output tokens still to produce
    reserved = [0] * n           # KV tokens held by a request (reserve policy)
    ctx_at_join = [0] * n
    rem_at_join = [0] * n
    epoch = [0] * n

    waiting: deque = deque()
    prefilling: deque = deque()  # [index, prompt tokens done] (chunked prefill)
    running: dict[int, int] = {}  # index -> decode step at which it joined (insertion order)
    retire: list = []             # heap of (decode step at which it finishes, index, epoch)
    n_run = 0
    ctx_sum = 0                   # context tokens of the running requests
    kv_used = 0                   # KV tokens held (paged: ctx + prefilling prompts)
    decode_steps = 0
    t = 0.0
    busy = 0.0
    computed = 0
    wasted = 0
    segments: list = []
    done = 0
    admitting = 0                 # prompts taken into the prefill step being formed

    def can_admit(i: int) -> bool:
        if n_run + len(prefilling) + admitting >= max_batch:
            return False
        if shape is not None:
            return kv_used + slot_tokens <= capacity
        if paged:
            return kv_used + cur_prompt[i] + 1 + watermark <= capacity
        return kv_used + cur_prompt[i] + reserve_out <= capacity

    def hold(i: int) -> int:
        if shape is not None:
            return slot_tokens
        if paged:
            return cur_prompt[i]
        return cur_prompt[i] + reserve_out

    def finish_request(i: int, when: float) -> None:
        nonlocal next_closed, done
        finish[i] = when
        done += 1
        if next_closed < n:
            incoming.append((when, next_closed))
            next_closed += 1

    def prefill_done(i: int, when: float) -> None:
        """Request i's prefill ended at ``when``: it has a token; it joins the batch or finishes."""
        nonlocal n_run, ctx_sum, kv_used
        if math.isnan(first[i]):
            first[i] = when
        if preempt[i]:
            history[i].append(("prefill", when, 0))
        remaining[i] -= 1
        if paged:
            kv_used -= cur_prompt[i]
        if remaining[i] == 0:
            if not paged:
                kv_used -= reserved[i]
            finish_request(i, when)
            return
        running[i] = decode_steps
        join_step[i] = decode_steps
        final_tokens[i] = remaining[i]
        ctx_at_join[i] = cur_prompt[i] + 1
        rem_at_join[i] = remaining[i]
        n_run += 1
        ctx_sum += cur_prompt[i] + 1
        if paged:
            kv_used += cur_prompt[i] + 1
        heapq.heappush(retire, (decode_steps + remaining[i], i, epoch[i]))

    def retire_due(when: float) -> None:
        nonlocal n_run, ctx_sum, kv_used
        while retire and retire[0][0] <= decode_steps:
            _, i, stamp = heapq.heappop(retire)
            if stamp != epoch[i]:
                continue
            del running[i]
            n_run -= 1
            context = ctx_at_join[i] + rem_at_join[i]
            ctx_sum -= context
            kv_used -= context if paged else reserved[i]
            remaining[i] = 0
            finish_request(i, when)

    def preempt_last() -> None:
        """Drop the most recently admitted running request's cache and queue it again."""
        nonlocal n_run, ctx_sum, kv_used
        i = next(reversed(running))
        joined = running.pop(i)
        produced = decode_steps - joined
        context = ctx_at_join[i] + produced
        n_run -= 1
        ctx_sum -= context
        kv_used -= context
        epoch[i] += 1
        preempt[i] += 1
        record = history.setdefault(i, [("prefill", first[i], 0)])
        if produced:
            record.append(("decode", joined + 1, decode_steps))
        remaining[i] = rem_at_join[i] - produced
        cur_prompt[i] = context
        join_step[i] = -1
        final_tokens[i] = 0
        waiting.appendleft(i)

    while done < n:
        # Everything that has arrived by now joins the queue.
        while incoming and incoming[0][0] <= t:
            when, i = incoming.popleft()
            arrival[i] = when
            waiting.append(i)

        if n_run == 0 and not prefilling and not waiting:
            if not incoming:
                raise RuntimeError("simulation stalled with requests left")  # cannot happen
            t = max(t, incoming[0][0])
            continue

        admissible = bool(waiting) and can_admit(waiting[0])

        if chunked and (prefilling or admissible):
            # One mixed step: a decode token per running request, prompt chunks in the rest.
            if paged:
                while n_run and kv_used + n_run > capacity:
                    preempt_last()
            room = budget - n_run
            chunk_tokens = 0
            chunk_ctx = 0
            chunk_pairs = 0  # causal (query, key) pairs of the prompt pieces
            finished_prefill = []
            for entry in prefilling:
                if room <= 0:
                    break
                i, done_tokens = entry
                take = min(cur_prompt[i] - done_tokens, room)
                entry[1] = done_tokens + take
                room -= take
                chunk_tokens += take
                chunk_ctx += done_tokens + take
                chunk_pairs += take * done_tokens + take * (take + 1) // 2
            while room > 0 and waiting and can_admit(waiting[0]):
                i = waiting.popleft()
                take = min(cur_prompt[i], room)
                reserved[i] = hold(i)
                kv_used += reserved[i]
                prefilling.append([i, take])
                room -= take
                chunk_tokens += take
                chunk_ctx += take
                chunk_pairs += take * (take + 1) // 2
            tokens = n_run + chunk_tokens
            step = step_time(tokens, ctx_sum + chunk_ctx, ctx_sum + chunk_pairs)
            segments.append((t, 1, step, 0.0, 0.0, 0.0, n_run, chunk_tokens, decode_steps))
            t += step
            busy += step
            computed += tokens
            if n_run:
                decode_steps += 1
                ctx_sum += n_run
                if paged:
                    kv_used += n_run
                retire_due(t)
            while prefilling and prefilling[0][1] >= cur_prompt[prefilling[0][0]]:
                finished_prefill.append(prefilling.popleft()[0])
            for i in finished_prefill:
                prefill_done(i, t)
            continue

        if not chunked and admissible:
            # One prefill-only step for as many admissible prompts as the budget takes;
            # the running requests wait for it.
            batch_prompts = []
            tokens = 0
            pairs = 0
            while waiting and can_admit(waiting[0]):
                i = waiting[0]
                size = shape.pad_prompt(cur_prompt[i]) if shape is not None else cur_prompt[i]
                if batch_prompts and tokens + size > budget:
                    break
                waiting.popleft()
                reserved[i] = hold(i)
                kv_used += reserved[i]
                batch_prompts.append(i)
                admitting += 1
                tokens += size
                pairs += size * (size + 1) // 2
            admitting = 0
            useful = sum(cur_prompt[i] for i in batch_prompts)
            step = step_time(tokens, tokens, pairs)
            segments.append((t, 1, step, 0.0, 0.0, 0.0, 0, tokens, decode_steps))
            t += step
            busy += step
            computed += tokens
            wasted += tokens - useful
            for i in batch_prompts:
                prefill_done(i, t)
            continue

        # A run of decode-only steps until the next event.
        if n_run == 0:
            raise RuntimeError("simulate: no request running and none admissible; "
                               "this is a bug in the simulator")
        while retire[0][2] != epoch[retire[0][1]]:
            heapq.heappop(retire)  # left behind by a preempted request
        k_max = retire[0][0] - decode_steps
        if paged:
            if kv_used + n_run > capacity:
                preempt_last()
                continue
            k_max = min(k_max, (capacity - kv_used) // n_run)
        # Stop at the next arrival only if it could be admitted then; otherwise it waits anyway.
        tau = math.inf
        if not waiting and incoming and n_run + len(prefilling) < max_batch:
            tau = incoming[0][0] - t
        # Between events a decode step's time is linear in the context, which grows by
        # one token per running request per step: m0 + m1 j for the j-th step.
        if shape is not None:
            batch = shape.pad_batch(n_run)
            m0 = step_time(batch, batch * slot_tokens, batch * slot_tokens)
            m1 = 0.0
            wasted_per_step = batch - n_run
        else:
            batch = n_run
            m0 = step_time(n_run, ctx_sum, ctx_sum)
            m1 = kv_s * n_run
            wasted_per_step = 0
        k, elapsed = _advance(m0, m1, 0.0, 0.0, k_max, tau)
        segments.append((t, k, m0, m1, 0.0, 0.0, n_run, 0, decode_steps))
        t += elapsed
        busy += elapsed
        computed += k * batch
        wasted += k * wasted_per_step
        decode_steps += k
        ctx_sum += k * n_run
        if paged:
            kv_used += k * n_run
        retire_due(t)

    return _result(rep, requests, sch, arrival, first, finish, preempt, segments, busy,
                   computed, wasted, join_step, final_tokens, history)


def _simulate_static(rep: Replica, requests: Requests, sch: Scheduler) -> SimResult:
    step_time = rep.step_function()
    kv_s = rep.kv_s_per_token
    n = len(requests)
    prompt = requests.prompt_tokens.tolist()
    out = requests.output_tokens.tolist()
    capacity = rep.kv_capacity_tokens
    reserve_out = (sch.reserve_output_tokens if sch.reserve_output_tokens is not None
                   else int(np.max(requests.output_tokens)))
    arrival = [math.nan] * n
    first = [math.nan] * n
    finish = [math.nan] * n
    join_step = [-1] * n
    incoming: deque = deque()
    closed = requests.kind == "closed"
    if closed:
        users = min(requests.concurrency, n)
        incoming.extend((0.0, i) for i in range(users))
        next_closed = users
    else:
        incoming.extend(zip(requests.arrival_s.tolist(), range(n), strict=True))
        next_closed = n
    waiting: deque = deque()
    segments: list = []
    t = 0.0
    busy = 0.0
    computed = 0
    wasted = 0
    decode_steps = 0
    done = 0
    while done < n:
        while incoming and incoming[0][0] <= t:
            when, i = incoming.popleft()
            arrival[i] = when
            waiting.append(i)
        if not waiting:
            t = max(t, incoming[0][0])
            continue
        full = len(waiting) >= sch.max_batch
        nothing_more = not incoming
        timed_out = t - arrival[waiting[0]] >= sch.batch_timeout_s
        if not (full or nothing_more or timed_out):
            # Wait for the next arrival or the head's timeout, whichever is first.
            t = min(incoming[0][0], arrival[waiting[0]] + sch.batch_timeout_s)
            continue
        # Take the longest prefix of the queue whose padded rectangle of cache fits.
        size = min(sch.max_batch, len(waiting))
        members = [waiting[j] for j in range(size)]
        while size > 1 and size * (max(prompt[i] for i in members[:size]) + reserve_out) > capacity:
            size -= 1
        members = members[:size]
        for _ in range(size):
            waiting.popleft()
        longest_prompt = max(prompt[i] for i in members)
        tokens = size * longest_prompt
        step = step_time(tokens, tokens, size * longest_prompt * (longest_prompt + 1) // 2)
        segments.append((t, 1, step, 0.0, 0.0, 0.0, 0, tokens, decode_steps))
        t += step
        busy += step
        computed += tokens
        wasted += tokens - sum(prompt[i] for i in members)
        for i in members:
            first[i] = t
        longest_out = max(out[i] for i in members)
        steps_needed = longest_out - 1
        if steps_needed:
            context = size * (longest_prompt + 1)
            m0 = step_time(size, context, context)
            m1 = kv_s * size
            segments.append((t, steps_needed, m0, m1, 0.0, 0.0, size, 0, decode_steps))
            for i in members:
                join_step[i] = decode_steps
                finish[i] = t + _elapsed(out[i] - 1, m0, m1, 0.0, 0.0, 0)
            elapsed = _elapsed(steps_needed, m0, m1, 0.0, 0.0, 0)
            t += elapsed
            busy += elapsed
            computed += size * steps_needed
            wasted += sum(longest_out - out[i] for i in members)
            decode_steps += steps_needed
        else:
            for i in members:
                finish[i] = t
        done += size
        if closed:
            for when in sorted(finish[i] for i in members):
                if next_closed < n:
                    incoming.append((when, next_closed))
                    next_closed += 1
    final_tokens = [count - 1 for count in out]
    return _result(rep, requests, sch, arrival, first, finish, [0] * n, segments, busy,
                   computed, wasted, join_step, final_tokens, {})


# --------------------------------------------------------------------------------------
# Throughput under a latency bound (MLPerf's Offline and Server scenarios, simplified)
# --------------------------------------------------------------------------------------

#: MLPerf Inference's 99th-percentile bounds for Llama 2 70B, (TTFT s, TPOT s), by scenario:
#: Server 2,000 ms and 200 ms; Interactive 450 ms and 40 ms (MLCommons, loadgen/mlperf.conf).
MLPERF_LLAMA2_70B_BOUNDS: dict[str, tuple[float, float]] = {
    "Server": (2.0, 0.200),
    "Interactive": (0.450, 0.040),
}


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
    has not had time to grow). This is the idea of MLPerf's Server scenario
    without its minimum duration and early-stopping test.

    Used in chapter 'Batching'.
    """
    if requests.kind != "poisson":
        raise ValueError(f"requests: arrivals are {requests.kind!r}; give Poisson arrivals")
    for name, value in (("ttft_p99_s", ttft_p99_s), ("tpot_p99_s", tpot_p99_s)):
        if not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name}: {value!r} is not allowed; give a positive number of seconds")
    iterations = _whole("iterations", iterations)
    if upper_rate_per_s is None:
        offline = offline_throughput(rep, requests, scheduler)
        upper_rate_per_s = offline.requests_per_s
    low, high = 0.0, float(upper_rate_per_s)
    best = None
    for _ in range(iterations):
        rate = (low + high) / 2
        run = simulate(rep, requests.at_rate(rate), scheduler)
        if meets_bounds(run, ttft_p99_s, tpot_p99_s):
            low, best = rate, run
        else:
            high = rate
    mean_output = float(np.mean(requests.output_tokens))
    return BoundedRate(low, low * mean_output, float(ttft_p99_s), float(tpot_p99_s), best)


def fit_efficiency(measure, target: float, *, low: float = 0.05, high: float = 1.0,
                   iterations: int = 20) -> float:
    """The efficiency ``e`` in ``[low, high]`` at which ``measure(e)`` equals ``target``.

    ``measure`` must increase with ``e`` (throughput does, as efficiency rises).
    Bisection; raises ``ValueError`` if ``target`` lies outside
    ``[measure(low), measure(high)]``, naming the range that can be reached.

    Used in chapter 'Batching' (calibration against one published result).
    """
    if not (isinstance(target, numbers.Real) and math.isfinite(target) and target > 0):
        raise ValueError(f"target: {target!r} is not allowed; give a positive number")
    if not 0 < low < high <= 1:
        raise ValueError(f"low: {low!r}, high: {high!r}; need 0 < low < high <= 1")
    at_low, at_high = measure(low), measure(high)
    if not at_low <= target <= at_high:
        raise ValueError(f"target: {target:.4g} is outside what efficiencies {low:g}-{high:g} "
                         f"give ({at_low:.4g} to {at_high:.4g})")
    for _ in range(_whole("iterations", iterations)):
        middle = (low + high) / 2
        if measure(middle) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


# --------------------------------------------------------------------------------------
# Explorer: load, batch limit, output-length spread -> the latency tail
# --------------------------------------------------------------------------------------

#: The explorers' server — Llama 2 70B at FP8 on one H200, with the efficiency the batching
#: chapter's calibration lands near, and a 1 ms overhead per step.
EXPLORER_EFFICIENCY = 0.65
EXPLORER_OVERHEAD_S = 1e-3
#: The explorers' traffic — prompts of 300 tokens on average, outputs of 294 (MLPerf's mean
#: for Llama 2 70B), both capped at 1,024 tokens as in MLPerf's data set.
EXPLORER_PROMPT = Lengths(300, cv=1.0, min_tokens=1, max_tokens=1024)
EXPLORER_OUTPUT_MEAN = 294
EXPLORER_REQUESTS = 2000
#: Requests queued at once to find the saturation rate — enough that the last, shrinking
#: batches (the drain) cost only a few per cent of the run.
SATURATION_PROBE_REQUESTS = 10_000


@cache
def explorer_replica() -> Replica:
    """The replica the tail explorer simulates (see :data:`EXPLORER_EFFICIENCY`)."""
    return replica("Llama 2 70B", "NVIDIA H200 SXM", 1, "fp8",
                   memory_efficiency=EXPLORER_EFFICIENCY, compute_efficiency=EXPLORER_EFFICIENCY,
                   step_overhead_s=EXPLORER_OVERHEAD_S)


@cache
def _explorer_requests(output_cv: float, seed: int, n: int = EXPLORER_REQUESTS) -> Requests:
    output = Lengths(EXPLORER_OUTPUT_MEAN, cv=output_cv, min_tokens=1, max_tokens=1024)
    return make_requests(n, EXPLORER_PROMPT, output, rate_per_s=1.0, seed=seed)


@cache
def saturation_rate_per_s(max_batch: int, output_cv: float, seed: int = 0) -> float:
    """Requests per second the explorer's server completes with every request queued at once.

    The Offline rate of :data:`SATURATION_PROBE_REQUESTS` requests: "load 1.0" in the
    tail explorer. Cached per argument set.
    """
    requests = _explorer_requests(output_cv, seed + 1, SATURATION_PROBE_REQUESTS)
    sch = Scheduler(max_batch=max_batch, token_budget=max(2048, max_batch))
    return offline_throughput(explorer_replica(), requests, sch).requests_per_s


@dataclass(frozen=True)
class TailView:
    """One run of the tail explorer: sorted TTFTs and TPOTs and their percentiles.

    ``mean_batch`` is the mean number of requests in the system (queued or
    running), from Little's law: the sum of end-to-end latencies over the run time.

    Used in chapter 'Batching'.
    """

    load: float
    rate_per_s: float
    ttft_sorted_s: np.ndarray
    tpot_sorted_s: np.ndarray
    percentiles: dict[str, float]
    throughput_tok_s: float
    mean_batch: float


def tail_explorer_compute(load: float = 0.7, max_batch: int = 256, output_cv: float = 1.0,
                          seed: int = 0) -> TailView:
    """The tail explorer's pure function: Poisson traffic at ``load`` x the saturation rate.

    ``load`` is the offered rate as a fraction of :func:`saturation_rate_per_s`;
    ``max_batch`` the most requests in flight; ``output_cv`` the coefficient of
    variation of output lengths (0: all 294 tokens). Simulates
    ``EXPLORER_REQUESTS`` requests with chunked prefill on
    :func:`explorer_replica` and returns p50, p99 and p99.9 of TTFT and TPOT.

    Raises ``ValueError`` naming the argument for a load outside (0, 2], a batch
    limit below 1 or a negative spread.

    Used in chapter 'Batching'.
    """
    if (not isinstance(load, numbers.Real) or isinstance(load, bool)
            or not math.isfinite(load) or not 0 < load <= 2):
        raise ValueError(f"load: {load!r} is not allowed; give a fraction of saturation in (0, 2]")
    max_batch = _whole("max_batch", max_batch)
    if (not isinstance(output_cv, numbers.Real) or isinstance(output_cv, bool)
            or not math.isfinite(output_cv) or output_cv < 0):
        raise ValueError(f"output_cv: {output_cv!r} is not allowed; give a number >= 0")
    output_cv = round(float(output_cv), 3)
    rate = load * saturation_rate_per_s(max_batch, output_cv, seed)
    requests = _explorer_requests(output_cv, seed).at_rate(rate)
    sch = Scheduler(max_batch=max_batch, token_budget=max(2048, max_batch))
    run = simulate(explorer_replica(), requests, sch)
    percentiles = {f"{metric}_p{q:g}": run.percentile(metric, q)
                   for metric in ("ttft", "tpot") for q in (50, 99, 99.9)}
    tpot = run.tpot_s
    mean_batch = float(np.sum(run.e2e_s) / run.makespan_s)  # Little's law
    return TailView(float(load), rate, np.sort(run.ttft_s), np.sort(tpot[np.isfinite(tpot)]),
                    percentiles, run.throughput_tok_s, mean_batch)


def _tail_render_factory(ax_ttft, ax_tpot):
    artists = {}
    for ax, metric, label in ((ax_ttft, "ttft", "time to first token (s, log scale)"),
                              (ax_tpot, "tpot", "time per output token (ms)")):
        (line,) = ax.plot([1e-3, 1], [0, 1], color=PALETTE[0], lw=2)
        marks = [ax.axvline(1, color=PALETTE[k + 1], ls="--", lw=1, label=name)
                 for k, name in enumerate(("p50", "p99", "p99.9"))]
        if metric == "ttft":
            ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylim(0, 1.02)
        artists[metric] = (line, marks)
    ax_ttft.set_ylabel("share of requests at or below")
    ax_tpot.legend(loc="center right", fontsize=8)
    label_kind(ax_tpot, "modelled")

    def render(view: TailView) -> str:
        for metric, ax, scale in (("ttft", ax_ttft, 1.0), ("tpot", ax_tpot, 1e3)):
            values = (view.ttft_sorted_s if metric == "ttft" else view.tpot_sorted_s) * scale
            line, marks = artists[metric]
            line.set_data(values, np.arange(1, len(values) + 1) / len(values))
            for mark, q in zip(marks, ("p50", "p99", "p99.9"), strict=True):
                x = view.percentiles[f"{metric}_{q}"] * scale
                mark.set_xdata([x, x])
            if metric == "ttft":
                ax.set_xlim(values[0] * 0.8, values[-1] * 1.25)
            else:
                ax.set_xlim(0, values[-1] * 1.1)
        p = view.percentiles
        return (f"Load {view.load:.2f} of saturation ({view.rate_per_s:.1f} requests/s): "
                f"{view.throughput_tok_s:,.0f} tok/s, {view.mean_batch:.0f} requests in flight "
                f"on average. TTFT p50 {p['ttft_p50']:.2f} s, p99 {p['ttft_p99']:.2f} s, "
                f"p99.9 {p['ttft_p99.9']:.2f} s; TPOT p50 {p['tpot_p50'] * 1e3:.0f} ms, "
                f"p99 {p['tpot_p99'] * 1e3:.0f} ms, p99.9 {p['tpot_p99.9'] * 1e3:.0f} ms.")

    return render


@register("batch_tail", kind="simulation", chapter="03_batching")
def tail_explorer() -> Explorer:
    """Sliders: offered load, batch limit, spread of output lengths.

    Used in chapter 'Batching'.
    """
    import ipywidgets as w

    controls = {
        "load": w.FloatSlider(value=0.7, min=0.1, max=1.2, step=0.05, description="load"),
        "max_batch": w.IntSlider(value=256, min=8, max=512, step=8, description="max batch"),
        "output_cv": w.FloatSlider(value=1.0, min=0.0, max=2.0, step=0.1,
                                   description="output spread"),
    }
    fig, (ax_ttft, ax_tpot) = figure(1, 2, figsize=(9, 3.6))
    render = _tail_render_factory(ax_ttft, ax_tpot)
    defaults = {name: control.value for name, control in controls.items()}
    _freeze_layout(fig, render, tail_explorer_compute(**defaults))
    plt.close(fig)
    return Explorer(tail_explorer_compute, render, controls, fig)
