"""The book's figure rules, checked on the drawn figure.

Issue 18 read every figure as an instructor would and found colours used for two series,
bar charts whose value axis starts above zero, log axes labelled in powers of ten or with
a single label, measured/modelled/reported badges drawn over the data, colour codes
without a legend, and internal row ids where a reader needs a name. :func:`problems`
finds each of these in a laid-out figure. :func:`watch` checks a figure whenever it is
drawn and warns (:class:`FigureRuleWarning`) once per problem. Every figure of the book
comes from :func:`inferlab.pages.plotting.figure`, which watches it, and the strict build
fails on a warning, so the build holds every figure it draws to these rules.

What counts as a series (the unit of "colours never repeat"): a line in data coordinates
(labelled, or a curve of three or more points), a bar container, a scatter of one
colour. Greys and black are the book's reference lines and notes, and they may repeat;
so may one label drawn in several pieces. Two series may share a colour when their line
style or marker differs (a claim dashed beside a model in the same kind colour): what
must not happen is that two different things look alike.

Used by every chapter, through :mod:`inferlab.pages.plotting`.
"""

from __future__ import annotations

import csv
import functools
import re
import warnings

import numpy as np
from matplotlib import colors as mcolors
from matplotlib.backend_bases import RendererBase
from matplotlib.collections import PathCollection
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from inferlab.common import checks

#: The ``gid`` of every badge :func:`inferlab.pages.plotting.label_kind` draws.
BADGE_GID = "inferlab-kind-badge"

#: The least overlap of two boxes, in square pixels, that counts as one covering the
#: other; less is rounding where they touch.
TOUCH_PX2 = 1.0


class FigureRuleWarning(UserWarning):
    """A figure breaks one of the book's figure rules (the message says which and where)."""


def problems(fig, renderer=None) -> list[str]:
    """Every way ``fig`` breaks the book's figure rules, one sentence each; ``[]`` if none.

    ``renderer`` is the one that just drew the figure; without it the figure is laid out
    first (without rendering), so the positions checked are the ones a reader sees.
    """
    checks.instance("fig", fig, Figure)
    if renderer is not None:
        checks.instance("renderer", renderer, RendererBase)
    state = _state(fig)
    if renderer is None:
        state["busy"] = True  # the layout below fires a draw event; do not warn twice
        try:
            fig.draw_without_rendering()
        finally:
            state["busy"] = False
        renderer = fig.canvas.get_renderer()
    found: list[str] = []
    axes = [ax for ax in fig.axes if ax.get_visible()]
    for number, ax in enumerate(axes, start=1):
        where = _name(ax, number, len(axes))
        found += [f"{where}: {text}" for text in dict.fromkeys((
            *_repeated_looks(ax), *_bar_baselines(ax), *_log_axes(ax),
            *_unexplained_codes(ax, fig, axes), *_internal_ids(ax)))]
    found += _legend_repeats(fig, axes)
    found += [f"{_name(ax, number, len(axes))}: {text}"
              for number, ax in enumerate(axes, start=1) for text in _legend_covers(ax, renderer)]
    found += _badge_problems(fig, axes, renderer)
    return found


def watch(fig) -> None:
    """Check ``fig`` each time it is drawn and warn once about each problem found.

    A notebook draws a figure to show it, so a chapter's bad figure warns in the cell
    that shows it, and the strict build, which fails on any output to stderr, fails.
    """
    checks.instance("fig", fig, Figure)
    state = _state(fig)
    if state.get("watched"):
        return
    state["watched"] = True

    def check(event) -> None:
        if state["busy"] or event.renderer is None:
            return
        state["busy"] = True
        try:
            found = problems(fig, event.renderer)
        finally:
            state["busy"] = False
        for text in found:
            if text not in state["reported"]:
                state["reported"].add(text)
                warnings.warn(FigureRuleWarning(text), stacklevel=1)

    fig.canvas.mpl_connect("draw_event", check)


def _state(fig) -> dict:
    if not hasattr(fig, "_inferlab_rules"):
        fig._inferlab_rules = {"busy": False, "reported": set()}
    return fig._inferlab_rules


