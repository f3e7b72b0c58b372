"""What several explorers' charts share: the badge that says where their numbers come
from, a plot with its badge, a line of text under a chart, and the points a latency
distribution is drawn through.

The same rule as the static figures (:func:`inferlab.pages.plotting.label_kind`): a chart is
labelled measured, modelled or reported in its top-right corner, in the kind's colour.
"""

from __future__ import annotations

import numpy as np

from inferlab.pages.colors import KIND_COLORS

#: The shares of requests at which a latency distribution is drawn: every two per cent,
#: then closer in the tail a 99th or 99.9th percentile marks. The tens of thousands of
#: sorted values of a run would weigh a page hundreds of times more, for the same curve.
DISTRIBUTION_SHARES = np.concatenate([np.arange(0.02, 0.981, 0.02), [0.99, 0.995, 0.999, 1.0]])


def distribution(sorted_values, scale: float = 1.0) -> dict[str, np.ndarray]:
    """Points of the empirical distribution of ``sorted_values`` (increasing) at about
    :data:`DISTRIBUTION_SHARES`: the value the ``k``-th fastest of ``n`` reached, times
    ``scale``, and the share ``k / n`` at or below it."""
    values = np.asarray(sorted_values, dtype=float)
    n = len(values)
    if n == 0:
        raise ValueError("sorted_values: give at least one value")
    ranks = np.unique(np.clip(np.ceil(DISTRIBUTION_SHARES * n).astype(int), 1, n))
    return {"value": values[ranks - 1] * scale, "share": ranks / n}


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


def badged(*layers, kinds: tuple[str, ...] = ("modelled",), width: int, height: int):
    """``layers`` drawn together ``width`` by ``height`` pixels, with the :func:`badge` of
    ``kinds`` in the top-right corner."""
    import altair as alt

    return alt.layer(*layers, badge(*kinds, width=width)).properties(width=width, height=height)


def text_line(chart, expression: str, *, width: int):
    """A line of text under a chart: ``expression`` (Vega) over the one row of ``chart``,
    ``width`` pixels wide, as every explorer writes its numbers out in words."""
    import altair as alt

    return chart.mark_text(align="left", baseline="top", fontSize=12).encode(
        x=alt.value(0), y=alt.value(0), text="line:N",
    ).transform_calculate(line=expression).properties(width=width, height=16)


def over_line(plot, chart, expression: str, *, width: int):
    """``plot`` with the :func:`text_line` of ``expression`` over ``chart``'s row under it."""
    import altair as alt

    return alt.vconcat(plot, text_line(chart, expression, width=width), spacing=10)
