"""The simulated serving engines, and the prefill policies that fill their steps.

A :class:`~inferlab.serving.scheduler.Scheduler` is a configuration; the engines here run
it. :class:`ContinuousEngine` is iteration-level scheduling (Orca; vLLM and TensorRT-LLM):
at every step it admits what the memory policy allows and retires what has finished, and
between two such events it advances over a whole run of decode-only steps in closed form
(:func:`advance`). How prompt work enters its steps is a prefill policy
(:class:`WholePrefill`, :class:`RoundPrefill`, :class:`ChunkedPrefill`,
:class:`DisaggregatedPrefill`). :class:`StaticEngine` is the older static batching. Both
share :class:`Arrivals` (open and closed loops) and return a :class:`Record`.

Used in chapter 'Batching'.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from inferlab.common import checks
from inferlab.serving.scheduler import FixedShape, PrefillPool, Scheduler


class PrefillPolicy:
    """How prompt work enters the steps (see ``step``)."""

    def step(self, engine: ContinuousEngine) -> bool:
        """Run one step that prefills, if there is prompt work to do now; say whether it did."""
        raise NotImplementedError


class ChunkedPrefill(PrefillPolicy):
    """Every step carries one decode token per running request and fills the rest of the
    token budget with pieces of waiting prompts (Sarathi-Serve; vLLM's chunked prefill)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def step(self, engine: ContinuousEngine) -> bool:
        e = engine
        prefilling, waiting = e.prefilling, e.waiting
        if not (prefilling or (waiting and e.can_admit(waiting[0]))):
            return False
        grows = e.grows
        if grows:
            while e.n_run and e.kv_used + e.n_run > e.capacity:
                e.preempt_last()
        n_run = e.n_run
        room = self.budget - n_run
        chunk_tokens = chunk_ctx = 0
        chunk_pairs = 0  # causal (query, key) pairs of the prompt pieces
        finishing = 0    # prompts whose last position this step computes: rows of logits
        cur_prompt = e.cur_prompt
        for entry in prefilling:
            if room <= 0:
                break
            i, done_tokens = entry
            take = min(cur_prompt[i] - done_tokens, room)
            entry[1] = done_tokens + take
            finishing += entry[1] == cur_prompt[i]
            room -= take
            chunk_tokens += take
            chunk_ctx += done_tokens + take
            chunk_pairs += take * done_tokens + take * (take + 1) // 2
        if room > 0 and waiting:
            hold, reserved = e.memory.hold, e.reserved
            while room > 0 and waiting and e.can_admit(waiting[0]):
                i = waiting.popleft()
                take = min(cur_prompt[i], room)
                reserved[i] = hold(cur_prompt[i])
                e.kv_used += reserved[i]
                prefilling.append([i, take])
                finishing += take == cur_prompt[i]
                room -= take
                chunk_tokens += take
                chunk_ctx += take
                chunk_pairs += take * (take + 1) // 2
        tokens = n_run + chunk_tokens
        ctx_sum = e.ctx_sum
        step = e.step_time(tokens, ctx_sum + chunk_ctx, ctx_sum + chunk_pairs,
                           n_run + finishing)
        t = e.t
        e.segments.append((t, 1, step, 0.0, n_run, chunk_tokens))
        t += step
        e.t = t
        e.busy += step
        e.computed += tokens
        if n_run:
            decode_steps = e.decode_steps + 1
            e.decode_steps = decode_steps
            e.ctx_sum = ctx_sum + n_run
            if grows:
                e.kv_used += n_run
            if e.retire[0][0] <= decode_steps:  # most steps retire nobody: skip the call
                e.retire_due(t)
        if prefilling and prefilling[0][1] >= cur_prompt[prefilling[0][0]]:
            finished = []
            while prefilling and prefilling[0][1] >= cur_prompt[prefilling[0][0]]:
                finished.append(prefilling.popleft()[0])
            for i in finished:
                e.prefill_done(i, t)
        return True


class WholePrefill(PrefillPolicy):
    """Admitted prompts are prefilled whole, in a step of their own, while the running
    requests wait for it (their next token is delayed); as many as ``budget`` tokens
    take, though one prompt is always admitted whole. A fixed shape pads each prompt
    to its compiled bucket."""

    def __init__(self, budget: int, shape: FixedShape | None) -> None:
        self.budget = budget
        self.shape = shape

    def step(self, engine: ContinuousEngine) -> bool:
        e = engine
        if not e.admissible():
            return False
        batch, tokens, pairs = [], 0, 0
        waiting, cur_prompt, shape = e.waiting, e.cur_prompt, self.shape
        while waiting and e.can_admit(waiting[0]):
            i = waiting[0]
            size = shape.pad_prompt(cur_prompt[i]) if shape is not None else cur_prompt[i]
            if batch and tokens + size > self.budget:
                break
            waiting.popleft()
            e.reserved[i] = e.memory.hold(cur_prompt[i])
            e.kv_used += e.reserved[i]
            batch.append(i)
            e.admitting += 1
            tokens += size
            pairs += size * (size + 1) // 2
        e.admitting = 0
        useful = sum(cur_prompt[i] for i in batch)
        step = e.step_time(tokens, tokens, pairs, len(batch))
        e.segments.append((e.t, 1, step, 0.0, 0, tokens))
        e.t += step
        e.busy += step
        e.computed += tokens
        e.wasted += tokens - useful
        for i in batch:
            e.prefill_done(i, e.t)
        return True


class RoundPrefill(WholePrefill):
    """Whole prefill decided once per scheduling round (vLLM's multi-step scheduling):
    the running requests decode ``steps`` steps between decisions, and at a round's end
    a prefill step runs only if fewer than ``max_batch`` requests are in flight and
    ``min_queries`` prompts are queued, or the last round's end ran none (AMD's patch to
    vLLM's scheduler for MLPerf, ``add-MIN_REQUIRE_PREFILL_QUERY-condition.patch``).
    An engine with nothing running prefills at once."""

    def __init__(self, budget: int, steps: int, min_queries: int) -> None:
        super().__init__(checks.whole("budget", budget), None)
        self.steps = checks.whole("steps", steps)
        self.min_queries = checks.whole("min_queries", min_queries)
        self.round_end = 0       # the decode step at which the current round ends
        self.passed_last = True  # whether the last round's end ran no prefill

    def step(self, engine: ContinuousEngine) -> bool:
        e = engine
        if e.n_run:
            if e.decode_steps < self.round_end:
                return False
            # The round's end: the engine's decode runs stop here (decode_steps_left).
            self.round_end = e.decode_steps + self.steps
            go = (e.n_run + len(e.prefilling) < e.max_batch
                  and (len(e.waiting) >= self.min_queries or self.passed_last))
            self.passed_last = not go
            if not go:
                return False
        if not super().step(e):
            return False
        self.round_end = e.decode_steps + self.steps
        return True

    def decode_steps_left(self, engine: ContinuousEngine) -> int:
        """Decode steps until the current round's end (at least one)."""
        return max(self.round_end - engine.decode_steps, 1)


class DisaggregatedPrefill(PrefillPolicy):
    """Prefill happens on a :class:`~inferlab.serving.scheduler.PrefillPool`; the replica only
    decodes. A request enters the decode replica with its first token made and its prompt's
    cache transferred, so no decode step ever carries prompt work."""

    def __init__(self, pool: PrefillPool) -> None:
        self.pool = pool

    def step(self, engine: ContinuousEngine) -> bool:
        e = engine
        admitted = False
        while e.admissible():
            i = e.waiting.popleft()
            e.reserved[i] = e.memory.hold(e.cur_prompt[i])
            e.kv_used += e.reserved[i]
            e.prefill_done(i, e.t)
            admitted = True
        return admitted


def prefill_policy(scheduler: Scheduler) -> PrefillPolicy:
    """The prefill policy ``scheduler`` chooses."""
    if scheduler.disaggregated is not None:
        return DisaggregatedPrefill(scheduler.disaggregated)
    if scheduler.chunked_prefill:
        return ChunkedPrefill(scheduler.token_budget)
    if scheduler.in_rounds:
        return RoundPrefill(scheduler.token_budget, scheduler.scheduler_steps,
                            scheduler.min_prefill_queries)
    return WholePrefill(scheduler.token_budget, scheduler.fixed_shape)


def elapsed(k: int, m0: float, m1: float) -> float:
    """Total time of decode steps ``j = 0 .. k-1`` when step ``j`` takes ``m0 + m1 j``.

    ``k`` from 0 to ``inferlab.common.checks.MAX_COUNT``, ``m0`` and ``m1`` seconds >= 0.
    """
    total = _elapsed(checks.whole("k", k, minimum=0), checks.non_negative("m0", m0),
                     checks.non_negative("m1", m1))
    return checks.finite_result(total, "k", "m0", "m1")


def advance(m0: float, m1: float, k_max: int, tau: float) -> tuple[int, float]:
    """Run up to ``k_max`` decode steps, stopping early at the first step that ends at or
    after ``tau`` seconds from now. Returns the steps run and the time they took.

    Step ``j`` takes ``m0 + m1 j``: while the batch is fixed only its cache reads
    grow, by ``m1`` a step, as every running request's context grows by one token
    (the step model is memory-bound in decode: see :meth:`inferlab.model.steptime.Replica.step_s`).
    The sum is quadratic in ``k`` and is inverted exactly, so a long run costs as
    little as a short one. ``tau`` may be ``math.inf``: no step stops the run early.
    """
    m0, m1 = checks.non_negative("m0", m0), checks.non_negative("m1", m1)
    k_max = checks.whole("k_max", k_max)
    if tau != math.inf:
        tau = checks.non_negative("tau", tau)
    checks.finite_result(_elapsed(k_max, m0, m1), "m0", "m1", "k_max")
    return _advance(m0, m1, k_max, tau)


def _elapsed(k: int, m0: float, m1: float) -> float:
    return k * m0 + m1 * k * (k - 1) / 2


def _advance(m0: float, m1: float, k_max: int, tau: float) -> tuple[int, float]:
    total = _elapsed(k_max, m0, m1)
    if total < tau:
        return k_max, total
    # The first k with elapsed(k) >= tau, a root of (m1/2) k^2 + (m0 - m1/2) k = tau.
    linear = m0 - m1 / 2
    if m1 > 0:
        # hypot keeps the square root finite where linear**2 would overflow, and where m1
        # is tiny beside m0 dividing by the sum keeps the digits a difference would cancel:
        # a root that far off would leave the settling loops below millions of steps to walk.
        spread = math.hypot(linear, math.sqrt(2 * m1) * math.sqrt(max(tau, 0.0)))
        root = tau / (linear + spread) * 2 if linear > 0 else (spread - linear) / m1
    else:
        root = tau / m0 if m0 > 0 else k_max
    # ceil of an infinite root (a step time near zero) would raise: it is k_max anyway.
    k = math.ceil(root) if root < k_max else k_max
    k = int(min(max(k, 1), k_max))
    # The root is exact but floating point is not: settle on the integer either side.
    while k > 1 and _elapsed(k - 1, m0, m1) >= tau:
        k -= 1
    while k < k_max and _elapsed(k, m0, m1) < tau:
        k += 1
    return k, _elapsed(k, m0, m1)


class Arrivals:
    """The queue of requests not yet arrived. A closed loop sends request ``k + users``
    when one of its users' requests finishes; an open loop has every time fixed."""

    def __init__(self, requests, ready_s: np.ndarray | None = None) -> None:
        n = len(requests)
        self.n = n
        self.incoming: deque = deque()
        if requests.kind == "closed":
            users = min(requests.concurrency, n)
            self.incoming.extend((0.0, i) for i in range(users))
            self.next_closed = users
        elif ready_s is None:
            self.incoming.extend(zip(requests.arrival_s.tolist(), range(n), strict=True))
            self.next_closed = n
        else:
            # Caches from a prefill pool reach the replica in the order they are ready.
            order = np.argsort(ready_s, kind="stable")
            self.incoming.extend((float(ready_s[i]), int(i)) for i in order)
            self.next_closed = n

    def finished(self, when: float) -> None:
        """A request finished at ``when``: a closed loop's user sends the next one."""
        if self.next_closed < self.n:
            self.incoming.append((when, self.next_closed))
            self.next_closed += 1


@dataclass
class Record:
    """What one engine run produced, in request order, for the simulator's result."""

    arrival: list
    first: list
    finish: list
    preempt: list
    segments: list
    busy: float
    computed: int
    wasted: int
    join: list
    final_tokens: list
    history: dict


class ContinuousEngine:
    """Iteration-level scheduling of one replica with a memory and a prefill policy.

    The engine's state is plain lists and counters, read by the policies: ``waiting``
    (a queue of request indices), ``prefilling`` (``[index, prompt tokens done]``),
    ``running`` (index -> the decode step it joined at, in admission order) and a heap
    of when each running request will finish.
    """

    def __init__(self, rep, requests, scheduler: Scheduler) -> None:
        self.step_time = rep.step_function()
        self.kv_s = rep.kv_s_per_token
        n = len(requests)
        self.n = n
        self.prompt = requests.prompt_tokens.tolist()
        self.out = requests.output_tokens.tolist()
        self.arrival = [math.nan] * n
        self.first = [math.nan] * n
        self.finish = [math.nan] * n
        self.preempt = [0] * n
        self.join_step = [-1] * n
        self.final_tokens = [0] * n
        self.history: dict[int, list] = {}
        self.capacity = rep.kv_capacity_tokens
        self.max_batch = scheduler.max_batch
        self.memory = scheduler.memory_policy(self.capacity, requests)
        self.prompt_share, self.admit_extra = self.memory.prompt_share, self.memory.extra
        self.grows = self.memory.grows
        self.prefill = prefill_policy(scheduler)
        self.rounds = self.prefill if isinstance(self.prefill, RoundPrefill) else None
        self.shape = scheduler.fixed_shape
        self.disaggregated = scheduler.disaggregated is not None
        if self.disaggregated:
            if requests.kind == "closed":
                raise ValueError("requests: a disaggregated server is simulated with open-loop "
                                 "(Poisson or all-at-once) arrivals")
            prefilled, ready = scheduler.disaggregated.ready_s(requests.arrival_s,
                                                               requests.prompt_tokens)
            self.prefilled = prefilled.tolist()
            self.arrivals = Arrivals(requests, ready)
        else:
            self.arrivals = Arrivals(requests)
        self.cur_prompt = list(self.prompt)  # tokens to prefill at admission (grows on preemption)
        self.remaining = list(self.out)      # output tokens still to produce
        self.reserved = [0] * n              # KV tokens held from admission (non-growing policies)
        self.ctx_at_join = [0] * n
        self.rem_at_join = [0] * n
        self.epoch = [0] * n
        self.waiting: deque = deque()
        self.prefilling: deque = deque()
        self.running: dict[int, int] = {}
        self.retire: list = []
        self.n_run = 0
        self.ctx_sum = 0      # context tokens of the running requests
        self.kv_used = 0      # KV tokens held (paged: ctx + prefilling prompts)
        self.decode_steps = 0
        self.t = 0.0
        self.busy = 0.0
        self.computed = 0
        self.wasted = 0
        self.segments: list = []
        self.done = 0
        self.admitting = 0    # prompts taken into the prefill step being formed
        # Set by LockStep: where the requests whose first token or finish a step records
        # are listed.
        self.events: list | None = None

    # ---- what the policies ask ------------------------------------------------------

    def can_admit(self, i: int) -> bool:
        """Whether request ``i`` may be admitted now (batch limit and memory policy)."""
        if self.n_run + len(self.prefilling) + self.admitting >= self.max_batch:
            return False
        return (self.kv_used + self.prompt_share * self.cur_prompt[i] + self.admit_extra
                <= self.capacity)

    def admissible(self) -> bool:
        """Whether the head of the queue may be admitted now."""
        waiting = self.waiting
        return bool(waiting) and self.can_admit(waiting[0])

    # ---- what happens to requests ---------------------------------------------------

    def finish_request(self, i: int, when: float) -> None:
        self.finish[i] = when
        self.done += 1
        self.arrivals.finished(when)
        if self.events is not None:
            self.events.append(i)

    def prefill_done(self, i: int, when: float) -> None:
        """Request i's prefill ended at ``when``: it has a token; it joins the batch or finishes."""
        if self.events is not None:
            self.events.append(i)
        if math.isnan(self.first[i]):
            # A disaggregated request got its first token from the prefill pool.
            self.first[i] = self.prefilled[i] if self.disaggregated else when
        if self.preempt[i]:
            self.history[i].append(("prefill", when, 0))
        remaining = self.remaining[i] - 1
        self.remaining[i] = remaining
        grows = self.grows
        prompt = self.cur_prompt[i]
        if grows:
            self.kv_used -= prompt
        if remaining == 0:
            if not grows:
                self.kv_used -= self.reserved[i]
            self.finish_request(i, when)
            return
        steps = self.decode_steps
        self.running[i] = steps
        self.join_step[i] = steps
        self.final_tokens[i] = remaining
        self.ctx_at_join[i] = prompt + 1
        self.rem_at_join[i] = remaining
        self.n_run += 1
        self.ctx_sum += prompt + 1
        if grows:
            self.kv_used += prompt + 1
        heapq.heappush(self.retire, (steps + remaining, i, self.epoch[i]))

    def retire_due(self, when: float) -> None:
        retire, epoch, grows = self.retire, self.epoch, self.grows
        while retire and retire[0][0] <= self.decode_steps:
            _, i, stamp = heapq.heappop(retire)
            if stamp != epoch[i]:
                continue
            del self.running[i]
            self.n_run -= 1
            context = self.ctx_at_join[i] + self.rem_at_join[i]
            self.ctx_sum -= context
            self.kv_used -= context if grows else self.reserved[i]
            self.remaining[i] = 0
            self.finish_request(i, when)

    def preempt_last(self) -> None:
        """Drop the most recently admitted running request's cache and queue it again, to be
        recomputed from its prompt and the tokens it already produced (vLLM's policy)."""
        i = next(reversed(self.running))
        joined = self.running.pop(i)
        produced = self.decode_steps - joined
        context = self.ctx_at_join[i] + produced
        self.n_run -= 1
        self.ctx_sum -= context
        self.kv_used -= context
        self.epoch[i] += 1
        self.preempt[i] += 1
        record = self.history.setdefault(i, [("prefill", self.first[i], 0)])
        if produced:
            record.append(("decode", joined + 1, self.decode_steps))
        self.remaining[i] = self.rem_at_join[i] - produced
        self.cur_prompt[i] = context
        self.join_step[i] = -1
        self.final_tokens[i] = 0
        self.waiting.appendleft(i)

    # ---- the loop ---------------------------------------------------------------------

    def decode_run(self) -> None:
        """A run of decode-only steps until the next event (a retirement, a full cache, or an
        arrival that could be admitted). Between events a step's time is linear in the
        context, which grows by one token per running request per step: ``m0 + m1 j``."""
        plan = self.decode_plan()
        if plan is None:
            return
        m0, m1, k_max, tau = plan[:4]
        k, took = _advance(m0, m1, k_max, tau)
        self.decode_apply(plan, k, took, took, ((self.t, k, m0, m1),))

    def decode_plan(self) -> tuple | None:
        """The next run of decode-only steps, ``(m0, m1, k_max, tau, batch, wasted per
        step)``: step ``j`` of it takes ``m0 + m1 j``, it may run ``k_max`` steps, and it
        stops at the first step ending ``tau`` seconds from now or later (an arrival that
        could be admitted). ``None`` if the cache was full and a request was preempted
        instead."""
        if self.n_run == 0:
            raise RuntimeError("simulate: no request running and none admissible; "
                               "this is a bug in the simulator")
        retire, epoch = self.retire, self.epoch
        while retire[0][2] != epoch[retire[0][1]]:
            heapq.heappop(retire)  # left behind by a preempted request
        n_run = self.n_run
        k_max = retire[0][0] - self.decode_steps
        if self.grows:
            if self.kv_used + n_run > self.capacity:
                self.preempt_last()
                return None
            k_max = min(k_max, (self.capacity - self.kv_used) // n_run)
        # Stop at the next arrival only if it could be admitted then; otherwise it waits anyway.
        tau = math.inf
        incoming = self.arrivals.incoming
        if self.rounds is not None:
            # In rounds, a prompt is admitted only at a round's end, wherever it arrives.
            k_max = min(k_max, self.rounds.decode_steps_left(self))
        elif not self.waiting and incoming and n_run + len(self.prefilling) < self.max_batch:
            tau = incoming[0][0] - self.t
        if self.shape is not None:
            batch = self.shape.pad_batch(n_run)
            slot = self.memory.slot_tokens
            return (self.step_time(batch, batch * slot, batch * slot, batch), 0.0, k_max, tau,
                    batch, batch - n_run)
        return (self.step_time(n_run, self.ctx_sum, self.ctx_sum, n_run),
                self.kv_s * n_run, k_max, tau, n_run, 0)

    def decode_apply(self, plan: tuple, k: int, took: float, own: float, pieces) -> None:
        """Advance ``k`` steps of the run ``plan`` (:meth:`decode_plan`) that took ``took``
        seconds, ``own`` of them this engine's work (less where it waited for other lanes),
        recorded as ``pieces`` of ``(start, steps, m0, m1)``."""
        n_run, batch, wasted_per_step = self.n_run, plan[4], plan[5]
        self.segments.extend((start, steps, m0, m1, n_run, 0) for start, steps, m0, m1 in pieces)
        t = self.t + took
        self.t = t
        self.busy += own
        self.computed += k * batch
        if wasted_per_step:
            self.wasted += k * wasted_per_step
        self.decode_steps += k
        self.ctx_sum += k * n_run
        if self.grows:
            self.kv_used += k * n_run
        self.retire_due(t)

    def admit_arrived(self) -> None:
        """Everything that has arrived by now joins the queue."""
        incoming, waiting, arrival = self.arrivals.incoming, self.waiting, self.arrival
        while incoming and incoming[0][0] <= self.t:
            when, i = incoming.popleft()
            arrival[i] = when
            waiting.append(i)

    @property
    def busy_now(self) -> bool:
        """Whether there is work to do at this moment (requests running, prompts being
        prefilled or queued)."""
        return bool(self.n_run or self.prefilling or self.waiting)

    def run(self) -> Record:
        incoming = self.arrivals.incoming
        n = self.n
        while self.done < n:
            self.admit_arrived()
            if not self.busy_now:
                if not incoming:
                    raise RuntimeError("simulation stalled with requests left")  # cannot happen
                self.t = max(self.t, incoming[0][0])
                continue
            if not self.prefill.step(self):
                self.decode_run()
        return self.record()

    def record(self) -> Record:
        """What the run produced, for the simulator's result."""
        return Record(self.arrival, self.first, self.finish, self.preempt, self.segments,
                      self.busy, self.computed, self.wasted, self.join_step, self.final_tokens,
                      self.history)


class StaticEngine:
    """Static batching: wait until ``max_batch`` requests are queued (or the oldest has
    waited ``batch_timeout_s``, or no more will come), prefill them together padded to the
    longest prompt, then decode until the longest output is done, finished requests
    keeping their slot and cache until then. Memory holds each slot's padded prompt plus
    the reserved output."""

    def __init__(self, rep, requests, scheduler: Scheduler) -> None:
        self.rep, self.requests, self.sch = rep, requests, scheduler

    def run(self) -> Record:
        rep, requests, sch = self.rep, self.requests, self.sch
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
        arrivals = Arrivals(requests)
        incoming = arrivals.incoming
        closed = requests.kind == "closed"
        waiting: deque = deque()
        segments: list = []
        t = busy = 0.0
        computed = wasted = decode_steps = done = 0
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
            # Compare against the same sum the wait below jumps to: (a + b) - a can fall
            # short of b, and the loop would wait for ever.
            timed_out = t >= arrival[waiting[0]] + sch.batch_timeout_s
            if not (full or nothing_more or timed_out):
                # Wait for the next arrival or the head's timeout, whichever is first.
                t = min(incoming[0][0], arrival[waiting[0]] + sch.batch_timeout_s)
                continue
            members = self._batch(waiting, prompt, reserve_out, capacity)
            size = len(members)
            longest_prompt = max(prompt[i] for i in members)
            tokens = size * longest_prompt
            step = step_time(tokens, tokens, size * longest_prompt * (longest_prompt + 1) // 2,
                             size)
            segments.append((t, 1, step, 0.0, 0, tokens))
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
                m0 = step_time(size, context, context, size)
                m1 = kv_s * size
                segments.append((t, steps_needed, m0, m1, size, 0))
                for i in members:
                    join_step[i] = decode_steps
                    finish[i] = t + _elapsed(out[i] - 1, m0, m1)
                took = _elapsed(steps_needed, m0, m1)
                t += took
                busy += took
                computed += size * steps_needed
                wasted += sum(longest_out - out[i] for i in members)
                decode_steps += steps_needed
            else:
                for i in members:
                    finish[i] = t
            done += size
            if closed:
                for when in sorted(finish[i] for i in members):
                    arrivals.finished(when)
        final_tokens = [count - 1 for count in out]
        return Record(arrival, first, finish, [0] * n, segments, busy, computed, wasted,
                      join_step, final_tokens, {})

    def _batch(self, waiting: deque, prompt: list, reserve_out: int, capacity: int) -> list:
        """Take from the queue the longest prefix whose padded rectangle of cache fits."""
        size = min(self.sch.max_batch, len(waiting))
        members = [waiting[j] for j in range(size)]
        while size > 1 and size * (max(prompt[i] for i in members[:size])
                                   + reserve_out) > capacity:
            size -= 1
        for _ in range(size):
            waiting.popleft()
        return members[:size]

