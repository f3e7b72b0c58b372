"""The figure rules catch what issue 18 found, and pass figures that keep them.

Each rule gets a figure that breaks it (the check must name the problem) beside the
same figure done right (the check must find nothing), so a rule that could not fail,
or that fails good figures, shows up here. The last tests hold the badge above the
axes whatever the axes has on top, and show that a watched figure warns when drawn:
that warning is what fails the strict build (tests/test_build.py builds one).
"""

from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from inferlab.pages import figure_rules  # noqa: E402
from inferlab.pages.plotting import KIND_COLORS, PALETTE, figure, label_kind, plain_log_axis  # noqa: E402


def _problems(fig) -> list[str]:
    return figure_rules.problems(fig)


def _only(fig, words: str) -> None:
    found = _problems(fig)
    assert found and all(words in text for text in found), found


def test_a_plain_good_figure_has_no_problems():
    fig, ax = figure()
    ax.plot([1, 2, 3], [1, 4, 9], color=PALETTE[0], label="one")
    ax.plot([1, 2, 3], [2, 3, 4], color=PALETTE[1], label="two")
    ax.legend(loc="lower right")
    label_kind(ax, "modelled")
    assert _problems(fig) == []


def test_two_series_in_one_look_are_caught_and_a_second_style_is_not():
    fig, ax = figure()
    ax.plot([1, 2, 3], [1, 4, 9], color=PALETTE[0], label="H100")
    ax.plot([1, 2, 3], [2, 5, 10], color=PALETTE[0], label="Groq")
    label_kind(ax, "modelled")
    found = _problems(fig)
    assert any("'H100' and 'Groq' look alike" in text for text in found), found
    assert any("the legend" not in text for text in found)
    fig, ax = figure()
    ax.plot([1, 2, 3], [1, 4, 9], color=KIND_COLORS["modelled"], label="model")
    ax.plot([1, 2, 3], [2, 5, 10], color=KIND_COLORS["modelled"], ls="--", label="claim")
    ax.legend(loc="lower right")
    label_kind(ax, "modelled")
    assert _problems(fig) == []


def test_nine_unlabelled_curves_from_the_cycle_repeat_a_colour():
    fig, ax = figure()
    x = np.arange(5)
    for k in range(len(PALETTE) + 1):  # the cycle comes round again at the ninth
        ax.plot(x, x * (k + 1))
    label_kind(ax, "modelled")
    assert any("look alike" in text for text in _problems(fig))


def test_two_bar_groups_in_one_colour_are_caught():
    fig, ax = figure()
    ax.bar([0, 1], [3, 4], 0.4, color=PALETTE[0], label="Server")
    ax.bar([0.4, 1.4], [2, 3], 0.4, color=PALETTE[0], label="Offline")
    ax.legend(loc="upper left")
    label_kind(ax, "modelled")
    found = _problems(fig)
    assert any("'Server' and 'Offline' look alike" in text for text in found), found


@pytest.mark.parametrize("horizontal", [False, True])
def test_bars_must_start_at_zero(horizontal):
    fig, ax = figure()
    if horizontal:
        ax.barh(["a", "b"], [1.05, 1.17])
        ax.set_xlim(0.9, 1.2)
    else:
        ax.bar(["a", "b"], [1.05, 1.17])
        ax.set_ylim(0.9, 1.2)
    label_kind(ax, "modelled")
    _only(fig, "starts at 0.9, above zero")
    (ax.set_xlim if horizontal else ax.set_ylim)(0, 1.2)
    assert _problems(fig) == []


def test_a_bar_series_with_no_values_is_no_problem():
    fig, ax = figure()
    ax.barh(["a", "b"], [1.0, 2.0], 0.4, label="priced")
    ax.barh([0.4, 1.4], [np.nan, np.nan], 0.4, label="unpriced")
    ax.legend(loc="lower right")
    label_kind(ax, "modelled")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no NumPy warning about an all-NaN slice either
        assert _problems(fig) == []


def test_bars_on_a_log_axis_are_caught_but_a_histogram_is_not():
    fig, ax = figure()
    ax.bar(["8B", "70B", "405B"], [1, 40, 3000])
    plain_log_axis(ax.yaxis)
    label_kind(ax, "modelled")
    _only(fig, "bars on a log y axis")
    fig, ax = figure()
    ax.hist(np.random.default_rng(1).lognormal(size=2000), bins=20)
    plain_log_axis(ax.yaxis)
    label_kind(ax, "modelled")
    assert _problems(fig) == []


def test_a_log_axis_needs_two_plain_labels():
    fig, ax = figure()
    ax.plot([1, 2, 3], [30, 60, 200])
    ax.set_yscale("log")  # Matplotlib: one label, 10^2
    label_kind(ax, "modelled")
    found = _problems(fig)
    assert any("1 labelled tick" in text for text in found), found
    assert any("powers of ten" in text for text in found), found
    plain_log_axis(ax.yaxis)
    assert _problems(fig) == []