def _name(ax, number: int, count: int) -> str:
    title = ax.get_title() or ax.get_title(loc="left") or ax.get_ylabel()
    panel = f"panel {number} of {count}" if count > 1 else "the axes"
    return f"{panel} ({title!r})" if title else panel


def _hex(colour) -> str:
    """``#rrggbb``, with the alpha appended only when the colour is see-through."""
    return mcolors.to_hex(colour, keep_alpha=mcolors.to_rgba(colour)[3] < 1)


def _grey(colour) -> bool:
    red, green, blue, _ = mcolors.to_rgba(colour)
    return max(red, green, blue) - min(red, green, blue) < 0.02


def _labelled(artist) -> bool:
    label = artist.get_label()
    return bool(label) and not label.startswith("_")


def _line_look(line: Line2D) -> tuple:
    marker = line.get_marker()
    has_marker = marker not in (None, "None", "none", "", " ")
    face = _hex(line.get_markerfacecolor()) if has_marker else None
    return ("line", _hex(line.get_color()), str(line.get_linestyle()) if
            line.get_linestyle() not in ("None", "none", "", " ") else None,
            str(marker) if has_marker else None, face)


def _series(ax) -> list[tuple[str, tuple, str]]:
    """The axes' series as ``(label, look, colour)``: data lines of two or more points,
    bar containers of one colour, scatters of one colour."""
    found = []
    for line in ax.get_lines():
        points = len(np.atleast_1d(line.get_xdata()))
        # An unlabelled line of two points is a range or a connector, drawn alike on
        # purpose; an unlabelled curve is a series named some other way.
        if (line.get_visible() and line.get_transform() is ax.transData
                and points >= (2 if _labelled(line) else 3)):
            found.append((line.get_label(), _line_look(line), line.get_color()))
    for container in ax.containers:
        if isinstance(container, BarContainer) and len(container.patches):
            faces = {_hex(bar.get_facecolor()) for bar in container.patches}
            if len(faces) == 1:
                face = faces.pop()
                hatch = container.patches[0].get_hatch()
                found.append((container.get_label(), ("bar", face, hatch), face))
    for collection in ax.collections:
        if isinstance(collection, PathCollection) and collection.get_visible():
            faces = {_hex(face) for face in collection.get_facecolors()}
            if len(faces) == 1:
                face = faces.pop()
                found.append((collection.get_label(), ("scatter", face), face))
    return found


def _repeated_looks(ax) -> list[str]:
    seen: dict[tuple, str] = {}
    found = []
    for label, look, colour in _series(ax):
        if _grey(colour):
            continue
        if look in seen and seen[look] != label:
            first, second = (name if not name.startswith("_") else "an unlabelled series"
                             for name in (seen[look], label))
            found.append(f"{first!r} and {second!r} look alike (colour {look[1]}); give "
                         "each series a colour of its own")
        seen.setdefault(look, label)
    return found


def _bar_baselines(ax) -> list[str]:
    found = []
    for container in ax.containers:
        if not isinstance(container, BarContainer) or not len(container.patches):
            continue
        vertical = container.orientation == "vertical"
        axis = ax.yaxis if vertical else ax.xaxis
        name = "y" if vertical else "x"
        low, high = sorted(ax.get_ylim() if vertical else ax.get_xlim())
        values = np.asarray(container.datavalues, dtype=float)
        if np.isnan(values).all():
            continue  # a series with no value here draws nothing
        if axis.get_scale() != "linear" and _histogram(container):
            continue  # counts of a distribution, read by their tops: log counts are usual
        if axis.get_scale() != "linear":
            found.append(f"bars on a {axis.get_scale()} {name} axis, where a bar's length "
                         "means nothing; use points, or a linear axis from zero")
        elif np.nanmin(values) >= 0 and low > 0:
            found.append(f"bars on a {name} axis that starts at {low:g}, above zero, so "
                         "their lengths mislead; start it at zero")
        elif np.nanmax(values) <= 0 and high < 0:
            found.append(f"bars on a {name} axis that ends at {high:g}, below zero")
    return found


