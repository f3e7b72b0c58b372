"""The explorers of chapter 'Batching': the latency tail under load.

The tail explorer runs the simulator (:func:`inferlab.simulator.tail_explorer_compute`,
tested there) on the chapter's one-H200 server; this module only declares its controls,
turns its result into tables and draws them. It opens on the point of section 'Load and
the tail' that the text reads most from: load 0.9 of saturation, a batch limit of 256
and outputs spread with a coefficient of variation of 1.
"""

from __future__ import annotations

from inferlab import simulator
from inferlab.explorers.base import Explorer, Slider, register
from inferlab.explorers.marks import badge, distribution
from inferlab.plotting import KIND_COLORS, PALETTE

CHAPTER = "03_batching"
MS = 1e3

# ---------------------------------------------------------------------- the tail

_PERCENTILES = ("p50", "p99", "p99.9")

_TAIL_WIDTH, _TAIL_HEIGHT = 270, 220


def _tail_tables(view: simulator.TailView) -> dict[str, dict]:
    p = view.percentiles
    return {
        "ttft": distribution(view.ttft_sorted_s),
        "tpot": distribution(view.tpot_sorted_s, MS),
        "ttft_marks": {"percentile": list(_PERCENTILES),
                       "value": [p[f"ttft_{q}"] for q in _PERCENTILES]},
        "tpot_marks": {"percentile": list(_PERCENTILES),
                       "value": [p[f"tpot_{q}"] * MS for q in _PERCENTILES]},
        "run": {"load": [view.load], "rate_per_s": [view.rate_per_s],
                "throughput_tok_s": [view.throughput_tok_s], "mean_batch": [view.mean_batch],
                # No dot in a column's name: Vega-Lite reads one as a nested field.
                **{key.replace(".", "_"): [value] for key, value in p.items()}},
    }


def _tail_chart(part):
    import altair as alt

    marks = alt.Scale(domain=list(_PERCENTILES), range=PALETTE[1:4])
    # Room above 100 % for the badge, which the curves would otherwise run into.
    # The rules name the axis too: Vega-Lite merges the layers' axes, and one without
    # values can thin the labels out.
    axis = alt.Axis(format=".0%", values=[0, 0.2, 0.4, 0.6, 0.8, 1])
    share = alt.Y("share:Q", title="share of requests at or below",
                  scale=alt.Scale(domain=[0, 1.1]), axis=axis)

    def panel(name: str, title: str, scale, axis):
        x = alt.X("value:Q", title=title, scale=scale, axis=axis)
        curve = part(name).mark_line(color=KIND_COLORS["modelled"], strokeWidth=2).encode(
            x=x, y=share)
        rules = part(f"{name}_marks").mark_rule(strokeDash=[4, 3], strokeWidth=1.5).encode(
            x=x, y=alt.YDatum(0, axis=axis), y2=alt.datum(1),
            color=alt.Color("percentile:N", scale=marks, title=None,
                            legend=alt.Legend(orient="top", direction="horizontal")),
            tooltip=[alt.Tooltip("percentile:N"),
                     alt.Tooltip("value:Q", title=title, format=",.3~g")])
        return alt.layer(curve, rules).properties(width=_TAIL_WIDTH, height=_TAIL_HEIGHT)

    seconds = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]
    ttft = panel("ttft", "time to first token (s)", alt.Scale(type="log", nice=False),
                 alt.Axis(values=seconds, format=",~g"))
    tpot = panel("tpot", "time per output token (ms)", alt.Scale(zero=False, nice=True),
                 alt.Axis(format=",.0f"))
    tpot = alt.layer(tpot, badge("modelled", width=_TAIL_WIDTH))
    panels = alt.hconcat(ttft, tpot, spacing=24)

    run = part("run")

    def line(expression: str):
        return run.mark_text(align="left", baseline="top", fontSize=12).encode(
            x=alt.value(0), y=alt.value(0), text="line:N",
        ).transform_calculate(line=expression).properties(width=2 * _TAIL_WIDTH, height=16)

    text = alt.vconcat(
        line("'Load ' + format(datum.load, '.2f') + ' of saturation (' + "
             "format(datum.rate_per_s, '.1f') + ' requests/s): ' + "
             "format(datum.throughput_tok_s, ',.0f') + ' tok/s, ' + "
             "format(datum.mean_batch, '.0f') + ' requests in flight on average'"),
        line("'TTFT p50 ' + format(datum.ttft_p50, '.2f') + ' s, p99 ' + "
             "format(datum.ttft_p99, '.2f') + ' s, p99.9 ' + format(datum.ttft_p99_9, '.2f')"
             " + ' s; TPOT p50 ' + format(1000 * datum.tpot_p50, '.0f') + ' ms, p99 ' + "
             "format(1000 * datum.tpot_p99, '.0f') + ' ms, p99.9 ' + "
             "format(1000 * datum.tpot_p99_9, '.0f') + ' ms'"),
        spacing=2)
    return alt.vconcat(panels, text, spacing=12)


@register
def tail_explorer() -> Explorer:
    """Sliders: offered load, batch limit, spread of output lengths (each move simulates
    2,000 requests)."""
    return Explorer(
        name="batch_tail", kind="simulation", chapter=CHAPTER,
        compute=simulator.tail_explorer_compute, tables=_tail_tables, chart=_tail_chart,
        controls=(
            # The grid holds the loads the text reads: 0.5, 0.9 and, past saturation, 1.1.
            Slider("load", "offered load (fraction of saturation)", 0.1, 1.2, 0.05,
                   default=0.9, grid=(0.1, 0.3, 0.5, 0.7, 0.9, 1.1)),
            Slider("max_batch", "batch limit (requests)", 8, 512, 8, default=256,
                   grid=(32, 256)),
            Slider("output_cv", "spread of output lengths (standard deviation over mean)",
                   0.0, 2.0, 0.1, default=1.0, grid=(0.0, 1.0, 2.0)),
        ),
    )
