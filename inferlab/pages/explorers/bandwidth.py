"""The explorers of chapter 'The memory-bandwidth floor': the floor, and the roofline.

Each has a pure function here (:func:`floor_explorer_compute`,
:func:`roofline_explorer_compute`) over :mod:`inferlab.model.roofline`, declares its
controls, turns its results into tables and draws them. Each opens on the chapter's own worked
example, so the numbers it shows first are the ones the text gives:

- the floor explorer on the KV-cache example of section 'The floor': Llama 2 70B at FP8
  on an H200, a batch of 16 requests of 4,096 tokens, the cache at 8 bits;
- the roofline explorer on section 'The roofline': Llama 2 70B at BF16 on an H100,
  decode at batch 1 and a prefill of a 2,048-token prompt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from inferlab.common import checks
from inferlab.model import roofline, specs
from inferlab.model.capacity import (
    BYTES_PER_PARAM,
    KIB,
    default_kv_precision,
    kv_bytes_per_token,
    weight_bytes,
)
from inferlab.model.roofline import (
    DecodeFloor,
    PassCost,
    attainable_flop_per_s,
    decode_floor,
    decode_pass,
    peak_flop_per_s,
    prefill_pass,
    ridge_point_flop_per_byte,
)
from inferlab.pages.colors import KIND_COLORS, PALETTE
from inferlab.pages.explorers.base import Choice, Explorer, Slider, log_range, register
from inferlab.pages.explorers.marks import badged

#: The chip choice that uses the explorer's own bandwidth slider instead of a row of data.
CUSTOM_CHIP = "custom bandwidth"


_CONTEXT_GRID = np.unique(np.geomspace(1, 131072, 120).astype(int))


@dataclass(frozen=True)
class FloorView:
    """What the floor explorer shows: the floor, and the ceiling across context lengths."""

    floor: DecodeFloor
    chip: str
    capacity_bytes: float
    context_tokens: int
    contexts: np.ndarray
    per_user_tok_s: np.ndarray

    @property
    def chips_to_hold(self) -> float:
        """Chips of this kind needed to hold weights plus KV cache (nan for a custom bandwidth)."""
        if not math.isfinite(self.capacity_bytes):
            return math.nan
        return math.ceil(self.floor.bytes_read / self.capacity_bytes)


def floor_explorer_compute(
    params_b: float,
    precision: str,
    chip: str,
    bandwidth_tb_s: float,
    kv_kib_per_token: float,
    context_tokens: int,
    batch: int,
) -> FloorView:
    """The floor explorer's pure function.

    ``params_b`` billions of parameters at ``precision``, on ``chip`` (a row of
    ``data/hardware.csv``) or, if ``chip`` is :data:`CUSTOM_CHIP`, at
    ``bandwidth_tb_s`` TB/s; a KV cache of ``kv_kib_per_token`` KiB per token;
    ``batch`` requests of ``context_tokens`` tokens. Returns the floor and the
    per-user ceiling over a grid of context lengths.

    Used in chapter 'The memory-bandwidth floor'.
    """
    # No model is near a million billion parameters; the cap keeps the bytes finite.
    params = checks.positive("params_b", params_b, high=1e6) * 1e9
    if chip == CUSTOM_CHIP:
        bandwidth = checks.positive("bandwidth_tb_s", bandwidth_tb_s) * TB
        capacity = math.nan
    else:
        spec = specs.chip(chip)
        bandwidth = spec.memory_bandwidth_bytes_per_s
        capacity = spec.memory_capacity_bytes
    per_token = checks.non_negative("kv_kib_per_token", kv_kib_per_token) * KIB
    floor = decode_floor(
        weight_bytes(params, precision),
        bandwidth,
        kv_bytes_per_token=per_token,
        context_tokens=context_tokens,
        batch=batch,
    )
    steps = (floor.weight_bytes + per_token * _CONTEXT_GRID * floor.batch) / bandwidth
    return FloorView(floor, chip, capacity, int(context_tokens), _CONTEXT_GRID, 1.0 / steps)


@dataclass(frozen=True)
class RooflineView:
    """What the roofline explorer shows for one chip, model and batch."""

    chip: str
    peak_flop_per_s: float
    bandwidth_bytes_per_s: float
    decode: PassCost
    prefill: PassCost
    batch: int
    prompt_tokens: int

    @property
    def ridge_flop_per_byte(self) -> float:
        """The chip's ridge point."""
        return ridge_point_flop_per_byte(self.peak_flop_per_s, self.bandwidth_bytes_per_s)

    def attainable(self, cost: PassCost) -> float:
        """Attainable FLOP/s of ``cost`` on this chip."""
        return attainable_flop_per_s(cost.intensity_flop_per_byte, self.peak_flop_per_s,
                                     self.bandwidth_bytes_per_s)