def _histogram(container: BarContainer) -> bool:
    """Whether the bars tile one interval without gaps, as ``ax.hist`` draws them."""
    bars = container.patches
    if len(bars) < 3:
        return False
    vertical = container.orientation == "vertical"
    starts = np.array([bar.get_x() if vertical else bar.get_y() for bar in bars])
    sizes = np.array([bar.get_width() if vertical else bar.get_height() for bar in bars])
    return bool(np.allclose(starts[:-1] + sizes[:-1], starts[1:], rtol=1e-9,
                            atol=1e-12 * np.ptp(starts)))


def _log_axes(ax) -> list[str]:
    found = []
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        if axis.get_scale() != "log":
            continue
        params = axis.get_tick_params(which="major")
        shown = [side for side in ("labelbottom", "labeltop", "labelleft", "labelright")
                 if params.get(side)]
        if not shown:
            continue  # labels left to a shared axis
        low, high = sorted(axis.get_view_interval())
        slack = (high / low) ** 1e-6 if low > 0 else 1.0
        labels = [tick.label1.get_text() or tick.label2.get_text()
                  for tick, at in zip(axis.get_major_ticks(), axis.get_majorticklocs(),
                                      strict=False)
                  if low / slack <= at <= high * slack]
        labels = [label for label in labels if label]
        minor = [tick.label1.get_text() for tick in axis.get_minor_ticks()]
        if len(labels) < 2:
            found.append(f"the log {name} axis has {len(labels)} labelled tick"
                         f"{'' if len(labels) == 1 else 's'} ({', '.join(labels) or 'none'});"
                         " give it two or more (plotting.plain_log_axis)")
        powers = [label for label in labels + minor if "$" in label or "^" in label]
        if powers:
            found.append(f"the log {name} axis is labelled in powers of ten ({powers[0]}); "
                         "label it in plain numbers (plotting.plain_log_axis)")
    return found


def _codes(ax) -> tuple[set[str], set[str]]:
    """The codes of the axes' data marks: the chromatic colours of its lines, bars and
    scatter points, and (for bars, which are never reference lines) greys and hatches."""
    colours, bar_codes = set(), set()
    for line in ax.get_lines():
        if line.get_visible() and line.get_transform() is ax.transData and len(
                np.atleast_1d(line.get_xdata())):
            colours.add(_hex(line.get_color())[:7])
    for container in ax.containers:
        if isinstance(container, BarContainer):
            for bar in container.patches:
                if bar.get_width() and bar.get_height():  # not a legend's stand-in
                    bar_codes.add(f"{_hex(bar.get_facecolor())[:7]}"
                                  f"{' hatched ' + bar.get_hatch() if bar.get_hatch() else ''}")
    for collection in ax.collections:
        if isinstance(collection, PathCollection) and collection.get_visible():
            colours |= {_hex(face)[:7] for face in collection.get_facecolors()}
    return {colour for colour in colours if not _grey(colour)}, bar_codes


def _text_colours(ax) -> set[str]:
    """Colours in which the axes names things directly: its texts, tick labels, badges."""
    colours = set()
    for text in ax.texts:
        if text.get_visible() and text.get_text():
            colours.add(_hex(text.get_color())[:7])
            patch = text.get_bbox_patch()
            if patch is not None:
                colours.add(_hex(patch.get_facecolor())[:7])
    for label in ax.get_xticklabels() + ax.get_yticklabels():
        colours.add(_hex(label.get_color())[:7])
    return colours


def _unexplained_codes(ax, fig, axes) -> list[str]:
    """A colour code needs a key: a legend anywhere in the figure (panels share one), a
    colour bar, or each colour named in that colour beside its marks."""
    colours, bar_codes = _codes(ax)
    codes = colours | bar_codes
    if len(codes) < 2 or fig.legends or any(other.get_legend() is not None for other in axes):
        return []
    if any(getattr(other, "_colorbar", None) is not None for other in fig.axes):
        return []
    unexplained = sorted(code for code in codes if code[:7] not in _text_colours(ax)
                         or "hatched" in code)
    if not unexplained:
        return []
    return [f"{len(codes)} colours or fills and no legend to say what "
            f"{', '.join(unexplained)} stand for; add one, or name each in its colour "
            "beside it"]


