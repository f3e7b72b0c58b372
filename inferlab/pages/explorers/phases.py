"""The explorers of chapter 'Prefill and decode': one request's timeline, and the
reconciliation of Groq's 270 with LLMPerf's 185.

Each has a pure function here (:func:`timeline_explorer_compute`,
:func:`reconcile_explorer_compute`) over :mod:`inferlab.lab.timing`, declares its
controls, turns its results into tables and draws them. Each opens on the chapter's puzzle:
LLMPerf's run of 550 prompt tokens and 150 output tokens, with Groq's claimed 270 tokens
per second as the decode rate, and for the reconciliation the TTFT rounded as LLMPerf's
README rounds it, 0.22 s.
"""

from __future__ import annotations

import math
import re
from functools import cache

import numpy as np

from inferlab.common import checks
from inferlab.common.data import result
from inferlab.lab import timing
from inferlab.lab.timing import Reconciliation, RequestTimeline, reconcile, request_timeline
from inferlab.pages.colors import KIND_COLORS, PALETTE
from inferlab.pages.explorers.base import Explorer, Slider, register
from inferlab.pages.explorers.marks import badged, over_line, text_line

#: Assumed queue wait and prefill rate of the timeline explorer (illustrative, not Groq's).
TIMELINE_QUEUE_S = 0.05


TIMELINE_PREFILL_TOK_PER_S = 3000.0


def timeline_explorer_compute(prompt_tokens: int = 550, output_tokens: int = 150,
                              decode_tok_per_s: float = 270.0) -> RequestTimeline:
    """The timeline explorer's pure function: :func:`~inferlab.lab.timing.request_timeline` at
    the chapter's illustrative queue wait and prefill rate (``TIMELINE_QUEUE_S``,
    ``TIMELINE_PREFILL_TOK_PER_S``). Used in chapter 'Prefill and decode'.
    """
    return request_timeline(prompt_tokens, output_tokens, decode_tok_per_s,
                            prefill_tok_per_s=TIMELINE_PREFILL_TOK_PER_S,
                            queue_s=TIMELINE_QUEUE_S)


#: The record whose rate the reconciliation explorer finds a TTFT for, LLMPerf's median.
RECONCILE_TARGET = "llmperf-groq-l2-70b-throughput"


@cache
def _reconcile_target_tok_per_s() -> float:
    from inferlab.common.data import result  # pandas, only when an explorer asks

    return float(result(RECONCILE_TARGET)["value"])


def reconcile_explorer_compute(output_tokens: int = 150, ttft_s: float = 0.22,
                               decode_tok_per_s: float = 270.0) -> Reconciliation:
    """The reconciliation explorer's pure function: :func:`~inferlab.lab.timing.reconcile` with
    LLMPerf's published median (record ``RECONCILE_TARGET``) as the target. Used in chapter
    'Prefill and decode'.
    """
    target = _reconcile_target_tok_per_s()
    # No wait brings a decode rate at or below the target up to it: say so, rather than
    # show a wait of "nan" for the target.
    if checks.positive("decode_tok_per_s", decode_tok_per_s) <= target:
        raise ValueError(f"decode_tok_per_s: {decode_tok_per_s:g} tok/s cannot average "
                         f"{target:g} tok/s whatever the wait; give more than {target:g}")
    return reconcile(output_tokens, ttft_s, decode_tok_per_s, target_tok_per_s=target)


CHAPTER = "01_prefill_decode"
MS = 1e3

# The chapter's puzzle, from the same records the chapter reads.
_CLAIM = result("groq-claim-l2-70b")
_LLMPERF = result("llmperf-groq-l2-70b-throughput")
# LLMPerf's run shape is its scenario: "550 in / 150 out, concurrency 5".
_PROMPT_TOKENS, _OUTPUT_TOKENS, _ = (int(x) for x in re.findall(r"\d+", _LLMPERF["scenario"]))
# LLMPerf's README rounds its median TTFT to 0.22 s, and the chapter reconciles with that.
_TTFT_S = round(result("llmperf-groq-l2-70b-ttft")["value"], 2)
_GROQ_OUTPUT_TOKENS = 1000  # the output length Groq reportedly averaged over (the claim's note)

#: Points of the tokens-received curve kept per request: corners of the staircase, enough
#: for a line to look like it at any output length, and few enough for the site's grid.
_CURVE_POINTS = 100

_WIDTH = 560


