"""The step-time model of one serving replica: how long one forward pass of a batch takes.

A *replica* is one copy of a model served by ``tp`` chips with tensor parallelism.
Every step of a serving engine is one forward pass over the tokens it has
gathered: one decode token for each running request, plus any prompt tokens
being prefilled. The model of that step, with its assumptions stated so that
you can argue with them:

- **memory time**: the weights are read once per step, whatever the batch, and
  every running request's KV cache is read once::

      memory_s = (weight_bytes + kv_bytes_per_token x context_tokens)
                 / (tp x bandwidth_per_chip x memory_efficiency)

  where ``context_tokens`` is the sum of the contexts the step attends over.
- **compute time**: two FLOPs per active parameter per token (a multiply and an
  add), for prefill and decode tokens alike::

      compute_s = 2 x params_active x tokens / (tp x peak_per_chip x compute_efficiency)

  Attention's own FLOPs (a few per cent at the prompt lengths used here) are left out.
- **the step** is the slower of the two (each resource overlaps the other
  perfectly), plus the tensor-parallel all-reduces, plus a fixed overhead
  (kernel launches, sampling, the scheduler's own work)::

      step_s = max(memory_s, compute_s) + allreduce_s(tokens) + step_overhead_s

  ``allreduce_s`` is two ring all-reduces per layer of ``tokens x hidden_size``
  activations (:func:`inferlab.parallel.ring_allreduce_s`), not overlapped.

The efficiency factors are the fraction of peak bandwidth and peak FLOP/s the
software reaches. They are not physics: the batching chapter sets them from one
published result and tests them on the others.

Everything is in SI units. The KV-cache capacity of the replica (how many tokens
of cache fit beside the weights) comes from :mod:`inferlab.capacity`; the peaks
from :mod:`inferlab.roofline`; the ring all-reduce from :mod:`inferlab.parallel`.

Used in chapter 'Batching'; the serving simulator (:mod:`inferlab.simulator`)
and the scenarios chapter build on it.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

import matplotlib.pyplot as plt
import numpy as np

from inferlab import specs
from inferlab.capacity import (
    ACTIVATION_RESERVE_FRACTION,
    bytes_per_param,
    kv_bytes_per_token,
    kv_tokens_that_fit,
    weight_bytes,
)
from inferlab.parallel import ring_allreduce_s
from inferlab.plotting import PALETTE, figure, label_kind
from inferlab.roofline import _freeze_layout, peak_flop_per_s
from inferlab.widgets import Explorer, register

#: All-reduces per layer in a tensor-parallel transformer — after attention and after the MLP
#: (Megatron-LM, Shoeybi et al. 2019).
ALLREDUCES_PER_LAYER = 2

#: Bytes per activation value sent in the all-reduces (16-bit activations).
ACTIVATION_BYTES = 2.0


def _whole(name: str, value, minimum: int = 1) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name}: {value!r} is not allowed; give a whole number >= {minimum}")
    return int(value)


def _fraction_in(name: str, value) -> float:
    if (not isinstance(value, numbers.Real) or isinstance(value, bool)
            or not math.isfinite(value) or not 0 < value <= 1):
        raise ValueError(f"{name}: {value!r} is not allowed; give a number in (0, 1]")
    return float(value)


def _non_negative(name: str, value) -> float:
    if (not isinstance(value, numbers.Real) or isinstance(value, bool)
            or not math.isfinite(value) or value < 0):
        raise ValueError(f"{name}: {value!r} is not allowed; give a finite number >= 0")
    return float(value)


@dataclass(frozen=True)
class Replica:
    """One model on ``tp`` chips, reduced to the coefficients of its step time.

    Build it with :func:`replica`. All rates are for the whole replica (summed
    over its ``tp`` chips) and already include the efficiency factors.

    Used in chapter 'Batching'.
    """

    name: str
    tp: int
    weight_bytes: float
    kv_bytes_per_token: float
    flop_per_token: float
    bandwidth_bytes_per_s: float
    peak_flop_per_s: float
    memory_efficiency: float
    compute_efficiency: float
    step_overhead_s: float
    allreduce_s_per_token: float
    allreduce_fixed_s: float
    kv_capacity_tokens: int

    # ---- the pieces of a step ------------------------------------------------------

    def memory_s(self, context_tokens):
        """Time to read the weights and ``context_tokens`` tokens of KV cache.

        Accepts a number or a NumPy array of context totals.
        """
        effective = self.bandwidth_bytes_per_s * self.memory_efficiency
        context = np.asarray(context_tokens)
        return (self.weight_bytes + self.kv_bytes_per_token * context) / effective

    def compute_s(self, tokens):
        """Time to do the matrix multiplies of ``tokens`` tokens (prefill and decode alike)."""
        effective = self.peak_flop_per_s * self.compute_efficiency
        return self.flop_per_token * np.asarray(tokens) / effective

    def allreduce_s(self, tokens):
        """Time of the step's tensor-parallel all-reduces (0 for one chip)."""
        return self.allreduce_fixed_s + self.allreduce_s_per_token * np.asarray(tokens)

    def step_s(self, context_tokens, tokens):
        """The modelled time of one step that attends over ``context_tokens`` tokens of
        KV cache and pushes ``tokens`` tokens through the weights::

            max(memory_s, compute_s) + allreduce_s + step_overhead_s

        Vectorised: pass arrays of equal shape for many steps at once.
        """
        result = (np.maximum(self.memory_s(context_tokens), self.compute_s(tokens))
                  + self.allreduce_s(tokens) + self.step_overhead_s)
        return float(result) if np.ndim(result) == 0 else result

    def decode_step_s(self, batch, context_tokens):
        """One decode step of ``batch`` requests, each with ``context_tokens`` of context."""
        batch = np.asarray(batch)
        return self.step_s(batch * np.asarray(context_tokens), batch)

    def prefill_s(self, prompt_tokens):
        """One step that prefills a single prompt of ``prompt_tokens`` tokens and nothing else.

        On a lightly loaded server this is the time to first token.
        """
        return self.step_s(prompt_tokens, prompt_tokens)

    # ---- derived figures -----------------------------------------------------------

    @property
    def ridge_tokens(self) -> float:
        """Tokens per step at which compute time equals the weights' memory time.

        Below it (small batches, no KV cache) a step is memory-bound and adding a
        request to the batch is almost free; above it every token costs compute.
        """
        return (self.weight_bytes / (self.bandwidth_bytes_per_s * self.memory_efficiency)
                * self.peak_flop_per_s * self.compute_efficiency / self.flop_per_token)

    def with_efficiency(self, memory_efficiency: float | None = None,
                        compute_efficiency: float | None = None,
                        step_overhead_s: float | None = None) -> Replica:
        """The same replica with other efficiency factors or overhead (others unchanged)."""
        changes = {}
        if memory_efficiency is not None:
            changes["memory_efficiency"] = _fraction_in("memory_efficiency", memory_efficiency)
        if compute_efficiency is not None:
            changes["compute_efficiency"] = _fraction_in("compute_efficiency", compute_efficiency)
        if step_overhead_s is not None:
            changes["step_overhead_s"] = _non_negative("step_overhead_s", step_overhead_s)
        return replace(self, **changes)