def test_a_log_axis_whose_labels_a_shared_axis_shows_is_not_counted():
    fig, (top, bottom) = figure(2, 1, sharex=True)
    for ax in (top, bottom):
        ax.plot([1, 10, 100], [1, 2, 3])
    plain_log_axis(bottom.xaxis)
    label_kind(top, "modelled")
    assert _problems(fig) == []


def test_a_colour_code_needs_a_key():
    fig, ax = figure()
    ax.barh(["traced", "untraced"], [241, 284], color=[PALETTE[1], "0.55"])
    label_kind(ax, "reported")
    _only(fig, "no legend to say what")
    ax.legend(handles=[Patch(color=PALETTE[1], label="not audited"),
                       Patch(color="0.55", label="unverified")], loc="upper left",
              bbox_to_anchor=(1.0, 1.0))
    assert _problems(fig) == []


def test_hatching_is_a_code_too():
    fig, ax = figure()
    ax.barh(["plain", "speculative"], [250, 1665], color=PALETTE[1], hatch=["", "//"])
    label_kind(ax, "reported")
    _only(fig, "hatched")


def test_colours_named_in_their_own_colour_need_no_legend():
    fig, ax = figure()
    for k, name in enumerate(("H100", "H200")):
        ax.plot([1, 2, 3], [k + 1, k + 2, k + 3], color=PALETTE[k])
        ax.annotate(name, (3, k + 3), color=PALETTE[k])
    label_kind(ax, "modelled")
    assert _problems(fig) == []


def test_internal_row_ids_are_caught_on_axes():
    fig, ax = figure()
    ax.barh(["mlperf-v5.0-nvidia-8xb200-offline", "Nebius 8x B200, MLPerf v5.1 Server"],
            [12691, 12701])
    label_kind(ax, "reported")
    _only(fig, "internal ids (mlperf-v5.0-nvidia-8xb200-offline)")


def test_the_ids_are_every_tables_row_ids_and_nothing_else():
    ids = figure_rules.row_ids()
    assert {"aa-groq-l2-70b", "mlperf-v5.0-nvidia-8xb200-offline"} <= ids
    assert "one-or-two-shot" not in ids and "Llama 2 70B" not in ids
    assert len(ids) > 50


def test_a_legend_over_the_data_is_caught():
    fig, ax = figure()
    ax.plot([0, 1], [1, 0], color=PALETTE[0], label="a line from the top left")
    ax.legend(loc="upper left")
    label_kind(ax, "modelled")
    _only(fig, "the legend covers data points or lines")
    ax.legend(loc="upper right")
    assert _problems(fig) == []


def test_a_figure_without_a_badge_is_caught():
    fig, ax = figure()
    ax.plot([1, 2], [1, 2])
    _only(fig, "no badge")


def test_a_badge_drawn_over_the_data_is_caught():
    fig, ax = figure()
    ax.plot([0, 1], [0, 1])
    ax.annotate("MODELLED", (0.95, 0.95), xycoords="axes fraction", ha="right", va="top",
                gid=figure_rules.BADGE_GID)
    assert any("covers the data area" in text for text in _problems(fig))


@pytest.mark.parametrize("kinds", [("measured",), ("modelled", "reported"),
                                   ("measured", "modelled", "reported")])
@pytest.mark.parametrize("title", ["", "A title long enough to reach the corner of the axes",
                                   "left"])
def test_badges_sit_above_the_axes_and_its_titles(kinds, title):
    fig, (left, right) = figure(1, 2, figsize=(7, 3))
    for ax in (left, right):
        ax.plot([0, 1], [0, 1])
        if title == "left":
            ax.set_title("Panel", loc="left")
        elif title:
            ax.set_title(title, fontsize=9)
        label_kind(ax, *kinds)
    assert _problems(fig) == []
    renderer = fig.canvas.get_renderer()
    badges = [text for text in right.texts if text.get_gid() == figure_rules.BADGE_GID]
    assert [badge.get_text() for badge in badges] == [kind.upper() for kind in reversed(kinds)]
    boxes = [badge.get_bbox_patch().get_window_extent(renderer) for badge in badges]
    assert all(box.y0 >= right.bbox.y1 for box in boxes)
    assert boxes[0].x1 <= right.bbox.x1 + 1 and boxes[0].x1 >= right.bbox.x1 - 10
    # In reading order, left to right, as the call names them.
    assert [box.x0 for box in reversed(boxes)] == sorted(box.x0 for box in boxes)


def test_a_watched_figure_warns_once_a_problem_when_drawn():
    fig, ax = figure()
    ax.bar(["a", "b"], [1.05, 1.17])
    ax.set_ylim(0.9, 1.2)
    label_kind(ax, "modelled")
    with pytest.warns(figure_rules.FigureRuleWarning, match="above zero") as caught:
        fig.canvas.draw()
        fig.canvas.draw()
    assert len([w for w in caught if issubclass(w.category, figure_rules.FigureRuleWarning)]) == 1


def test_a_good_watched_figure_draws_without_a_warning():
    fig, ax = figure()
    ax.bar(["a", "b"], [1.05, 1.17])
    label_kind(ax, "modelled")
    with warnings.catch_warnings():
        warnings.simplefilter("error", figure_rules.FigureRuleWarning)
        fig.canvas.draw()