def roofline_explorer_compute(
    chip: str, model: str, precision: str, batch: int, context_tokens: int
) -> RooflineView:
    """The roofline explorer's pure function: decode at ``batch`` and a prefill of
    ``context_tokens`` tokens of ``model`` at ``precision``, placed on ``chip``'s roofline.

    Used in chapter 'The memory-bandwidth floor'.
    """
    spec = specs.chip(chip)
    shape = specs.model(model)
    peak = peak_flop_per_s(spec, precision)
    kv_precision = default_kv_precision(precision)
    per_token = kv_bytes_per_token(shape, kv_precision)
    decode = decode_pass(shape.params_active, precision, kv_bytes_per_token=per_token,
                             context_tokens=context_tokens, batch=batch)
    prompt = max(int(context_tokens), 1)
    prefill = prefill_pass(shape.params_active, precision, prompt, kv_bytes_per_token=per_token)
    return RooflineView(chip, peak, spec.memory_bandwidth_bytes_per_s, decode, prefill,
                        int(batch), prompt)


CHAPTER = "02_bandwidth_floor"
GB = 1e9
TB = 1e12
MS = 1e3

# The chapter's worked examples, from the same tables the chapter reads.
_L2_70B = specs.model("Llama 2 70B")
_H100, _H200 = "NVIDIA H100 SXM", "NVIDIA H200 SXM"
_KV_PRECISION = default_kv_precision("fp8")

#: The chips the site's menus offer (the notebook's offer every row): the chapter's two,
#: the newest GPU of each vendor, SRAM machines, a laptop and desktop memory.
SITE_CHIPS = (_H100, _H200, "NVIDIA B200", "AMD MI300X", "Groq LPU (GroqChip)",
              "Cerebras WSE-3", "Apple M4 Max", "DDR5-5600 dual channel")

#: The chips the roofline's menu offers on the site: those of SITE_CHIPS with a BF16 peak
#: in the data, and the other accelerators the chapter's roofline figure draws.
SITE_ROOFLINE_CHIPS = (_H100, _H200, "NVIDIA B200", "AMD MI300X", "NVIDIA L40S",
                       "Google TPU v5e (per chip)", "AWS Inferentia2 (per chip)",
                       "Groq LPU (GroqChip)")

# Every third of the function's context lengths (and the last): a log axis needs no more.
_CURVE_EVERY = 3

_WIDTH, _HEIGHT = 560, 220


def _floor_tables(view: FloorView) -> dict[str, dict]:
    floor = view.floor
    keep = list(range(0, len(view.contexts), _CURVE_EVERY))
    if keep[-1] != len(view.contexts) - 1:
        keep.append(len(view.contexts) - 1)
    # Each part holds what depends on the same controls, so that the site stores it once
    # for them: the chip, the bytes (which do not depend on it), the step, the curve.
    return {
        "chip": {"chip": [view.chip], "bandwidth_tb_s": [floor.bandwidth_bytes_per_s / TB],
                 "capacity_gb": [view.capacity_bytes / GB]},
        "bytes": {"weight_gb": [floor.weight_bytes / GB], "kv_gb": [floor.kv_bytes / GB],
                  "batch": [floor.batch]},
        "step": {"weight_ms": [floor.weight_s * MS], "floor_ms": [floor.step_s * MS],
                 "per_user_tok_s": [floor.per_user_tok_s],
                 "aggregate_tok_s": [floor.aggregate_tok_s],
                 "chips_to_hold": [view.chips_to_hold],
                 # A log axis has no 0: a context of 0 is marked at 1 token.
                 "context_tokens": [max(view.context_tokens, 1)]},
        "ceiling": {"context_tokens": view.contexts[keep],
                    "per_user_tok_s": view.per_user_tok_s[keep]},
    }


