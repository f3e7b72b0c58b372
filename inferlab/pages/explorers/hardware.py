"""The explorers of chapter 'Choosing hardware': what speculative decoding gives, and
which families fit a service and what a deployment of it needs.

- The speculative-decoding explorer computes with
  :func:`inferlab.serving.speculative.speculative_decoding` and draws the curve of
  :func:`inferlab.serving.speculative.speedup_curve`. It opens on the section's worked example:
  acceptance 0.8, four draft tokens, a draft costing ``choosing.DRAFT_COST_RATIO`` of a
  target step, over Cerebras's launch rate.
- The planner explorer is the chapter's one workflow, computed by
  :func:`plan_explorer_compute`: the decision guide's verdict per family
  (:func:`inferlab.choosing.decide`, whose tails come from the serving simulator, once,
  then cached), then :func:`inferlab.plan.plan` on :data:`PLAN_CHIPS`: the chips each
  kind needs to serve the traffic within the p99 bounds and the dollars per million
  output tokens. It opens on the chapter's own service: Llama 3.1 8B, 1,000 tokens in and
  200 out, a 2 s p99 TTFT, a 50 ms p99 TPOT, 20 requests a second. Its kind is
  simulation: each plan runs the serving simulator on one replica of each layout it
  tries.

The functions are tested where they live; this module only declares the controls, turns
the results into tables and draws them.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from inferlab import choosing
from inferlab.common.data import result
from inferlab.model import steptime
from inferlab.pages.colors import KIND_COLORS, PALETTE
from inferlab.pages.explorers.base import Choice, Explorer, Slider, log_range, register
from inferlab.pages.explorers.marks import badge, badged, over_line, text_line
from inferlab.plan import PlanResult
from inferlab.plan import plan as plan_deployment
from inferlab.serving import speculative

CHAPTER = "07_choosing_hardware"
#: The chapter that sizes a deployment with the planner and shows its explorer.
PLAN_CHAPTER = "08_sizing"

# ---------------------------------------------------------------------- the decision

_DECIDE_WIDTH = 460
_BAR_HEIGHT = 34
#: The reasons under the chart: lines of at most this many characters (the chart's width
#: with its labels, in 12-pixel text), this many pixels apart, room kept for this many.
_LINE_CHARS, _LINE_PX, _REASON_LINES = 78, 16, 11


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
            "tok_s": [v.floor.ceiling_tok_s * steptime.ATTAINABLE_FRACTION
                      if v.floor is not None else math.nan for v in verdicts],
            "verdict": ["fits" if v.fits else "ruled out" for v in verdicts]},
        "need": {"tok_s": [decision.requirements.per_user_tok_s]},
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
    plot = badged(bars, need, named, width=_DECIDE_WIDTH, height=_BAR_HEIGHT * len(families))
    lines = part("reasons").mark_text(align="left", baseline="top", fontSize=12).encode(
        x=alt.value(0), y=alt.Y("y:Q", scale=None), text="text:N",
    ).properties(width=_DECIDE_WIDTH, height=_LINE_PX * _REASON_LINES)
    return alt.vconcat(plot, lines, spacing=12)


# ------------------------------------------------------------ speculative decoding

# The section's worked example, from the records the chapter reads.
_LAUNCH = result("cerebras-l31-70b-launch")["value"]
_REPORTED = result("cerebras-l31-70b-specdec")["value"]

_DRAFTS = np.arange(choosing.MAX_SPECULATIVE_DRAFT + 1)
_SPEC_WIDTH, _SPEC_HEIGHT = 540, 280
_HEADROOM = 1.15


def _speculative_tables(estimate: speculative.SpeculativeEstimate) -> dict[str, dict]:
    gains = speculative.speedup_curve(estimate.acceptance_rate, _DRAFTS,
                                      estimate.draft_cost_ratio)
    return {
        "curve": {"draft_tokens": _DRAFTS, "speedup": gains},
        "point": {"draft_tokens": [estimate.draft_tokens], "speedup": [estimate.speedup],
                  "acceptance_rate": [estimate.acceptance_rate],
                  "draft_cost_ratio": [estimate.draft_cost_ratio],
                  "per_pass": [estimate.expected_tokens_per_step],
                  "base_tok_s": [estimate.base_decode_tok_per_s],
                  "decode_tok_s": [estimate.decode_tok_per_s]},
        # The reported figure is fixed; the speed-up it claims is over the chosen base.
        "claim": {"speedup": [_REPORTED / estimate.base_decode_tok_per_s],
                  "reported_tok_s": [_REPORTED],
                  "base_tok_s": [estimate.base_decode_tok_per_s],
                  # Room above the claim and the curve for the badges in the corner.
                  "room": [max(_REPORTED / estimate.base_decode_tok_per_s, gains.max())
                           * _HEADROOM]},
    }


def _speculative_chart(part):
    import altair as alt

    modelled, reported = KIND_COLORS["modelled"], KIND_COLORS["reported"]
    x = alt.X("draft_tokens:Q", title="draft tokens per cycle, k",
              scale=alt.Scale(domain=[0, int(_DRAFTS[-1])]), axis=alt.Axis(tickMinStep=1))
    y = alt.Y("speedup:Q", title="speed-up over plain decoding",
              scale=alt.Scale(zero=True, nice=True))
    curve = part("curve").mark_line(color=modelled).encode(x=x, y=y)
    point = part("point").mark_point(filled=True, size=90, color=modelled).encode(
        x=x, y=y, tooltip=[alt.Tooltip("speedup:Q", title="speed-up", format=".2f")])
    one = alt.Chart(alt.Data(values=[{"speedup": 1.0}])).mark_rule(color="#888888").encode(y=y)
    claim = part("claim")
    claimed = claim.mark_rule(color=reported, strokeDash=[5, 3]).encode(y=y)
    room = claim.mark_point(opacity=0).encode(y="room:Q")
    claimed_label = claim.mark_text(align="left", baseline="bottom", dy=-3, fontSize=10,
                                    color=reported).encode(
        x=alt.value(4), y=y, text="line:N",
    ).transform_calculate(line="'reported: ' + format(datum.reported_tok_s, ',.0f') + ' / ' + "
                               "format(datum.base_tok_s, ',.0f') + ' tok/s = ' + "
                               "format(datum.speedup, '.2f') + 'x'")
    plot = badged(curve, one, claimed, room, claimed_label, point,
                  kinds=("modelled", "reported"), width=_SPEC_WIDTH, height=_SPEC_HEIGHT)
    line = ("'a = ' + format(datum.acceptance_rate, '.2f') + ', k = ' + "
            "datum.draft_tokens + ', c = ' + format(datum.draft_cost_ratio, '.2f') + "
            "': ' + format(datum.per_pass, '.2f') + ' tokens per target pass, "
            "speed-up ' + format(datum.speedup, '.2f') + 'x, ' + "
            "format(datum.base_tok_s, ',.0f') + ' -> ' + "
            "format(datum.decode_tok_s, ',.0f') + ' tok/s'")
    return over_line(plot, part("point"), line, width=_SPEC_WIDTH)


@register
def speculative_explorer() -> Explorer:
    """Sliders: acceptance rate a, draft tokens k, draft cost ratio c, plain decode rate."""
    top, cost = int(_DRAFTS[-1]), choosing.DRAFT_COST_RATIO
    return Explorer(
        name="hw_speculative", kind="analytic", chapter=CHAPTER,
        compute=speculative.speculative_decoding, tables=_speculative_tables,
        chart=_speculative_chart,
        controls=(
            Slider("acceptance_rate", "acceptance rate of draft tokens", 0.0, 1.0, 0.01,
                   default=0.8, grid=(0.5, 0.7, 0.8, 0.9, 0.95, 1.0)),
            Slider("draft_tokens", "draft tokens per cycle", 0, top, 1, default=4,
                   grid=(0, 1, 2, 4, 8, 12, top)),
            Slider("draft_cost_ratio", "draft cost (share of a target step)", 0.0, 1.0, 0.01,
                   default=cost, grid=(0.0, cost, 0.1, 0.25, 0.5)),
            Slider("base_decode_tok_per_s", "plain decode rate (tokens per second)", 10, 3000,
                   10, default=_LAUNCH, grid=(100, _LAUNCH, 1000),
                   glued="hw_cerebras_launch"),
        ),
    )


# ---------------------------------------------------------------------- the planner

#: The chip kinds the planner explorer sizes: every chip with a dated price in
#: data/prices.csv, and one without (ranked by chips), so the explorer shows both.
PLAN_CHIPS = ("NVIDIA B200", "NVIDIA H200 SXM", "NVIDIA H100 SXM",
              "Google TPU v5e (per chip)", "AMD MI325X")
#: The models its menu offers: a small and a large dense model, one chip against many.
PLAN_MODELS = ("Llama 3.1 8B", "Llama 3.1 70B")
#: The precision menu: the planner's default (8 bits where the chip computes them) or 16.
PLAN_PRECISIONS = ("8-bit where the chip has it", "bf16")
#: The chapter's own service, where the explorer opens: Llama 3.1 8B, 1,000 tokens in and
#: 200 out, p99 TTFT 2 s, p99 TPOT 50 ms, 20 requests a second; for the decision guide, a
#: p99 within three times the median and a model change every other month.
PLAN_SERVICE = {"model": "Llama 3.1 8B", "input_tokens": 1000, "output_tokens": 200,
                "ttft_p99_s": 2.0, "tpot_p99_ms": 50, "rate_per_s": 20.0,
                "tail_ratio_max": 3.0, "changes_per_month": 0.5}

_PLAN_WIDTH = 540
_PLAN_ROW = 40
#: The chips axis starts below one chip, so a one-chip plan still shows a bar.
_PLAN_ENDS = (0.5, 1e4)
_PLANNED, _REFUSED = "planned", "refused"


@dataclass(frozen=True)
class Workflow:
    """What the planner explorer shows for one service: the families the decision guide
    lets through (:func:`inferlab.choosing.decide`) and the planner's cheapest plan per
    chip kind (:func:`inferlab.plan.plan`)."""

    decision: choosing.Decision
    planned: PlanResult


#: The decision guide's precision for each entry of :data:`PLAN_PRECISIONS` (its weights'
#: bytes are what it judges by).
_DECIDE_PRECISION = {PLAN_PRECISIONS[0]: "fp8", PLAN_PRECISIONS[1]: "fp16"}


def plan_explorer_compute(model: str = PLAN_SERVICE["model"],
                          input_tokens: int = PLAN_SERVICE["input_tokens"],
                          output_tokens: int = PLAN_SERVICE["output_tokens"],
                          ttft_p99_s: float = PLAN_SERVICE["ttft_p99_s"],
                          tpot_p99_ms: int = PLAN_SERVICE["tpot_p99_ms"],
                          rate_per_s: float = PLAN_SERVICE["rate_per_s"],
                          precision: str = PLAN_PRECISIONS[0],
                          tail_ratio_max: float = PLAN_SERVICE["tail_ratio_max"],
                          changes_per_month: float = PLAN_SERVICE["changes_per_month"]
                          ) -> Workflow:
    """The workflow of chapter 'Choosing hardware' for one service: the decision guide's
    verdict per family at the speed per user the TPOT bound allows (``1000 /
    tpot_p99_ms``) and the output tokens a day the traffic makes, with ``tail_ratio_max``
    and ``changes_per_month``; then :func:`inferlab.plan.plan` over :data:`PLAN_CHIPS`.
    ``precision`` is one of :data:`PLAN_PRECISIONS`; the rest are the planner's arguments
    (TPOT in milliseconds)."""
    if precision not in PLAN_PRECISIONS:
        raise ValueError(f"precision: {precision!r}; give one of {', '.join(PLAN_PRECISIONS)}")
    plans = _planned(model, input_tokens, output_tokens, ttft_p99_s, tpot_p99_ms, rate_per_s,
                     precision)
    decision = choosing.decide(model=model, precision=_DECIDE_PRECISION[precision],
                               per_user_tok_s=1e3 / tpot_p99_ms, tail_ratio_max=tail_ratio_max,
                               changes_per_month=changes_per_month,
                               tokens_per_day=plans.rate_per_s * output_tokens * 86_400)
    return Workflow(decision, plans)


@lru_cache(maxsize=256)
def _planned(model, input_tokens, output_tokens, ttft_p99_s, tpot_p99_ms, rate_per_s,
             precision) -> PlanResult:
    # The decision guide's own controls leave the plans as they are: the site's grid over
    # them reuses each plan rather than running it again.
    return plan_deployment(model, input_tokens=input_tokens, output_tokens=output_tokens,
                           ttft_p99_s=ttft_p99_s, tpot_p99_s=tpot_p99_ms / 1e3,
                           rate_per_s=rate_per_s, chips=PLAN_CHIPS,
                           precision=None if precision == PLAN_PRECISIONS[0] else "bf16")


def _plan_line(found) -> str:
    layout = (f"tp{found.tp}" + (f" x pp{found.pp}" if found.pp > 1 else "")
              + f" x {found.replicas}" if found.mode == "aggregated" else
              " + ".join(f"{p.role} tp{p.tp} x {p.replicas}" for p in found.pools))
    cost = (f"${found.usd_per_mtok:.3f} per M output tokens"
            if math.isfinite(found.usd_per_mtok) else "no sourced price")
    count = f"{found.chips:,} chip" + ("s" if found.chips != 1 else "")
    return (f"{found.chip}: {count} ({found.mode}, {layout}, "
            f"{found.precision}), {cost}; bound by {found.binding}")


def _workflow_tables(flow: Workflow) -> dict[str, dict]:
    return {**_decision_tables(flow.decision), **_plan_tables(flow.planned)}


def _workflow_chart(part):
    import altair as alt

    return alt.vconcat(_decision_chart(part), _plan_chart(part), spacing=18)


def _plan_tables(result) -> dict[str, dict]:
    planned = {p.chip: p for p in result.plans}
    reasons = dict(result.refused)
    chips, texts, verdicts = [], [], []
    for name in PLAN_CHIPS:
        if name in planned:
            chips.append(planned[name].chips)
            texts.append(_plan_line(planned[name]))
            verdicts.append(_PLANNED)
        else:
            chips.append(math.nan)
            # The reason cut to one line: its figures come first, so they stay.
            texts.append(f"{name}: " + textwrap.shorten(reasons[name], 110, placeholder=" ..."))
            verdicts.append(_REFUSED)
    if not result.plans:
        title = "no chip kind keeps this promise at this traffic"
    else:
        best = result.best()
        title = (f"cheapest: {best.chip}, {best.chips:,} chip{'s' if best.chips != 1 else ''}, "
                 f"${best.usd_per_mtok:.3f} per M output tokens"
                 if math.isfinite(best.usd_per_mtok) else
                 f"fewest chips (no sourced price): {best.chip}, {best.chips:,}")
    return {"chips": {"chip": list(PLAN_CHIPS), "chips": chips, "text": texts,
                      "verdict": verdicts},
            "title": {"text": [title]}}


def _plan_chart(part):
    import altair as alt

    scale = alt.Scale(type="log", domain=list(_PLAN_ENDS), clamp=True)
    y = alt.Y("chip:N", title=None, sort=list(PLAN_CHIPS),
              scale=alt.Scale(domain=list(PLAN_CHIPS)), axis=alt.Axis(labels=False, ticks=False))
    rows = part("chips")
    bars = rows.mark_bar(height=12, yOffset=8, color=PALETTE[2]).encode(
        x=alt.X("floor:Q", scale=scale, title="chips the traffic needs within the promise",
                axis=alt.Axis(values=[1, 10, 100, 1000, 10000], format=",~g")),
        x2="chips:Q", y=y,
        tooltip=[alt.Tooltip("chip:N"), alt.Tooltip("chips:Q", format=",.0f")],
    ).transform_calculate(floor=str(_PLAN_ENDS[0])).transform_filter("isValid(datum.chips)")
    lines = rows.mark_text(align="left", baseline="bottom", dy=2, fontSize=12).encode(
        x=alt.value(0), y=y, text="text:N",
        color=alt.condition(f"datum.verdict == '{_PLANNED}'", alt.value("#222222"),
                            alt.value("#777777")))
    plot = alt.layer(bars, lines).properties(width=_PLAN_WIDTH,
                                             height=_PLAN_ROW * len(PLAN_CHIPS))
    heading = alt.layer(
        text_line(part("title"), "datum.text", width=_PLAN_WIDTH).mark_text(
            align="left", baseline="top", fontSize=13, fontWeight="bold"),
        badge("modelled", width=_PLAN_WIDTH))
    return alt.vconcat(heading, plot, spacing=6)


@register
def plan_explorer() -> Explorer:
    """Menus and sliders: model, prompt and answer lengths, p99 TTFT and TPOT bounds,
    requests per second, precision, and the decision guide's tail bound and change rate;
    a move runs the decision guide and, unless only those two moved, the planner on five
    chip kinds (a second or more, cached per value)."""
    service = PLAN_SERVICE
    return Explorer(
        name="hw_plan", kind="simulation", chapter=PLAN_CHAPTER,
        compute=plan_explorer_compute, tables=_workflow_tables, chart=_workflow_chart,
        controls=(
            Choice("model", "model", PLAN_MODELS, default=service["model"]),
            # The lengths and the TTFT bound are fixed on the site: every value more
            # multiplies the plans the build runs.
            Slider("input_tokens", "prompt length (tokens)", 100, 8000, 100,
                   default=service["input_tokens"], grid=(service["input_tokens"],)),
            Slider("output_tokens", "answer length (tokens)", 50, 4000, 50,
                   default=service["output_tokens"], grid=(service["output_tokens"],)),
            Slider("ttft_p99_s", "p99 time to first token bound (s)", 0.1, 10.0, 0.1,
                   default=service["ttft_p99_s"], grid=(service["ttft_p99_s"],)),
            Slider("tpot_p99_ms", "p99 time per output token bound (ms)", 5, 200, 5,
                   default=service["tpot_p99_ms"], grid=(20, service["tpot_p99_ms"], 100)),
            Slider("rate_per_s", "requests per second", *log_range(20.0, 0.5, 1000.0, 0.1),
                   0.1, default=service["rate_per_s"], grid=(2.0, service["rate_per_s"], 200.0),
                   log=True),
            Choice("precision", "weights' format", PLAN_PRECISIONS,
                   default=PLAN_PRECISIONS[0], grid=(PLAN_PRECISIONS[0],)),
            # The decision guide's own two: they rule families in or out, never a plan.
            Slider("tail_ratio_max", "largest p99 over median time per token", 1.0, 5.0, 0.05,
                   default=service["tail_ratio_max"], grid=(1.05, service["tail_ratio_max"])),
            Slider("changes_per_month", "model changes per month", 0.0, 60.0, 0.5,
                   default=service["changes_per_month"],
                   grid=(service["changes_per_month"], 30.0)),
        ),
    )


