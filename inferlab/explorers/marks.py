"""Marks every explorer's chart shares: the badge that says where its numbers come from.

The same rule as the static figures (:func:`inferlab.plotting.label_kind`): a chart is
labelled measured, modelled or reported in its top-right corner, in the kind's colour.
"""

from __future__ import annotations

from inferlab.plotting import KIND_COLORS


def badge(*kinds: str, width: int):
    """A layer writing ``kinds`` (``"modelled"``, ...) in the top-right corner of a chart
    ``width`` pixels wide, one under the other, each in its colour."""
    import altair as alt

    unknown = [kind for kind in kinds if kind not in KIND_COLORS]
    if not kinds or unknown:
        raise ValueError(f"kinds: give some of {', '.join(KIND_COLORS)}, not {kinds!r}")
    # Literal colours, not a colour scale: a scale would merge with the chart's own.
    marks = [alt.Chart(alt.Data(values=[{}])).mark_text(
        align="right", baseline="top", fontSize=9, fontWeight="bold", color=KIND_COLORS[kind],
        text=kind.upper(), x=width - 4, y=4 + 14 * i) for i, kind in enumerate(kinds)]
    return alt.layer(*marks)


def text_line(chart, expression: str, *, width: int):
    """A line of text under a chart: ``expression`` (Vega) over the one row of ``chart``,
    ``width`` pixels wide, as every explorer writes its numbers out in words."""
    import altair as alt

    return chart.mark_text(align="left", baseline="top", fontSize=12).encode(
        x=alt.value(0), y=alt.value(0), text="line:N",
    ).transform_calculate(line=expression).properties(width=width, height=16)