def _floor_chart(part):
    import altair as alt

    segments = alt.Scale(domain=["weights", "KV cache"], range=PALETTE[:2])
    step = part("step")
    weights = step.mark_bar(height=28).encode(
        x=alt.X("zero:Q", title="floor per decode step (ms)", scale=alt.Scale(nice=True)),
        x2="weight_ms:Q",
        color=alt.Color(datum="weights", scale=segments, title=None,
                        legend=alt.Legend(orient="top-right", direction="horizontal",
                                          offset=0)),
        tooltip=[alt.Tooltip("weight_ms:Q", title="weights (ms)", format=".2f")],
    ).transform_calculate(zero="0")
    cache = step.mark_bar(height=28).encode(
        x="weight_ms:Q", x2="floor_ms:Q", color=alt.Color(datum="KV cache", scale=segments),
        tooltip=[alt.Tooltip("floor_ms:Q", title="floor (ms)", format=".2f")],
    )
    title = step.mark_text(align="left", baseline="top", fontSize=13, fontWeight="bold").encode(
        x=alt.value(0), y=alt.value(-4),
        text=alt.Text("line:N"),
    ).transform_calculate(line="'floor ' + format(datum.floor_ms, '.2f') + ' ms = ceiling ' + "
                               "format(datum.per_user_tok_s, ',.1f') + ' tok/s per user'")
    bar = alt.layer(weights, cache, title).properties(width=_WIDTH, height=60)

    modelled = KIND_COLORS["modelled"]
    context = alt.X("context_tokens:Q", title="context length (tokens)",
                    scale=alt.Scale(type="log", domain=[1, 131072]),
                    axis=alt.Axis(values=[1, 16, 256, 4096, 65536], format=","))
    ceiling = alt.Y("per_user_tok_s:Q", title="ceiling, tok/s per user",
                    scale=alt.Scale(zero=True, nice=True))
    curve = part("ceiling").mark_line(color=modelled).encode(x=context, y=ceiling)
    marker = step.mark_point(filled=True, size=70, color=modelled).encode(
        x=context, y=ceiling,
        tooltip=[alt.Tooltip("context_tokens:Q", title="context", format=","),
                 alt.Tooltip("per_user_tok_s:Q", title="tok/s per user", format=",.1f")])
    line = badged(curve, marker, width=_WIDTH, height=_HEIGHT)

    summary = part("chip").mark_text(align="left", baseline="top", fontSize=12).encode(
        x=alt.value(0), y=alt.value(0), text="line:N",
    ).transform_calculate(line="format(datum.bandwidth_tb_s, '.2f') + ' TB/s (' + datum.chip "
                               "+ ')' + (isValid(datum.capacity_gb) ? ', holds ' + "
                               "format(datum.capacity_gb, ',.1f') + ' GB' : '')")
    reads = part("bytes").mark_text(align="left", baseline="top", fontSize=12).encode(
        x=alt.value(0), y=alt.value(0), text="line:N",
    ).transform_calculate(line="'Reads ' + format(datum.weight_gb + datum.kv_gb, ',.1f') + "
                               "' GB per step: ' + format(datum.weight_gb, ',.1f') + "
                               "' GB of weights, ' + format(datum.kv_gb, ',.1f') + "
                               "' GB of KV cache for ' + datum.batch + ' request(s)'")
    totals = step.mark_text(align="left", baseline="top", fontSize=12).encode(
        x=alt.value(0), y=alt.value(0), text="line:N",
    ).transform_calculate(line="'Aggregate ceiling ' + format(datum.aggregate_tok_s, ',.0f') "
                               "+ ' tok/s' + (isValid(datum.chips_to_hold) ? '; at least ' "
                               "+ datum.chips_to_hold + ' chip(s) to hold it all' : '')")
    text = alt.vconcat(*(mark.properties(width=_WIDTH, height=16)
                         for mark in (summary, reads, totals)), spacing=2)
    # Each view keeps its own legend, so the bar's sits by the bar.
    return alt.vconcat(bar, text, line, spacing=16).resolve_legend(color="independent")


