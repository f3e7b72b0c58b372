"""The explorer of chapter 'Choosing hardware' for speculative decoding: the speed-up
against the draft length, for one acceptance rate and draft cost, against the speed-up
Cerebras's reported figure claims over its launch figure.

It computes with :func:`inferlab.speculative.speculative_decoding` and draws the curve
of :func:`inferlab.speculative.speedup_curve` (both tested there); this module only
declares the controls, turns the estimate into tables and draws them. It opens on the
section's worked example: acceptance 0.8, four draft tokens, a draft costing
``choosing.DRAFT_COST_RATIO`` of a target step, over Cerebras's launch rate.
"""

from __future__ import annotations

import numpy as np

from inferlab import speculative
from inferlab.choosing import DRAFT_COST_RATIO, MAX_SPECULATIVE_DRAFT
from inferlab.data import result
from inferlab.explorers.base import Explorer, Slider, register
from inferlab.explorers.marks import badge, text_line
from inferlab.plotting import KIND_COLORS

CHAPTER = "07_choosing_hardware"

# The section's worked example, from the records the chapter reads.
_LAUNCH = result("cerebras-l31-70b-launch")["value"]
_REPORTED = result("cerebras-l31-70b-specdec")["value"]

_DRAFTS = np.arange(MAX_SPECULATIVE_DRAFT + 1)
_WIDTH, _HEIGHT = 540, 280
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
    plot = alt.layer(curve, one, claimed, room, claimed_label, point,
                     badge("modelled", "reported", width=_WIDTH)).properties(
        width=_WIDTH, height=_HEIGHT)
    text = text_line(part("point"), "'a = ' + format(datum.acceptance_rate, '.2f') + ', k = ' + "
                     "datum.draft_tokens + ', c = ' + format(datum.draft_cost_ratio, '.2f') + "
                     "': ' + format(datum.per_pass, '.2f') + ' tokens per target pass, "
                     "speed-up ' + format(datum.speedup, '.2f') + 'x, ' + "
                     "format(datum.base_tok_s, ',.0f') + ' -> ' + "
                     "format(datum.decode_tok_s, ',.0f') + ' tok/s'", width=_WIDTH)
    return alt.vconcat(plot, text, spacing=10)


@register
def speculative_explorer() -> Explorer:
    """Sliders: acceptance rate a, draft tokens k, draft cost ratio c, plain decode rate."""
    top = int(_DRAFTS[-1])
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
                   default=DRAFT_COST_RATIO, grid=(0.0, DRAFT_COST_RATIO, 0.1, 0.25, 0.5)),
            Slider("base_decode_tok_per_s", "plain decode rate (tokens per second)", 10, 3000,
                   10, default=_LAUNCH, grid=(100, _LAUNCH, 1000),
                   glued="hw_cerebras_launch"),
        ),
    )
