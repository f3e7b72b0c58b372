"""Tensor parallelism: the decode floor of a model split across chips, with its all-reduces.

Tensor parallelism (Megatron-LM, Shoeybi et al. 2019) splits every weight matrix
of a layer across ``tp`` chips. Each chip then reads ``1/tp`` of the weights and of
the KV cache per step, so the bandwidth floor falls as ``1/tp``. The price is
communication: after the attention block and after the MLP block the chips' partial
results must be summed, two all-reduces per layer per step.

The model here (its assumptions are stated so you can argue with them):

- memory time: ``(weight_bytes + kv_bytes) / (tp x bandwidth per chip)``, a perfect split;
- all-reduce time, the standard ring cost model (Thakur, Rabenseifner and Gropp,
  2005): ``2 (tp - 1) x hop_latency_s + 2 (tp - 1) / tp x message_bytes / link_bytes_per_s``,
  where the message is ``batch x hidden_size x activation_bytes``;
- ``allreduces_per_layer`` (2) all-reduces per layer, one after the other; no overlap
  of communication with memory reads, so the step is their sum.

``link_bytes_per_s`` is one chip's scale-up link *per direction* from
``data/hardware.csv`` (NVLink 4: 450 GB/s per H100, half the quoted two-way 900;
NeuronLink-v2: 96 GB/s per Inferentia2 on the book's reading of AWS's 192).

The ring is the textbook algorithm and the right one for large messages. Decode
steps send small ones (a batch of 64 tokens of Llama 2 70B is 1 MiB), and on a
switched fabric such as NVSwitch engines use algorithms with fewer latency hops
(:func:`allreduce_s`): *one-shot*, where each chip sends its whole message to
every peer and reduces what it receives, and *two-shot*, a reduce-scatter then an
all-gather through the switch (TensorRT-LLM's custom all-reduce kernels).

Used in chapter 'The memory-bandwidth floor'.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from inferlab.common import checks


def ring_allreduce_s(
    message_bytes: float, chips: int, link_bytes_per_s: float, hop_latency_s: float = 0.0
) -> float:
    """Time of one ring all-reduce of ``message_bytes`` over ``chips`` chips.

    Formula (Thakur, Rabenseifner and Gropp, IJHPCA 2005)::

        2 (p - 1) x hop_latency_s + 2 (p - 1) / p x message_bytes / link_bytes_per_s

    Zero for one chip. Each chip sends and receives ``2 (p - 1) / p`` of the message,
    in ``2 (p - 1)`` steps that each pay one hop's latency.

    Used in chapter 'The memory-bandwidth floor'.
    """
    checks.non_negative("hop_latency_s", hop_latency_s)  # named as this function calls it
    return allreduce_s(message_bytes, chips, link_bytes_per_s, hop_latency_s, "ring")


#: All-reduce algorithms :func:`allreduce_s` knows; ``"best"`` takes the fastest of them.
ALLREDUCE_ALGORITHMS = ("ring", "one-shot", "two-shot", "best")


def allreduce_s(message_bytes: float, chips: int, link_bytes_per_s: float,
                latency_s: float = 0.0, algorithm: str = "best") -> float:
    """Time of one all-reduce of ``message_bytes`` over ``chips`` chips on a switched fabric.

    Formulas, with ``p`` chips, latency ``a`` per hop and per-direction link rate ``B``::

        ring:      2 (p - 1) a + 2 (p - 1) / p x m / B     (Thakur et al. 2005)
        one-shot:  a + (p - 1) x m / B                      (every chip sends m to each peer)
        two-shot:  2 a + 2 (p - 1) / p x m / B              (reduce-scatter, then all-gather)

    ``"best"`` is the minimum of the three: one-shot for small messages, two-shot
    for large ones, the ring never on a switch (it pays ``2 (p - 1)`` hops for the
    two-shot's bytes). Zero for one chip.

    Used in chapters 'The memory-bandwidth floor' and 'Batching'.
    """
    if algorithm not in ALLREDUCE_ALGORITHMS:
        raise ValueError(f"algorithm: {algorithm!r} is not one of "
                         f"{', '.join(ALLREDUCE_ALGORITHMS)}")
    message = checks.non_negative("message_bytes", message_bytes)
    p = checks.whole("chips", chips)
    link = checks.positive("link_bytes_per_s", link_bytes_per_s)
    latency = checks.non_negative("latency_s", latency_s)
    if p == 1:
        return 0.0
    times = {
        "ring": 2 * (p - 1) * latency + 2 * (p - 1) / p * message / link,
        "one-shot": latency + (p - 1) * message / link,
        "two-shot": 2 * latency + 2 * (p - 1) / p * message / link,
    }
    return checks.finite_result(min(times.values()) if algorithm == "best" else times[algorithm],
                                "message_bytes", "link_bytes_per_s", "latency_s")


@dataclass(frozen=True)
class TensorParallelStep:
    """One decode step split over ``tp`` chips: memory time, communication time, their sum."""

    tp: int
    memory_s: float
    allreduce_s: float
    allreduces: int

    @property
    def step_s(self) -> float:
        """Modelled time of the step, the memory floor plus all-reduces (no overlap)."""
        return self.memory_s + self.allreduce_s

    @property
    def per_user_tok_s(self) -> float:
        """Ceiling in tokens per second per user at this split."""
        return 1.0 / self.step_s


def tensor_parallel_step(
    weight_bytes: float,
    bandwidth_bytes_per_s: float,
    tp: int,
    *,
    layers: int,
    hidden_size: int,
    link_bytes_per_s: float,
    kv_bytes_per_token: float = 0.0,
    context_tokens: float = 0,
    batch: int = 1,
    activation_bytes: float = 2.0,
    allreduces_per_layer: int = 2,
    hop_latency_s: float = 0.0,
) -> TensorParallelStep:
    """The modelled decode step of a model split ``tp`` ways (see the module docstring).

    Formula::

        memory_s    = (weight_bytes + batch x context_tokens x kv_bytes_per_token)
                      / (tp x bandwidth_bytes_per_s)
        allreduce_s = layers x allreduces_per_layer
                      x ring_allreduce_s(batch x hidden_size x activation_bytes, tp, ...)
        step_s      = memory_s + allreduce_s

    ``bandwidth_bytes_per_s`` is one chip's memory bandwidth. Whether the weights
    fit on ``tp`` chips is not checked here: use :func:`inferlab.model.capacity.chips_to_hold`.

    Used in chapter 'The memory-bandwidth floor'.
    """
    tp = checks.whole("tp", tp)
    weights = checks.positive("weight_bytes", weight_bytes)
    bandwidth = checks.positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    batch = checks.whole("batch", batch)
    kv = checks.non_negative("kv_bytes_per_token", kv_bytes_per_token) * checks.non_negative(
        "context_tokens", context_tokens
    ) * batch
    for name, value in (("layers", layers), ("hidden_size", hidden_size),
                        ("allreduces_per_layer", allreduces_per_layer)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name}: {value!r} is not allowed; give a whole number >= 0")
    message = batch * hidden_size * checks.positive("activation_bytes", activation_bytes)
    count = int(layers) * int(allreduces_per_layer)
    one = ring_allreduce_s(message, tp, link_bytes_per_s, hop_latency_s)
    memory = checks.finite_result((weights + kv) / (tp * bandwidth), "weight_bytes",
                                  "bandwidth_bytes_per_s", "kv_bytes_per_token")
    return TensorParallelStep(tp, memory, count * one, count)


def tensor_parallel_speedup(step_1: TensorParallelStep, step_tp: TensorParallelStep) -> float:
    """How many times faster the ``tp``-way step is than the one-chip step.

    With no communication it is ``tp``; all-reduces pull it below.

    Used in chapter 'The memory-bandwidth floor'.
    """
    return step_1.step_s / step_tp.step_s


# --------------------------------------------------------------------------------------
# Many small chips: a decode step bounded by pipelining and by ideal tensor parallelism
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChipSpread:
    """The per-user decode ceilings of a model spread over ``chips`` chips, both ways.

    ``pipeline_s``: layers in stages, one stage per chip; a token visits every stage
    in turn, and each stage reads its own ``1 / chips`` of the weights at one chip's
    bandwidth, so a batch-1 step takes the *whole* model's bytes over *one* chip's
    bandwidth (and its FLOPs over one chip's peak), however many chips there are.
    ``tensor_parallel_s``: every layer split over all chips with free communication,
    the whole model's bytes over *all* chips' bandwidth: a bound no real network
    reaches. The truth lies between; ``compute_*`` are the same bounds on FLOPs
    (``nan`` where no peak rate is published).

    Used in chapters 'The memory-bandwidth floor' and 'Choosing hardware'.
    """

    chip: str
    chips: int
    weight_bytes: float
    memory_pipeline_s: float
    memory_tensor_parallel_s: float
    compute_pipeline_s: float
    compute_tensor_parallel_s: float

    @property
    def pipeline_s(self) -> float:
        """The batch-1 step with layers pipelined, the slower of bytes and FLOPs on one chip."""
        return max(self.memory_pipeline_s, _or_zero(self.compute_pipeline_s))

    @property
    def tensor_parallel_s(self) -> float:
        """The batch-1 step with ideal tensor parallelism over every chip."""
        return max(self.memory_tensor_parallel_s, _or_zero(self.compute_tensor_parallel_s))

    @property
    def pipeline_tok_s(self) -> float:
        """Per-user ceiling, tokens per second, with the layers pipelined."""
        return 1.0 / self.pipeline_s

    @property
    def tensor_parallel_tok_s(self) -> float:
        """Per-user ceiling, tokens per second, with ideal tensor parallelism."""
        return 1.0 / self.tensor_parallel_s


def _or_zero(value: float) -> float:
    return value if value == value else 0.0


def chip_spread(model, chip, precision: str = "int8", *, chips: int | None = None,
                reserve_fraction: float = 0.0) -> ChipSpread:
    """Batch-1 decode bounds of ``model`` at ``precision`` spread over ``chips`` chips.

    ``chips`` defaults to the fewest that hold the weights after ``reserve_fraction``
    (:func:`inferlab.model.feasibility.fewest_chips`); fewer is refused by the feasibility
    layer's capacity check. The chips hold every parameter, but a batch-1 step reads
    only those its token uses (``params_active`` for a mixture of experts). Llama 2
    70B at INT8 on Groq chips: the pipeline bound is about 1,100 tokens per second
    per user whatever the chip count, the ideal tensor-parallel bound hundreds of
    thousands; see the class docstring.

    Used in chapters 'The memory-bandwidth floor' and 'Choosing hardware'.
    """
    import math

    from inferlab.model import specs
    from inferlab.model.capacity import weight_bytes
    from inferlab.model.feasibility import Infeasible, fewest_chips
    from inferlab.model.roofline import PEAK_COLUMN, flop_per_token, params_read

    spec = specs.model(model) if isinstance(model, str) else model
    hw = specs.chip(chip) if isinstance(chip, str) else chip
    need = fewest_chips(spec, hw, precision, reserve_fraction=reserve_fraction)
    count = need if chips is None else checks.whole("chips", chips)
    if count < need:
        raise Infeasible("capacity", (
            f"chips: {count} x {hw.name} cannot hold {spec.name} at {precision} "
            f"({weight_bytes(spec.params_total, precision) / 1e9:,.1f} GB of weights); "
            f"it needs at least {need}"))
    # A batch-1 step reads the parameters its one token uses: all of a dense model, the
    # dense part and the chosen experts of a mixture (params_read at one token).
    weights = weight_bytes(params_read(spec, 1), precision)
    bandwidth = hw.memory_bandwidth_bytes_per_s
    peak = getattr(hw, PEAK_COLUMN.get(precision.lower(), "bf16_flop_per_s"))
    flop = flop_per_token(spec)
    compute = flop / peak if math.isfinite(peak) else math.nan
    return ChipSpread(hw.name, count, weights, weights / bandwidth,
                      weights / (count * bandwidth), compute, compute / count)
