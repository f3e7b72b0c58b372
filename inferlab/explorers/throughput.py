"""The explorer of chapter 'Batching' that trades throughput for interactivity: the
closed-form fronts of Llama 2 70B on an H100, an H200 and a B200, and what each delivers
per GPU at MLPerf's Server and Interactive per-user bounds.

It computes with :func:`inferlab.steptime.curve_explorer_compute` (tested there); this
module only declares its controls, turns the result into tables and draws them. It opens
on the assumptions of section 'The throughput-interactivity curve': FP8, 300-token
prompts, MLPerf's mean output of 294 tokens, both efficiencies at 0.65 and 1 ms of fixed
cost per step, the same constants the chapter's simulator runs use.
"""

from __future__ import annotations

import numpy as np

from inferlab import simulator, steptime
from inferlab.explorers.base import Choice, Explorer, Slider, register
from inferlab.explorers.marks import badge
from inferlab.mlperf import MLPERF_PER_USER_TOK_S
from inferlab.plotting import PALETTE
from inferlab.specs import short_name

CHAPTER = "03_batching"

#: Points kept of each front for the chart: a smooth line on a log axis needs no more,
#: and the site stores one front per chip at every point of the grid.
_FRONT_POINTS = 30

_WIDTH, _HEIGHT = 560, 300
_USER_ENDS = (2, 400)


def _thinned(values: np.ndarray) -> np.ndarray:
    keep = np.unique(np.linspace(0, len(values) - 1, min(len(values), _FRONT_POINTS))
                     .round().astype(int))
    return values[keep]


def _curve_tables(view: steptime.CurveView) -> dict[str, dict]:
    chips, users, rates = [], [], []
    for front in view.fronts:
        users.append(_thinned(front.per_user_tok_s))
        rates.append(_thinned(front.per_chip_tok_s))
        chips += [short_name(front.chip)] * len(users[-1])
    marked = {"chip": [], "bound": [], "per_user_tok_s": [], "per_chip_tok_s": []}
    for front in view.fronts:
        for name, bound in MLPERF_PER_USER_TOK_S.items():
            value = view.at_bound[front.chip][name]
            # Drawn where the front reaches that throughput, at the bound or beyond it.
            reached = front.per_user_tok_s[front.per_chip_tok_s >= value]
            marked["chip"].append(short_name(front.chip))
            marked["bound"].append(name)
            marked["per_user_tok_s"].append(max(reached.min(), bound) if value else bound)
            marked["per_chip_tok_s"].append(value)
    fronts = view.fronts
    return {
        "fronts": {"chip": chips, "per_user_tok_s": np.concatenate(users),
                   "per_chip_tok_s": np.concatenate(rates)},
        "at_bounds": marked,
        "summary": {"chip": [short_name(f.chip) for f in fronts],
                    "server": [view.at_bound[f.chip]["Server"] for f in fronts],
                    "interactive": [view.at_bound[f.chip]["Interactive"] for f in fronts],
                    "drop": [view.drop(f.chip) for f in fronts]},
    }


def _curve_chart(part):
    import altair as alt

    names = [short_name(chip) for chip in steptime.CURVE_CHIPS]
    colours = alt.Scale(domain=names, range=list(PALETTE[:len(names)]))
    x = alt.X("per_user_tok_s:Q", title="interactivity: tokens per second per user",
              scale=alt.Scale(type="log", domain=list(_USER_ENDS)),
              axis=alt.Axis(values=[2, 5, 10, 25, 50, 100, 200], format=","))
    y = alt.Y("per_chip_tok_s:Q", title="output tokens per second per GPU",
              scale=alt.Scale(zero=True, nice=True))
    colour = alt.Color("chip:N", scale=colours, title=None,
                       legend=alt.Legend(orient="bottom-left", offset=6))
    fronts = part("fronts").mark_line(strokeWidth=2).encode(x=x, y=y, color=colour)
    marks = part("at_bounds").mark_point(filled=True, size=60).encode(
        x=x, y=y, color=alt.Color("chip:N", scale=colours, legend=None),
        tooltip=["chip:N", "bound:N",
                 alt.Tooltip("per_chip_tok_s:Q", title="tok/s per GPU", format=",.0f")])
    # MLPerf's bounds are fixed: drawn from the package's constants, not computed.
    bounds = alt.Chart(alt.Data(values=[
        {"bound": f"MLPerf {name}", "per_user_tok_s": value}
        for name, value in MLPERF_PER_USER_TOK_S.items()]))
    rules = bounds.mark_rule(color="#666666", strokeDash=[5, 3]).encode(x=x)
    labels = bounds.mark_text(align="left", baseline="top", dx=4, fontSize=10,
                              color="#4d4d4d").encode(x=x, y=alt.value(4), text="bound:N")
    plot = alt.layer(fronts, rules, labels, marks, badge("modelled", width=_WIDTH)).properties(
        width=_WIDTH, height=_HEIGHT)
    summary = part("summary").mark_text(align="left", baseline="top", fontSize=12).encode(
        x=alt.value(0), y=alt.Y("chip:N", axis=None, sort=names), text="line:N",
    ).transform_calculate(line="datum.chip + ': ' + format(datum.server, ',.0f') + ' tok/s "
                               "per GPU at the Server bound, ' + format(datum.interactive, "
                               "',.0f') + ' at the Interactive bound (' + "
                               "format(datum.drop, '.1%') + ' less)'"
    ).properties(width=_WIDTH, height=16 * len(names))
    return alt.vconcat(plot, summary, spacing=10)


@register
def curve_explorer() -> Explorer:
    """Menu and sliders: precision, prompt and output length, efficiency, per-step cost."""
    prompt = simulator.EXPLORER_PROMPT.mean_tokens
    output = simulator.EXPLORER_OUTPUT_MEAN
    efficiency = simulator.EXPLORER_EFFICIENCY
    overhead_ms = simulator.EXPLORER_OVERHEAD_S * 1e3
    return Explorer(
        name="batch_curve", kind="analytic", chapter=CHAPTER,
        compute=steptime.curve_explorer_compute, tables=_curve_tables, chart=_curve_chart,
        controls=(
            Choice("precision", "precision of the weights", ("fp8", "fp16", "int4"),
                   default="fp8"),
            Slider("prompt_tokens", "prompt length (tokens)", 16, 4096, 2, default=prompt,
                   grid=(64, prompt, 2048)),
            Slider("output_tokens", "output length (tokens)", 16, 4096, 2, default=output,
                   grid=(64, output, 2048)),
            Slider("efficiency", "efficiency (share of peak bandwidth and FLOP/s)", 0.1, 1.0,
                   0.05, default=efficiency, grid=(0.35, efficiency, 0.95),
                   glued="batch_curve_efficiency"),
            Slider("step_overhead_ms", "fixed cost per step (ms)", 0.0, 20.0, 0.5,
                   default=overhead_ms, grid=(0.0, overhead_ms, 10.0, 20.0)),
        ),
    )
