"""Time the engine and set each time against its roofline floor, as tidy DataFrames.

Two measurements carry the chapters "prefill and decode", "bandwidth floor"
and "batching":

* :func:`ttft_by_prompt_length`: time to first token (the prefill) against
  prompt length, with the compute floor ``prefill_flop / FLOP/s``;
* :func:`decode_step_times`: time per decode step against batch size and
  context length, with the bandwidth floor
  ``(weight bytes + KV bytes read) / bandwidth``.

Each row is one cell of the sweep: median, 10th and 90th percentile of the
repeats (``median_s``, ``p10_s``, ``p90_s``), the floor (``floor_s``) and the
achieved fraction of it (``floor_fraction = floor_s / median_s``, at most 1
if the floor is right). Pass the bandwidth and FLOP/s measured by
:mod:`inferlab.lab.machine` on the same machine, and label the numbers as measured
on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from inferlab.common import checks
from inferlab.lab.engine import Engine, greedy
from inferlab.lab.engine_sizes import decode_bytes, prefill_flop


def time_repeats(
    run: Callable[[], object],
    repeats: int,
    setup: Callable[[], object] | None = None,
    warmup: int = 1,
    label: str | None = None,
    progress=None,
) -> np.ndarray:
    """Wall-clock seconds of ``repeats`` calls of ``run``, after ``warmup`` untimed calls.

    ``setup`` runs before every call, outside the timed region (e.g. to rewind
    a KV cache). The warm-up pays the one-time costs a steady state does not
    have: page faults on fresh arrays, waking BLAS threads. ``progress`` draws a bar
    labelled ``label`` while the calls run in a notebook (pass
    :func:`inferlab.pages.progress.progress`; ``None`` shows nothing).
    """
    repeats = checks.whole("repeats", repeats, maximum=checks.MAX_ITEMS)
    warmup = checks.whole("warmup", warmup, minimum=0, maximum=checks.MAX_ITEMS)
    seconds = np.empty(repeats)
    calls = range(warmup + repeats)
    for index in checks.shown("progress", progress, calls, label=label or "Timing calls"):
        if setup is not None:
            setup()
        start = time.perf_counter()
        run()
        elapsed = time.perf_counter() - start
        if index >= warmup:
            seconds[index - warmup] = elapsed
    return seconds


def spread(seconds: np.ndarray) -> dict[str, float]:
    """Median and 10th/90th percentiles of repeated timings, as ``median_s, p10_s, p90_s``.

    The median, not the mean: a run slowed by another process is an outlier
    that the median ignores.
    """
    seconds = checks.reals("seconds", seconds, low=0.0)
    p10, median, p90 = np.percentile(seconds, [10, 50, 90])
    return {"median_s": float(median), "p10_s": float(p10), "p90_s": float(p90)}


def _timed_row(what: dict, repeats: int, stats: dict, work_name: str, work: float,
               rate: float, achieved_name: str) -> dict:
    """One row of a timing table: what was timed, its spread, the floor that ``work`` at
    ``rate`` sets, the share of the time that floor is, and the rate achieved."""
    floor_s = work / rate
    return {**what, "repeats": repeats, **stats, work_name: work, "floor_s": floor_s,
            "floor_fraction": floor_s / stats["median_s"],
            achieved_name: work / stats["median_s"]}


def ttft_by_prompt_length(
    engine: Engine,
    prompt_tokens: Sequence[int],
    flop_per_s: float,
    repeats: int = 5,
    batch: int = 1,
    seed: int = 0,
    progress=None,
) -> pd.DataFrame:
    """Time to first token against prompt length, with the compute floor of each.

    TTFT here is a prefill of ``batch`` random prompts of each length plus
    picking the first token greedily. The floor is
    ``prefill_flop(config, prompt_tokens, batch) / flop_per_s``, and
    ``achieved_flop_per_s`` is that work over the median time. Columns:
    ``prompt_tokens, batch, repeats, median_s, p10_s, p90_s, flop, floor_s,
    floor_fraction, achieved_flop_per_s``. ``progress`` draws a bar over the lengths
    (pass :func:`inferlab.pages.progress.progress`; ``None`` shows nothing). Chapter "prefill
    and decode".
    """
    checks.wholes("prompt_tokens", prompt_tokens)
    checks.positive("flop_per_s", flop_per_s)
    rng = np.random.default_rng(seed)
    rows = []
    for tokens in checks.shown("progress", progress, prompt_tokens,
                               label="Timing prefill at each prompt length"):
        prompts = rng.integers(0, engine.config.vocab_size, size=(batch, int(tokens)))

        def first_token(prompts=prompts) -> np.ndarray:
            logits, _ = engine.prefill(prompts)
            return greedy(logits)

        stats = spread(time_repeats(first_token, repeats))
        flop = prefill_flop(engine.config, int(tokens), batch)
        rows.append(_timed_row({"prompt_tokens": int(tokens), "batch": batch}, repeats, stats,
                               "flop", flop, flop_per_s, "achieved_flop_per_s"))
    return pd.DataFrame(rows)


def decode_step_times(
    engine: Engine,
    batch_sizes: Sequence[int],
    context_tokens: Sequence[int],
    bandwidth_bytes_per_s: float,
    repeats: int = 5,
    seed: int = 0,
    progress=None,
) -> pd.DataFrame:
    """Time per decode step against batch size and context length, with the bandwidth floor.

    For each (batch, context) cell the KV cache is filled with ``context``
    random positions (:meth:`~inferlab.lab.engine.KVCache.fill_random`: a step's cost
    depends on how much it reads, not on what) and one decode step is timed,
    rewinding the cache before each repeat so every repeat reads the same
    bytes. The floor is ``decode_bytes(config, batch, context) /
    bandwidth_bytes_per_s``. Columns: ``batch, context_tokens, repeats,
    median_s, p10_s, p90_s, bytes_read, floor_s, floor_fraction,
    tokens_per_s, achieved_bytes_per_s``. ``progress`` draws a bar over the cells (pass
    :func:`inferlab.pages.progress.progress`; ``None`` shows nothing). Chapters "bandwidth
    floor" and "batching".
    """
    checks.wholes("batch_sizes", batch_sizes)
    checks.wholes("context_tokens", context_tokens, minimum=0)
    checks.positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    rng = np.random.default_rng(seed)
    rows = []
    cells = [(int(batch), int(context)) for batch in batch_sizes for context in context_tokens]
    for batch, context in checks.shown("progress", progress, cells,
                                       label="Timing decode steps"):
        cache = engine.new_cache(batch, context + 1)
        cache.fill_random(context, rng)
        tokens = rng.integers(0, engine.config.vocab_size, size=batch)
        stats = spread(time_repeats(
            lambda tokens=tokens, cache=cache: engine.decode_step(tokens, cache),
            repeats,
            setup=lambda cache=cache, context=context: cache.truncate(context),
        ))
        bytes_read = decode_bytes(engine.config, batch, context)
        row = _timed_row({"batch": batch, "context_tokens": context}, repeats, stats,
                         "bytes_read", bytes_read, bandwidth_bytes_per_s, "achieved_bytes_per_s")
        achieved = row.pop("achieved_bytes_per_s")  # after tokens_per_s, as documented
        rows.append({**row, "tokens_per_s": batch / stats["median_s"],
                     "achieved_bytes_per_s": achieved})
    return pd.DataFrame(rows)
