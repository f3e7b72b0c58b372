"""Charts of chapter 'The memory-bandwidth floor': rooflines, lines that stop where memory
runs out, and bars coloured by where their numbers come from.

The chapter computes every number with the model modules (:mod:`inferlab.model.roofline`,
:mod:`inferlab.model.feasibility`, :mod:`inferlab.model.capacity`); these functions only draw them,
so a figure cell says what is plotted and the book's figure rules hold in one place:
one colour per series, plain tick labels on log axes, a legend for every colour code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from inferlab.common import checks
from inferlab.model import specs
from inferlab.model.roofline import attainable_flop_per_s, ridge_point_flop_per_byte
from inferlab.pages.plotting import KIND_COLORS, PALETTE, label_kind, plain_log_axis

TERA = 1e12

#: Arithmetic intensities a roofline is drawn over, FLOP per byte.
INTENSITY_FLOP_PER_BYTE = np.geomspace(0.1, 1e5, 300)

#: Colours for thin lines, the palette without its yellow, which is too faint on white.
LINE_COLOURS = [colour for colour in PALETTE if colour != "#F0E442"]


def rooflines(ax, chips: Sequence, *, points: Iterable = (), dashed: Iterable[str] = (),
              intensity=INTENSITY_FLOP_PER_BYTE) -> None:
    """Each chip's BF16 roofline, ``min(peak, I x bandwidth)``, in TFLOP/s against FLOP per
    byte, with its ridge point as a diamond and a colour of its own.

    ``chips`` are names or :class:`~inferlab.model.specs.Chip` rows, at most one per colour of
    :data:`LINE_COLOURS`. A chip named in ``dashed`` is drawn dashed, so a roofline lying on
    another's stays visible. ``points`` are ``(label, intensity, flop_per_s, marker)``,
    drawn as open black markers. Both axes are log with plain labels, with room above the
    highest peak for the figure's badge.
    """
    chips = [specs.as_chip(chip) for chip in chips]
    intensity = checks.reals("intensity", intensity, low=0.0, low_open=True)
    if len(chips) > len(LINE_COLOURS):
        raise ValueError(f"chips: {len(chips)} is more than the {len(LINE_COLOURS)} colours "
                         "of the palette; a colour would repeat")
    dashed = set(dashed)
    for colour, chip in zip(LINE_COLOURS, chips, strict=False):
        peak, bandwidth = chip.bf16_flop_per_s, chip.memory_bandwidth_bytes_per_s
        ax.plot(intensity, attainable_flop_per_s(intensity, peak, bandwidth) / TERA,
                color=colour, lw=1.5, ls=(0, (4, 4)) if chip.name in dashed else "-",
                label=specs.short_name(chip.name))
        ax.plot([ridge_point_flop_per_byte(peak, bandwidth)], [peak / TERA], "D",
                color=colour, ms=4)
    for label, at, flop_per_s, marker in points:
        ax.plot([at], [flop_per_s / TERA], marker, ms=10, mfc="none", mec="black", mew=2,
                label=label)
    plain_log_axis(ax.xaxis)
    plain_log_axis(ax.yaxis)
    ax.set_ylim(top=max(chip.bf16_flop_per_s for chip in chips) / TERA * 4)
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("attainable TFLOP/s (BF16)")


def stopping_lines(ax, lines: Iterable, limit: float, *, limit_label: str = "context limit",
                   ticks: Sequence[float] | None = None, levels: Iterable = ()) -> None:
    """Curves against context length that stop where they must.

    ``lines`` are ``(label, x, y, colour, style)``. A line whose last ``x`` falls short of
    ``limit`` (the model's context limit, a dotted vertical line) stopped because memory
    is full, and ends in a cross; the legend says so. ``levels`` are ``(y, style, label)``
    grey horizontal lines labelled at their left end (a memory size, say). The x axis is
    log with plain labels, at ``ticks`` if given.
    """
    limit = checks.positive("limit", limit)
    lines = list(lines)
    for y, style, label in levels:
        ax.axhline(y, color="0.5", ls=style, lw=1)
        ax.annotate(label, (min(np.min(line[1]) for line in lines), y), xytext=(2, 3),
                    textcoords="offset points", fontsize=8, color="0.3")
    stopped = False
    for label, x, y, colour, style in lines:
        x, y = np.asarray(x), np.asarray(y)
        ax.plot(x, y, style, color=colour, label=label)
        if x[-1] < limit:
            ax.plot(x[-1], y[-1], "x", ms=9, mew=2, color=colour)
            stopped = True
    ax.axvline(limit, color="0.4", ls=":", lw=1)
    ax.annotate(limit_label, (limit, 0.02), xycoords=("data", "axes fraction"),
                xytext=(-4, 0), textcoords="offset points", ha="right", fontsize=8,
                color="0.3")
    plain_log_axis(ax.xaxis, ticks)
    ax.set_xlabel("context length (tokens)")
    handles, labels = ax.get_legend_handles_labels()
    if stopped:
        handles.append(Line2D([], [], ls="none", marker="x", mew=2, color="0.3"))
        labels.append("memory full")
    ax.legend(handles, labels, fontsize=8)


def kind_bars(ax, labels: Sequence[str], values: Sequence[float], kinds: Sequence[str], *,
              unit: str = "", xlabel: str = "") -> None:
    """Horizontal bars from top to bottom, each coloured by its kind ("measured",
    "modelled" or "reported") and labelled with its value, with a legend of the kinds
    below the axes and the figure's badge."""
    labels, kinds = list(labels), list(kinds)
    values = checks.reals("values", values, low=0.0)
    if not len(labels) == len(values) == len(kinds):
        raise ValueError(f"labels, values, kinds: lengths {len(labels)}, {len(values)} and "
                         f"{len(kinds)} differ; give one of each per bar")
    for kind in kinds:
        checks.option("kinds", kind, KIND_COLORS)
    bars = ax.barh(labels, values, color=[KIND_COLORS[kind] for kind in kinds])
    ax.bar_label(bars, labels=[f"{value:,.0f}{unit}" for value in values], padding=3,
                 fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(values) * 1.2)
    ax.set_xlabel(xlabel)
    shown = list(dict.fromkeys(kinds))
    ax.legend([Patch(color=KIND_COLORS[kind]) for kind in shown], shown, fontsize=8,
              loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=len(shown))
    label_kind(ax, *shown)


def decode_walk(ax, chip, points: Iterable, *, context_tokens: int) -> None:
    """Decode steps on one chip's BF16 roofline as the batch grows.

    ``points`` are ``(batch, with_context, intensity, attainable_flop_per_s)``: one colour
    per batch, filled without context and open with ``context_tokens`` tokens of it. The
    ridge point is a dotted line; the legend explains colours and fills.
    """
    chip = specs.as_chip(chip)
    context_tokens = checks.whole("context_tokens", context_tokens)
    rooflines(ax, [chip])
    rows = []
    for point in points:
        if not isinstance(point, tuple | list) or len(point) != 4:
            raise ValueError(f"points: {point!r} is not (batch, with_context, intensity, "
                             "attainable_flop_per_s)")
        batch, with_context, at, attained = point
        rows.append((checks.whole("points", batch), bool(with_context),
                     checks.positive("points", at), checks.positive("points", attained)))
    batches = list(dict.fromkeys(row[0] for row in rows))
    if len(batches) >= len(PALETTE):
        raise ValueError(f"points: {len(batches)} batches need more colours than the "
                         f"{len(PALETTE) - 1} the palette has beside the roofline's")
    colours = dict(zip(batches, [c for c in PALETTE if c != LINE_COLOURS[0]], strict=False))
    for batch, with_context, at, attained in rows:
        ax.plot([at], [attained / TERA], "o", ms=8, mec=colours[batch], mew=2,
                mfc="none" if with_context else colours[batch],
                label=None if with_context else f"batch {batch}")
    for fill, label in (("0.3", "no context (filled)"),
                        ("none", f"{context_tokens:,}-token contexts (open)")):
        ax.plot([], [], "o", ms=8, mec="0.3", mew=2, mfc=fill, label=label)
    ax.axvline(ridge_point_flop_per_byte(chip.bf16_flop_per_s, chip.memory_bandwidth_bytes_per_s),
               color="0.5", ls=":", lw=1)
    ax.set_xlim(0.5, 5e3)
    ax.set_ylim(1, chip.bf16_flop_per_s / TERA * 8)
    ax.legend(fontsize=8, ncols=2, loc="lower right")


def against_context_ratio(ax, contexts, ratios, *, bandwidth_ratio: float, claim: float,
                          audited: Sequence[float], span: tuple[float, float],
                          limit: float, ylabel: str = "", ylim: tuple[float, float] = (0.8, 1.8)
                          ) -> None:
    """A modelled ratio of two chips against context length, beside the bandwidth ratio,
    a vendor's "up to" claim and audited results placed in the ``span`` of context lengths
    they were measured at (the H200 over the H100 of chapter 'The memory-bandwidth floor')."""
    contexts = checks.reals("contexts", contexts, low=0.0, low_open=True)
    ratios = checks.reals("ratios", ratios, low=0.0)
    if len(ratios) != len(contexts):
        raise ValueError(f"ratios: {len(ratios)} values for {len(contexts)} contexts; give "
                         "one ratio per context")
    bandwidth_ratio = checks.positive("bandwidth_ratio", bandwidth_ratio)
    claim = checks.positive("claim", claim)
    audited = checks.reals("audited", audited, low=0.0)
    span = checks.reals("span", span, low=0.0, low_open=True)
    # The axis is ticked from 256 tokens up to the limit; no model's context is shorter.
    limit = checks.real("limit", limit, low=256.0)
    ylim = checks.reals("ylim", ylim)
    if len(span) != 2 or len(ylim) != 2 or ylim[0] >= ylim[1]:
        raise ValueError(f"span, ylim: got {span!r} and {ylim!r}; give each as (low, high)")
    ax.axvspan(*span, color="0.9", label="MLPerf request lengths")
    ax.plot(contexts, ratios, "o-", color=KIND_COLORS["modelled"],
            label="modelled: rate at the largest batch that fits")
    ax.axhline(bandwidth_ratio, color="0.35", ls=":",
               label=f"bandwidth ratio {bandwidth_ratio:.2f}x (datasheets)")
    ax.axhline(claim, color=KIND_COLORS["reported"], ls="--",
               label=f'NVIDIA: "up to {claim:.1f}x"')
    ax.plot([np.sqrt(span[0] * span[1])] * len(audited), audited, "D",
            color=KIND_COLORS["reported"], label="audited MLPerf v4.1 Offline (H200, H200 CTS)")
    ax.axvline(limit, color="0.4", ls=":", lw=1)
    ticks = [tick for tick in (256, 512, 1024, 2048, 4096, 8192) if tick <= limit]
    plain_log_axis(ax.xaxis, ticks)
    ax.set_xlim(min(contexts) * 0.9, limit * 1.12)
    ax.set_xlabel("context per request (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(*ylim)
    ax.legend(loc="upper left", fontsize=7, ncols=2)
    label_kind(ax, "modelled", "reported")


def tensor_parallel_sweep(ax, tps: Sequence[int], ideal: Sequence[float], curves: Iterable
                          ) -> None:
    """Ceilings per user against the tensor-parallel degree: the ideal ``1/tp`` floor dotted,
    and ``curves`` of ``(algorithm, hop_latency_s, ceilings)``, one colour per hop latency
    and one line style per all-reduce algorithm."""
    tps = checks.wholes("tps", tps)
    ideal = checks.reals("ideal", ideal, low=0.0)
    curves = list(curves)
    for name, values in (("ideal", ideal), *(("curves", curve[-1]) for curve in curves)):
        if len(values) != len(tps):
            raise ValueError(f"{name}: {len(values)} ceilings for {len(tps)} chip counts; give "
                             "one per chip count")
    ax.plot(tps, ideal, ":", color="0.3", label="ideal 1/tp floor")
    hops: dict[float, str] = {}
    for algorithm, hop, ceilings in curves:
        colour = hops.setdefault(hop, PALETTE[len(hops)])
        name = "ring" if algorithm == "ring" else "one- or two-shot"
        ax.plot(tps, ceilings, "-" if algorithm == "ring" else "--", marker="o", ms=4,
                color=colour, label=f"{name}, {hop * 1e6:.0f} µs a hop")
    ax.set_xticks(list(tps))
    ax.set_ylabel("ceiling, tok/s per user")
    label_kind(ax, "modelled")
