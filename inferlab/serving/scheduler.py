"""How a serving replica picks the tokens of each step: a configuration and its memory policies.

The serving simulator (:mod:`inferlab.serving.simulator`) runs one replica step by step.
What goes into each step is decided here, in the manner of vidur's replica
schedulers: a :class:`Scheduler` is a configuration, and it chooses

- a **memory policy** (:class:`PagedMemory`, :class:`ReservedMemory`,
  :class:`FixedSlots`): how much KV cache a request holds when it is admitted,
  whether the cache grows token by token, and whether a request may be admitted
  now;
- a **prefill policy** (:class:`~inferlab.serving.engines.WholePrefill`,
  :class:`~inferlab.serving.engines.RoundPrefill`,
  :class:`~inferlab.serving.engines.ChunkedPrefill`,
  :class:`~inferlab.serving.engines.DisaggregatedPrefill`): how prompt work enters the
  replica's steps.

The engines that run a configuration, and the prefill policies they step with, are in
:mod:`inferlab.serving.engines`.

Used in chapter 'Batching'.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from inferlab.common import checks

SCHEDULER_KINDS = ("continuous", "static")
KV_POLICIES = ("paged", "reserve")

#: Share of the KV cache a paged server keeps free when admitting (vLLM's default watermark).
PAGED_WATERMARK_FRACTION = 0.01

#: How long a static batcher lets the oldest queued request wait for a fuller batch
#: before it launches what is queued, 10 ms, the default ``batch_wait_timeout_s`` of
#: Ray Serve's ``@serve.batch`` (docs.ray.io, ``ray.serve.batch``). Triton's dynamic
#: batcher waits not at all unless ``max_queue_delay_microseconds`` is set. Beside LLM
#: batches that run for seconds either is short, and a batch leaves with whatever queued
#: while the one before it ran. ``math.inf`` models a batcher that waits for a full batch.
STATIC_BATCH_TIMEOUT_S = 0.01


def _buckets(name: str, values) -> tuple[int, ...]:
    return tuple(int(item) for item in checks.wholes(name, values, increasing=True))


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
        checks.whole("context_tokens", self.context_tokens)

    def pad_prompt(self, tokens: int) -> int:
        """The compiled prompt length ``tokens`` is padded to."""
        for bucket in self.prompt_buckets:
            if bucket >= tokens:
                return bucket
        checks.whole("tokens", tokens)
        raise ValueError(f"tokens: {tokens} is longer than the largest compiled prompt "
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

    ``max_batch`` is the most requests in flight (running or being prefilled); ``token_budget``
    the most tokens in one step (for chunked prefill, decode tokens included; without chunking,
    the most prompt tokens prefilled in one step, though one prompt is always admitted whole).
    ``reserve_output_tokens`` is the output room a ``"reserve"`` policy holds per request
    (``None``: the longest output among the requests, as if the server knew the cap).
    ``disaggregated`` moves every prefill to a separate prefill pool
    (:class:`~inferlab.serving.engines.DisaggregatedPrefill`; DistServe, Splitwise, NVIDIA
    Dynamo): the replica only decodes, and each request joins it ``prefill_s`` of a
    :class:`PrefillPool` after it arrives. ``batch_timeout_s`` is a static batcher's
    queue timeout: a batch launches when ``max_batch`` requests are queued or when
    the oldest has waited this long (``STATIC_BATCH_TIMEOUT_S`` by default).

    Two settings of vLLM's scheduler without chunked prefill, as AMD's MLPerf engines set
    them: ``scheduler_steps`` decode steps run per scheduling round (vLLM's
    ``num_scheduler_steps``), so a prompt that arrives mid-round waits for its end; and
    at a round's end a prefill step waits, while requests are running, for
    ``min_prefill_queries`` prompts in the queue, though never at two ends running
    (AMD's ``VLLM_LLAMA2_MLPERF_MIN_REQUIRE_PREFILL_QUERY``). Both are 1 by default:
    every step is a round, and one prompt is enough.

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
    batch_timeout_s: float = STATIC_BATCH_TIMEOUT_S
    fixed_shape: FixedShape | None = None
    disaggregated: PrefillPool | None = None
    scheduler_steps: int = 1
    min_prefill_queries: int = 1

    def __post_init__(self) -> None:
        checks.option("kind", self.kind, SCHEDULER_KINDS)
        checks.whole("scheduler_steps", self.scheduler_steps)
        checks.whole("min_prefill_queries", self.min_prefill_queries)
        if self.in_rounds and (
                self.kind != "continuous" or self.chunked_prefill or self.fixed_shape is not None
                or self.disaggregated is not None):
            raise ValueError("scheduler_steps, min_prefill_queries: scheduling rounds are "
                             "modelled for continuous batching with whole prefill "
                             "(chunked_prefill=False, no fixed shape, not disaggregated)")
        checks.option("kv_policy", self.kv_policy, KV_POLICIES)
        checks.whole("max_batch", self.max_batch)
        checks.whole("token_budget", self.token_budget)
        if self.reserve_output_tokens is not None:
            checks.whole("reserve_output_tokens", self.reserve_output_tokens)
        # math.inf is allowed: it is the static batcher's "wait for a full batch".
        if self.batch_timeout_s != math.inf:
            checks.non_negative("batch_timeout_s", self.batch_timeout_s)
        if self.kind == "continuous" and self.chunked_prefill and self.fixed_shape is None \
                and self.disaggregated is None and self.token_budget < self.max_batch:
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
        if self.disaggregated is not None:
            if not isinstance(self.disaggregated, PrefillPool):
                raise ValueError(f"disaggregated: {self.disaggregated!r} is not a PrefillPool")
            if self.kind != "continuous" or self.fixed_shape is not None:
                raise ValueError("disaggregated: a prefill pool feeds a continuous-batching "
                                 "decode replica without a fixed shape")

    @property
    def in_rounds(self) -> bool:
        """Whether prefill is decided in scheduling rounds
        (:class:`~inferlab.serving.engines.RoundPrefill`)."""
        return self.scheduler_steps > 1 or self.min_prefill_queries > 1

    def memory_policy(self, capacity: int, requests) -> MemoryPolicy:
        """The memory policy this configuration chooses, for a cache of ``capacity`` tokens."""
        if self.fixed_shape is not None:
            return FixedSlots(capacity, self.fixed_shape)
        if self.kv_policy == "paged":
            return PagedMemory(capacity)
        reserve = (self.reserve_output_tokens if self.reserve_output_tokens is not None
                   else int(np.max(requests.output_tokens)))
        return ReservedMemory(capacity, reserve)



# --------------------------------------------------------------------------------------
# Memory policies
# --------------------------------------------------------------------------------------


class MemoryPolicy:
    """How a request's KV cache is held. ``grows``: the cache grows one token per decode
    step (and a full cache forces a preemption); otherwise the admission holds it all."""

    grows = False
    #: Admission needs ``prompt_share x prompt + extra`` free tokens (kept as two numbers so
    #: the engine's hot loop tests them without a call).
    prompt_share = 1
    extra = 0

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity

    def hold(self, prompt_tokens: int) -> int:
        """Tokens a request holds from its admission."""
        raise NotImplementedError


class PagedMemory(MemoryPolicy):
    """PagedAttention: memory is taken as tokens are produced (block rounding ignored).

    Like vLLM, admit only while a sliver of the cache (``PAGED_WATERMARK_FRACTION``)
    stays free for the running requests to grow into; without it a paged server
    thrashes, admitting and preempting in turn.
    """

    grows = True

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.watermark = int(PAGED_WATERMARK_FRACTION * capacity)
        self.extra = 1 + self.watermark  # room for the first output token, and the watermark

    def hold(self, prompt_tokens: int) -> int:
        return prompt_tokens


class ReservedMemory(MemoryPolicy):
    """Each request holds its prompt plus ``reserve_output_tokens`` from the start."""

    def __init__(self, capacity: int, reserve_output_tokens: int) -> None:
        super().__init__(capacity)
        self.reserve = self.extra = reserve_output_tokens

    def hold(self, prompt_tokens: int) -> int:
        return prompt_tokens + self.reserve


class FixedSlots(MemoryPolicy):
    """A fixed-shape server: every slot holds (and every step reads) the compiled context."""

    prompt_share = 0

    def __init__(self, capacity: int, shape: FixedShape) -> None:
        super().__init__(capacity)
        self.shape = shape
        self.slot_tokens = self.extra = shape.context_tokens

    def hold(self, prompt_tokens: int) -> int:
        return self.slot_tokens


# --------------------------------------------------------------------------------------
# Prefill policies
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrefillPool:
    """A separate pool of chips that only prefills, for disaggregated serving.

    ``prefill_s(prompt_tokens)`` is the time one prompt takes on the pool (a
    prefill replica's :meth:`inferlab.model.steptime.Replica.prefill_s`), called once with the
    array of every prompt's length (a constant is taken for each); ``servers`` is
    how many prompts the pool works on at once, first come first served;
    ``transfer_bytes_per_s`` the link the KV cache crosses to the decode replica
    (``kv_bytes_per_token`` per prompt token). The pool's own queueing is
    simulated; its steps do not mix with the decode replica's.

    Used in chapter 'Batching'.
    """

    prefill_s: object
    kv_bytes_per_token: float
    transfer_bytes_per_s: float
    servers: int = 1

    def __post_init__(self) -> None:
        if not callable(self.prefill_s):
            raise ValueError("prefill_s: give a function of the prompt length in tokens")
        checks.positive("kv_bytes_per_token", self.kv_bytes_per_token)
        checks.positive("transfer_bytes_per_s", self.transfer_bytes_per_s)
        checks.whole("servers", self.servers, maximum=checks.MAX_ITEMS)

    def ready_s(self, arrival_s: np.ndarray, prompt_tokens: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """When each request's prefill ends (its first token) and when its cache is on the
        decode replica: first-come-first-served queueing, prefill, then the transfer."""
        arrival_s = checks.reals("arrival_s", arrival_s, low=0.0)
        prompt_tokens = checks.wholes("prompt_tokens", prompt_tokens)
        if arrival_s.shape != prompt_tokens.shape:
            raise ValueError(f"prompt_tokens: {prompt_tokens.size} lengths for "
                             f"{arrival_s.size} arrivals in arrival_s; give one per arrival")
        free = [0.0] * self.servers  # when each prefill server is next free (a heap)
        prefilled = np.empty(len(arrival_s))
        ready = np.empty(len(arrival_s))
        # One call for every prompt: a replica's prefill_s takes an array of lengths.
        took = np.broadcast_to(np.asarray(self.prefill_s(prompt_tokens), dtype=float),
                               prompt_tokens.shape).tolist()
        for k, (when, prompt) in enumerate(zip(arrival_s.tolist(), prompt_tokens.tolist(),
                                               strict=True)):
            start = max(when, heapq.heappop(free))
            end = start + took[k]
            heapq.heappush(free, end)
            prefilled[k] = end
            ready[k] = end + prompt * self.kv_bytes_per_token / self.transfer_bytes_per_s
        return prefilled, ready


# --------------------------------------------------------------------------------------
# The closed form of a run of decode steps
# --------------------------------------------------------------------------------------


# The engines call these two once per run of decode steps, with values they computed
# themselves: the public functions above check a caller's values, these do not.


# --------------------------------------------------------------------------------------
# Arrivals, and the two engines
# --------------------------------------------------------------------------------------