#: The batch of the chapter's KV-cache example, and what one of its steps reads of
#: Llama 2 70B, in billions: every weight but the embedding rows none of its tokens looks up.
_EXAMPLE_BATCH = 16
_EXAMPLE_READ_B = roofline.params_read(_L2_70B, _EXAMPLE_BATCH) / 1e9


@register
def floor_explorer() -> Explorer:
    """Sliders: parameters, precision, chip or bandwidth, KV per token, context, batch."""
    custom = CUSTOM_CHIP
    bandwidth = specs.chip(_H200).memory_bandwidth_bytes_per_s / TB
    return Explorer(
        name="bw_floor", kind="analytic", chapter=CHAPTER,
        compute=floor_explorer_compute, tables=_floor_tables, chart=_floor_chart,
        controls=(
            Slider("params_b", "parameters a step reads (billions)",
                   *log_range(_EXAMPLE_READ_B, 1, 1000, 0.01), 0.01,
                   default=_EXAMPLE_READ_B, log=True,
                   grid=(1, 8, _EXAMPLE_READ_B, 405), glued="bw_kv_example_read_b"),
            Choice("precision", "precision of the weights", tuple(BYTES_PER_PARAM),
                   default="fp8", grid=("fp16", "fp8", "int4")),
            Choice("chip", "chip", (*specs.chips(), custom), default=_H200,
                   grid=(*SITE_CHIPS, custom)),
            Slider("bandwidth_tb_s", "custom bandwidth (TB/s)", 0.05, 10, 0.05,
                   default=bandwidth, grid=(0.1, 1, bandwidth, 8),
                   only_when=("chip", custom), glued="bw_h200_tb_s"),
            Slider("kv_kib_per_token", "KV cache per token (KiB)", 0, 2560, 16,
                   default=round(kv_bytes_per_token(_L2_70B, _KV_PRECISION) / KIB),
                   grid=(0, 80, round(kv_bytes_per_token(_L2_70B, _KV_PRECISION) / KIB),
                         320, 1280)),
            Slider("context_tokens", "context length (tokens)", 0, 131072, 256,
                   default=_L2_70B.context_length_tokens,
                   grid=(0, 1024, _L2_70B.context_length_tokens, 16384, 131072),
                   glued="bw_kv_example_context"),
            Slider("batch", "batch (requests)", 1, 256, 1, default=_EXAMPLE_BATCH,
                   grid=(1, 4, 16, 64, 256), glued="bw_kv_example_batch"),
        ),
    )


# ------------------------------------------------------------------------ the roofline

#: Intensities the roof is drawn between, FLOP per byte (the ridge is added between).
_INTENSITY_ENDS = (0.1, 1e5)

_ROOF_WIDTH, _ROOF_HEIGHT = 520, 300


def _roofline_tables(view: RooflineView) -> dict[str, dict]:
    peak, ridge = view.peak_flop_per_s, view.ridge_flop_per_byte
    intensity = np.array([_INTENSITY_ENDS[0], ridge, _INTENSITY_ENDS[1]])
    roof = roofline.attainable_flop_per_s(intensity, peak, view.bandwidth_bytes_per_s)

    def point(cost: roofline.PassCost, **extra) -> dict:
        attainable = view.attainable(cost)
        return {"intensity": [cost.intensity_flop_per_byte], "tflop_s": [attainable / TB],
                "share_of_peak": [attainable / peak],
                **{key: [value] for key, value in extra.items()}}

    return {
        "roof": {"intensity": intensity, "tflop_s": roof / TB},
        "ridge": {"chip": [view.chip], "intensity": [ridge], "tflop_s": [peak / TB]},
        "decode": point(view.decode, batch=view.batch),
        "prefill": point(view.prefill, prompt_tokens=view.prompt_tokens),
    }