def replica(
    model: str | specs.ModelSpec = "Llama 2 70B",
    chip: str | specs.Chip = "NVIDIA H200 SXM",
    tp: int = 1,
    precision: str = "fp8",
    *,
    kv_precision: str | None = None,
    memory_efficiency: float = 1.0,
    compute_efficiency: float = 1.0,
    step_overhead_s: float = 0.0,
    reserve_fraction: float = ACTIVATION_RESERVE_FRACTION,
    peak_flop_per_s_per_chip: float | None = None,
    hop_latency_s: float = 0.0,
) -> Replica:
    """Build the step-time model of ``model`` on ``tp`` chips of ``chip`` at ``precision``.

    ``model`` and ``chip`` are names from ``data/models.csv`` and
    ``data/hardware.csv`` (or the specs themselves). Weights are all
    ``params_total`` at ``precision``; FLOPs follow ``params_active``. The KV cache
    is stored at ``kv_precision`` (default: the weights' format, but 8 bits for
    4-bit weights). The chips' memory, less ``reserve_fraction`` for activations
    (:data:`inferlab.capacity.ACTIVATION_RESERVE_FRACTION` by default), holds the
    weights and the cache; what is left, in tokens, is ``kv_capacity_tokens``.
    The peak rate is the chip's dense rate for ``precision``
    (:func:`inferlab.roofline.peak_flop_per_s`) unless ``peak_flop_per_s_per_chip``
    overrides it. All-reduces use the chip's interconnect figure from the table.

    Raises ``ValueError`` naming the argument for an unknown model, chip or
    format, ``tp < 1``, efficiencies outside (0, 1], a negative overhead, or a
    model whose weights leave no room for even one token of KV cache on ``tp``
    chips (it says how many chips would be needed).

    Used in chapter 'Batching'.
    """
    spec = specs.model(model) if isinstance(model, str) else model
    hw = specs.chip(chip) if isinstance(chip, str) else chip
    tp = _whole("tp", tp)
    memory_efficiency = _fraction_in("memory_efficiency", memory_efficiency)
    compute_efficiency = _fraction_in("compute_efficiency", compute_efficiency)
    step_overhead_s = _non_negative("step_overhead_s", step_overhead_s)
    if kv_precision is None:
        kv_precision = "int8" if bytes_per_param(precision) < 1 else precision
    weights = weight_bytes(spec.params_total, precision)
    per_token = kv_bytes_per_token(spec, kv_precision)
    capacity = tp * hw.memory_capacity_bytes
    kv_tokens = kv_tokens_that_fit(capacity, weights, per_token, reserve_fraction=reserve_fraction)
    if kv_tokens < 1:
        usable = hw.memory_capacity_bytes * (1 - reserve_fraction)
        needed = math.floor(weights / usable) + 1
        raise ValueError(
            f"tp: {spec.name} at {precision} needs {weights / 1e9:.1f} GB of weights, which leaves "
            f"no room for the KV cache on {tp} x {hw.name} ({usable / 1e9:.1f} GB usable each); "
            f"give tp >= {needed}"
        )
    if peak_flop_per_s_per_chip is None:
        peak = peak_flop_per_s(hw, precision)
    else:
        if (not isinstance(peak_flop_per_s_per_chip, numbers.Real)
                or not math.isfinite(peak_flop_per_s_per_chip) or peak_flop_per_s_per_chip <= 0):
            raise ValueError(f"peak_flop_per_s_per_chip: {peak_flop_per_s_per_chip!r} is not "
                             "allowed; give a positive, finite number")
        peak = float(peak_flop_per_s_per_chip)
    per_token_s = fixed_s = 0.0
    if tp > 1:
        link = hw.interconnect_bytes_per_s
        if not math.isfinite(link):
            raise ValueError(f"chip: {hw.name!r} has no interconnect bandwidth in "
                             "data/hardware.csv, so tp must be 1")
        count = spec.layers * ALLREDUCES_PER_LAYER
        # The ring cost is linear in the message: a fixed latency part plus a per-byte part.
        fixed_s = count * ring_allreduce_s(0.0, tp, link, hop_latency_s)
        per_token_s = count * ring_allreduce_s(spec.hidden_size * ACTIVATION_BYTES, tp, link)
    return Replica(
        name=f"{spec.name} on {tp} x {hw.name} ({precision})",
        tp=tp,
        weight_bytes=weights,
        kv_bytes_per_token=per_token,
        flop_per_token=2.0 * spec.params_active,
        bandwidth_bytes_per_s=tp * hw.memory_bandwidth_bytes_per_s,
        peak_flop_per_s=tp * peak,
        memory_efficiency=memory_efficiency,
        compute_efficiency=compute_efficiency,
        step_overhead_s=step_overhead_s,
        allreduce_s_per_token=per_token_s,
        allreduce_fixed_s=fixed_s,
        kv_capacity_tokens=int(kv_tokens),
    )


