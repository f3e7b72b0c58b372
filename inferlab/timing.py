"""Request timing: the two phases of one request and the clocks that time them.

A request waits in a queue, then **prefill** reads the whole prompt in one
forward pass and produces the first output token, then **decode** produces the
remaining tokens one forward pass at a time. Every "tokens per second" figure is
some number of tokens divided by one of the intervals this module names:

- time to first token (TTFT) = queue + prefill;
- time per output token (TPOT) = (end-to-end - TTFT) / (n - 1), vLLM's
  definition (NVIDIA AIPerf calls the same quantity "inter token latency");
- LLMPerf's inter-token latency = end-to-end / n, which *includes* the TTFT;
- end-to-end latency = the time the last token arrives;
- the rate *with* TTFT, n / end-to-end (LLMPerf's per-request throughput), and
  the rate *after* the first token, n / (end-to-end - TTFT), the decode-only
  rate that LLMPerf's medians give and Groq's dashboard reports.

The reconciliation of the two published Groq figures is the identity
``rate_with_ttft = n / (TTFT + n / decode_rate)``, with the decode-only rate
defined as above. Sources: the LLMPerf leaderboard and its raw data (Anyscale,
2023-24), Groq's reply to it (2024), vLLM's benchmark definitions.

The module also converts reading speed to tokens per second. The arithmetic
intensity of each phase lives in :mod:`inferlab.roofline`. Everything is in SI
units (seconds, tokens per second).

Used in chapter 'Prefill and decode'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from inferlab import checks
from inferlab.widgets import Explorer, register

CHAPTER = "01_prefill_decode"


# --- one request's timeline ------------------------------------------------------------------


@dataclass(frozen=True)
class Clocks:
    """The clocks of one request, all derived from three numbers: n, TTFT and end-to-end.

    ``tpot_s`` is ``nan`` for a one-token output (there is no gap to time).
    """

    output_tokens: int
    ttft_s: float
    e2e_s: float
    tpot_s: float
    llmperf_inter_token_latency_s: float
    rate_with_ttft_tok_per_s: float
    decode_only_tok_per_s: float


def clocks(output_tokens: int, ttft_s: float, e2e_s: float) -> Clocks:
    """Every clock of a request with ``output_tokens`` tokens, its TTFT and end-to-end latency.

    Formulas: TPOT = (e2e - TTFT) / (n - 1) (vLLM; AIPerf's "inter token latency");
    LLMPerf inter-token latency = e2e / n (includes TTFT); rate with TTFT = n / e2e
    (LLMPerf's per-request output throughput); decode-only rate = n / (e2e - TTFT).

    Used in chapter 'Prefill and decode'.
    """
    n = checks.whole("output_tokens", output_tokens)
    ttft = checks.non_negative("ttft_s", ttft_s)
    e2e = checks.positive("e2e_s", e2e_s)
    if e2e <= ttft:
        raise ValueError(
            f"e2e_s: {e2e_s!r} must be greater than ttft_s ({ttft_s!r}): the last token "
            "cannot arrive before the first"
        )
    return Clocks(
        output_tokens=n,
        ttft_s=ttft,
        e2e_s=e2e,
        tpot_s=(e2e - ttft) / (n - 1) if n > 1 else math.nan,
        llmperf_inter_token_latency_s=e2e / n,
        rate_with_ttft_tok_per_s=n / e2e,
        decode_only_tok_per_s=n / (e2e - ttft),
    )


@dataclass(frozen=True)
class RequestTimeline:
    """One modelled request: queue, prefill (which emits token 1), then n - 1 decode steps.

    Token ``k`` (1-based) arrives at ``ttft_s + (k - 1) * time_per_output_token_s``.
    Every step takes the same time: a batch-1 decode step reads the same weights
    each time, and the growing KV cache is ignored here.
    """

    prompt_tokens: int
    output_tokens: int
    queue_s: float
    prefill_s: float
    time_per_output_token_s: float

    @property
    def ttft_s(self) -> float:
        """Time to first token, queue plus prefill."""
        return self.queue_s + self.prefill_s

    @property
    def decode_s(self) -> float:
        """Time spent after the first token, in (n - 1) decode steps."""
        return (self.output_tokens - 1) * self.time_per_output_token_s

    @property
    def e2e_s(self) -> float:
        """End-to-end latency, TTFT plus the decode steps."""
        return self.ttft_s + self.decode_s

    def token_times_s(self) -> np.ndarray:
        """Arrival time of each output token, in seconds from the request being sent."""
        return self.ttft_s + np.arange(self.output_tokens) * self.time_per_output_token_s

    def clocks(self) -> Clocks:
        """The request's clocks (see :func:`clocks`)."""
        return clocks(self.output_tokens, self.ttft_s, self.e2e_s)


def request_timeline(prompt_tokens: int, output_tokens: int, decode_tok_per_s: float, *,
                     prefill_tok_per_s: float, queue_s: float = 0.0) -> RequestTimeline:
    """Model one request's timeline from its lengths and the two phase rates.

    prefill = prompt_tokens / prefill_tok_per_s; TTFT = queue_s + prefill;
    time per output token = 1 / decode_tok_per_s; end-to-end = TTFT + (n - 1) / decode rate.
    Assumes a fixed prefill rate (compute-bound) and a fixed decode step (batch 1,
    memory-bound, KV-cache growth ignored); the queue wait is an input, not modelled.

    Used in chapter 'Prefill and decode'.
    """
    prompt = checks.whole("prompt_tokens", prompt_tokens)
    n = checks.whole("output_tokens", output_tokens)
    decode = checks.positive("decode_tok_per_s", decode_tok_per_s)
    prefill = checks.positive("prefill_tok_per_s", prefill_tok_per_s)
    queue = checks.non_negative("queue_s", queue_s)
    prefill_s = checks.finite_result(prompt / prefill, "prompt_tokens", "prefill_tok_per_s")
    tpot = checks.finite_result(1.0 / decode, "decode_tok_per_s")
    # The timeline's end-to-end time must be a float as well, not only its parts.
    checks.finite_result(queue + prefill_s + (n - 1) * tpot, "output_tokens", "decode_tok_per_s",
                         "queue_s")
    return RequestTimeline(prompt, n, queue, prefill_s, tpot)


# --- the reconciliation ----------------------------------------------------------------------


def decode_only_rate_tok_per_s(output_tokens: int, ttft_s: float, e2e_s: float) -> float:
    """Decode-only rate: output tokens divided by the time after the first token.

    Formula: n / (e2e - TTFT). From LLMPerf's median latencies for Groq's Llama 2 70B
    (150 tokens out, TTFT 0.222 s, e2e 0.805 s) it gives about 257 tok/s.
    (Medians of different quantities do not combine exactly; this is an estimate.)

    Used in chapter 'Prefill and decode'.
    """
    return clocks(output_tokens, ttft_s, e2e_s).decode_only_tok_per_s


def rate_with_ttft_tok_per_s(output_tokens: int | np.ndarray, ttft_s: float | np.ndarray,
                             decode_tok_per_s: float) -> float | np.ndarray:
    """Per-request tokens per second when the clock includes the first-token wait.

    Formula: rate = n / (TTFT + n / decode_rate), where decode_rate is the decode-only
    rate n / (e2e - TTFT); this is then exactly n / e2e. It rises toward the decode rate
    as n grows and never rises when TTFT grows. Source: the reconciliation of Groq's
    270+ tok/s with LLMPerf's 185 tok/s (Groq, 2024; LLMPerf leaderboard, 2023-24):
    n=150, TTFT=0.22 s, decode 270 tok/s gives about 193; n=1,000 gives about 255.

    ``output_tokens`` and ``ttft_s`` may be numpy arrays (for sweeps); the result
    then has their broadcast shape.

    Used in chapter 'Prefill and decode'.
    """
    decode = checks.positive("decode_tok_per_s", decode_tok_per_s)
    n = checks.reals("output_tokens", output_tokens, low=1.0)
    ttft = checks.reals("ttft_s", ttft_s, low=0.0)
    rate = n / (ttft + n / decode)
    return float(rate) if rate.ndim == 0 else rate


def ttft_for_rate_s(rate_with_ttft_tok_per_s: float, output_tokens: int,
                    decode_tok_per_s: float) -> float:
    """The TTFT that makes the TTFT-inclusive rate come out at a given value.

    Formula: TTFT = n / rate - n / decode_rate (the reconciliation formula solved for
    TTFT). At decode 270 tok/s and 150 tokens, 185 tok/s needs TTFT of about 0.255 s.
    The target must be below the decode rate (a TTFT of zero gives the decode rate).

    Used in chapter 'Prefill and decode'.
    """
    n = checks.whole("output_tokens", output_tokens)
    decode = checks.positive("decode_tok_per_s", decode_tok_per_s)
    target = checks.positive("rate_with_ttft_tok_per_s", rate_with_ttft_tok_per_s, high=decode)
    return checks.finite_result(n / target - n / decode, "rate_with_ttft_tok_per_s")


def decode_rate_from_rate_with_ttft_tok_per_s(rate_with_ttft_tok_per_s: float,
                                              output_tokens: int, ttft_s: float) -> float:
    """The decode-only rate hidden in a TTFT-inclusive rate, given n and the TTFT.

    Formula: the reconciliation formula solved for the decode rate,
    r = n / (n / rate - TTFT). The rate must be below n / TTFT (otherwise the TTFT
    alone would take longer than the whole request).

    Used in chapter 'Prefill and decode'.
    """
    n = checks.whole("output_tokens", output_tokens)
    ttft = checks.non_negative("ttft_s", ttft_s)
    limit = n / ttft if ttft > 0 else math.inf
    rate = checks.real("rate_with_ttft_tok_per_s", rate_with_ttft_tok_per_s, low=0.0,
                       high=limit, low_open=True, high_open=True)
    return checks.finite_result(n / (n / rate - ttft), "rate_with_ttft_tok_per_s", "ttft_s")


def output_tokens_for_fraction(fraction: float, ttft_s: float, decode_tok_per_s: float) -> float:
    """How many output tokens it takes for the TTFT-inclusive rate to reach ``fraction`` of decode.

    Formula: from n / (TTFT + n / r) = f r, n = f / (1 - f) * TTFT * r. Returned as a
    real number (round up for a whole token count). ``fraction`` must lie in (0, 1).

    Used in chapter 'Prefill and decode'.
    """
    f = checks.fraction("fraction", fraction, low_open=True, high_open=True)
    ttft = checks.non_negative("ttft_s", ttft_s)
    decode = checks.positive("decode_tok_per_s", decode_tok_per_s)
    return f / (1.0 - f) * ttft * decode


# --- what feels fast ----------------------------------------------------------------------------


def reading_rate_tok_per_s(words_per_minute: float, words_per_token: float) -> float:
    """A reading speed in words per minute, as output tokens per second.

    Formula: tok/s = wpm / 60 / (words per token). The words-per-token ratio depends on
    the tokenizer and the text; 0.75 is OpenAI's rule of thumb for English.

    Used in chapter 'Prefill and decode'.
    """
    wpm = checks.positive("words_per_minute", words_per_minute)
    wpt = checks.positive("words_per_token", words_per_token)
    return checks.finite_result(wpm / 60.0 / wpt, "words_per_minute", "words_per_token")


def words_per_minute(tok_per_s: float, words_per_token: float) -> float:
    """Tokens per second as words per minute: wpm = tok/s * 60 * (words per token).

    Used in chapter 'Prefill and decode'.
    """
    rate = checks.positive("tok_per_s", tok_per_s)
    wpt = checks.positive("words_per_token", words_per_token)
    return checks.finite_result(rate * 60.0 * wpt, "tok_per_s", "words_per_token")


# --- explorers ------------------------------------------------------------------------------------


def freeze_layout(fig) -> None:
    """Lay ``fig`` out once with its layout engine, then keep those positions.

    An explorer's axes do not move when a slider does, so recomputing the
    constrained layout on every redraw (about a third of the redraw time) buys
    nothing. Call it after setting the widest tick labels the figure will show.
    """
    fig.draw_without_rendering()
    fig.set_layout_engine("none")



def _timeline_explorer(prefill_tok_per_s: float, queue_s: float) -> Explorer:
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch, Rectangle

    from inferlab.plotting import KIND_COLORS, PALETTE, figure, label_kind

    fig, (strip, ax) = figure(2, 1, figsize=(7.5, 4.2), height_ratios=[1, 3], sharex=True)
    queue_box = strip.add_patch(Rectangle((0, 0), 0, 1, color="#bbbbbb"))
    prefill_box = strip.add_patch(Rectangle((0, 0), 0, 1, color=PALETTE[1]))
    steps = PolyCollection([], facecolors=[], edgecolors="none")
    strip.add_collection(steps)
    strip.set_ylim(0, 1)
    strip.set_yticks([])
    strip.grid(False)
    (tokens_line,) = ax.plot([], [], drawstyle="steps-post", color=KIND_COLORS["modelled"],
                             label="tokens received")
    ttft_line = ax.axvline(0, color=PALETTE[1], linestyle="--", linewidth=1)
    ttft_text = ax.text(0, 0, "", fontsize=8, color=PALETTE[1], va="top")
    ax.set_xlabel("time since the request was sent (s)")
    ax.set_ylabel("output tokens received")
    shades = np.array([[0.13, 0.4, 0.67, 1.0], [0.55, 0.72, 0.88, 1.0]])
    ax.legend(handles=[Patch(color="#bbbbbb", label="queue"),
                       Patch(color=PALETTE[1], label="prefill"),
                       Patch(color=shades[0], label="decode steps"),
                       tokens_line], loc="lower right", fontsize=8)
    label_kind(ax, "modelled")
    ax.set_ylim(0, 2100)  # the widest tick labels the sliders can produce
    freeze_layout(fig)
    plt.close(fig)

    def compute(prompt_tokens, output_tokens, decode_tok_per_s):
        return request_timeline(prompt_tokens, output_tokens, decode_tok_per_s,
                                prefill_tok_per_s=prefill_tok_per_s, queue_s=queue_s)

    def render(timeline: RequestTimeline) -> str:
        times = timeline.token_times_s()
        n = timeline.output_tokens
        queue_box.set_width(timeline.queue_s)
        prefill_box.set_x(timeline.queue_s)
        prefill_box.set_width(timeline.prefill_s)
        starts = times[:-1]
        ends = times[1:]
        verts = np.empty((n - 1, 4, 2))
        verts[:, 0, 0] = verts[:, 1, 0] = starts
        verts[:, 2, 0] = verts[:, 3, 0] = ends
        verts[:, [0, 3], 1] = 0.0
        verts[:, [1, 2], 1] = 1.0
        steps.set_verts(verts)
        steps.set_facecolor(shades[np.arange(n - 1) % 2])
        x = np.concatenate(([0.0], times))
        y = np.arange(n + 1)
        tokens_line.set_data(x, y)
        ttft_line.set_xdata([timeline.ttft_s, timeline.ttft_s])
        ttft_text.set_position((timeline.ttft_s * 1.02, n * 0.95))
        ttft_text.set_text(f" TTFT {timeline.ttft_s * 1000:.0f} ms")
        ax.set_xlim(0, timeline.e2e_s * 1.03)
        ax.set_ylim(0, n * 1.05)
        c = timeline.clocks()
        tpot_ms = c.tpot_s * 1000 if n > 1 else math.nan
        return (f"TTFT {c.ttft_s * 1000:.0f} ms, TPOT {tpot_ms:.2f} ms, "
                f"end-to-end {c.e2e_s:.3f} s; rate with TTFT {c.rate_with_ttft_tok_per_s:.0f} "
                f"tok/s, after the first token {c.decode_only_tok_per_s:.0f} tok/s")

    controls = {
        "prompt_tokens": w.IntSlider(value=550, min=1, max=8000, step=50,
                                     description="prompt tokens"),
        "output_tokens": w.IntSlider(value=150, min=2, max=2000, step=10,
                                     description="output tokens"),
        "decode_tok_per_s": w.FloatSlider(value=270.0, min=5.0, max=1000.0, step=5.0,
                                          description="decode tok/s"),
    }
    return Explorer(compute, render, controls, fig)


#: Assumed queue wait and prefill rate of the timeline explorer (illustrative, not Groq's).
TIMELINE_QUEUE_S = 0.05
TIMELINE_PREFILL_TOK_PER_S = 3000.0


@register("pd_timeline", "analytic", chapter=CHAPTER)
def timeline_explorer(prefill_tok_per_s: float = TIMELINE_PREFILL_TOK_PER_S,
                      queue_s: float = TIMELINE_QUEUE_S) -> Explorer:
    """Explorer: one request's timeline (queue, prefill, each decode step) and its clocks.

    Sliders: prompt tokens, output tokens, decode rate (1 / TPOT). A view over
    :func:`request_timeline`. Used in chapter 'Prefill and decode'.
    """
    checks.positive("prefill_tok_per_s", prefill_tok_per_s)
    checks.non_negative("queue_s", queue_s)
    return _timeline_explorer(prefill_tok_per_s, queue_s)


@dataclass(frozen=True)
class Reconciliation:
    """What the reconciliation explorer shows for one setting of its sliders."""

    output_tokens: int
    ttft_s: float
    decode_tok_per_s: float
    rate_with_ttft_tok_per_s: float
    ttft_for_target_s: float
    target_tok_per_s: float
    curve_output_tokens: np.ndarray
    curve_rate_tok_per_s: np.ndarray


def reconcile(output_tokens: int, ttft_s: float, decode_tok_per_s: float, *,
              target_tok_per_s: float = 185.0, max_output_tokens: int = 2000) -> Reconciliation:
    """The TTFT-inclusive rate at one setting, the curve over output length, and the TTFT
    that would make it exactly ``target_tok_per_s`` at this output length.

    ``ttft_for_target_s`` is ``nan`` when the target is not below the decode rate.
    Used in chapter 'Prefill and decode'.
    """
    n = checks.whole("output_tokens", output_tokens)
    ttft = checks.non_negative("ttft_s", ttft_s)
    decode = checks.positive("decode_tok_per_s", decode_tok_per_s)
    target = checks.positive("target_tok_per_s", target_tok_per_s)
    top = checks.whole("max_output_tokens", max_output_tokens)
    curve_n = np.unique(np.geomspace(1, max(top, n), 200).round())
    return Reconciliation(
        output_tokens=n,
        ttft_s=ttft,
        decode_tok_per_s=decode,
        rate_with_ttft_tok_per_s=rate_with_ttft_tok_per_s(n, ttft, decode),
        ttft_for_target_s=ttft_for_rate_s(target, n, decode) if target <= decode else math.nan,
        target_tok_per_s=target,
        curve_output_tokens=curve_n,
        curve_rate_tok_per_s=rate_with_ttft_tok_per_s(curve_n, ttft, decode),
    )


@register("pd_reconcile", "analytic", chapter=CHAPTER)
def reconcile_explorer(published: tuple[tuple[str, float, float], ...] = ()) -> Explorer:
    """Explorer: the TTFT-inclusive rate against output length, with published points.

    Sliders: output tokens, TTFT, decode-only rate. ``published`` holds
    ``(label, output_tokens, tok_per_s)`` points drawn as reported figures.
    A view over :func:`reconcile`. Used in chapter 'Prefill and decode'.
    """
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    from inferlab.plotting import KIND_COLORS, figure, label_kind, plain_log_axis

    fig, ax = figure(figsize=(7.5, 4.0))
    (curve,) = ax.plot([], [], color=KIND_COLORS["modelled"], label="modelled: n / (TTFT + n / r)")
    decode_line = ax.axhline(0, color=KIND_COLORS["modelled"], linestyle=":", linewidth=1,
                             label="decode-only rate r")
    (point,) = ax.plot([], [], "o", color=KIND_COLORS["modelled"], markersize=8)
    for label, n, rate in published:
        ax.plot([n], [rate], "s", color=KIND_COLORS["reported"], markersize=8)
        right = n > 300  # labels near the right edge go to the left of their point
        ax.annotate(label, (n, rate), xytext=(-6 if right else 6, -12),
                    textcoords="offset points", ha="right" if right else "left",
                    fontsize=8, color=KIND_COLORS["reported"])
    ax.set_xlim(1, 2000)
    # Fixed ticks: a log axis otherwise recomputes its minor ticks on every redraw.
    plain_log_axis(ax.xaxis, ticks=[1, 10, 100, 1000])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_ylim(0, 1100)  # the widest tick labels the sliders can produce
    ax.set_xlabel("output tokens per request (log scale)")
    ax.set_ylabel("tokens per second, per request")
    ax.legend(loc="center left", fontsize=8)
    if published:
        label_kind(ax, "modelled", "reported")
    else:
        label_kind(ax, "modelled")
    freeze_layout(fig)
    plt.close(fig)

    def render(r: Reconciliation) -> str:
        curve.set_data(r.curve_output_tokens, r.curve_rate_tok_per_s)
        decode_line.set_ydata([r.decode_tok_per_s, r.decode_tok_per_s])
        point.set_data([r.output_tokens], [r.rate_with_ttft_tok_per_s])
        ax.set_ylim(0, max(400.0, r.decode_tok_per_s * 1.1))
        target = (f"; a TTFT of {r.ttft_for_target_s * 1000:.0f} ms would give exactly "
                  f"{r.target_tok_per_s:.0f}" if math.isfinite(r.ttft_for_target_s) else "")
        return (f"{r.output_tokens} tokens at TTFT {r.ttft_s * 1000:.0f} ms and decode "
                f"{r.decode_tok_per_s:.0f} tok/s: {r.rate_with_ttft_tok_per_s:.1f} tok/s "
                f"with TTFT{target}")

    controls = {
        "output_tokens": w.IntSlider(value=150, min=1, max=2000, step=10,
                                     description="output tokens"),
        "ttft_s": w.FloatSlider(value=0.22, min=0.0, max=2.0, step=0.005,
                                readout_format=".3f", description="TTFT (s)"),
        "decode_tok_per_s": w.FloatSlider(value=270.0, min=10.0, max=1000.0, step=1.0,
                                          description="decode tok/s"),
    }
    return Explorer(reconcile, render, controls, fig)