def _shown_texts(ax) -> list[str]:
    texts = [text.get_text() for text in ax.texts if text.get_visible()]
    texts += [ax.get_title(loc) for loc in ("left", "center", "right")]
    for axis in (ax.xaxis, ax.yaxis):
        low, high = sorted(axis.get_view_interval())
        texts += [tick.label1.get_text() for tick, at in
                  zip(axis.get_major_ticks(), axis.get_majorticklocs(), strict=False)
                  if low <= at <= high]
    legend = ax.get_legend()
    if legend is not None:
        texts += [text.get_text() for text in legend.get_texts()]
    return texts


@functools.cache
def row_ids() -> frozenset[str]:
    """The ``id`` of every row of every table in ``data/`` (``mlperf-v5.0-nvidia-8xb200-
    offline``, ...): names for code, which a figure must not show a reader."""
    from inferlab.common.data import DATA_DIR

    ids = set()
    for path in sorted(DATA_DIR.glob("*.csv")):
        with path.open(encoding="utf-8-sig", newline="") as table:
            ids |= {row["id"] for row in csv.DictReader(table) if row.get("id")}
    return frozenset(ids)


def _internal_ids(ax) -> list[str]:
    ids = sorted({word for text in _shown_texts(ax) for word in
                  re.split(r"[\s,;()\[\]]+", text) if word in row_ids()})
    if not ids:
        return []
    return [f"shows internal ids ({', '.join(ids)}); label the rows with readable names"]


def _legend_look(handle) -> tuple | None:
    if isinstance(handle, Line2D):
        return _line_look(handle)
    if isinstance(handle, Patch):
        return ("patch", _hex(handle.get_facecolor()), _hex(handle.get_edgecolor()),
                handle.get_hatch())
    if isinstance(handle, PathCollection) and len(handle.get_facecolors()):
        shape = tuple(np.round(handle.get_paths()[0].vertices, 3).ravel())
        return ("scatter", _hex(handle.get_facecolors()[0]), shape)
    return None


def _legend_repeats(fig, axes) -> list[str]:
    found = []
    legends = [ax.get_legend() for ax in axes if ax.get_legend() is not None] + fig.legends
    for legend in legends:
        seen: dict[tuple, str] = {}
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=False):
            look = _legend_look(handle)
            if look is None:
                continue
            if look in seen and seen[look] != text.get_text():
                found.append(f"the legend draws {seen[look]!r} and {text.get_text()!r} "
                             "alike; give each its own colour or style")
            seen.setdefault(look, text.get_text())
    return found


def _data_points(ax, renderer) -> list[np.ndarray]:
    """Where the axes' data lines run and its points sit, in display pixels: each line
    sampled along its segments, so one that crosses a box between two vertices counts."""
    found = []
    for line in ax.get_lines():
        xy = np.asarray(line.get_xydata(), dtype=float)
        if not line.get_visible() or line.get_transform() is not ax.transData or not len(xy):
            continue
        xy = xy[np.isfinite(xy).all(axis=1)]
        pixels = ax.transData.transform(xy) if len(xy) else np.empty((0, 2))
        if len(pixels) > 1 and str(line.get_linestyle()) not in ("None", "none", "", " "):
            steps = np.linspace(0.0, 1.0, 25)[:, None, None]
            pixels = (pixels[:-1] + steps * (pixels[1:] - pixels[:-1])).reshape(-1, 2)
        found.append(pixels)
    for collection in ax.collections:
        if isinstance(collection, PathCollection) and collection.get_visible():
            found.append(collection.get_offset_transform().transform(collection.get_offsets()))
    return found


