"""Feasibility: whether a configuration can run at all, and if not, what does not fit by how much.

Every model in the book that takes a configuration (a chip, how many of them, a
model, a number format, a context length, a batch, a parallel layout) asks this
module first. Three things must hold, and each refusal says which one failed:

- **capacity**: on every chip, its share of the weights, of the KV cache and a
  reserve for activations and the runtime
  (:data:`inferlab.model.capacity.ACTIVATION_RESERVE_FRACTION`)
  fit in its memory;
- **context**: no request is longer than the model's context limit
  (``context_length_tokens`` in ``data/models.csv``: 4,096 for Llama 2 70B);
- **domain**: tensor parallelism splits every layer across chips that must
  exchange activations twice per layer, so its ``tp`` chips sit in one scale-up
  domain (``scaleup_domain_chips`` in ``data/hardware.csv``: 8 on an HGX board,
  72 in a GB200 NVL72 rack, 12 in an inf2.48xlarge, 256 in a TPU v5e pod).
  Pipeline stages pass one activation per token between them, which the
  scale-out network carries, so ``pp`` may span domains.

A refusal is an :class:`Infeasible`, a ``ValueError`` whose ``kind`` is
``"capacity"``, ``"context"`` or ``"domain"``. Sweeps ask for the largest
feasible batch or context (:meth:`Layout.max_batch`, :meth:`Layout.max_context`)
and stop there.

The weights are split evenly over ``tp x pp`` chips and the cache with them
(each chip holds ``1 / (tp x pp)`` of every request's cache); a real engine's
split is a little uneven, so these are the most optimistic fits.

Used in every modelling chapter; :mod:`inferlab.model.steptime` builds replicas on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferlab.common import checks
from inferlab.model import specs
from inferlab.model.capacity import (
    ACTIVATION_RESERVE_FRACTION,
    default_kv_precision,
    kv_bytes_for_context,
    kv_bytes_per_token,
    weight_bytes,
)

GB = 1e9
KINDS = ("capacity", "context", "domain")


class Infeasible(ValueError):
    """A configuration that cannot run; ``kind`` names the limit it breaks."""

    def __init__(self, kind: str, message: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
        super().__init__(message)
        self.kind = kind


def _specs(model, chip) -> tuple[specs.ModelSpec, specs.Chip]:
    return specs.as_model(model), specs.as_chip(chip)


def check_context(model: str | specs.ModelSpec, context_tokens) -> int:
    """``context_tokens`` as a whole number, refused (``"context"``) beyond ``model``'s limit.

    Used in every modelling chapter.
    """
    spec = specs.model(model) if isinstance(model, str) else model
    context = checks.whole("context_tokens", context_tokens)
    limit = spec.context_length_tokens
    if context > limit:
        raise Infeasible("context", (
            f"context_tokens: {context:,} exceeds {spec.name}'s context limit of "
            f"{limit:,} tokens (by {context - limit:,})"))
    return context


@dataclass(frozen=True)
class Layout:
    """A model laid out on ``tp x pp`` chips: what each chip holds and how much cache fits.

    Build it with :func:`layout`, which has already refused what does not fit.
    Byte figures are per chip; ``kv_capacity_tokens`` is for the whole layout
    (tokens of cache summed over all requests).

    Used in every modelling chapter.
    """

    model: specs.ModelSpec
    chip: specs.Chip
    precision: str
    kv_precision: str
    tp: int
    pp: int
    reserve_fraction: float
    weight_bytes_per_chip: float
    kv_bytes_per_token_per_chip: float
    usable_bytes_per_chip: float

    @property
    def chips(self) -> int:
        """Chips the layout occupies."""
        return self.tp * self.pp

    @property
    def kv_bytes_free_per_chip(self) -> float:
        """Bytes per chip left for the KV cache after the weights and the reserve."""
        return self.usable_bytes_per_chip - self.weight_bytes_per_chip

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache the layout holds beside its weights (all requests together)."""
        return int(math.floor(round(self.kv_bytes_free_per_chip
                                    / self.kv_bytes_per_token_per_chip, 6)))

    def _describe(self) -> str:
        return (f"{self.model.name} at {self.precision} on {self.chips} x {self.chip.name}"
                + (f" (tp={self.tp}, pp={self.pp})" if self.chips > 1 else ""))

    def max_context(self, batch: int = 1) -> int:
        """The longest context every one of ``batch`` requests can have: the cache and the
        model's limit both bound it. 0 if not even one token each fits."""
        batch = checks.whole("batch", batch)
        return min(self.model.context_length_tokens, self.kv_capacity_tokens // batch)

    def request_kv_bytes_per_chip(self, context_tokens: int) -> float:
        """Bytes of cache one request of ``context_tokens`` tokens holds on each chip; a
        sliding-window layer holds only its window
        (:func:`inferlab.model.capacity.kv_bytes_for_context`)."""
        if not self.model.sliding_layers:
            return context_tokens * self.kv_bytes_per_token_per_chip
        return kv_bytes_for_context(self.model, context_tokens, self.kv_precision) / self.chips

    def max_batch(self, context_tokens: int) -> int:
        """The most requests of ``context_tokens`` tokens whose cache fits (0 if none).

        Raises :class:`Infeasible` (``"context"``) if the context exceeds the model's limit.
        """
        context = self.check_context(context_tokens)
        if not self.model.sliding_layers:
            return self.kv_capacity_tokens // context
        return int(self.kv_bytes_free_per_chip // self.request_kv_bytes_per_chip(context))

    def check_context(self, context_tokens) -> int:
        """``context_tokens`` as a whole number, refused beyond the model's context limit."""
        return check_context(self.model, context_tokens)

    def check(self, batch: int, context_tokens: int) -> Layout:
        """Refuse ``batch`` requests of ``context_tokens`` tokens if they do not fit; else self.

        The message gives the cache they need, what the layout has free and how many
        such requests would fit.
        """
        batch = checks.whole("batch", batch)
        context = self.check_context(context_tokens)
        need = batch * self.request_kv_bytes_per_chip(context)
        free = self.kv_bytes_free_per_chip
        if need > free:
            fits = self.max_batch(context)
            raise Infeasible("capacity", (
                f"batch: {batch:,} requests of {context:,} tokens need "
                f"{need * self.chips / GB:,.1f} GB of KV cache, but {self._describe()} has "
                f"{free * self.chips / GB:,.1f} GB free after weights and reserve "
                f"(short by {(need - free) * self.chips / GB:,.1f} GB); at most {fits:,} such "
                "requests fit"))
        return self


def layout(
    model: str | specs.ModelSpec,
    chip: str | specs.Chip,
    precision: str = "fp8",
    *,
    tp: int = 1,
    pp: int = 1,
    kv_precision: str | None = None,
    reserve_fraction: float = ACTIVATION_RESERVE_FRACTION,
) -> Layout:
    """Lay ``model`` at ``precision`` out on ``tp x pp`` chips of ``chip``, or refuse.

    Refuses with :class:`Infeasible`:

    - ``"domain"`` if ``tp`` exceeds the chip's scale-up domain (or the chip has no
      scale-up link in ``data/hardware.csv`` and ``tp > 1``);
    - ``"capacity"`` if each chip's share of the weights, plus the reserve, leaves no
      room for even one token of KV cache (the message says how many chips would do).

    ``model`` and ``chip`` are names from ``data/`` or the specs themselves.

    Used in every modelling chapter.
    """
    spec, hw = _specs(model, chip)
    tp = checks.whole("tp", tp)
    pp = checks.whole("pp", pp)
    reserve = checks.fraction("reserve_fraction", reserve_fraction, high_open=True)
    kv_precision = default_kv_precision(precision) if kv_precision is None else kv_precision
    if tp > 1:
        if not math.isfinite(hw.link_bytes_per_s) or hw.domain_chips < 2:
            raise Infeasible("domain", (
                f"tp: {tp} needs a scale-up link between chips, and data/hardware.csv records "
                f"none for {hw.name}; give tp=1"))
        if tp > hw.domain_chips:
            raise Infeasible("domain", (
                f"tp: {tp} exceeds the {hw.domain_chips}-chip scale-up domain of {hw.name} "
                f"({hw.domain_chips} chips share one fabric; by {tp - hw.domain_chips}); "
                "split further with pipeline stages (pp) instead"))
    if pp > 1 and hw.domain_chips and tp * pp > hw.domain_chips \
            and not math.isfinite(hw.scaleout_bytes_per_s):
        raise Infeasible("domain", (
            f"pp: {tp * pp} chips span more than one {hw.domain_chips}-chip domain of {hw.name}, "
            "and data/hardware.csv records no scale-out network for it"))
    chips = tp * pp
    weights = weight_bytes(spec.params_total, precision) / chips
    usable = hw.memory_capacity_bytes * (1 - reserve)
    per_token = kv_bytes_per_token(spec, kv_precision) / chips
    if weights >= usable:
        total = weights * chips
        needed = math.floor(total / usable) + 1
        raise Infeasible("capacity", (
            f"tp: {spec.name} at {precision} needs {total / GB:,.1f} GB of weights; {chips} x "
            f"{hw.name} hold {usable * chips / GB:,.1f} GB after the {reserve:.0%} reserve "
            f"(short by {(weights - usable) * chips / GB:,.1f} GB, before any KV cache); it "
            f"needs at least {needed} chips"))
    return Layout(spec, hw, precision, kv_precision, tp, pp, reserve, weights, per_token, usable)


def fitting_layouts(model: specs.ModelSpec, chip: specs.Chip, precision: str, widths,
                    stages, allowed) -> tuple[list[tuple[int, int]], Infeasible | None]:
    """For each tensor-parallel width in ``widths``, the first of ``stages`` (pipeline
    depths, shallowest first) whose :func:`layout` fits and which ``allowed(tp, pp)``
    admits; and the last refusal met, ``None`` if there was none.

    A width outside the chip's scale-up domain tries no deeper pipeline: a deeper one
    crosses the same domain. The one search behind the predictor's layouts and the
    planner's replicas, which differ only in what they allow (a count that divides the
    system, or one within a budget).
    """
    widths = [int(tp) for tp in checks.wholes("widths", widths)]
    stages = [int(pp) for pp in checks.wholes("stages", stages)]
    if not callable(allowed):
        raise ValueError(f"allowed: {allowed!r} is not a function of (tp, pp)")
    found, last = [], None
    for tp in widths:
        for pp in stages:
            if not allowed(tp, pp):
                continue
            try:
                layout(model, chip, precision, tp=tp, pp=pp)
            except Infeasible as error:
                last = error
                if error.kind == "domain":
                    break
                continue
            found.append((tp, pp))
            break
    return found, last


def fewest_chips(model: str | specs.ModelSpec, chip: str | specs.Chip, precision: str = "fp8",
                 *, batch: int = 1, context_tokens: int = 1,
                 reserve_fraction: float = ACTIVATION_RESERVE_FRACTION) -> int:
    """The fewest chips (a whole pipeline of them) that hold the weights and ``batch`` requests
    of ``context_tokens`` tokens, after the reserve.

    The floor of any deployment: Llama 2 70B at 16 bits on 44 GB Cerebras wafers needs
    four, on 220 MiB Groq chips several hundred. Raises :class:`Infeasible` (``"context"``)
    beyond the model's context limit.

    Used in chapters 'The memory-bandwidth floor' and 'Choosing hardware'.
    """
    spec, hw = _specs(model, chip)
    batch = checks.whole("batch", batch)
    context = check_context(spec, context_tokens)
    kv_precision = default_kv_precision(precision)
    total = (weight_bytes(spec.params_total, precision)
             + batch * context * kv_bytes_per_token(spec, kv_precision))
    reserve = checks.fraction("reserve_fraction", reserve_fraction, high_open=True)
    usable = hw.memory_capacity_bytes * (1 - reserve)
    return max(1, math.ceil(round(total / usable, 9)))
