"""The plotting helpers the figures share: log axes a reader can read, shades that order.

Issue 18 asked for log axes with plain tick labels and more than one tick, and for
ordered shades for ordered values; these tests hold the helpers to both over spans
from a factor of three to six decades.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

from inferlab.pages.plotting import figure, ordered_shades, plain_log_axis  # noqa: E402


def _shown_labels(ax, axis) -> list[str]:
    ax.figure.canvas.draw()
    low, high = sorted(axis.get_view_interval())
    return [tick.get_text() for tick in axis.get_ticklabels()
            if low <= tick.get_position()[axis is ax.yaxis] <= high and tick.get_text()]


@pytest.mark.parametrize(("low", "high"), [(15, 45), (3, 40), (16, 2048), (0.05, 3),
                                           (1, 5000), (10, 1e7)])
def test_a_log_axis_shows_two_or_more_plain_labels(low, high):
    fig, ax = figure()
    ax.plot([low, high], [low, high])
    plain_log_axis(ax.xaxis)
    plain_log_axis(ax.yaxis)
    for axis in (ax.xaxis, ax.yaxis):
        labels = _shown_labels(ax, axis)
        assert len(labels) >= 2, (low, high, labels)
        # Plain numbers, with thousands separators: no powers of ten, no TeX.
        assert all(label.replace(",", "").replace(".", "").isdigit() for label in labels), labels
    assert ax.get_xscale() == ax.get_yscale() == "log"


def test_given_ticks_are_the_ones_labelled():
    fig, ax = figure()
    ax.plot([16, 2048], [1, 2])
    plain_log_axis(ax.xaxis, ticks=[16, 256, 1024, 2048])
    assert _shown_labels(ax, ax.xaxis) == ["16", "256", "1,024", "2,048"]
    with pytest.raises(ValueError, match="ticks"):
        plain_log_axis(ax.xaxis, ticks=[0, 10])


@pytest.mark.parametrize("count", [1, 2, 4, 8])
def test_ordered_shades_darken_with_the_value_and_never_repeat(count):
    shades = ordered_shades(count)
    lightness = [sum(to_rgb(shade)) for shade in shades]
    assert lightness == sorted(lightness, reverse=True)
    assert len(set(shades)) == count
    assert max(lightness) < 3 * 0.9  # the lightest still shows on white


def test_ordered_shades_refuse_what_they_cannot_order():
    with pytest.raises(ValueError, match="count"):
        ordered_shades(9)
    with pytest.raises(ValueError, match="colormap"):
        ordered_shades(3, "viridis")
