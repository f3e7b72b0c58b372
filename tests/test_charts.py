"""The bandwidth-floor chapter's charts keep the book's figure rules: no colour twice in a
figure, plain labels on log axes, a legend for every code, readable chip names."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.colors as mcolors  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from inferlab.model import specs  # noqa: E402
from inferlab.pages import charts
from inferlab.pages.plotting import figure  # noqa: E402

SEVEN = ["NVIDIA H100 SXM", "NVIDIA H200 SXM", "NVIDIA B200", "AMD MI300X",
         "Google TPU v5e (per chip)", "AWS Inferentia2 (per chip)", "Groq LPU (GroqChip)"]


def _line_colours(ax) -> list[str]:
    return [mcolors.to_hex(line.get_color()) for line in ax.get_lines()
            if len(line.get_xdata()) > 1]


def _tick_texts(axis) -> list[str]:
    axis.axes.figure.canvas.draw()
    low, high = sorted(axis.get_view_interval())
    return [tick.get_text() for tick, at in zip(axis.get_ticklabels(), axis.get_ticklocs(),
                                                strict=False) if low <= at <= high]


def test_rooflines_give_every_chip_its_own_colour_and_a_readable_name():
    fig, ax = figure()
    charts.rooflines(ax, SEVEN, dashed=["AWS Inferentia2 (per chip)"])
    colours = _line_colours(ax)
    assert len(colours) == len(SEVEN) == len(set(colours))
    labels = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert "Inferentia2" in labels and "Groq LPU" in labels and "H100 SXM" in labels
    dashed = [line for line in ax.get_lines() if line.get_label() == "Inferentia2"]
    assert dashed[0].get_linestyle() != "-"
    with pytest.raises(ValueError, match="chips: 8 is more than the 7 colours"):
        charts.rooflines(ax, SEVEN + ["NVIDIA L40S"])


def test_log_axes_are_labelled_in_plain_numbers_with_several_ticks():
    fig, ax = figure()
    charts.rooflines(ax, SEVEN[:2])
    for axis in (ax.xaxis, ax.yaxis):
        texts = [text for text in _tick_texts(axis) if text]
        assert len(texts) > 1
        assert not any("10^" in text or "$" in text for text in texts), texts
    assert "1,000" in _tick_texts(ax.xaxis)


def test_a_line_that_stops_early_ends_in_a_cross_the_legend_explains():
    fig, ax = figure()
    charts.stopping_lines(ax, [("batch 1", [256, 4096], [1, 2], "C0", "-"),
                               ("batch 64", [256, 1024], [1, 3], "C1", "-")], 4096,
                          ticks=[256, 1024, 4096])
    crosses = [line for line in ax.get_lines() if line.get_marker() == "x"]
    assert len(crosses) == 1 and crosses[0].get_xdata()[0] == 1024
    assert "memory full" in [text.get_text() for text in ax.get_legend().get_texts()]
    assert _tick_texts(ax.xaxis) == ["256", "1,024", "4,096"]
    with pytest.raises(ValueError, match="limit"):
        charts.stopping_lines(ax, [], float("nan"))


def test_bars_are_coloured_by_kind_with_a_legend_of_the_kinds():
    fig, ax = figure()
    charts.kind_bars(ax, ["here", "DDR5"], [20.0, 90.0], ["measured", "reported"], unit=" GB/s")
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["measured", "reported"]
    assert [label.get_text() for label in ax.texts if "GB/s" in label.get_text()] == [
        "20 GB/s", "90 GB/s"]
    with pytest.raises(ValueError, match="lengths 2, 1 and 2 differ"):
        charts.kind_bars(ax, ["a", "b"], [1.0], ["measured", "reported"])
    with pytest.raises(ValueError, match="kinds"):
        charts.kind_bars(ax, ["a"], [1.0], ["guessed"])


def test_the_decode_walk_gives_each_batch_a_colour_unlike_the_roofline():
    fig, ax = figure()
    points = [(batch, False, float(batch), batch * 3e12) for batch in (1, 4, 16, 64, 256, 1024)]
    points += [(16, True, 15.0, 45e12)]
    charts.decode_walk(ax, "NVIDIA H100 SXM", points, context_tokens=2048)
    colours = [mcolors.to_hex(line.get_markeredgecolor()) for line in ax.get_lines()
               if line.get_marker() == "o" and len(line.get_xdata())]
    roofline_colour = _line_colours(ax)[0]
    assert roofline_colour not in colours
    assert len(set(colours)) == 6  # batch 16 with context shares batch 16's colour
    assert "2,048-token contexts (open)" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ValueError, match="points"):
        charts.decode_walk(ax, "NVIDIA H100 SXM", [(1, False, -1.0, 1e12)], context_tokens=1)


def test_the_ratio_chart_names_the_mlperf_round_of_its_audited_points():
    fig, ax = figure()
    charts.against_context_ratio(ax, [256, 4096], [1.0, 1.5], bandwidth_ratio=1.43, claim=1.5,
                                 audited=[1.28, 1.42], span=(300, 600), limit=4096)
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert any("MLPerf v4.1" in text for text in legend)
    with pytest.raises(ValueError, match="ratios: 1 values for 2 contexts"):
        charts.against_context_ratio(ax, [256, 4096], [1.0], bandwidth_ratio=1.43, claim=1.5,
                                     audited=[1.28], span=(300, 600), limit=4096)


def test_the_tensor_parallel_sweep_colours_by_hop_and_styles_by_algorithm():
    fig, ax = figure()
    curves = [(algorithm, hop, [1.0, 1.5]) for hop in (1e-6, 5e-6) for algorithm in
              ("ring", "best")]
    charts.tensor_parallel_sweep(ax, [1, 2], [1.0, 2.0], curves)
    styled = {(mcolors.to_hex(line.get_color()), line.get_linestyle())
              for line in ax.get_lines()[1:]}
    assert len(styled) == 4 and len({colour for colour, _ in styled}) == 2
    with pytest.raises(ValueError, match="curves: 1 ceilings for 2 chip counts"):
        charts.tensor_parallel_sweep(ax, [1, 2], [1.0, 2.0], [("ring", 1e-6, [1.0])])


def test_short_names_drop_vendors_and_row_qualifiers_only():
    assert specs.short_name("NVIDIA H100 SXM") == "H100 SXM"
    assert specs.short_name("AWS Inferentia2 (per chip)") == "Inferentia2"
    assert specs.short_name("Groq LPU (GroqChip)") == "Groq LPU"
    assert specs.short_name("AMD MI300X") == "AMD MI300X"
    short = [specs.short_name(name) for name in specs.chips()]
    assert len(set(short)) == len(short)  # no two rows of data/hardware.csv collide
    with pytest.raises(ValueError, match="name"):
        specs.short_name(" ")
    assert np.all([len(name) <= 45 for name in short])
