"""Capacity: what fits in a chip's memory, and how many chips a model needs.

A decoder's memory holds three things: the weights, the KV cache of every
request in flight, and working space (activations, the runtime's buffers).
This module turns a model's shape and a number format into bytes, and bytes
into chip counts, batch sizes and context lengths.

Everything is in SI units: bytes, parameters, tokens. Chip capacities come from
:func:`inferlab.model.specs.chip` (already in bytes).

Used in chapter 'The memory-bandwidth floor'; the batching chapter reuses the
KV-cache functions.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from inferlab.common import checks
from inferlab.model.specs import ModelSpec, as_model

#: Bytes that one parameter (or one cached value) occupies in each number format.
#: 16-bit formats take 2 bytes, 8-bit formats 1, 4-bit formats half a byte
#: (packing overheads such as per-group scales are ignored). ``fp4`` is a 4-bit
#: float the tensor cores multiply natively (NVIDIA's NVFP4 on Blackwell);
#: ``int4`` is weight-only quantization, unpacked to 16 bits before the multiply.
BYTES_PER_PARAM: dict[str, float] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "fp4": 0.5,
    "int4": 0.5,
}

#: Share of a chip's memory the book leaves unused. vLLM's default
#: ``gpu_memory_utilization`` of 0.9 leaves 10 % of the GPU to the CUDA context and
#: other processes; vLLM profiles its activations inside the other 90 %. The book
#: holds back the same 10 % and, for simplicity, gives all the rest to weights and KV
#: cache. It is an assumption, not a law.
ACTIVATION_RESERVE_FRACTION = 0.10

KIB = 2**10
MIB = 2**20
GIB = 2**30


def bytes_per_param(precision: str) -> float:
    """Bytes per parameter (or cached value) in ``precision``.

    ``precision`` is one of the keys of :data:`BYTES_PER_PARAM` (``"fp32"``,
    ``"bf16"``, ``"fp16"``, ``"fp8"``, ``"int8"``, ``"int4"``), case-insensitive.
    Raises ``ValueError`` naming the allowed formats otherwise.

    Used in chapter 'The memory-bandwidth floor'.
    """
    key = precision.lower() if isinstance(precision, str) else precision
    if key not in BYTES_PER_PARAM:
        raise ValueError(
            f"precision: unknown format {precision!r}; allowed: {', '.join(BYTES_PER_PARAM)}"
        )
    return float(BYTES_PER_PARAM[key])


def default_kv_precision(precision: str) -> str:
    """The cache format the book pairs with ``precision``: the same, but 8 bits for 4-bit weights.

    Serving stacks that quantise weights to 4 bits (NVFP4, INT4 AWQ) keep the
    cache at 8 bits; FP8 and 16-bit weights keep it in their own format.
    """
    return "fp8" if bytes_per_param(precision) < 1 else precision


def weight_bytes(params: float, precision: str) -> float:
    """Bytes of weights: ``params x bytes_per_param(precision)``.

    A 70-billion-parameter model takes 140 GB at FP16, 70 GB at INT8 and 35 GB
    at INT4. Mixture-of-experts models must hold every expert, so pass the total
    parameter count here, not the active one.

    Used in chapter 'The memory-bandwidth floor'.
    """
    return checks.positive("params", params) * bytes_per_param(precision)


def kv_bytes_per_token(
    model: ModelSpec,
    precision: str = "bf16",
    *,
    kv_heads: int | None = None,
) -> float:
    """Bytes of KV cache one token adds (and each decode step reads back), over all layers.

    Formula, for multi-head and grouped-query attention (``attention`` ``"mha"``
    or ``"gqa"``)::

        2 (K and V) x layers x kv_heads x head_dim x bytes_per_param(precision)

    Llama 2 70B (80 layers, 8 KV heads of 128) at BF16: 327,680 bytes = 320 KiB.
    Pass ``kv_heads=model.attention_heads`` to see what the cache would be without
    grouped-query attention (2,560 KiB for Llama 2 70B).

    For multi-head latent attention (``"mla"``, DeepSeek-V2/V3) each layer caches
    one compressed latent and one rotary key instead of per-head keys and values::

        layers x (kv_lora_rank + qk_rope_head_dim) x bytes_per_param(precision)

    with both widths from the model's config (DeepSeek-V3: 61 x (512 + 64) x 2 =
    70,272 bytes at BF16; DeepSeek-V2 paper, arXiv 2405.04434).

    This is the rate while a request is shorter than any sliding window: a model whose
    ``sliding_layers`` attend only to the last ``sliding_window`` tokens stops adding
    cache in those layers past the window (:func:`kv_bytes_for_context`).

    Used in chapter 'The memory-bandwidth floor'.
    """
    model = as_model(model)
    per_value = bytes_per_param(precision)
    if model.attention == "mla":
        if kv_heads is not None:
            raise ValueError(
                f"kv_heads: {kv_heads!r} has no meaning for {model.name}, which uses "
                "multi-head latent attention; leave it as None"
            )
        width = model.kv_lora_rank + model.qk_rope_head_dim
        if width < 1:
            raise ValueError(
                f"model: {model.name!r} uses multi-head latent attention but gives no cached "
                "widths; give kv_lora_rank and qk_rope_head_dim (DeepSeek-V3: 512 and 64)")
        return float(model.layers * width * per_value)
    if model.attention not in ("mha", "gqa"):
        raise ValueError(
            f"model: attention {model.attention!r} of {model.name!r} is not one of mha, gqa, mla"
        )
    heads = model.kv_heads if kv_heads is None else kv_heads
    if not isinstance(heads, numbers.Integral) or isinstance(heads, bool) or heads < 1:
        raise ValueError(f"kv_heads: {heads!r} is not allowed; give a whole number >= 1")
    return float(2 * model.layers * heads * model.head_dim * per_value)


def kv_bytes_for_context(model: ModelSpec, context_tokens, precision: str = "bf16"):
    """Bytes of KV cache one request of ``context_tokens`` tokens holds, over all layers.

    ``context_tokens x kv_bytes_per_token`` for a model that attends to its whole
    context in every layer. A layer with a sliding window (``sliding_layers`` of them,
    ``sliding_window`` tokens: Mistral 7B's every layer at 4,096, gpt-oss's every other
    at 128) keeps only the last window of tokens, so::

        per_layer x (full_layers x context + sliding_layers x min(context, window))

    It is also what one decode step of that request reads back. Vectorised over
    ``context_tokens``.

    Used in chapters 'The memory-bandwidth floor' and 'Batching'.
    """
    model = as_model(model)
    context = np.asarray(checks.reals("context_tokens", context_tokens, low=0.0,
                                      high=checks.MAX_COUNT), dtype=float)
    per_layer = kv_bytes_per_token(model, precision) / model.layers
    windowed = model.sliding_layers if model.sliding_window else 0
    result = per_layer * ((model.layers - windowed) * context
                          + windowed * np.minimum(context, model.sliding_window or 0))
    return float(result) if result.ndim == 0 else result


def kv_cache_bytes(kv_bytes_per_token: float, context_tokens: float, batch: int = 1) -> float:
    """Bytes of KV cache for ``batch`` requests of ``context_tokens`` each.

    Formula: ``kv_bytes_per_token x context_tokens x batch``. It grows linearly
    in both, which is why long contexts and large batches compete for the same
    memory.

    Used in chapter 'The memory-bandwidth floor'.
    """
    per_token = checks.non_negative("kv_bytes_per_token", kv_bytes_per_token)
    context = checks.non_negative("context_tokens", context_tokens)
    checks.whole("batch", batch)
    return per_token * context * batch


def usable_bytes(capacity_bytes: float, reserve_fraction: float = 0.0) -> float:
    """Memory left for weights and KV cache: ``capacity x (1 - reserve_fraction)``.

    Pass :data:`ACTIVATION_RESERVE_FRACTION` for the book's "after the reserve" figure.

    Used in chapter 'The memory-bandwidth floor'.
    """
    return checks.positive("capacity_bytes", capacity_bytes) * (
        1 - checks.fraction("reserve_fraction", reserve_fraction, high_open=True)
    )


def largest_model_params(
    capacity_bytes: float, precision: str, reserve_fraction: float = 0.0
) -> float:
    """The most parameters whose weights alone fit: ``usable bytes / bytes_per_param``.

    A weights-only ceiling: H100's 80 GB holds 40 billion parameters at FP16 with
    nothing left for the KV cache. With ``reserve_fraction`` the working space is
    held back first.

    Used in chapter 'The memory-bandwidth floor'.
    """
    return usable_bytes(capacity_bytes, reserve_fraction) / bytes_per_param(precision)


def chips_to_hold(
    total_bytes: float,
    capacity_bytes_per_chip: float,
    *,
    reserve_fraction: float = 0.0,
    max_chips: int | None = None,
) -> int:
    """The fewest chips whose memory together holds ``total_bytes``.

    Formula: ``ceil(total_bytes / (capacity_bytes_per_chip x (1 - reserve_fraction)))``.
    It assumes the bytes split perfectly across chips, so it is a floor, not a
    deployment: Groq's 220 MiB per chip needs 303 chips for 70 B parameters at
    INT8 and 607 at FP16 (ISCA 2022 paper for the 220 MiB).

    ``max_chips``, if given, is the largest system you can build; a model that
    needs more raises ``ValueError`` saying how many it needs.

    Used in chapter 'The memory-bandwidth floor'.
    """
    total = checks.positive("total_bytes", total_bytes)
    per_chip = checks.positive("capacity_bytes_per_chip", capacity_bytes_per_chip)
    usable = usable_bytes(per_chip, reserve_fraction)
    # Round before ceil so that 140 GB on 70 GB chips is 2, not 3 from float noise.
    ratio = checks.finite_result(total / usable, "total_bytes", "capacity_bytes_per_chip")
    needed = math.ceil(round(ratio, 9))
    if max_chips is not None:
        max_chips = checks.whole("max_chips", max_chips)
        if needed > max_chips:
            raise ValueError(
                f"total_bytes: {total:.4g} bytes need {needed} chips of "
                f"{usable:.4g} usable bytes each, more than max_chips={max_chips}"
            )
    return needed


def kv_tokens_that_fit(
    capacity_bytes: float,
    weight_bytes: float,
    kv_bytes_per_token: float,
    *,
    reserve_fraction: float = 0.0,
) -> int:
    """How many tokens of KV cache fit beside the weights (summed over all requests).

    Formula: ``floor((capacity x (1 - reserve) - weight_bytes) / kv_bytes_per_token)``;
    0 if the weights alone do not fit. Any split into batch x context with that
    product fits: 8 requests of 4,096 tokens take as much as 32 of 1,024.

    Used in chapter 'The memory-bandwidth floor'.
    """
    weights = checks.positive("weight_bytes", weight_bytes)
    free = usable_bytes(capacity_bytes, reserve_fraction) - weights
    per_token = checks.positive("kv_bytes_per_token", kv_bytes_per_token)
    if free <= 0:
        return 0
    tokens = checks.finite_result(round(free / per_token, 9), "capacity_bytes",
                                  "kv_bytes_per_token")
    return int(math.floor(tokens))


def max_batch(
    capacity_bytes: float,
    weight_bytes: float,
    kv_bytes_per_token: float,
    context_tokens: int,
    *,
    reserve_fraction: float = 0.0,
) -> int:
    """The largest batch of ``context_tokens``-long requests whose KV cache fits beside the weights.

    Formula: ``floor(kv_tokens_that_fit / context_tokens)``; 0 means not even one
    request fits (or the weights alone do not).

    Used in chapter 'The memory-bandwidth floor'.
    """
    context = checks.positive("context_tokens", context_tokens)
    tokens = kv_tokens_that_fit(
        capacity_bytes, weight_bytes, kv_bytes_per_token, reserve_fraction=reserve_fraction
    )
    return int(tokens // context)


@dataclass(frozen=True)
class MemoryBudget:
    """How one chip's (or one group's) memory splits between weights, KV cache and reserve."""

    capacity_bytes: float
    weight_bytes: float
    reserve_bytes: float
    kv_bytes: float

    @property
    def free_bytes(self) -> float:
        """What is left after weights, KV cache and reserve (negative if it does not fit)."""
        return self.capacity_bytes - self.weight_bytes - self.reserve_bytes - self.kv_bytes

    @property
    def fits(self) -> bool:
        """Whether everything fits."""
        return self.free_bytes >= 0


def memory_budget(
    capacity_bytes: float,
    weight_bytes: float,
    kv_bytes_per_token: float = 0.0,
    context_tokens: float = 0,
    batch: int = 1,
    *,
    reserve_fraction: float = 0.0,
) -> MemoryBudget:
    """Split ``capacity_bytes`` into weights, KV cache for ``batch x context_tokens`` and reserve.

    Used in chapter 'The memory-bandwidth floor'.
    """
    capacity = checks.positive("capacity_bytes", capacity_bytes)
    reserve = capacity * checks.fraction("reserve_fraction", reserve_fraction, high_open=True)
    kv = kv_cache_bytes(kv_bytes_per_token, context_tokens, batch)
    return MemoryBudget(capacity, checks.positive("weight_bytes", weight_bytes), reserve, kv)