def _roofline_chart(part):
    import altair as alt

    names = ["ridge point", "decode (batch)", "prefill (prompt)"]
    colours = alt.Scale(domain=names, range=["#4d4d4d", PALETTE[0], PALETTE[1]])
    shapes = alt.Scale(domain=names, range=["diamond", "circle", "square"])
    legend = alt.Legend(orient="bottom-right", title=None, offset=6)
    decades = [10.0 ** e for e in range(-1, 6)]
    x = alt.X("intensity:Q", title="arithmetic intensity (FLOP per byte)",
              scale=alt.Scale(type="log", domain=list(_INTENSITY_ENDS)),
              axis=alt.Axis(format=",~g", values=decades))
    y = alt.Y("tflop_s:Q", title="attainable TFLOP/s", scale=alt.Scale(type="log"),
              axis=alt.Axis(format=",~g", values=[10.0 ** e for e in range(-2, 6)]))
    roof = part("roof").mark_line(color="#4d4d4d", strokeWidth=2).encode(x=x, y=y)

    def marker(name: str, label: str, tooltip: list):
        return part(name).mark_point(size=110, filled=True, opacity=1).encode(
            x=x, y=y, color=alt.Color(datum=label, scale=colours, legend=legend),
            shape=alt.Shape(datum=label, scale=shapes, legend=legend), tooltip=tooltip)

    ridge = marker("ridge", "ridge point",
                   [alt.Tooltip("intensity:Q", title="ridge (FLOP/byte)", format=",.0f")])
    decode = marker("decode", "decode (batch)",
                    [alt.Tooltip("intensity:Q", title="FLOP/byte", format=",.1f"),
                     alt.Tooltip("share_of_peak:Q", title="share of peak", format=".1%")])
    prefill = marker("prefill", "prefill (prompt)",
                     [alt.Tooltip("intensity:Q", title="FLOP/byte", format=",.0f"),
                      alt.Tooltip("share_of_peak:Q", title="share of peak", format=".0%")])
    title = part("ridge").mark_text(align="left", baseline="bottom", fontSize=13,
                                    fontWeight="bold").encode(
        x=alt.value(0), y=alt.value(-8), text="chip:N")
    plot = badged(roof, ridge, decode, prefill, title, width=_ROOF_WIDTH, height=_ROOF_HEIGHT)

    def line(name: str, expression: str):
        return part(name).mark_text(align="left", baseline="top", fontSize=12).encode(
            x=alt.value(0), y=alt.value(0), text="line:N",
        ).transform_calculate(line=expression).properties(width=_ROOF_WIDTH, height=16)

    text = alt.vconcat(
        line("ridge", "'Ridge point at ' + format(datum.intensity, ',.0f') + ' FLOP per "
                      "byte, peak ' + format(datum.tflop_s, ',.0f') + ' TFLOP/s'"),
        line("decode", "'Decode at batch ' + datum.batch + ': ' + format(datum.intensity, "
                       "',.1f') + ' FLOP per byte, at most ' + format(datum.share_of_peak, "
                       "'.1%') + ' of peak'"),
        line("prefill", "'Prefill of ' + format(datum.prompt_tokens, ',') + ' tokens: ' + "
                        "format(datum.intensity, ',.0f') + ' FLOP per byte, ' + "
                        "format(datum.share_of_peak, '.0%') + ' of peak'"),
        spacing=2)
    return alt.vconcat(plot, text, spacing=12).resolve_legend(color="independent",
                                                               shape="independent")


@register
def roofline_explorer() -> Explorer:
    """Menus and sliders: chip, model, precision, decode batch, context (= prompt) length."""
    chips = tuple(name for name in specs.chips()
                  if math.isfinite(specs.chip(name).bf16_flop_per_s))
    return Explorer(
        name="bw_roofline", kind="analytic", chapter=CHAPTER,
        compute=roofline_explorer_compute, tables=_roofline_tables,
        chart=_roofline_chart,
        controls=(
            Choice("chip", "chip", chips, default=_H100, grid=SITE_ROOFLINE_CHIPS),
            Choice("model", "model", tuple(specs.models()), default=_L2_70B.name),
            Choice("precision", "precision", tuple(roofline.PEAK_COLUMN), default="bf16"),
            Slider("batch", "decode batch (requests)", 1, 1024, 1, default=1,
                   grid=(1, 4, 16, 64, 256, 1024)),
            Slider("context_tokens", "context and prompt (tokens)", 1, 32768, 1,
                   default=2048, grid=(1, 512, 2048, 8192, 32768), glued="bw_prompt"),
        ),
    )
