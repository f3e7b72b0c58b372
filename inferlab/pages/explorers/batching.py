"""The explorers of chapter 'Batching': throughput against interactivity, and the latency
tail under load.

- The curve explorer computes with :func:`curve_explorer_compute`: the closed-form fronts
  of Llama 2 70B on an H100, an H200 and a B200, and what each delivers per GPU at
  MLPerf's Server and Interactive per-user bounds. It opens on the assumptions of section
  'The throughput-interactivity curve': FP8, MLPerf's mean prompt (222 tokens) and output
  (294 tokens), both efficiencies at 0.65 and 1 ms of fixed cost per step, the same
  constants the chapter's simulator runs use.
- The tail explorer runs the simulator (:func:`tail_explorer_compute`) on the chapter's
  one-H200 server. It opens on the point of section 'Load and the
  tail' that the text reads most from: load 0.9 of saturation, a batch limit of 256 and
  outputs spread with a coefficient of variation of 1.

Each explorer's pure function lives here beside its controls, its tables and its chart;
the model it runs is :mod:`inferlab.model.steptime` and :mod:`inferlab.serving.simulator`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from inferlab.benchmark.mlperf import (
    LLAMA2_70B_MEAN_OUTPUT_TOKENS,
    LLAMA2_70B_MEAN_PROMPT_TOKENS,
    MLPERF_PER_USER_TOK_S,
)
from inferlab.benchmark.traffic import Lengths, Requests, make_requests
from inferlab.common import checks
from inferlab.model import steptime
from inferlab.model.specs import short_name
from inferlab.model.steptime import ATTAINABLE_FRACTION, Front, interactivity_front
from inferlab.pages.colors import KIND_COLORS, PALETTE
from inferlab.pages.explorers.base import Choice, Explorer, Slider, register
from inferlab.pages.explorers.marks import badge, badged, distribution
from inferlab.serving.example import (
    EXAMPLE_OUTPUT_MEAN,
    EXAMPLE_OVERHEAD_S,
    EXAMPLE_PROMPT,
    EXAMPLE_REQUESTS,
    EXAMPLE_SEED,
    example_replica,
)
from inferlab.serving.scheduler import Scheduler
from inferlab.serving.simulator import MIN_LOAD, offline_throughput, simulate

#: Requests queued at once to find the saturation rate — enough that the last, shrinking
#: batches (the drain) cost only a few per cent of the run.
SATURATION_PROBE_REQUESTS = 10_000


#: The widest spread of output lengths the explorers simulate (a standard deviation of
#: four means, twice the slider's end): far wider, nearly every output is one token long,
#: and a one-token output has no time per output token.
MAX_OUTPUT_CV = 4.0


@cache
def _explorer_requests(output_cv: float, seed: int, n: int = EXAMPLE_REQUESTS) -> Requests:
    output = Lengths(EXAMPLE_OUTPUT_MEAN, cv=output_cv, min_tokens=1, max_tokens=1024)
    return make_requests(n, EXAMPLE_PROMPT, output, rate_per_s=1.0, seed=seed)


@cache
def saturation_rate_per_s(max_batch: int, output_cv: float, seed: int = 0) -> float:
    """Requests per second the explorer's server completes with every request queued at once.

    The Offline rate of :data:`SATURATION_PROBE_REQUESTS` requests: "load 1.0" in the
    tail explorer. Cached per argument set.
    """
    max_batch = checks.whole("max_batch", max_batch)
    output_cv = checks.non_negative("output_cv", output_cv, high=MAX_OUTPUT_CV)
    requests = _explorer_requests(output_cv, seed + 1, SATURATION_PROBE_REQUESTS)
    sch = Scheduler(max_batch=max_batch, token_budget=max(2048, max_batch))
    return offline_throughput(example_replica(), requests, sch).requests_per_s


@dataclass(frozen=True)
class TailView:
    """One run of the tail explorer: sorted TTFTs and TPOTs and their percentiles.

    ``mean_batch`` is the mean number of requests in the system (queued or
    running), from Little's law: the sum of end-to-end latencies over the run time.

    Used in chapter 'Batching'.
    """

    load: float
    rate_per_s: float
    ttft_sorted_s: np.ndarray
    tpot_sorted_s: np.ndarray
    percentiles: dict[str, float]
    throughput_tok_s: float
    mean_batch: float


def tail_explorer_compute(load: float = 0.7, max_batch: int = 256,
                          output_cv: float = 1.0) -> TailView:
    """The tail explorer's pure function: Poisson traffic at ``load`` x the saturation rate.

    ``load`` is the offered rate as a fraction of :func:`saturation_rate_per_s`; ``max_batch``
    the most requests in flight; ``output_cv`` the coefficient of variation of output lengths
    (0: all 294 tokens). Simulates ``EXAMPLE_REQUESTS`` requests (the draw ``EXAMPLE_SEED``)
    with chunked prefill on :func:`~inferlab.serving.example.example_replica` and returns
    p50, p99 and p99.9 of TTFT and TPOT.

    Raises ``ValueError`` naming the argument for a load outside
    [:data:`~inferlab.serving.simulator.MIN_LOAD`, 2], a batch limit below 1 or a negative
    spread.

    Used in chapter 'Batching'.
    """
    load = checks.real("load", load, low=MIN_LOAD, high=2.0)
    max_batch = checks.whole("max_batch", max_batch)
    output_cv = round(checks.non_negative("output_cv", output_cv, high=MAX_OUTPUT_CV), 3)
    rate = load * saturation_rate_per_s(max_batch, output_cv, EXAMPLE_SEED)
    requests = _explorer_requests(output_cv, EXAMPLE_SEED).at_rate(rate)
    sch = Scheduler(max_batch=max_batch, token_budget=max(2048, max_batch))
    run = simulate(example_replica(), requests, sch)
    percentiles = {f"{metric}_p{q:g}": run.percentile(metric, q)
                   for metric in ("ttft", "tpot") for q in (50, 99, 99.9)}
    tpot = run.tpot_s
    mean_batch = float(np.sum(run.e2e_s) / run.makespan_s)  # Little's law
    return TailView(float(load), rate, np.sort(run.ttft_s), np.sort(tpot[np.isfinite(tpot)]),
                    percentiles, run.throughput_tok_s, mean_batch)


CURVE_CHIPS = ("NVIDIA H100 SXM", "NVIDIA H200 SXM", "NVIDIA B200")


@dataclass(frozen=True)
class CurveView:
    """What the curve explorer shows: one front per chip and the throughput at each bound.

    Used in chapter 'Batching'.
    """

    fronts: tuple[Front, ...]
    at_bound: dict[str, dict[str, float]]

    def drop(self, chip: str) -> float:
        """Fractional fall in per-chip throughput from the Server to the Interactive bound."""
        server = self.at_bound[chip]["Server"]
        return 1 - self.at_bound[chip]["Interactive"] / server if server else float("nan")


def curve_explorer_compute(
    precision: str = "fp8",
    prompt_tokens: int = LLAMA2_70B_MEAN_PROMPT_TOKENS,
    output_tokens: int = LLAMA2_70B_MEAN_OUTPUT_TOKENS,
    efficiency: float = ATTAINABLE_FRACTION,
    step_overhead_ms: float = 1.0,
) -> CurveView:
    """The curve explorer's pure function: fronts of Llama 2 70B on H100, H200 and B200.

    Raises ``ValueError`` naming the argument for lengths below 1, an efficiency
    outside (0, 1] or a negative overhead.

    Used in chapter 'Batching'.
    """
    overhead = checks.non_negative("step_overhead_ms", step_overhead_ms) / 1e3
    fronts = tuple(
        interactivity_front(chip, "Llama 2 70B", precision, prompt_tokens, output_tokens,
                            efficiency=efficiency, step_overhead_s=overhead)
        for chip in CURVE_CHIPS
    )
    at_bound = {front.chip: {name: front.throughput_at(bound)
                             for name, bound in MLPERF_PER_USER_TOK_S.items()}
                for front in fronts}
    return CurveView(fronts, at_bound)


CHAPTER = "03_batching"
MS = 1e3

# ---------------------------------------------------- the throughput-interactivity curve

#: Points kept of each front for the chart: a smooth line on a log axis needs no more,
#: and the site stores one front per chip at every point of the grid.
_FRONT_POINTS = 30

_CURVE_WIDTH, _CURVE_HEIGHT = 560, 300
_USER_ENDS = (2, 400)


def _thinned(values: np.ndarray) -> np.ndarray:
    keep = np.unique(np.linspace(0, len(values) - 1, min(len(values), _FRONT_POINTS))
                     .round().astype(int))
    return values[keep]


def _curve_tables(view: CurveView) -> dict[str, dict]:
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

    names = [short_name(chip) for chip in CURVE_CHIPS]
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
    plot = badged(fronts, rules, labels, marks, width=_CURVE_WIDTH, height=_CURVE_HEIGHT)
    summary = part("summary").mark_text(align="left", baseline="top", fontSize=12).encode(
        x=alt.value(0), y=alt.Y("chip:N", axis=None, sort=names), text="line:N",
    ).transform_calculate(line="datum.chip + ': ' + format(datum.server, ',.0f') + ' tok/s "
                               "per GPU at the Server bound, ' + format(datum.interactive, "
                               "',.0f') + ' at the Interactive bound (' + "
                               "format(datum.drop, '.1%') + ' less)'"
    ).properties(width=_CURVE_WIDTH, height=16 * len(names))
    return alt.vconcat(plot, summary, spacing=10)


@register
def curve_explorer() -> Explorer:
    """Menu and sliders: precision, prompt and output length, efficiency, per-step cost."""
    prompt = EXAMPLE_PROMPT.mean_tokens
    output = EXAMPLE_OUTPUT_MEAN
    efficiency = steptime.ATTAINABLE_FRACTION
    overhead_ms = EXAMPLE_OVERHEAD_S * 1e3
    return Explorer(
        name="batch_curve", kind="analytic", chapter=CHAPTER,
        compute=curve_explorer_compute, tables=_curve_tables, chart=_curve_chart,
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


# ---------------------------------------------------------------------- the tail

_PERCENTILES = ("p50", "p99", "p99.9")

_TAIL_WIDTH, _TAIL_HEIGHT = 270, 220


def _tail_tables(view: TailView) -> dict[str, dict]:
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
        compute=tail_explorer_compute, tables=_tail_tables, chart=_tail_chart,
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