# --------------------------------------------------------------------------------------
# Steady state: the closed form of a server that always has `concurrency` requests in flight
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SteadyState:
    """A replica that always holds ``concurrency`` requests, in the mean-value closed form.

    Arrays have one entry per concurrency. ``per_user_tok_s`` is ``1 / step_s``
    (a request gets one token per step); ``aggregate_tok_s`` is output tokens per
    second summed over the requests of the replica, ``per_chip_tok_s`` the same
    divided by ``tp``.

    Used in chapter 'Batching'.
    """

    concurrency: np.ndarray
    step_s: np.ndarray
    tp: int
    fits: np.ndarray
    bound: np.ndarray

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
    ``c x (1 + prompt/output)`` tokens through the weights and attends over the
    mean context ``c x (prompt + output / 2)``::

        step_s = replica.step_s(c x (prompt + output / 2), c x (1 + prompt / output))

    Each user then sees ``1 / step_s`` tokens per second and the replica
    ``c / step_s``. ``fits`` is false where the KV cache of ``c`` full-length
    requests (``c x (prompt + output)`` tokens) exceeds the replica's capacity;
    ``bound`` says whether memory or compute set each step. The serving simulator
    agrees with this form in steady state (``tests/test_simulator.py``).

    Used in chapter 'Batching' (the throughput-interactivity curve).
    """
    c = np.atleast_1d(np.asarray(concurrency, dtype=float))
    if c.size == 0 or not np.all(np.isfinite(c)) or np.any(c < 1):
        raise ValueError(f"concurrency: {concurrency!r} is not allowed; give numbers >= 1")
    prompt = float(prompt_tokens)
    output = float(output_tokens)
    if not (math.isfinite(prompt) and prompt >= 1):
        raise ValueError(f"prompt_tokens: {prompt_tokens!r} is not allowed; give a number >= 1")
    if not (math.isfinite(output) and output >= 1):
        raise ValueError(f"output_tokens: {output_tokens!r} is not allowed; give a number >= 1")
    context = c * (prompt + output / 2)
    tokens = c * (1 + prompt / output)
    memory = rep.memory_s(context)
    compute = rep.compute_s(tokens)
    step = np.maximum(memory, compute) + rep.allreduce_s(tokens) + rep.step_overhead_s
    fits = c * (prompt + output) <= rep.kv_capacity_tokens
    bound = np.where(compute > memory, "compute", "memory")
    return SteadyState(c, step, rep.tp, fits, bound)


def throughput_at_bound(state: SteadyState, min_per_user_tok_s: float) -> float:
    """The most per-chip tokens per second on the curve with each user at or above the bound.

    Only concurrencies whose KV cache fits count. Returns 0 if no point qualifies.
    MLPerf's Server bound for Llama 2 70B is 5 tok/s per user (200 ms per token);
    its Interactive bound 25 tok/s (40 ms).

    Used in chapter 'Batching'.
    """
    bound = float(min_per_user_tok_s)
    if not (math.isfinite(bound) and bound > 0):
        raise ValueError(f"min_per_user_tok_s: {min_per_user_tok_s!r} is not allowed; "
                         "give a positive number")
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
    prompt_tokens: float = 300,
    output_tokens: float = 294,
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
    xs, ys = [], []
    for tp in tps:
        try:
            rep = replica(model, chip, tp, precision, memory_efficiency=efficiency,
                          compute_efficiency=efficiency, step_overhead_s=step_overhead_s)
        except ValueError as error:
            if str(error).startswith("tp:"):
                continue  # the weights do not fit on this many chips
            raise
        state = steady_state(rep, concurrency, prompt_tokens, output_tokens)
        xs.append(state.per_user_tok_s[state.fits])
        ys.append(state.per_chip_tok_s[state.fits])
    if not xs:
        raise ValueError(f"chip: {model} at {precision} does not fit on {max(tps)} x {chip}")
    x, y = pareto_front(np.concatenate(xs), np.concatenate(ys))
    return Front(chip, x, y)


# --------------------------------------------------------------------------------------
# Explorer: the throughput-interactivity curve
# --------------------------------------------------------------------------------------

CURVE_CHIPS = ("NVIDIA H100 SXM", "NVIDIA H200 SXM", "NVIDIA B200")

#: MLPerf's per-user bounds for Llama 2 70B in tokens per second — 1 / 200 ms and 1 / 40 ms.
MLPERF_PER_USER_TOK_S = {"Server": 5.0, "Interactive": 25.0}


@dataclass(frozen=True)
class CurveView:
    """What the curve explorer shows: one front per chip and the throughput at each bound.

    Used in chapter 'Batching'.
    """

    fronts: tuple[Front, ...]
    at_bound: dict[str, dict[str, float]]

    def drop(self, chip: str) -> float:
        """Fractional fall in per-chip throughput from the Server to the Interactive bound."""
        server = self.at_bound[chip]["Server"]
        return 1 - self.at_bound[chip]["Interactive"] / server if server else float("nan")


def curve_explorer_compute(
    precision: str = "fp8",
    prompt_tokens: int = 300,
    output_tokens: int = 294,
    efficiency: float = 0.65,
    step_overhead_ms: float = 1.0,
) -> CurveView:
    """The curve explorer's pure function: fronts of Llama 2 70B on H100, H200 and B200.

    Raises ``ValueError`` naming the argument for lengths below 1, an efficiency
    outside (0, 1] or a negative overhead.

    Used in chapter 'Batching'.
    """
    overhead = _non_negative("step_overhead_ms", step_overhead_ms) / 1e3
    fronts = tuple(
        interactivity_front(chip, "Llama 2 70B", precision, prompt_tokens, output_tokens,
                            efficiency=efficiency, step_overhead_s=overhead)
        for chip in CURVE_CHIPS
    )
    at_bound = {front.chip: {name: front.throughput_at(bound)
                             for name, bound in MLPERF_PER_USER_TOK_S.items()}
                for front in fronts}
    return CurveView(fronts, at_bound)


def _curve_render_factory(ax):
    lines = [ax.plot([1], [1], color=PALETTE[k], lw=2, label=chip.replace("NVIDIA ", ""))[0]
             for k, chip in enumerate(CURVE_CHIPS)]
    markers = [ax.plot([1, 1], [1, 1], "o", color=PALETTE[k], ms=6)[0]
               for k in range(len(CURVE_CHIPS))]
    for name, bound in MLPERF_PER_USER_TOK_S.items():
        ax.axvline(bound, color="0.4", ls="--", lw=1)
        ax.annotate(f"MLPerf {name}\n{1000 / bound:.0f} ms/token", (bound, 1.0),
                    xycoords=("data", "axes fraction"), xytext=(4, -4),
                    textcoords="offset points", va="top", fontsize=8, color="0.3")
    ax.set_xscale("log")
    ax.set_xlim(2, 400)
    ax.set_xlabel("interactivity: tokens per second per user")
    ax.set_ylabel("tokens per second per GPU")
    ax.legend(loc="lower left", fontsize=8)
    label_kind(ax, "modelled")

    def render(view: CurveView) -> str:
        top = 0.0
        for line, marker, front in zip(lines, markers, view.fronts, strict=True):
            line.set_data(front.per_user_tok_s, front.per_chip_tok_s)
            bounds = list(MLPERF_PER_USER_TOK_S.values())
            values = [view.at_bound[front.chip][name] for name in MLPERF_PER_USER_TOK_S]
            xs = [max(front.per_user_tok_s[front.per_chip_tok_s >= v].min(), b)
                  if v else b for b, v in zip(bounds, values, strict=True)]
            marker.set_data(xs, values)
            top = max(top, float(front.per_chip_tok_s.max()))
        ax.set_ylim(0, top * 1.1)
        parts = [f"{chip.replace('NVIDIA ', '')}: {view.at_bound[chip]['Server']:,.0f} -> "
                 f"{view.at_bound[chip]['Interactive']:,.0f} tok/s/GPU "
                 f"({view.drop(chip):.0%} drop)" for chip in CURVE_CHIPS]
        return "Server bound -> Interactive bound. " + "; ".join(parts)

    return render


@register("batch_curve", kind="analytic", chapter="03_batching")
def curve_explorer() -> Explorer:
    """Sliders: precision, prompt and output length, efficiency, per-step overhead.

    Used in chapter 'Batching'.
    """
    import ipywidgets as w

    controls = {
        "precision": w.Dropdown(options=["fp8", "fp16", "int4"], value="fp8",
                                description="precision"),
        "prompt_tokens": w.IntSlider(value=300, min=16, max=4096, step=16, description="prompt"),
        "output_tokens": w.IntSlider(value=294, min=16, max=4096, step=16, description="output"),
        "efficiency": w.FloatSlider(value=0.65, min=0.1, max=1.0, step=0.05,
                                    description="efficiency"),
        "step_overhead_ms": w.FloatSlider(value=1.0, min=0.0, max=20.0, step=0.5,
                                          description="overhead ms"),
    }
    fig, ax = figure(figsize=(7.5, 4.2))
    render = _curve_render_factory(ax)
    defaults = {name: control.value for name, control in controls.items()}
    _freeze_layout(fig, render, curve_explorer_compute(**defaults))
    plt.close(fig)
    return Explorer(curve_explorer_compute, render, controls, fig)