def _legend_covers(ax, renderer) -> list[str]:
    """A legend inside the axes must sit where there is no data: bars, points, lines or
    the numbers written on them."""
    legend = ax.get_legend()
    if legend is None or not legend.get_visible():
        return []
    if not _overlap(legend.get_window_extent(renderer), ax.bbox):
        return []
    # What the reader sees of a frameless legend: its entries, not its padding, less
    # two pixels of the text boxes' margins, so that a line grazing a corner passes.
    boxes = [item.get_window_extent(renderer) for item in
             (*legend.get_texts(), *legend.legend_handles) if item is not None]
    boxes = [box for box in boxes if np.isfinite(box.get_points()).all()]
    if not boxes:
        return []
    inner = Bbox.union(boxes).padded(-2)
    covered = []
    for container in ax.containers:
        if isinstance(container, BarContainer) and any(
                bar.get_width() and bar.get_height()
                and _overlap(inner, bar.get_window_extent(renderer))
                for bar in container.patches):
            covered.append("bars")
            break
    for pixels in _data_points(ax, renderer):
        if len(pixels) and np.any((pixels[:, 0] > inner.x0) & (pixels[:, 0] < inner.x1)
                                  & (pixels[:, 1] > inner.y0) & (pixels[:, 1] < inner.y1)):
            covered.append("data points or lines")
            break
    for text in ax.texts:
        if (text.get_visible() and text.get_text() and text.get_gid() != BADGE_GID
                and _overlap(inner, _extent(text, renderer))):
            covered.append(f"the note {text.get_text()!r}")
    if not covered:
        return []
    return [f"the legend covers {', '.join(covered)}; move it where there is no data, or "
            "outside the axes"]


def _extent(text: Text, renderer):
    patch = text.get_bbox_patch()
    if patch is not None:
        text.update_bbox_position_size(renderer)
        return patch.get_window_extent(renderer)
    return text.get_window_extent(renderer)


def _overlap(one, other) -> bool:
    if not (np.isfinite(one.get_points()).all() and np.isfinite(other.get_points()).all()):
        return False  # a bar of no value (NaN) is not drawn
    width = min(one.x1, other.x1) - max(one.x0, other.x0)
    height = min(one.y1, other.y1) - max(one.y0, other.y0)
    return width > 0 and height > 0 and width * height > TOUCH_PX2


def _obstacles(fig, axes, renderer, badges) -> list[tuple[str, object]]:
    """What a badge must not cover: each axes' data area, axis labels and ticks, titles,
    notes and legends, and the other badges."""
    tick_labels = {id(label) for ax in axes for axis in (ax.xaxis, ax.yaxis)
                   for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                   for label in (tick.label1, tick.label2)}
    found = []
    for ax in axes:
        found.append(("the data area", ax.bbox))
        for name, axis in (("x axis", ax.xaxis), ("y axis", ax.yaxis)):
            box = axis.get_tightbbox(renderer)
            if box is not None:
                found.append((f"the {name}", box))
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            found.append(("the legend", legend.get_window_extent(renderer)))
        for text in ax.findobj(Text):
            if (id(text) not in tick_labels and text.get_visible() and text.get_text()
                    and text not in badges and not _inside_legend(text, legend)):
                found.append((repr(text.get_text()), _extent(text, renderer)))
    for legend in fig.legends:
        found.append(("the legend", legend.get_window_extent(renderer)))
    for text in fig.texts:
        if text.get_visible() and text.get_text():
            found.append((repr(text.get_text()), _extent(text, renderer)))
    return found


def _inside_legend(text, legend) -> bool:
    return legend is not None and any(text is item for item in legend.findobj(Text))


def _badge_problems(fig, axes, renderer) -> list[str]:
    badges = [text for ax in axes for text in ax.texts if text.get_gid() == BADGE_GID]
    if not badges:
        return ["no badge says whether the figure is measured, modelled or reported "
                "(plotting.label_kind)"]
    found = []
    obstacles = _obstacles(fig, axes, renderer, badges)
    for badge in badges:
        box = _extent(badge, renderer)
        name = badge.get_text()
        for what, other in obstacles:
            if _overlap(box, other):
                found.append(f"the {name} badge covers {what}; it belongs above the axes")
        for other in badges:
            if other is not badge and _overlap(box, _extent(other, renderer)):
                found.append(f"the {name} badge covers the {other.get_text()} badge")
        figure_box = fig.bbox
        if (box.x0 < figure_box.x0 - 1 or box.y0 < figure_box.y0 - 1
                or box.x1 > figure_box.x1 + 1 or box.y1 > figure_box.y1 + 1):
            found.append(f"the {name} badge reaches outside the figure")
    return sorted(set(found))