def _timeline_tables(timeline: timing.RequestTimeline) -> dict[str, dict]:
    times = timeline.token_times_s()
    n = timeline.output_tokens
    every = math.ceil(n / _CURVE_POINTS)
    kept = np.unique(np.append(np.arange(1, n + 1, every), n))
    clocks = timeline.clocks()
    return {
        "phases": {"phase": ["queue", "prefill", "decode"],
                   "start_s": [0.0, timeline.queue_s, timeline.ttft_s],
                   "end_s": [timeline.queue_s, timeline.ttft_s, timeline.e2e_s]},
        # No token until the first arrives at the TTFT, then one per decode step.
        "tokens": {"time_s": np.concatenate(([0.0, timeline.ttft_s], times[kept - 1])),
                   "tokens": np.concatenate(([0, 0], kept))},
        "clocks": {"ttft_s": [clocks.ttft_s], "ttft_ms": [clocks.ttft_s * MS],
                   "tpot_ms": [clocks.tpot_s * MS], "e2e_s": [clocks.e2e_s],
                   "output_tokens": [n], "decode_steps": [n - 1],
                   "rate_with_ttft": [clocks.rate_with_ttft_tok_per_s],
                   "decode_only": [clocks.decode_only_tok_per_s]},
    }


def _timeline_chart(part):
    import altair as alt

    phases = alt.Scale(domain=["queue", "prefill", "decode"],
                       range=["#bbbbbb", PALETTE[1], "#2166ac"])
    time = alt.X("start_s:Q", title="time since the request was sent (s)")
    strip = part("phases").mark_bar(height=22).encode(
        x=time, x2="end_s:Q",
        color=alt.Color("phase:N", scale=phases, title=None,
                        legend=alt.Legend(orient="top", direction="horizontal", offset=0)),
        tooltip=["phase:N", alt.Tooltip("start_s:Q", title="from (s)", format=".3f"),
                 alt.Tooltip("end_s:Q", title="to (s)", format=".3f")],
    ).properties(width=_WIDTH, height=30)

    modelled = KIND_COLORS["modelled"]
    tokens = part("tokens").mark_line(color=modelled).encode(
        x=alt.X("time_s:Q", title="time since the request was sent (s)"),
        y=alt.Y("tokens:Q", title="output tokens received"))
    clocks = part("clocks")
    ttft = clocks.mark_rule(color=PALETTE[1], strokeDash=[4, 3]).encode(x="ttft_s:Q")
    ttft_label = clocks.mark_text(align="left", baseline="top", dx=4, color=PALETTE[1],
                                  fontSize=11).encode(
        x="ttft_s:Q", y=alt.value(4), text="line:N",
    ).transform_calculate(line="'TTFT ' + format(datum.ttft_ms, ',.0f') + ' ms'")
    received = badged(tokens, ttft, ttft_label, width=_WIDTH, height=220)

    def line(expression: str):
        return text_line(clocks, expression, width=_WIDTH)

    text = alt.vconcat(
        line("'TTFT ' + format(datum.ttft_ms, ',.0f') + ' ms, then ' + "
             "format(datum.decode_steps, ',') + ' decode steps of ' + "
             "format(datum.tpot_ms, '.2f') + ' ms (TPOT); end-to-end ' + "
             "format(datum.e2e_s, ',.3f') + ' s'"),
        line("'Rate with TTFT ' + format(datum.rate_with_ttft, ',.0f') + ' tok/s, after the "
             "first token ' + format(datum.decode_only, ',.0f') + ' tok/s'"),
        spacing=2)
    return alt.vconcat(strip, received, text, spacing=10).resolve_scale(x="independent")


@register
def timeline_explorer() -> Explorer:
    """Sliders: prompt tokens, output tokens, decode rate (1 / TPOT)."""
    return Explorer(
        name="pd_timeline", kind="analytic", chapter=CHAPTER,
        compute=timeline_explorer_compute, tables=_timeline_tables,
        chart=_timeline_chart,
        controls=(
            Slider("prompt_tokens", "prompt length (tokens)", 50, 8000, 50,
                   default=_PROMPT_TOKENS, grid=(50, _PROMPT_TOKENS, 2000, 4000, 8000),
                   glued="pd_prompt_tokens"),
            Slider("output_tokens", "output length (tokens)", 10, 2000, 10,
                   default=_OUTPUT_TOKENS, grid=(10, _OUTPUT_TOKENS, 500, 1000, 2000),
                   glued="pd_output_tokens"),
            Slider("decode_tok_per_s", "decode rate (tokens per second)", 5, 1000, 5,
                   default=_CLAIM["value"], grid=(50, 100, _CLAIM["value"], 500, 1000),
                   glued="pd_claim"),
        ),
    )


# ------------------------------------------------------------------- the reconciliation

