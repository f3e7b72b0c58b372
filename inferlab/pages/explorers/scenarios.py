"""The explorers of chapter 'Benchmark scenarios': one LoadGen trial against its bounds.

The Server explorer runs MLPerf's Server or Interactive scenario on the chapter's example
system (:func:`server_explorer_compute`, over :mod:`inferlab.serving.loadgen`); this
module declares its controls, turns the judged run into tables and draws them. It opens where
the text reads the Server sweep: 120 queries per second under the Server bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from inferlab.benchmark import mlperf
from inferlab.benchmark.mlperf import BOUNDED_SCENARIOS, LatencyBounds, bounds
from inferlab.benchmark.verdict import Summary, mlperf_rules
from inferlab.common import checks
from inferlab.pages.colors import KIND_COLORS
from inferlab.pages.explorers.base import Choice, Explorer, Slider, register
from inferlab.pages.explorers.marks import badge, distribution
from inferlab.serving.example import example_system
from inferlab.serving.loadgen import System, run_scenario

#: The explorer's run rules — MLPerf's, with the minimum duration cut to a quarter
#: (150 s) so that one move of the slider simulates in well under a second.
EXPLORER_SCALE = 0.25


@dataclass(frozen=True)
class ServerView:
    """One run of the Server explorer: sorted TTFT and TPOT, the bounds and the verdict.

    Used in chapter 'Benchmark scenarios'.
    """

    rate_per_s: float
    scenario: str
    ttft_sorted_s: np.ndarray
    tpot_sorted_s: np.ndarray
    limit: LatencyBounds
    summary: Summary


def server_explorer_compute(rate_per_s: float = 60.0, scenario: str = "Server") -> ServerView:
    """Run the example system at ``rate_per_s`` under ``scenario`` and judge it.

    Uses :func:`~inferlab.serving.example.example_system`, the default
    :class:`~inferlab.benchmark.workload.Workload` and MLPerf's rules scaled by
    :data:`EXPLORER_SCALE`. Raises ``ValueError`` for a non-positive rate or a scenario without
    a bound.

    Used in chapter 'Benchmark scenarios'.
    """
    if scenario not in BOUNDED_SCENARIOS:
        raise ValueError(f"scenario: {scenario!r} is not one of {', '.join(BOUNDED_SCENARIOS)}")
    rate = checks.positive("rate_per_s", rate_per_s)
    summary = run_scenario(_cached_system(), scenario, rate_per_s=rate,
                           rules=mlperf_rules(scale=EXPLORER_SCALE))
    return ServerView(rate, scenario, np.sort(summary.log.ttft_s), np.sort(summary.log.tpot_s),
                      bounds("llama2-70b", scenario), replace(summary, log=None))


@cache
def _cached_system() -> System:
    return example_system()


CHAPTER = "05_scenarios"
MS = 1e3

_WIDTH, _HEIGHT = 270, 200

#: The two lines each panel marks: the scenario's bound and the run's p99 as LoadGen
#: computes it.
_LINES = ("bound", "p99 (LoadGen)")

#: Lines kept under the chart: two for the run, one for the verdict and three for its
#: reasons (a run can miss both p99 bounds and early stopping at once).
_TEXT_LINES = 6


def _server_tables(view: ServerView) -> dict[str, dict]:
    s = view.summary
    return {
        "ttft": distribution(view.ttft_sorted_s),
        "tpot": distribution(view.tpot_sorted_s, MS),
        "ttft_lines": {"line": list(_LINES), "value": [view.limit.ttft_s, s.ttft_p99_s]},
        "tpot_lines": {"line": list(_LINES),
                       "value": [view.limit.tpot_s * MS, s.tpot_p99_s * MS]},
        # Written here, not in the chart: the site keeps numbers to four figures, and a
        # count of 18,432 queries must not read 18,430.
        "lines": {"row": list(range(3 + len(s.reasons))),
                  "text": [f"{view.scenario} at {view.rate_per_s:.1f} queries/s: {s.queries:,} "
                           f"queries, {s.rules.min_duration_s:.0f} s minimum",
                           f"{s.result:,.0f} tok/s, p99 TTFT {s.ttft_p99_s * MS:,.0f} ms, "
                           f"p99 TPOT {s.tpot_p99_s * MS:.1f} ms",
                           "VALID" if s.valid else "INVALID", *s.reasons]},
    }


def _server_chart(part):
    import altair as alt

    colours = alt.Scale(domain=list(_LINES), range=[KIND_COLORS["reported"], "#4d4d4d"])
    dashes = alt.Scale(domain=list(_LINES), range=[[6, 3], [2, 2]])
    legend = alt.Legend(orient="top", direction="horizontal", title=None)
    # Every layer names the axis: Vega-Lite merges the layers' axes, and one without
    # values would thin the labels out.
    axis = alt.Axis(format=".0%", values=[0, 0.2, 0.4, 0.6, 0.8, 1])
    share = alt.Y("share:Q", title="share of queries at or below",
                  scale=alt.Scale(domain=[0, 1.1]), axis=axis)

    def panel(name: str, title: str, scale):
        x = alt.X("value:Q", title=title, scale=scale, axis=alt.Axis(format=",~r"))
        curve = part(name).mark_line(color=KIND_COLORS["modelled"], strokeWidth=2).encode(
            x=x, y=share)
        # The share LoadGen's p99 is read at: where a curve crosses it is the p99.
        p99 = alt.Chart(alt.Data(values=[{}])).mark_rule(color="#bbbbbb").encode(
            y=alt.YDatum(0.99, axis=axis))
        marks = part(f"{name}_lines").mark_rule(strokeWidth=1.5).encode(
            x=x, y=alt.YDatum(0, axis=axis), y2=alt.datum(1),
            color=alt.Color("line:N", scale=colours, legend=legend),
            strokeDash=alt.StrokeDash("line:N", scale=dashes, legend=legend),
            tooltip=[alt.Tooltip("line:N", title="line"),
                     alt.Tooltip("value:Q", title=title, format=",.4~r")])
        return alt.layer(curve, p99, marks).properties(width=_WIDTH, height=_HEIGHT)

    # Zero on both axes: a bound far to the right of the curve is the point.
    ttft = panel("ttft", "time to first token (s)", alt.Scale(zero=True, nice=True))
    tpot = panel("tpot", "time per output token (ms)", alt.Scale(zero=True, nice=True))
    panels = alt.hconcat(ttft, alt.layer(tpot, badge("modelled", width=_WIDTH)), spacing=24)

    row = alt.Y("row:O", axis=None, scale=alt.Scale(domain=list(range(_TEXT_LINES))))

    def lines(weight: str, which: str):
        return part("lines").mark_text(align="left", baseline="top", fontSize=12,
                                       fontWeight=weight).encode(
            x=alt.value(0), y=row, text="text:N").transform_filter(which)

    # The verdict in bold, between the run's numbers and the reasons for it.
    text = alt.layer(lines("bold", "datum.row == 2"),
                     lines("normal", "datum.row != 2")).properties(
        width=2 * _WIDTH, height=16 * _TEXT_LINES)
    return alt.vconcat(panels, text, spacing=12)


@register
def server_explorer() -> Explorer:
    """Slider: target rate; menu: Server or Interactive bounds (each move simulates a
    full, if shortened, LoadGen run)."""
    return Explorer(
        name="scen_server", kind="simulation", chapter=CHAPTER,
        compute=server_explorer_compute, tables=_server_tables, chart=_server_chart,
        controls=(
            Slider("rate_per_s", "target rate (queries per second)", 5.0, 150.0, 2.5,
                   default=120.0, grid=(20.0, 40.0, 60.0, 80.0, 100.0, 120.0, 140.0),
                   glued="scen_sweep_rate"),
            Choice("scenario", "scenario (its latency bounds)", mlperf.BOUNDED_SCENARIOS,
                   default="Server"),
        ),
    )
