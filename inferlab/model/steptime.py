"""The step-time model of one serving replica: how long one forward pass of a batch takes.

A *replica* is one copy of a model served by ``tp`` chips with tensor parallelism
inside one scale-up domain (:mod:`inferlab.model.feasibility` refuses layouts that do
not fit or cross a domain). Every step of a serving engine is one forward pass
over the tokens it has gathered: one decode token for each running request, plus
any prompt tokens being prefilled. The model of that step has five terms, each a
separate group of kernels that run one after another:

- **matrix multiplies** read the weights once per step and do two FLOPs per active
  parameter per token, the output head's only for the ``logits`` rows the step
  samples from (one per decoded token and one per prompt the step finishes;
  :func:`inferlab.model.roofline.head_flop`). Each is a roofline of its own, with an
  ``overlap`` of the two resources that real kernels only approach::

      weights_s = params_read(tokens) x bytes_per_param / (bandwidth x memory_efficiency)
      matmul_s  = (body_flop x tokens + head_flop x logits) / (peak x compute_efficiency)
      gemm_s    = max(weights_s, matmul_s) + (1 - overlap) x min(weights_s, matmul_s)

  With ``overlap = 1`` it is the ideal roofline; below 1 a step near the ridge
  pays for part of both, as measured GEMMs at small batch do. ``params_read`` is
  all the weights for a dense model and the experts touched for a mixture of
  experts (:func:`inferlab.model.roofline.params_read`). ``peak`` is the chip's dense
  rate at the weights' format, FP4 included where the chip has it.
- **attention** reads every running request's KV cache and does four FLOPs per
  query head, head dimension and layer for each (query, cached token) pair::

      attention_s = max(kv_bytes_per_token x context_read / bandwidth_eff,
                        4 x layers x heads x head_dim x pairs / peak_eff)

  Decode attention is memory-bound on every chip here for grouped-query attention (its
  intensity is about 16 FLOP per byte for Llama 2 70B); long prefills are compute-bound.
  Multi-head latent attention decodes in its absorbed form, with about three times the
  arithmetic of its prefill per pair (:func:`inferlab.model.roofline.attention_flop_per_pair`):
  the pairs of a step up to the tokens it reads are counted at the decode rate, the rest
  at the prefill rate.
- **activations**: every kernel between the matrix multiplies (norms, rotary
  embeddings, the gated activation, residual adds) reads its input and writes its output
  through memory, a number of bytes per token set by the model's widths
  (:func:`inferlab.model.roofline.activation_bytes_per_token`)::

      activation_s = tokens x activation_bytes_per_token / bandwidth_eff

  It is small beside the weights at a small batch, and nearly twice as heavy per FLOP
  for an 8B model as for a 70B one at a large one.
- **communication**: two all-reduces per layer of ``tokens x hidden_size``
  16-bit activations, by the fastest algorithm for the message size on a switched
  fabric (:func:`inferlab.model.parallel.allreduce_s`), at the chip's per-direction link
  rate, ``allreduce_latency_s`` per hop. With expert parallelism (``ep`` chips of the
  ``tp`` each hold whole experts) a MoE layer's MLP all-reduce runs over the ``tp / ep``
  chips that share an expert, and the tokens travel to their experts and back in two
  all-to-alls. Between pipeline stages each token's activation crosses one link.
- **overhead**: a fixed ``step_overhead_s`` per step (kernel launches, sampling,
  the scheduler's own work), paid whatever the batch.

::

      step_s = gemm_s + attention_s + activation_s + allreduce_s + step_overhead_s

where ``body_flop = flop_per_token - head_flop``.

**Pipeline parallelism.** A replica of ``tp x pp`` chips runs ``pp`` stages of
``layers / pp`` layers, each on ``tp`` chips. With ``pp`` micro-batches in flight every
stage works on one of them at a time, so the replica behaves as ``pp`` *lanes*, each a
micro-batch whose step passes through every stage in turn: its step time is that of the
whole model on ``tp`` chips' bandwidth and FLOP/s, plus the hand-offs between stages, and
the lanes share the cache of all ``tp x pp`` chips. When fewer than ``pp`` micro-batches
are ready (a light load, one stream) lanes sit idle: that is the pipeline bubble, and it
is why pipelining buys throughput and capacity, never a faster token. The lanes also
move in lock step, each round of steps as long as its slowest lane's, so a lane of
light decode steps waits for one carrying a chunk of prompt: the simulator runs them so
(:class:`inferlab.serving.pipeline.LockStep`). Every stage's process runs the engine's
loop for every micro-batch, so a lane's step carries the host's part of the fixed cost
once per stage (``step_overhead_s`` as the stack gives it for ``pp`` stages,
:meth:`inferlab.serving.calibration.Stack.step_overhead_on`).

**What a step reads.** ``params_read`` is every weight of a dense model but the
embedding rows a step does not look up, and for a mixture of experts the dense part and
the experts the step's tokens route to (:func:`inferlab.model.roofline.params_read`). A model
with sliding-window layers reads only its window of cache in those layers; the replica
takes the cache's rate per token at a typical context (``context_tokens``).

The efficiencies, the overlap, the overhead and the all-reduce latency describe a
software stack, not a chip: :mod:`inferlab.serving.calibration` fits them, by stack, on
named audited results and reports the error on the others.

Everything is in SI units. Used in chapter 'Batching'; the serving simulator
(:mod:`inferlab.serving.simulator`), the scenarios chapter and :mod:`inferlab.predict`
build on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from inferlab.benchmark.mlperf import LLAMA2_70B_MEAN_OUTPUT_TOKENS, LLAMA2_70B_MEAN_PROMPT_TOKENS
from inferlab.benchmark.mlperf import MLPERF_PER_USER_TOK_S as MLPERF_PER_USER_TOK_S
from inferlab.common import checks
from inferlab.model import specs
from inferlab.model.capacity import (
    ACTIVATION_RESERVE_FRACTION,
    kv_bytes_for_context,
    kv_bytes_per_token,
)
from inferlab.model.feasibility import Infeasible, Layout, layout
from inferlab.model.roofline import (
    ACTIVATION_BYTES,
    activation_bytes_per_token,
    attention_flop_per_pair,
    flop_per_token,
    head_flop,
    params_read,
    sustained_flop_per_s,
)

#: The share of peak bandwidth and compute assumed wherever no stack is fitted, for chips
#: without a calibrated stack (TPUs, Inferentia, Intel, CPUs), for the batching chapter's
#: explorers and for the decision guide. One assumption, not a fit.
ATTAINABLE_FRACTION = 0.65

#: All-reduces per layer in a tensor-parallel transformer — after attention and after the MLP
#: (Megatron-LM, Shoeybi et al. 2019).
ALLREDUCES_PER_LAYER = 2


@dataclass(frozen=True)
class Replica:
    """One model on ``tp x pp`` chips, reduced to the coefficients of its step time.

    Build it with :func:`replica`. Rates are for one lane (``tp`` chips: the whole
    replica without pipeline stages, one micro-batch's path through them with; see the
    module docstring), and so is :attr:`kv_capacity_tokens`; ``weight_bytes`` are the
    whole model's. The efficiencies, ``overlap``, ``step_overhead_s`` and
    ``allreduce_latency_s`` are the software stack's. ``attention_flop_per_pair`` is a
    prompt's attention arithmetic per (query, cached token) pair and
    ``decode_flop_per_pair`` decode's (``None``: the same); ``activation_bytes_per_token``
    is what a token's activations move between kernels, over the lane's chips;
    ``head_flop`` is the part of ``flop_per_token`` only a token the step samples from
    pays (the output head).

    Used in chapter 'Batching'.
    """

    name: str
    layout: Layout
    weight_bytes: float
    kv_bytes_per_token: float
    flop_per_token: float
    attention_flop_per_pair: float
    bandwidth_bytes_per_s: float
    peak_flop_per_s: float
    memory_efficiency: float
    compute_efficiency: float
    overlap: float
    step_overhead_s: float
    allreduce_latency_s: float
    link_bytes_per_s: float
    ep: int = 1
    stage_link_bytes_per_s: float = math.inf
    attention_dp: bool = False
    attention_peak_flop_per_s: float | None = None
    decode_flop_per_pair: float | None = None
    activation_bytes_per_token: float = 0.0
    head_flop: float = 0.0

    @property
    def tp(self) -> int:
        """The tensor-parallel width, which is how many chips one lane holds."""
        return self.layout.tp

    @property
    def lanes(self) -> int:
        """How many micro-batches the replica runs at once, one per pipeline stage (``pp``)."""
        return self.layout.pp

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache one lane holds beside the weights (all its requests together):
        the replica's cache, shared among its lanes."""
        return self.layout.kv_capacity_tokens // self.lanes

    # ---- the coefficients, in seconds ----------------------------------------------

    @property
    def _bandwidth(self) -> float:
        return self.bandwidth_bytes_per_s * self.memory_efficiency

    @property
    def _flops(self) -> float:
        return self.peak_flop_per_s * self.compute_efficiency

    @property
    def _attention_flops(self) -> float:
        # Attention multiplies queries by the cache in the cache's format, whatever the
        # weights' (FP8 for FP4 weights on Blackwell).
        peak = (self.peak_flop_per_s if self.attention_peak_flop_per_s is None
                else self.attention_peak_flop_per_s)
        return peak * self.compute_efficiency

    @property
    def kv_s_per_token(self) -> float:
        """Seconds of attention per token of context read (the larger of bytes and FLOPs)."""
        return max(self.kv_bytes_per_token / self._bandwidth,
                   self._decode_flop_per_pair / self._attention_flops)

    @property
    def _decode_flop_per_pair(self) -> float:
        return (self.attention_flop_per_pair if self.decode_flop_per_pair is None
                else self.decode_flop_per_pair)

    # ---- the pieces of a step (numbers or NumPy arrays) -----------------------------

    def weights_s(self, tokens=1):
        """Time to read the weights a step of ``tokens`` tokens touches
        (:func:`inferlab.model.roofline.params_read`)."""
        model = self.layout.model
        share = params_read(model, np.maximum(np.asarray(tokens, dtype=float), 1))
        return self.weight_bytes * share / model.params_total / self._bandwidth

    def matmul_s(self, tokens, logits=None):
        """Time of the matrix multiplies of ``tokens`` tokens at the stack's compute
        efficiency, the output head's for ``logits`` of them (default: all, as in decode)."""
        tokens = np.asarray(tokens, dtype=float)
        logits = tokens if logits is None else np.asarray(logits, dtype=float)
        return ((self.flop_per_token - self.head_flop) * tokens
                + self.head_flop * logits) / self._flops

    def gemm_s(self, tokens, logits=None):
        """The matrix-multiply kernels: the larger of reading the weights and multiplying,
        plus the part of the smaller that ``overlap`` does not hide."""
        read, work = self.weights_s(tokens), self.matmul_s(tokens, logits)
        return np.maximum(read, work) + (1 - self.overlap) * np.minimum(read, work)

    def attention_s(self, context_tokens, attention_pairs=None):
        """Attention over ``context_tokens`` tokens of KV cache read, with ``attention_pairs``
        (query, cached token) pairs of arithmetic (default: one per token read, as in decode).

        As many pairs as tokens read are taken to be decode's, at
        ``decode_flop_per_pair``; the rest are a prompt's, at ``attention_flop_per_pair``
        (the two differ only for multi-head latent attention,
        :func:`inferlab.model.roofline.attention_flop_per_pair`)."""
        context = np.asarray(context_tokens, dtype=float)
        read = self.kv_bytes_per_token * context / self._bandwidth
        pairs = context if attention_pairs is None else np.asarray(attention_pairs, dtype=float)
        decode = np.minimum(pairs, context)
        work = (self._decode_flop_per_pair * decode
                + self.attention_flop_per_pair * (pairs - decode)) / self._attention_flops
        return np.maximum(read, work)

    def activation_s(self, tokens):
        """Time to move ``tokens`` tokens' activations between kernels
        (:func:`inferlab.model.roofline.activation_bytes_per_token`)."""
        return (self.activation_bytes_per_token * np.asarray(tokens, dtype=float)
                / self._bandwidth)

    def memory_s(self, context_tokens, tokens=1):
        """Time to read the weights a step of ``tokens`` tokens touches and ``context_tokens``
        tokens of KV cache: the floor."""
        return (self.weights_s(tokens)
                + self.kv_bytes_per_token * np.asarray(context_tokens) / self._bandwidth)

    def compute_s(self, tokens, logits=None):
        """Time of the matrix multiplies of ``tokens`` tokens (same as :meth:`matmul_s`)."""
        return self.matmul_s(tokens, logits)

    def allreduce_s(self, tokens):
        """Time of the step's communication: the tensor-parallel all-reduces, the expert
        all-to-alls and the hand-offs between pipeline stages (0 for one chip)."""
        tokens = np.asarray(tokens, dtype=float)
        one = self._comm_function()
        result = np.vectorize(one, otypes=[float])(tokens)
        return result if result.ndim else float(result)

    def _comm_function(self):
        """A scalar ``f(tokens) -> seconds`` of the step's communication (see
        :meth:`allreduce_s`), for the simulator's inner loop."""
        model = self.layout.model
        latency = self.allreduce_latency_s
        per_token = model.hidden_size * ACTIVATION_BYTES / self.link_bytes_per_s
        moe = model.moe_layers if self.ep > 1 else 0
        # Attention data-parallel over the ranks needs no attention all-reduce.
        attention = 0 if self.attention_dp else model.layers
        groups = ((self.tp, attention + model.layers - moe),  # attention + MLP all-reduces
                  (self.tp // self.ep, moe))                  # experts shared by tp / ep
        groups = tuple((p, count) for p, count in groups if p > 1 and count)
        coefficients = tuple((count, (p - 1) * per_token, 2 * (p - 1) / p * per_token)
                             for p, count in groups)
        a2a = (2 * moe, model.experts_per_token * per_token * (self.ep - 1) / self.ep**2)
        handoff = (self.lanes - 1,
                   model.hidden_size * ACTIVATION_BYTES / self.stage_link_bytes_per_s
                   if self.lanes > 1 else 0.0)

        def comm(tokens: float) -> float:
            total = 0.0
            for count, one_shot, two_shot in coefficients:
                total += count * min(latency + one_shot * tokens,
                                     2 * latency + two_shot * tokens)
            if a2a[0]:
                total += a2a[0] * (latency + a2a[1] * tokens)
            if handoff[0]:
                total += handoff[0] * (latency + handoff[1] * tokens)
            return total

        return comm

    def step_s(self, context_tokens, tokens, attention_pairs=None, logits=None):
        """The modelled time of one step that reads ``context_tokens`` tokens of KV cache and
        pushes ``tokens`` tokens through the weights, ``logits`` of them through the output
        head (default: all, as in decode; see the module docstring)::

            gemm_s + attention_s + activation_s + allreduce_s + step_overhead_s

        Vectorised: pass arrays of equal shape for many steps at once.
        """
        result = (self.gemm_s(tokens, logits)
                  + self.attention_s(context_tokens, attention_pairs)
                  + self.activation_s(tokens) + self.allreduce_s(tokens)
                  + self.step_overhead_s)
        return float(result) if np.ndim(result) == 0 else result

    def step_function(self):
        """A fast scalar ``f(tokens, context_read, attention_pairs, logits) -> seconds``
        equal to :meth:`step_s`, for the simulator's inner loop (plain floats, no arrays)."""
        flops, bandwidth = self._flops, self._bandwidth
        matmul = (self.flop_per_token - self.head_flop) / flops
        head = self.head_flop / flops
        kv_read = self.kv_bytes_per_token / bandwidth
        pair = self.attention_flop_per_pair / self._attention_flops
        decode_pair = self._decode_flop_per_pair / self._attention_flops
        activation = self.activation_bytes_per_token / bandwidth
        hidden = 1 - self.overlap
        fixed = self.step_overhead_s
        model = self.layout.model
        per_param = self.weight_bytes / model.params_total / bandwidth
        # A dense model reads its weights less the embedding table, plus a row per token.
        table_rows = model.vocab_size if model.lookup_params else 0
        row = model.hidden_size * per_param
        dense_weights = (model.params_total - model.lookup_params) * per_param
        moe = model.experts > 1 and model.experts_per_token < model.experts
        if moe:
            # params_read of a mixture, inlined: the simulator calls this once per step.
            miss = 1 - model.experts_per_token / model.experts
            experts_total = (model.params_total - model.params_active) / miss
            shared = model.params_total - experts_total - model.lookup_params
        comm = self._comm_function()
        simple = self.tp == 1 and self.lanes == 1

        # One closure for the common case (a dense model on one chip), so that the
        # simulator's inner loop pays for no further calls; the general one handles
        # experts and communication.
        if not moe and simple:
            def step(tokens: float, context_read: float, pairs: float, logits: float) -> float:
                read = dense_weights + row * (tokens if tokens < table_rows else table_rows)
                work = matmul * tokens + head * logits
                gemm = read + hidden * work if read > work else work + hidden * read
                attention = kv_read * context_read
                decode = pairs if pairs < context_read else context_read
                work = decode_pair * decode + pair * (pairs - decode)
                if work > attention:
                    attention = work
                return gemm + attention + activation * tokens + fixed

            return step

        def step(tokens: float, context_read: float, pairs: float, logits: float) -> float:
            read = row * (tokens if tokens < table_rows else table_rows)
            if moe:
                read += (shared + experts_total * (1 - miss ** max(tokens, 1))) * per_param
            else:
                read += dense_weights
            work = matmul * tokens + head * logits
            gemm = read + hidden * work if read > work else work + hidden * read
            attention = kv_read * context_read
            decode = pairs if pairs < context_read else context_read
            work = decode_pair * decode + pair * (pairs - decode)
            if work > attention:
                attention = work
            # One chip and one stage send nothing: no call for the communication then.
            return (gemm + attention + activation * tokens + (0.0 if simple else comm(tokens))
                    + fixed)

        return step

    def decode_step_s(self, batch, context_tokens):
        """One decode step of ``batch`` requests, each with ``context_tokens`` of context."""
        batch = np.asarray(batch)
        return self.step_s(batch * np.asarray(context_tokens), batch)

    def prefill_s(self, prompt_tokens, cached_tokens=0):
        """One step that prefills a single prompt of ``prompt_tokens`` tokens and nothing else.

        On a lightly loaded server this is the time to first token. Causal attention
        gives ``prompt x (prompt + 1) / 2`` (query, key) pairs.

        ``cached_tokens`` of the prompt's start already sit in a prefix cache (vLLM's
        automatic prefix caching, SGLang's RadixAttention): only the rest goes through
        the weights, each new token attending over the cached ones and those before it,
        while the step reads the whole prompt's cache. At least the prompt's last token
        is always computed, since its logits give the first output token, so
        ``cached_tokens`` runs from 0 to ``prompt_tokens - 1`` (a ``ValueError`` names
        it otherwise). Vectorised over either argument.
        """
        prompt = np.asarray(prompt_tokens, dtype=float)
        cached = np.asarray(cached_tokens, dtype=float)
        if np.any(~np.isfinite(cached)) or np.any(cached < 0) or np.any(cached > prompt - 1):
            raise ValueError(f"cached_tokens: got {cached_tokens!r}; must be from 0 to "
                             f"prompt_tokens - 1 (the last prompt token is always computed)")
        new = prompt - cached
        return self.step_s(prompt, new, new * cached + new * (new + 1) / 2,
                           np.ones_like(new))

    # ---- derived figures -----------------------------------------------------------

    @property
    def ridge_tokens(self) -> float:
        """Tokens per step at which the matrix multiplies take as long as reading the weights.

        Weights only: it ignores the KV cache, which attention reads in kernels of its
        own, so it is the batch at which the *weights* stop being the bottleneck, not
        the batch at which a decode step turns compute-bound (see
        :meth:`compute_bound_batch`).
        """
        return float(self.weights_s(1)) / (self.flop_per_token / self._flops)

    def compute_bound_batch(self, context_tokens: float) -> float:
        """The decode batch at which a step's arithmetic equals all its memory traffic,
        weights, the KV cache of ``context_tokens``-token requests and the activations::

            batch x matmul_s_per_token = weights_s
                                         + batch x (context x kv_read_s + activation_s)

        ``inf`` where the cache alone takes longer per request than its arithmetic:
        the step then never turns compute-bound, whatever the batch.
        """
        context = checks.non_negative("context_tokens", context_tokens)
        per_token = self.flop_per_token / self._flops - (
            context * self.kv_bytes_per_token + self.activation_bytes_per_token) / self._bandwidth
        return float(self.weights_s(1)) / per_token if per_token > 0 else math.inf

    def with_efficiency(self, memory_efficiency: float | None = None,
                        compute_efficiency: float | None = None,
                        step_overhead_s: float | None = None,
                        overlap: float | None = None) -> Replica:
        """The same replica with other stack parameters (the others unchanged)."""
        changes = {}
        if memory_efficiency is not None:
            changes["memory_efficiency"] = checks.fraction(
                "memory_efficiency", memory_efficiency, low_open=True)
        if compute_efficiency is not None:
            changes["compute_efficiency"] = checks.fraction(
                "compute_efficiency", compute_efficiency, low_open=True)
        if step_overhead_s is not None:
            changes["step_overhead_s"] = checks.non_negative("step_overhead_s", step_overhead_s)
        if overlap is not None:
            changes["overlap"] = checks.fraction("overlap", overlap)
        return replace(self, **changes)


def replica(
    model: str | specs.ModelSpec = "Llama 2 70B",
    chip: str | specs.Chip = "NVIDIA H200 SXM",
    tp: int = 1,
    precision: str = "fp8",
    *,
    pp: int = 1,
    ep: int = 1,
    kv_precision: str | None = None,
    memory_efficiency: float = 1.0,
    compute_efficiency: float = 1.0,
    overlap: float = 1.0,
    step_overhead_s: float = 0.0,
    allreduce_latency_s: float = 0.0,
    reserve_fraction: float = ACTIVATION_RESERVE_FRACTION,
    peak_flop_per_s_per_chip: float | None = None,
    context_tokens: float | None = None,
    attention_dp: bool = False,
) -> Replica:
    """Build the step-time model of ``model`` on ``tp x pp`` chips of ``chip`` at ``precision``.

    ``model`` and ``chip`` are names from ``data/models.csv`` and
    ``data/hardware.csv`` (or the specs themselves). The layout comes from
    :func:`inferlab.model.feasibility.layout`, which refuses (``Infeasible``, a
    ``ValueError``) weights that do not fit on ``tp x pp`` chips after the reserve or a
    ``tp`` beyond the chip's scale-up domain. Weights are all ``params_total`` at
    ``precision``; FLOPs follow :func:`inferlab.model.roofline.flop_per_token`. The cache is
    stored at ``kv_precision`` (default: the weights' format, but 8 bits for 4-bit
    weights). The peak rate is the dense rate for ``precision`` the chip holds within its
    power limit (:func:`inferlab.model.roofline.sustained_flop_per_s`; the datasheet peak for
    every chip run at full power) unless ``peak_flop_per_s_per_chip`` overrides it.

    ``pp`` pipeline stages run as ``pp`` lanes (module docstring); their hand-offs cross
    the scale-up link inside one domain and the scale-out network beyond it. ``ep``
    chips of each stage's ``tp`` hold whole experts of a mixture (``ep`` divides ``tp``
    and the expert count; 1 for none). ``context_tokens`` is a typical request's context,
    at which the cache's per-token rate is taken for a model with sliding-window layers
    (default: the model's whole context, the most a request can hold). ``attention_dp``
    runs attention data-parallel over the ``tp`` chips (each holds its own requests'
    cache whole), so no all-reduce follows it; the other layers stay tensor-parallel.

    The defaults (efficiencies 1, overlap 1, no overhead, no latency) are the ideal
    machine; :mod:`inferlab.serving.calibration` holds fitted stacks.

    Used in chapter 'Batching'.
    """
    lay = layout(model, chip, precision, tp=tp, pp=pp, kv_precision=kv_precision,
                 reserve_fraction=reserve_fraction)
    spec, hw = lay.model, lay.chip
    ep = checks.whole("ep", ep, maximum=lay.tp)
    if lay.tp % ep or (ep > 1 and (spec.experts <= 1 or spec.experts % ep)):
        raise ValueError(f"ep: {ep} must divide tp={lay.tp} and {spec.name}'s "
                         f"{spec.experts} expert(s); give 1 or such a divisor")
    memory_efficiency = checks.fraction("memory_efficiency", memory_efficiency, low_open=True)
    compute_efficiency = checks.fraction("compute_efficiency", compute_efficiency, low_open=True)
    overlap = checks.fraction("overlap", overlap)
    step_overhead_s = checks.non_negative("step_overhead_s", step_overhead_s)
    allreduce_latency_s = checks.non_negative("allreduce_latency_s", allreduce_latency_s)
    if peak_flop_per_s_per_chip is None:
        peak = sustained_flop_per_s(hw, precision)
        attention_peak = _attention_peak(hw, lay.kv_precision, peak)
    else:
        peak = checks.positive("peak_flop_per_s_per_chip", peak_flop_per_s_per_chip)
        attention_peak = peak
    per_token = _cache_bytes_per_token(lay, context_tokens)
    tp, pp = lay.tp, lay.pp
    stage_link = _stage_link_bytes_per_s(hw, tp, pp)
    return Replica(
        name=(f"{spec.name} on {tp * pp} x {hw.name} ({precision}"
              + (f", tp={tp}, pp={pp}" if pp > 1 else "") + (f", ep={ep}" if ep > 1 else "")
              + ")"),
        layout=lay,
        weight_bytes=lay.weight_bytes_per_chip * lay.chips,
        kv_bytes_per_token=per_token,
        flop_per_token=flop_per_token(spec),
        head_flop=head_flop(spec),
        attention_flop_per_pair=attention_flop_per_pair(spec, "prefill"),
        decode_flop_per_pair=attention_flop_per_pair(spec, "decode"),
        activation_bytes_per_token=activation_bytes_per_token(spec, tp, attention_dp),
        bandwidth_bytes_per_s=tp * hw.memory_bandwidth_bytes_per_s,
        peak_flop_per_s=tp * peak,
        memory_efficiency=memory_efficiency,
        compute_efficiency=compute_efficiency,
        overlap=overlap,
        step_overhead_s=step_overhead_s,
        allreduce_latency_s=allreduce_latency_s,
        link_bytes_per_s=hw.link_bytes_per_s if tp > 1 else math.inf,
        ep=ep,
        stage_link_bytes_per_s=stage_link,
        attention_dp=checks.instance("attention_dp", attention_dp, bool),
        attention_peak_flop_per_s=tp * attention_peak,
    )


def _cache_bytes_per_token(lay: Layout, context_tokens: float | None) -> float:
    """Bytes of cache a step reads per token of context, over the layout's chips: for a
    model with sliding-window layers, its rate at a typical context of ``context_tokens``
    (default: the model's whole context), since those layers read only their window."""
    spec = lay.model
    per_token = lay.kv_bytes_per_token_per_chip * lay.chips
    if not spec.sliding_layers:
        return per_token
    typical = (spec.context_length_tokens if context_tokens is None
               else checks.real("context_tokens", context_tokens, low=1.0,
                                high=spec.context_length_tokens))
    return per_token * (kv_bytes_for_context(spec, typical, lay.kv_precision)
                        / (typical * kv_bytes_per_token(spec, lay.kv_precision)))


def _stage_link_bytes_per_s(hw: specs.Chip, tp: int, pp: int) -> float:
    """The rate at which one pipeline stage hands activations to the next: the scale-up
    link inside one domain, the scale-out network beyond it (no hand-off for one stage)."""
    if pp == 1:
        return math.inf
    in_domain = hw.domain_chips and tp * pp <= hw.domain_chips
    link = (hw.link_bytes_per_s if in_domain and math.isfinite(hw.link_bytes_per_s)
            else hw.scaleout_bytes_per_s)
    if math.isnan(link):
        # Each stage hands every token's activation to the next; without the link's rate
        # that hand-off, and so the step, has no time to model (a closed-form SRAM
        # pipeline needs none, so the feasibility layer itself allows the layout).
        raise Infeasible("domain", (
            f"pp: {pp} stages hand activations between chips, and data/hardware.csv records "
            f"no link or scale-out rate for {hw.name}; give pp=1"))
    return link


def _attention_peak(chip: specs.Chip, kv_precision: str, weights_peak: float) -> float:
    """The dense rate attention runs at: the chip's at the cache's format, or the weights'
    where the table gives none for that format."""
    try:
        rate = sustained_flop_per_s(chip, kv_precision)
    except ValueError:
        return weights_peak
    return rate if math.isfinite(rate) else weights_peak


# --------------------------------------------------------------------------------------
# Steady state: the closed form of a server that always has `concurrency` requests in flight
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SteadyState:
    """A replica that always holds ``concurrency`` requests, in the mean-value closed form.

    Arrays have one entry per concurrency. ``per_user_tok_s`` is ``1 / step_s``
    (a request gets one token per step); ``aggregate_tok_s`` is output tokens per
    second summed over the requests of the replica, ``per_chip_tok_s`` the same
    divided by ``tp``. ``tokens``, ``context`` and ``pairs`` are what one step pushes
    through the weights, reads of cache and attends over, and ``concurrency`` the rows
    of logits it computes (one per request), so a caller can split ``step_s`` into the
    replica's terms.

    Used in chapter 'Batching'.
    """

    concurrency: np.ndarray
    step_s: np.ndarray
    tp: int
    fits: np.ndarray
    bound: np.ndarray
    tokens: np.ndarray
    context: np.ndarray
    pairs: np.ndarray

    @property
    def per_user_tok_s(self) -> np.ndarray:
        return 1.0 / self.step_s

    @property
    def aggregate_tok_s(self) -> np.ndarray:
        return self.concurrency / self.step_s

    @property
    def per_chip_tok_s(self) -> np.ndarray:
        return self.aggregate_tok_s / self.tp


def steady_state(
    rep: Replica,
    concurrency,
    prompt_tokens: float,
    output_tokens: float,
) -> SteadyState:
    """Per-user and aggregate decode rates at each ``concurrency``, in steady state.

    Closed form (mean values): ``concurrency`` requests are always running, each
    with a prompt of ``prompt_tokens`` and ``output_tokens`` outputs. Prefill work
    is spread over the steps (as chunked prefill does), so each step pushes
    ``c x (1 + prompt/output)`` tokens through the weights, ``c`` of them through the
    output head (each request samples one token a step), and attends over the mean
    context ``c x (prompt + output / 2)``::

        step_s = replica.step_s(c x (prompt + output / 2), c x (1 + prompt / output),
                                logits=c)

    Each user then sees ``1 / step_s`` tokens per second and the replica
    ``c / step_s``. ``fits`` is false where the KV cache of ``c`` full-length
    requests (``c x (prompt + output)`` tokens) exceeds the replica's capacity;
    ``bound`` says whether memory or compute set each step. The serving simulator
    agrees with this form in steady state (``tests/test_simulator.py``).

    Used in chapter 'Batching' (the throughput-interactivity curve).
    """
    c = np.atleast_1d(checks.reals("concurrency", concurrency, low=1.0, high=checks.MAX_COUNT))
    prompt = checks.real("prompt_tokens", prompt_tokens, low=1.0, high=checks.MAX_COUNT)
    output = checks.real("output_tokens", output_tokens, low=1.0, high=checks.MAX_COUNT)
    context = c * (prompt + output / 2)
    tokens = c * (1 + prompt / output)
    # Decode tokens attend over their whole context; the prefill share of each step
    # does prompt^2 / 2 pairs per prompt, spread over the output's steps.
    pairs = context + c * prompt * (prompt + 1) / (2 * output)
    step = checks.finite_result(rep.step_s(context, tokens, pairs, c),
                                "concurrency", "prompt_tokens", "output_tokens")
    fits = c * (prompt + output) <= rep.kv_capacity_tokens
    bound = np.where(rep.matmul_s(tokens, c) > rep.weights_s(tokens)
                     + rep.attention_s(context, pairs) + rep.activation_s(tokens),
                     "compute", "memory")
    return SteadyState(c, step, rep.tp, fits, bound, tokens, context, pairs)


def throughput_at_bound(state: SteadyState, min_per_user_tok_s: float) -> float:
    """The most per-chip tokens per second on the curve with each user at or above the bound.

    Only concurrencies whose KV cache fits count. Returns 0 if no point qualifies.
    MLPerf's Server bound for Llama 2 70B is 5 tok/s per user (200 ms per token);
    its Interactive bound 25 tok/s (40 ms).

    Used in chapter 'Batching'.
    """
    bound = checks.positive("min_per_user_tok_s", min_per_user_tok_s)
    ok = state.fits & (state.per_user_tok_s >= bound)
    return float(state.per_chip_tok_s[ok].max()) if np.any(ok) else 0.0


def pareto_front(per_user, per_chip) -> tuple[np.ndarray, np.ndarray]:
    """The upper-right envelope of (per-user, per-chip) points, sorted by per-user rate.

    A point stays if no other point is at least as fast per user *and* at least
    as productive per chip. InferenceMAX-style plots draw this envelope over many
    configurations (parallelism, batch limits), one per chip.

    Used in chapter 'Batching'.
    """
    x = np.asarray(per_user, dtype=float).ravel()
    y = np.asarray(per_chip, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"per_chip: shape {y.shape} does not match per_user's {x.shape}")
    order = np.argsort(-x, kind="stable")
    xs, ys = x[order], y[order]
    keep = ys >= np.maximum.accumulate(ys)
    xs, ys = xs[keep], ys[keep]
    return xs[::-1], ys[::-1]


#: Concurrencies the throughput-interactivity curve is evaluated at (1 to 4,096, log-spaced).
CONCURRENCY_GRID = np.unique(np.geomspace(1, 4096, 160).round())

#: Tensor-parallel widths an InferenceMAX-style front chooses among.
TP_CHOICES = (1, 2, 4, 8)


@dataclass(frozen=True)
class Front:
    """One chip's throughput-interactivity front: the best per-chip rate at each per-user rate.

    ``per_user_tok_s`` is increasing; ``per_chip_tok_s`` the most output tokens per
    second per chip any of the parallelism choices reaches at that interactivity.

    Used in chapter 'Batching'.
    """

    chip: str
    per_user_tok_s: np.ndarray
    per_chip_tok_s: np.ndarray

    def throughput_at(self, min_per_user_tok_s: float) -> float:
        """The most per-chip tokens per second with every user at or above the bound (0 if none)."""
        ok = self.per_user_tok_s >= min_per_user_tok_s
        return float(self.per_chip_tok_s[ok].max()) if np.any(ok) else 0.0


def interactivity_front(
    chip: str,
    model: str = "Llama 2 70B",
    precision: str = "fp8",
    prompt_tokens: float = LLAMA2_70B_MEAN_PROMPT_TOKENS,
    output_tokens: float = LLAMA2_70B_MEAN_OUTPUT_TOKENS,
    *,
    efficiency: float = 1.0,
    step_overhead_s: float = 0.0,
    tps=TP_CHOICES,
    concurrency=CONCURRENCY_GRID,
) -> Front:
    """The throughput-interactivity front of ``model`` on ``chip`` (modelled).

    For each tensor-parallel width in ``tps`` on which the model fits, the
    steady-state closed form (:func:`steady_state`) is evaluated at every
    ``concurrency`` whose KV cache fits; the front is the upper envelope of all
    those points (:func:`pareto_front`), as InferenceMAX draws one line per chip
    over many configurations. ``efficiency`` applies to both memory and compute.

    Used in chapter 'Batching'.
    """
    # Checked here so that a refusal names this argument, not the replica's two.
    efficiency = checks.fraction("efficiency", efficiency, low_open=True)
    tps = checks.wholes("tps", tps).tolist()
    xs, ys = [], []
    for tp in tps:
        try:
            rep = replica(model, chip, tp, precision, memory_efficiency=efficiency,
                          compute_efficiency=efficiency, step_overhead_s=step_overhead_s)
        except Infeasible:
            continue  # the weights do not fit on this many chips, or tp leaves the domain
        state = steady_state(rep, concurrency, prompt_tokens, output_tokens)
        xs.append(state.per_user_tok_s[state.fits])
        ys.append(state.per_chip_tok_s[state.fits])
    if not xs:
        raise ValueError(f"chip: {model} at {precision} does not fit on {max(tps)} x {chip}")
    x, y = pareto_front(np.concatenate(xs), np.concatenate(ys))
    return Front(chip, x, y)