_OUTPUT_ENDS = (1, 2000)
_HEADROOM = 1.25


def _reconcile_tables(r: timing.Reconciliation) -> dict[str, dict]:
    return {
        "curve": {"output_tokens": r.curve_output_tokens, "rate": r.curve_rate_tok_per_s},
        # Room above the decode rate, the curve's limit, for the badges in the corner.
        "decode": {"decode_tok_per_s": [r.decode_tok_per_s],
                   "headroom": [r.decode_tok_per_s * _HEADROOM]},
        "point": {"output_tokens": [r.output_tokens], "rate": [r.rate_with_ttft_tok_per_s],
                  "ttft_ms": [r.ttft_s * MS], "decode_tok_per_s": [r.decode_tok_per_s],
                  "ttft_for_target_ms": [r.ttft_for_target_s * MS],
                  "target_tok_per_s": [r.target_tok_per_s]},
    }


def _reconcile_chart(part):
    import altair as alt

    modelled, reported = KIND_COLORS["modelled"], KIND_COLORS["reported"]
    x = alt.X("output_tokens:Q", title="output tokens per request (log scale)",
              scale=alt.Scale(type="log", domain=list(_OUTPUT_ENDS)),
              axis=alt.Axis(values=[1, 10, 100, 1000], format=","))
    y = alt.Y("rate:Q", title="tokens per second, per request",
              scale=alt.Scale(zero=True, nice=True))
    curve = part("curve").mark_line(color=modelled).encode(x=x, y=y)
    decode = part("decode").mark_rule(color=modelled, strokeDash=[2, 2]).encode(
        y="decode_tok_per_s:Q")
    room = part("decode").mark_point(opacity=0).encode(y="headroom:Q")
    point = part("point").mark_point(filled=True, size=80, color=modelled).encode(
        x=x, y=y, tooltip=[alt.Tooltip("output_tokens:Q", title="output tokens", format=","),
                           alt.Tooltip("rate:Q", title="tok/s with TTFT", format=",.1f")])
    # The published figures are fixed: drawn from the chapter's records, not computed.
    published = alt.Chart(alt.Data(values=[
        {"label": "LLMPerf median", "output_tokens": _OUTPUT_TOKENS, "rate": _LLMPERF["value"]},
        {"label": f"Groq dashboard {_CLAIM['value']:.0f}+", "output_tokens": _GROQ_OUTPUT_TOKENS,
         "rate": _CLAIM["value"]},
    ]))
    squares = published.mark_square(size=80, color=reported).encode(x=x, y=y)
    names = published.mark_text(align="right", dx=-8, dy=12, fontSize=10,
                                color=reported).encode(x=x, y=y, text="label:N")
    plot = badged(curve, decode, room, point, squares, names, kinds=("modelled", "reported"),
                  width=_WIDTH, height=260)
    line = ("format(datum.output_tokens, ',') + ' tokens at TTFT ' + "
            "format(datum.ttft_ms, ',.0f') + ' ms and decode ' + "
            "format(datum.decode_tok_per_s, ',.0f') + ' tok/s: ' + "
            "format(datum.rate, ',.1f') + ' tok/s with TTFT' + "
            "(isValid(datum.ttft_for_target_ms) ? '; a TTFT of ' + "
            "format(datum.ttft_for_target_ms, ',.0f') + ' ms would give "
            "exactly ' + format(datum.target_tok_per_s, ',.0f') : '')")
    return over_line(plot, part("point"), line, width=_WIDTH)


@register
def reconcile_explorer() -> Explorer:
    """Sliders: output tokens, TTFT, decode-only rate; LLMPerf's and Groq's published
    figures drawn as reported points."""
    return Explorer(
        name="pd_reconcile", kind="analytic", chapter=CHAPTER,
        compute=reconcile_explorer_compute, tables=_reconcile_tables,
        chart=_reconcile_chart,
        controls=(
            Slider("output_tokens", "output length (tokens)", 10, 2000, 10,
                   default=_OUTPUT_TOKENS, grid=(10, 50, _OUTPUT_TOKENS, 500, 1000, 2000),
                   glued="pd_output_tokens"),
            Slider("ttft_s", "time to first token (s)", 0.0, 2.0, 0.01, default=_TTFT_S,
                   grid=(0.0, 0.1, _TTFT_S, 0.5, 1.0, 2.0), glued="pd_ttft_round"),
            Slider("decode_tok_per_s", "decode-only rate (tokens per second)", 10, 1000, 1,
                   default=_CLAIM["value"], grid=(50, 100, 185, _CLAIM["value"], 500, 1000),
                   glued="pd_claim"),
        ),
    )
