"""The decision explorer of chapter 'Choosing hardware': a workload and the families that fit.

It computes with :func:`inferlab.choosing.decide_explorer_compute` (tested there); this
module only declares its controls, turns the decision into tables and draws it. It opens
on the chapter's chat service: Llama 3.1 70B at FP8, 30 tokens per second per user, a
p99 within three times the median, a model change every other month, 5 billion tokens a
day. Its kind is simulation: the tails it judges come from
:func:`inferlab.choosing.latency_spread`, which runs the serving simulator (once, then
cached).
"""

from __future__ import annotations

import math
import textwrap

from inferlab import choosing, specs
from inferlab.explorers.base import Choice, Explorer, Slider, log_range, register
from inferlab.explorers.marks import badge
from inferlab.plotting import KIND_COLORS, PALETTE

CHAPTER = "07_choosing_hardware"

_WIDTH = 460
_BAR_HEIGHT = 34
#: The reasons under the chart: lines of at most this many characters (the chart's width
#: with its labels, in 12-pixel text), this many pixels apart, room kept for this many.
_LINE_CHARS, _LINE_PX, _REASON_LINES = 78, 16, 11
#: The chat service's volume, 5 billion output tokens a day, as the slider's logarithm.
_CHAT_VOLUME = math.log10(5e9)


def _against(verdict: choosing.Verdict) -> str:
    if verdict.fits:
        return "fits"
    first, *more = verdict.against
    return first.text + (f" (and {len(more)} more)" if more else "")


def _decision_tables(decision: choosing.Decision) -> dict[str, dict]:
    verdicts = decision.verdicts
    labels = [choosing.FAMILY_LABELS[v.family] for v in verdicts]
    lines = [line for label, v in zip(labels, verdicts, strict=True)
             for line in textwrap.wrap(f"{label}: {_against(v)}", _LINE_CHARS,
                                       subsequent_indent="    ")]
    return {
        "families": {
            "family": labels,
            # A family whose node cannot hold the model has no speed to draw.
            "tok_s": [v.floor.ceiling_tok_s * choosing.ATTAINABLE_FRACTION
                      if v.floor is not None else math.nan for v in verdicts],
            "verdict": ["fits" if v.fits else "ruled out" for v in verdicts]},
        "need": {"tok_s": [decision.workload.per_user_tok_s]},
        # The whole first reason against each family and how many more there are, wrapped
        # at spaces rather than cut: its number is the point.
        "reasons": {"y": [_LINE_PX * row for row in range(len(lines))], "text": lines},
    }


def _decision_chart(part):
    import altair as alt

    families = [choosing.FAMILY_LABELS[f] for f in choosing.FAMILIES]
    y = alt.Y("family:N", title=None, sort=families, scale=alt.Scale(domain=families))
    x = alt.X("tok_s:Q", title="attainable single-stream tok/s per user",
              scale=alt.Scale(type="log", domain=[1, 1e6]),
              axis=alt.Axis(values=[1, 10, 100, 1000, 10000, 100000, 1000000], format=",~g"))
    verdicts = alt.Scale(domain=["fits", "ruled out"], range=[PALETTE[2], "#999999"])
    bars = part("families").mark_bar(height=_BAR_HEIGHT * 0.6).encode(
        x=alt.X("floor:Q", scale=alt.Scale(type="log", domain=[1, 1e6])), x2="tok_s:Q", y=y,
        color=alt.Color("verdict:N", scale=verdicts, title=None,
                        legend=alt.Legend(orient="top", direction="horizontal")),
        tooltip=[alt.Tooltip("family:N"), alt.Tooltip("tok_s:Q", title="tok/s per user",
                                                      format=",.0f")],
    ).transform_calculate(floor="1").transform_filter("isValid(datum.tok_s)")
    need = part("need").mark_rule(color=KIND_COLORS["reported"], strokeDash=[6, 3],
                                  strokeWidth=1.5).encode(
        x=x, tooltip=[alt.Tooltip("tok_s:Q", title="needed, tok/s per user", format=",~g")])
    named = part("need").mark_text(color=KIND_COLORS["reported"], fontSize=11, align="left",
                                   dx=4).encode(x=x, y=alt.value(6), text=alt.value("needed"))
    plot = alt.layer(bars, need, named, badge("modelled", width=_WIDTH)).properties(
        width=_WIDTH, height=_BAR_HEIGHT * len(families))
    lines = part("reasons").mark_text(align="left", baseline="top", fontSize=12).encode(
        x=alt.value(0), y=alt.Y("y:Q", scale=None), text="text:N",
    ).properties(width=_WIDTH, height=_LINE_PX * _REASON_LINES)
    return alt.vconcat(plot, lines, spacing=12)


@register
def decide_explorer() -> Explorer:
    """Sliders and menus: daily volume, change rate, tail bound, speed per user, model,
    precision."""
    return Explorer(
        name="hw_decide", kind="simulation", chapter=CHAPTER,
        compute=choosing.decide_explorer_compute, tables=_decision_tables,
        chart=_decision_chart,
        controls=(
            # The workload's volume and change rate first: they decide between families
            # only while the others leave the choice open.
            # Ends a whole number of steps from the chat service's volume (about 6 and
            # 12), so that the slider opens on it rather than snapping to 9.7.
            Slider("log10_tokens_per_day", "output tokens per day (log10)",
                   _CHAT_VOLUME - 3.7, _CHAT_VOLUME + 2.3, 0.1,
                   default=_CHAT_VOLUME, grid=(8.0, _CHAT_VOLUME, 10.7)),
            Slider("changes_per_month", "model changes per month", 0.0, 60.0, 0.5,
                   default=0.5, grid=(0.5, 30.0)),
            Slider("tail_ratio_max", "largest p99 over median time per token", 1.0, 5.0, 0.05,
                   default=3.0, grid=(1.05, 3.0)),
            Slider("per_user_tok_s", "speed each user needs (tok/s)",
                   *log_range(30, 1, 10000, 0.05), 0.05,
                   default=30, log=True, grid=(10, 30, 100, 400, 1000),
                   glued="hw_chat_tok_s"),
            Choice("model", "model", tuple(specs.models()), default="Llama 3.1 70B",
                   grid=("Llama 3.1 8B", "Llama 3.1 70B", "Llama 3.1 405B")),
            Choice("precision", "precision of the weights", ("fp16", "fp8", "int8", "int4"),
                   default="fp8", grid=("fp16", "fp8")),
        ),
    )
