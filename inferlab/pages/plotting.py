"""The book's plotting style, and the badge that says where a figure's numbers come from.

Every figure in the book is one of three kinds, and says so in a badge above its
top-right corner:

- **measured**: timed on the machine that ran the page (yours, if you run it);
- **modelled**: computed by the book's formulas or simulator;
- **reported**: someone's published claim, with its source and whether it was audited.

Every figure made with :func:`figure` is checked against the book's figure rules
whenever it is drawn (:mod:`inferlab.pages.figure_rules`).

Used by every chapter.
"""

from __future__ import annotations

import math

import matplotlib as mpl
import matplotlib.pyplot as plt
from matplotlib.transforms import Bbox

from inferlab.common import checks
from inferlab.pages import figure_rules
from inferlab.pages.colors import KIND_COLORS as KIND_COLORS
from inferlab.pages.colors import PALETTE as PALETTE

#: The most panels a figure has along either side. Ten panels across a page are each
#: narrower than their tick labels, and a grid of thousands takes minutes to lay out.
MAX_PANELS_PER_SIDE = 10

#: The most shades :func:`ordered_shades` gives of one hue; past about eight, neighbours
#: cannot be told apart.
MAX_SHADES = 8

#: Matplotlib's sequential maps of one hue, light to dark, for :func:`ordered_shades`.
SINGLE_HUE_COLORMAPS = ("Blues", "Greens", "Greys", "Oranges", "Purples", "Reds")


STYLE = {
    "figure.figsize": (7.0, 4.0),
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "legend.frameon": False,
    "font.size": 10,
    "axes.prop_cycle": mpl.cycler(color=PALETTE),
}


def use_style() -> None:
    """Apply the book's matplotlib style (call once at the top of a chapter)."""
    mpl.rcParams.update(STYLE)


def label_kind(ax, *kinds: str) -> None:
    """Badge the axes with the figure's kinds ("measured", "modelled", "reported").

    The badges sit in a row above the axes' top-right corner, above its titles when it
    has any, so they can never cover data, a legend inside the axes or a title; the
    layout makes room for them. A figure that sets a model beside a published claim
    names both, e.g. ``label_kind(ax, "modelled", "reported")``, read left to right.
    """
    if not kinds:
        raise ValueError(f"kinds: give at least one of {', '.join(KIND_COLORS)}")
    unknown = [kind for kind in kinds if kind not in KIND_COLORS]
    if unknown:
        raise ValueError(f"kinds: {unknown[0]!r} is not one of {', '.join(KIND_COLORS)}")
    # The rightmost badge hangs from the corner; each other one from its right-hand
    # neighbour, so the row is as wide as its words whatever the font.
    anchor, xy, offset = ("axes fraction", _TopOfTitles(ax)), (1.0, 1.0), (-2, 5)
    for kind in reversed(kinds):
        badge = ax.annotate(
            kind.upper(), xy=xy, xycoords=anchor, xytext=offset, textcoords="offset points",
            ha="right", va="bottom", fontsize=8, fontweight="bold", color="white",
            annotation_clip=False,
            bbox={"boxstyle": "round,pad=0.25", "facecolor": KIND_COLORS[kind], "linewidth": 0},
        )
        badge.set_gid(figure_rules.BADGE_GID)
        anchor, xy, offset = badge, (0.0, 0.0), (-8, 0)


class _TopOfTitles:
    """The axes' box raised to the top of its titles, for a badge to stand on: called by
    Matplotlib at draw time, when the titles have their final places."""

    def __init__(self, ax):
        self.ax = ax

    def __call__(self, renderer):
        top = self.ax.bbox.y1
        # Matplotlib keeps the left and right titles only as private attributes.
        for title in (self.ax.title, self.ax._left_title, self.ax._right_title):
            if title.get_visible() and title.get_text():
                top = max(top, title.get_window_extent(renderer).y1)
        box = self.ax.bbox
        return Bbox.from_extents(box.x0, box.y0, box.x1, top)


def figure(nrows: int = 1, ncols: int = 1, **kwargs):
    """A new figure in the book's style: ``fig, ax = figure()``.

    At most :data:`MAX_PANELS_PER_SIDE` rows and as many columns. The figure warns
    when it is drawn if it breaks a figure rule (:func:`inferlab.pages.figure_rules.watch`).
    """
    nrows = checks.whole("nrows", nrows, maximum=MAX_PANELS_PER_SIDE)
    ncols = checks.whole("ncols", ncols, maximum=MAX_PANELS_PER_SIDE)
    use_style()
    fig, axes = plt.subplots(nrows, ncols, layout="constrained", **kwargs)
    figure_rules.watch(fig)
    return fig, axes


def _plain_number(value: float, _position=None) -> str:
    """A tick label as a reader writes the number: 1,000 and 0.5, not 10^3 and 5x10^-1."""
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def plain_log_axis(axis, ticks=None) -> None:
    """Put ``axis`` (``ax.xaxis`` or ``ax.yaxis``) on a log scale labelled in plain numbers.

    Matplotlib labels a log axis in powers of ten and may label a single tick. This
    labels ticks as plain numbers (1,000, not 10^3) and leaves the minor ticks bare.
    The major ticks are ``ticks`` when given; else every power of ten when the data
    span more than three decades, and 1, 2 and 5 times each power otherwise (so any
    span wider than 2.5-fold has at least two; Matplotlib falls back to linear ticks
    within a narrower one). Call it after plotting, so the span is known.
    """
    from matplotlib import axis as mpl_axis
    from matplotlib import ticker

    checks.instance("axis", axis, mpl_axis.Axis)
    if ticks is not None:
        ticks = checks.reals("ticks", ticks, low=0.0, low_open=True)
    if axis is axis.axes.xaxis:
        axis.axes.set_xscale("log")
    else:
        axis.axes.set_yscale("log")
    if ticks is not None:
        axis.set_major_locator(ticker.FixedLocator(ticks))
    else:
        low, high = sorted(axis.get_view_interval())
        decades = math.log10(high / low) if low > 0 else math.inf
        subs = (1.0,) if decades > 3 else (1.0, 2.0, 5.0)
        axis.set_major_locator(ticker.LogLocator(subs=subs))
    axis.set_major_formatter(ticker.FuncFormatter(_plain_number))
    axis.set_minor_formatter(ticker.NullFormatter())


def ordered_shades(count: int, colormap: str = "Blues") -> list[str]:
    """``count`` shades of one hue, light to dark, for series whose values are ordered.

    ``colormap`` is one of Matplotlib's single-hue sequential maps
    (:data:`SINGLE_HUE_COLORMAPS`). The lightest part of the map is skipped, so that the
    first shade still shows on white; give the series in increasing order of value.
    """
    count = checks.whole("count", count, minimum=1, maximum=MAX_SHADES)
    cmap = mpl.colormaps[checks.option("colormap", colormap, SINGLE_HUE_COLORMAPS)]
    return [mpl.colors.to_hex(cmap(0.3 + 0.7 * i / max(count - 1, 1))) for i in range(count)]
