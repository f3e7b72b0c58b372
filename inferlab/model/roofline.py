"""The memory-bandwidth floor and the roofline.

Two ideas, one module:

- **The floor.** One decode step must read every weight and the KV cache of every
  request in the batch. No step can be faster than those bytes divided by the
  memory bandwidth, so ``1 / floor`` is a ceiling on each user's tokens per second.
- **The roofline** (Williams, Waterman and Patterson, CACM 2009). A kernel that
  does ``F`` FLOPs while moving ``B`` bytes has arithmetic intensity ``I = F / B``
  and can run at most at ``min(peak FLOP/s, I x bandwidth)``. The ridge point
  ``peak / bandwidth`` separates memory-bound work (left) from compute-bound work
  (right). Pope et al. (MLSys 2023) place transformer prefill right of it and
  decode far left.

SI units throughout: bytes, seconds, FLOP, bytes per second, FLOP per second.
The chapter's two explorers compute with these functions in
:mod:`inferlab.pages.explorers.bandwidth`.

Used in chapter 'The memory-bandwidth floor'; the batching chapter reuses the
floor functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from inferlab.common import checks
from inferlab.model import specs
from inferlab.model.capacity import (
    bytes_per_param,
    default_kv_precision,
    kv_bytes_for_context,
    kv_bytes_per_token,
    weight_bytes,
)
from inferlab.model.feasibility import check_context

GB = 1e9
TB = 1e12


# --------------------------------------------------------------------------------------
# The floor
# --------------------------------------------------------------------------------------


def floor_s(bytes_read: float, bandwidth_bytes_per_s: float) -> float:
    """The least time to read ``bytes_read`` at ``bandwidth_bytes_per_s``: their ratio.

    It assumes the memory runs at its peak rate the whole time and that nothing
    else (compute, synchronisation, kernel launches) adds time, so a real step is
    slower. 140 GB at H100's 3.35 TB/s: 41.8 ms.

    Used in chapter 'The memory-bandwidth floor'.
    """
    time = checks.non_negative("bytes_read", bytes_read) / checks.positive(
        "bandwidth_bytes_per_s", bandwidth_bytes_per_s
    )
    return checks.finite_result(time, "bytes_read", "bandwidth_bytes_per_s")


def ceiling_tok_s(step_s: float) -> float:
    """Tokens per second per user at one token per step: ``1 / step_s``.

    Applied to a floor, it is the ceiling: no user of that chip can see more.

    Used in chapter 'The memory-bandwidth floor'.
    """
    return checks.finite_result(1.0 / checks.positive("step_s", step_s), "step_s")


@dataclass(frozen=True)
class DecodeFloor:
    """The bytes one decode step reads, and the least time that takes.

    ``weight_bytes`` is read once per step whatever the batch; ``kv_bytes`` is
    the KV cache of every request in the batch, read in full at every step.
    """

    weight_bytes: float
    kv_bytes: float
    bandwidth_bytes_per_s: float
    batch: int

    @property
    def bytes_read(self) -> float:
        """Weights plus KV cache."""
        return self.weight_bytes + self.kv_bytes

    @property
    def weight_s(self) -> float:
        """The part of the floor spent reading weights."""
        return self.weight_bytes / self.bandwidth_bytes_per_s

    @property
    def kv_s(self) -> float:
        """The part of the floor spent reading the KV cache."""
        return self.kv_bytes / self.bandwidth_bytes_per_s

    @property
    def step_s(self) -> float:
        """The floor, the least time of one decode step, in seconds."""
        return self.bytes_read / self.bandwidth_bytes_per_s

    @property
    def per_user_tok_s(self) -> float:
        """The ceiling, the most tokens per second any one user of the batch can see."""
        return 1.0 / self.step_s

    @property
    def aggregate_tok_s(self) -> float:
        """The most tokens per second summed over the batch (memory-bound regime only)."""
        return self.batch / self.step_s


def decode_floor(
    weight_bytes: float,
    bandwidth_bytes_per_s: float,
    *,
    kv_bytes_per_token: float = 0.0,
    context_tokens: float = 0,
    batch: int = 1,
) -> DecodeFloor:
    """The memory-bandwidth floor of one decode step.

    Formula::

        step_s >= (weight_bytes + batch x context_tokens x kv_bytes_per_token)
                  / bandwidth_bytes_per_s

    Assumptions: every weight is read once per step (dense models; for a
    mixture of experts pass the bytes of the experts actually read), every
    request's whole KV cache is read once per step, and memory runs at its peak.
    Compute time and overlap are ignored, so real steps are slower. Source: the
    argument of Pope et al. (MLSys 2023), section 2.

    Pass ``bandwidth_bytes_per_s`` summed over chips for a model split across
    several (an ideal split; :mod:`inferlab.model.parallel` adds the communication).

    Used in chapter 'The memory-bandwidth floor'.
    """
    weights = checks.positive("weight_bytes", weight_bytes)
    bandwidth = checks.positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    per_token = checks.non_negative("kv_bytes_per_token", kv_bytes_per_token)
    context = checks.non_negative("context_tokens", context_tokens)
    batch = checks.whole("batch", batch)
    return DecodeFloor(weights, per_token * context * batch, bandwidth, batch)


def params_read(model: specs.ModelSpec, tokens) -> float | np.ndarray:
    """Parameters one step reads when it pushes ``tokens`` tokens through a model.

    Every matrix a step multiplies by is read once per step. The input embedding table,
    unless it is also the output head, is only looked up: one row per token, not the whole
    table (``vocab_size x hidden_size``, 6.5 % of Llama 3.1 8B). Dense models read all their
    other weights whatever the batch. A mixture of experts with ``E`` routed experts per
    layer, ``k`` used per token, reads its dense part (attention, dense layers, shared
    experts, the output head) and only the experts some token chose. With each token
    choosing its ``k`` independently and uniformly, an expert is missed by all ``T``
    tokens with probability ``(1 - k / E) ** T``, so the expected read is::

        dense - table + rows(T) + experts_total x (1 - (1 - k / E) ** T)

    where ``experts_total = (params_total - params_active) / (1 - k / E)`` and
    ``dense = params_total - experts_total`` follow from the two counts in
    ``data/models.csv`` (shared experts and dense layers are in both, so they land in
    ``dense``), ``table`` is :attr:`~inferlab.model.specs.ModelSpec.lookup_params` and
    ``rows(T) = min(T, vocab_size) x hidden_size``. At one token a mixture reads its
    active parameters less the table; by a few dozen tokens (Mixtral's 2 of 8) or a few
    hundred (DeepSeek-V3's 8 of 256) nearly all of ``params_total``: the active-parameter
    floor holds at batch 1 only. Real routers are not uniform, which lowers the read a
    little at mid-size batches.

    Used in chapters 'The memory-bandwidth floor' and 'Batching'.
    """
    model = specs.as_model(model)
    t = checks.reals("tokens", tokens, low=1.0)
    table = model.lookup_params
    rows = np.minimum(t, model.vocab_size) * model.hidden_size if table else 0.0 * t
    if model.experts <= 1 or model.experts_per_token >= model.experts:
        result = model.params_total - table + rows
    else:
        share = model.experts_per_token / model.experts
        experts_total = (model.params_total - model.params_active) / (1 - share)
        dense = model.params_total - experts_total
        result = dense - table + rows + experts_total * (1 - (1 - share) ** t)
    return float(result) if result.ndim == 0 else result


def flop_per_token(model: specs.ModelSpec) -> float:
    """Matrix-multiply FLOPs of one token through the model and its output head: two per
    active parameter it multiplies by, ``2 x (params_active - lookup_params)`` (an
    embedding lookup multiplies nothing; a tied table is multiplied by as the output
    head, and counts). That is a decoded token's work; a prompt token other than the
    last skips the head (:func:`head_flop`, :func:`request_flop`).

    Used in chapter 'Batching'.
    """
    model = specs.as_model(model)
    return 2.0 * (model.params_active - model.lookup_params)


def head_flop(model: specs.ModelSpec) -> float:
    """FLOPs of the output head for one row of logits, ``2 x vocab_size x hidden_size``.

    An engine computes logits only where it samples a token: each decoded token, and
    the last position of a prompt, which gives the first output token. The other
    prompt positions stop at the final norm, so a prefill of ``p`` tokens pays the head
    once, not ``p`` times. For Llama 3.1 8B that is about 7 % of a token's FLOPs.

    Used in chapters 'Prefill and decode' and 'How far the model carries'.
    """
    model = specs.as_model(model)
    return 2.0 * model.vocab_size * model.hidden_size


def request_flop(model: specs.ModelSpec, prompt_tokens, output_tokens=1):
    """Matrix-multiply FLOPs to serve one request of ``prompt_tokens`` in and
    ``output_tokens`` out: every token through the layers, and the head once per output
    token (the prompt's last position yields the first)::

        (flop_per_token - head_flop) x (prompt + output - 1) + head_flop x output

    With ``output_tokens=1`` it is a prefill's work, the compute floor of the time to
    first token. Attention's own arithmetic is not included
    (:func:`attention_flop_per_pair`). Vectorised over both lengths.

    Used in chapters 'Prefill and decode' and 'Choosing hardware'.
    """
    prompt = checks.reals("prompt_tokens", prompt_tokens, low=1.0)
    output = checks.reals("output_tokens", output_tokens, low=1.0)
    head = head_flop(model)
    result = (flop_per_token(model) - head) * (prompt + output - 1) + head * output
    return float(result) if np.ndim(result) == 0 else result


#: FLOPs per (query head, head dimension, layer) for one query token against one cached token:
#: a multiply-add in Q K^T and another in the weighted sum of V.
ATTENTION_FLOP_PER_PAIR = 4


def attention_flop_per_pair(model: specs.ModelSpec, form: str = "prefill") -> float:
    """FLOPs of attention for one (query token, cached token) pair, summed over the layers.

    Grouped-query and multi-head attention: a multiply-add per head dimension for the
    score and another for the weighted sum of values, ``4 x layers x heads x head_dim``,
    whichever the ``form``.

    Multi-head latent attention (DeepSeek-V3) is computed in two forms. ``"prefill"``
    decompresses keys and values and attends as ordinary heads do, with scores over the
    ``head_dim`` plus ``qk_rope_head_dim`` query dimensions. ``"decode"`` is the
    *absorbed* form that decode kernels use (the key and value up-projections folded
    into the query and output ones, as the DeepSeek-V2 report notes; FlashMLA):
    each head's query meets the cached latent itself, ``kv_lora_rank + qk_rope_head_dim``
    wide for the score and ``kv_lora_rank`` for the values. It reads only the small cache
    but does about three times the arithmetic per pair, which makes MLA's decode
    attention compute-bound where grouped-query attention's is memory-bound.

    Used in chapter 'Batching'.
    """
    model = specs.as_model(model)
    checks.option("form", form, ("prefill", "decode"))
    heads, layers = model.attention_heads, model.layers
    if model.attention != "mla":
        return float(ATTENTION_FLOP_PER_PAIR * layers * heads * model.head_dim)
    if form == "decode":
        per_head = 2 * (model.kv_lora_rank + model.qk_rope_head_dim) + 2 * model.kv_lora_rank
    else:
        per_head = 2 * (model.head_dim + model.qk_rope_head_dim) + 2 * model.head_dim
    return float(per_head * heads * layers)


#: Bytes per activation value written or read between kernels (16-bit activations).
ACTIVATION_BYTES = 2.0


def activation_bytes_per_token(model: specs.ModelSpec, tp: int = 1,
                               attention_dp: bool = False) -> float:
    """Bytes of activations one token moves through memory between kernels, summed over
    the ``tp`` chips of a tensor-parallel replica.

    A matrix multiply is not the only kernel of a layer. Norms, rotary embeddings, the
    gated activation, residual adds and the hand-offs into and out of the matrix
    multiplies each read their input from memory and write their output back, once per
    token. The count assumes every such tensor is written once and read once at 16 bits
    (an engine that fuses kernels moves less); per layer, in elements:

    - on every chip, whatever ``tp`` (tensor parallelism splits the heads and the MLP,
      not the hidden vector): the two norms read and write it (4), the two residual adds
      read two and write one (6), the QKV and gate/up multiplies read it (2) and the
      output and down multiplies write it (2): ``14 x hidden``. With ``attention_dp``
      each chip runs whole requests of its own, so each token's hidden vector lives on
      one chip and this part is not repeated;
    - split over the ``tp`` chips: the QKV output written, then read and written by the
      rotary embedding, ``3 x (q + 2 kv)``; the attention output written and read,
      ``2 x q``; the MLP's gate and up outputs written and read, its product written and
      read, ``6 x intermediate``.

    A mixture-of-experts layer runs that MLP for each of a token's ``experts_per_token``
    experts and each shared expert (``moe_intermediate_size`` wide), and its router copies
    the hidden vector out to the experts and back, ``2 x (1 + experts_per_token) x
    hidden``. Its dense layers use ``intermediate_size``. Since the traffic grows with the
    hidden size and the FLOPs with its square, this work weighs more on a small model:
    nearly twice as much per FLOP for Llama 3.1 8B as for Llama 2 70B.

    Used in chapter 'Batching'.
    """
    model = specs.as_model(model)
    tp = checks.whole("tp", tp)
    copies = 1 if checks.instance("attention_dp", attention_dp, bool) else tp
    hidden = model.hidden_size
    q = model.attention_heads * model.head_dim
    kv = model.kv_heads * model.head_dim
    attention = 14 * hidden * copies + 3 * (q + 2 * kv) + 2 * q
    dense_mlp = 6 * model.intermediate_size
    elements = (model.layers - model.moe_layers) * (attention + dense_mlp)
    if model.moe_layers:
        width = model.moe_intermediate_size or model.intermediate_size
        experts = model.experts_per_token + model.shared_experts
        router = 2 * (1 + model.experts_per_token) * hidden * copies
        elements += model.moe_layers * (attention + 6 * width * experts + router)
    return float(elements * ACTIVATION_BYTES)


def model_decode_floor(
    model: specs.ModelSpec,
    precision: str,
    bandwidth_bytes_per_s: float,
    *,
    context_tokens: float = 0,
    batch: int = 1,
    kv_precision: str | None = None,
    use_active_params: bool = True,
) -> DecodeFloor:
    """:func:`decode_floor` for a model of ``data/models.csv`` at ``precision``.

    Weights are what one decode step of ``batch`` tokens reads
    (:func:`params_read`: every weight of a dense model but the embedding rows it does
    not look up; the dense part and the experts the batch's tokens route to for a
    mixture, from its active parameters at batch 1 towards all of them) unless
    ``use_active_params`` is false, which reads all ``params_total``. The KV cache is
    stored at ``kv_precision`` (default: the weights' precision, except 4-bit weights,
    whose cache is kept at 8 bits); sliding-window layers hold at most their window
    (:func:`inferlab.model.capacity.kv_bytes_for_context`).

    A context beyond the model's limit raises ``Infeasible`` (``"context"``).

    Used in chapter 'The memory-bandwidth floor'.
    """
    model = specs.as_model(model)
    if context_tokens:
        check_context(model, math.ceil(context_tokens))
    batch = checks.whole("batch", batch)
    params = params_read(model, batch) if use_active_params else model.params_total
    if kv_precision is None:
        kv_precision = default_kv_precision(precision)
    per_token = kv_bytes_per_token(model, kv_precision)
    if context_tokens and model.sliding_layers:
        per_token = kv_bytes_for_context(model, context_tokens, kv_precision) / context_tokens
    return decode_floor(
        weight_bytes(params, precision),
        bandwidth_bytes_per_s,
        kv_bytes_per_token=per_token,
        context_tokens=context_tokens,
        batch=batch,
    )


# --------------------------------------------------------------------------------------
# The roofline
# --------------------------------------------------------------------------------------


def ridge_point_flop_per_byte(peak_flop_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """The ridge point: ``peak_flop_per_s / bandwidth_bytes_per_s`` FLOP per byte.

    Work with lower arithmetic intensity is memory-bound; with higher, compute-bound.
    H100 at BF16: 989.4 TFLOP/s / 3.35 TB/s = 295 FLOP per byte (Williams et al. 2009).

    Used in chapter 'The memory-bandwidth floor'.
    """
    ridge = checks.positive("peak_flop_per_s", peak_flop_per_s) / checks.positive(
        "bandwidth_bytes_per_s", bandwidth_bytes_per_s
    )
    return checks.finite_result(ridge, "peak_flop_per_s", "bandwidth_bytes_per_s")


def attainable_flop_per_s(intensity_flop_per_byte, peak_flop_per_s: float,
                          bandwidth_bytes_per_s: float):
    """The roofline: ``min(peak_flop_per_s, intensity x bandwidth_bytes_per_s)``.

    Accepts a number or a NumPy array of intensities (all >= 0) and returns the
    same shape. Source: Williams, Waterman and Patterson, CACM 52(4), 2009.

    Used in chapter 'The memory-bandwidth floor'.
    """
    peak = checks.positive("peak_flop_per_s", peak_flop_per_s)
    bandwidth = checks.positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    intensity = checks.reals("intensity_flop_per_byte", intensity_flop_per_byte, low=0.0)
    result = np.minimum(peak, intensity * bandwidth)
    return float(result) if result.ndim == 0 else result


def roofline_time_s(flop: float, bytes_moved: float, peak_flop_per_s: float,
                    bandwidth_bytes_per_s: float) -> float:
    """The roofline's least time for ``flop`` FLOPs over ``bytes_moved`` bytes.

    Formula: ``max(flop / peak_flop_per_s, bytes_moved / bandwidth_bytes_per_s)``,
    the time the slower of the two resources needs if the other overlaps perfectly.

    Used in chapter 'The memory-bandwidth floor'.
    """
    time = max(
        checks.non_negative("flop", flop) / checks.positive("peak_flop_per_s", peak_flop_per_s),
        checks.non_negative("bytes_moved", bytes_moved)
        / checks.positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s),
    )
    return checks.finite_result(time, "flop", "bytes_moved", "peak_flop_per_s",
                                "bandwidth_bytes_per_s")


@dataclass(frozen=True)
class PassCost:
    """FLOPs and bytes of one forward pass, and their ratio."""

    flop: float
    bytes_moved: float

    @property
    def intensity_flop_per_byte(self) -> float:
        """Arithmetic intensity, in FLOPs per byte moved."""
        return self.flop / self.bytes_moved


def decode_pass(
    params_active: float,
    precision: str,
    *,
    kv_bytes_per_token: float = 0.0,
    context_tokens: float = 0,
    batch: int = 1,
) -> PassCost:
    """FLOPs and bytes of one decode step of ``batch`` requests.

    FLOPs: ``2 x params_active x batch`` (one multiply and one add per weight per
    token; attention's own FLOPs, a few per cent at moderate context, are left
    out). Bytes: the weights once plus every request's KV cache. At batch 1 and
    2-byte weights the intensity is about 1 FLOP per byte; each extra request in
    the batch adds FLOPs but (nearly) no bytes, which walks decode toward the
    ridge (Pope et al., MLSys 2023).

    Used in chapter 'The memory-bandwidth floor'.
    """
    params = checks.positive("params_active", params_active)
    batch = checks.whole("batch", batch)
    weights = weight_bytes(params, precision)
    kv = checks.non_negative("kv_bytes_per_token", kv_bytes_per_token) * checks.non_negative(
        "context_tokens", context_tokens
    ) * batch
    return PassCost(2.0 * params * batch, weights + kv)


def prefill_pass(
    params_active: float,
    precision: str,
    prompt_tokens: int,
    *,
    kv_bytes_per_token: float = 0.0,
) -> PassCost:
    """FLOPs and bytes of the prefill of one ``prompt_tokens``-long prompt.

    FLOPs: ``2 x params_active x prompt_tokens``. Bytes: the weights once plus the
    KV cache written for the prompt. The intensity grows with the prompt: about
    ``prompt_tokens / bytes_per_param`` FLOP per byte when the weights dominate.

    Used in chapter 'The memory-bandwidth floor'.
    """
    params = checks.positive("params_active", params_active)
    prompt = checks.positive("prompt_tokens", prompt_tokens)
    weights = weight_bytes(params, precision)
    kv = checks.non_negative("kv_bytes_per_token", kv_bytes_per_token) * prompt
    return PassCost(2.0 * params * prompt, weights + kv)


#: Which of a chip's peak rates applies to matrix multiplies with weights in each format.
#: ``int4`` weights are unpacked to 16 bits before the multiply (weight-only
#: quantization), so they run at the BF16 rate; ``fp4`` runs at the chip's native
#: 4-bit rate, which only Blackwell-generation rows of ``data/hardware.csv`` have.
PEAK_COLUMN: dict[str, str] = {
    "bf16": "bf16_flop_per_s",
    "fp16": "bf16_flop_per_s",
    "int4": "bf16_flop_per_s",
    "fp8": "fp8_flop_per_s",
    "fp4": "fp4_flop_per_s",
    "int8": "int8_op_per_s",
}


def peak_flop_per_s(chip: specs.Chip, precision: str) -> float:
    """The chip's dense peak for matrix multiplies at ``precision`` (see :data:`PEAK_COLUMN`).

    Raises ``ValueError`` if ``data/hardware.csv`` gives no such rate for the chip.

    Used in chapter 'The memory-bandwidth floor'.
    """
    bytes_per_param(precision)  # rejects unknown formats with the allowed list
    key = precision.lower()
    if key not in PEAK_COLUMN:
        raise ValueError(
            f"precision: {precision!r} has no peak rate in data/hardware.csv; "
            f"allowed: {', '.join(PEAK_COLUMN)}"
        )
    chip = specs.as_chip(chip)
    peak = getattr(chip, PEAK_COLUMN[key])
    if not math.isfinite(peak):
        raise ValueError(
            f"chip: {chip.name!r} has no published {key} peak rate in data/hardware.csv"
        )
    return peak


def sustained_flop_per_s(chip: specs.Chip, precision: str) -> float:
    """The dense rate ``chip`` can hold at ``precision`` within its power limit.

    A card that runs a full-power part's silicon at fewer watts (``full_power_part``
    in ``data/hardware.csv``: the H100 NVL at 400 W and the H100 PCIe at 350 W are
    the H100 SXM's die, rated at 700 W; the MI300X at 750 W has the compute die and
    the peaks of the MI325X, rated at 1,000 W) cannot draw the power its datasheet peak
    needs for long. Dense matrix multiplies are where a GPU meets its power limit,
    so the rate it holds is taken as at most its watts times the FLOP per joule
    of the full-power part at that part's peak::

        sustained = min(peak, board_power_w * full_peak / full_power_w)

    An assumption, not a fit: the energy of one FLOP is taken as the full-power
    part's at its peak clock, while a capped card also lowers its voltage and so
    spends a little less, which makes this a pessimistic bound. It leaves every
    chip without a ``full_power_part`` at its peak.

    Used in chapter 'Batching' (the serving model's compute rate).
    """
    chip = specs.as_chip(chip)
    peak = peak_flop_per_s(chip, precision)
    if not chip.full_power_part:
        return peak
    full = specs.chip(chip.full_power_part)
    if not (math.isfinite(chip.board_power_w) and math.isfinite(full.board_power_w)):
        raise ValueError(f"chip: {chip.name!r} names full_power_part {full.name!r}, but "
                         "data/hardware.csv gives no board_power_w for both")
    return min(peak, chip.board_power_w * peak_flop_per_s(full, precision)
               / full.board_power_w)


def clock_slowdown(chip: specs.Chip, precision: str) -> float:
    """How many times longer ``chip`` takes than its full-power part over work that
    neither memory nor power bounds: small kernels between the big matrix multiplies.

    A card that runs a full-power part's die at a lower clock (the H100 and H200 NVL
    cards) is rated lower on its datasheet by that clock, so the ratio of the two
    datasheet peaks at ``precision`` is taken as the ratio of clocks::

        slowdown = full_peak / peak

    An assumption: a datasheet peak is rated at a sustained tensor clock, which may
    sit below the clock small kernels run at. For the H100 PCIe the ratio also
    counts its fewer multiprocessors (114 of 132), over which such kernels spread
    too. The datasheets' rounding makes it differ between formats in the fourth
    digit. 1 for a chip without a ``full_power_part``, and for the MI300X, whose
    datasheet peaks are the MI325X's.

    Used in chapter 'Batching' (the share of a step's fixed cost that runs at the
    chip's clock, :meth:`inferlab.serving.calibration.Stack.step_overhead_on`).
    """
    chip = specs.as_chip(chip)
    peak = peak_flop_per_s(chip, precision)
    if not chip.full_power_part:
        return 1.0
    return max(1.0, peak_flop_per_s(specs.chip(chip.full_power_part), precision) / peak)


# --------------------------------------------------------------------------------------
# Capacity meets bandwidth: the best aggregate rate a group of chips allows
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchedThroughput:
    """The largest batch that fits on ``chips`` chips, and the roofline's rate at that batch."""

    chips: int
    batch: int
    step_s: float
    bound: str

    @property
    def aggregate_tok_s(self) -> float:
        """Tokens per second summed over the batch (0 if nothing fits)."""
        return self.batch / self.step_s if self.batch else 0.0

    @property
    def per_user_tok_s(self) -> float:
        """Tokens per second each user sees (0 if nothing fits)."""
        return 1.0 / self.step_s if self.batch else 0.0


def throughput_at_max_batch(
    chip: specs.Chip,
    model: specs.ModelSpec,
    precision: str,
    context_tokens: int,
    *,
    chips: int = 1,
    reserve_fraction: float = 0.0,
) -> BatchedThroughput:
    """The roofline bound on aggregate decode rate at the largest batch that fits.

    Weights (all ``params_total``) and the KV cache (at ``precision``) are split
    evenly over ``chips`` chips with ``reserve_fraction`` of each held back. The
    batch is the most requests of ``context_tokens`` tokens whose cache fits
    (:func:`inferlab.model.capacity.max_batch`); the step time is
    :func:`roofline_time_s` per chip for ``2 x params_active x batch / chips`` FLOPs
    and ``(weights + KV cache) / chips`` bytes. Communication is ignored.

    When memory is full and the step is memory-bound, the step reads the whole
    usable memory, so the rate is ``batch x bandwidth / usable bytes``: a chip
    with more memory per unit of bandwidth gains twice, from the bandwidth and
    from the larger batch. ``bound`` says which of ``"compute"`` or ``"memory"``
    set the step (``"capacity"`` if not even one request fits).

    Used in chapter 'The memory-bandwidth floor' (H100 against H200).
    """
    from inferlab.model.capacity import max_batch

    chips = checks.whole("chips", chips)
    chip, model = specs.as_chip(chip), specs.as_model(model)
    check_context(model, context_tokens)
    weights = weight_bytes(model.params_total, precision)
    per_token = kv_bytes_per_token(model, precision)
    batch = max_batch(chips * chip.memory_capacity_bytes, weights, per_token, context_tokens,
                      reserve_fraction=reserve_fraction)
    if batch == 0:
        return BatchedThroughput(chips, 0, math.inf, "capacity")
    peak = peak_flop_per_s(chip, precision)
    flop = 2.0 * model.params_active * batch / chips
    bytes_moved = (weights + batch * context_tokens * per_token) / chips
    compute_s = flop / peak
    memory_s = bytes_moved / chip.memory_bandwidth_bytes_per_s
    bound = "compute" if compute_s > memory_s else "memory"
    return BatchedThroughput(chips, batch, max(compute_s, memory_s), bound)
