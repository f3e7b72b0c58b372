"""Fit each software stack's free parameters on its named anchor results; write data/stacks.csv.

    python scripts/calibrate.py

For each stack in :data:`ANCHORS`, ``step_overhead_s`` is bisected so that the
predicted latency-bound anchor (Interactive, else Server) matches the audited
figure, and inside every trial ``compute_efficiency`` is bisected so that the
predicted Offline anchor matches its figure. An anchor's figure is the median of
every audited row the model cannot tell apart from the named one (same accelerator,
count, format, scenario and stack: :func:`inferlab.serving.calibration.row_key`), so that one
submitter's tuning does not set a stack; for the latency-bound anchor, only those
whose runs reached a bound (:func:`inferlab.serving.calibration.at_bound`), since the model
predicts the most a system can do. Last, a stack in :data:`CLOCK_ANCHORS` bisects
``clock_share`` so that its lower-clocked card's anchor matches too, and a stack in
:data:`CLOCK_SHARE_FROM` takes the share of the same engine's stack.
``fitted_on`` lists the rows used. Everything else is
:data:`inferlab.serving.calibration.ASSUMED`. Runs use :data:`inferlab.predict.FIT_RULES`
(MLPerf's own rules in every scenario), as the accuracy benchmark does. Takes about
six minutes for the FP8 stack, clock share included, on one core of a 2-core machine;
prints each trial.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from dataclasses import replace
from functools import cache
from pathlib import Path

from inferlab.common.bisection import bisect
from inferlab.common.data import DATA_DIR, load_table
from inferlab.predict import FIT_RULES, predict
from inferlab.serving.calibration import ASSUMED, Stack, at_bound, row_key, stack

#: Each stack's anchors: (Offline row, latency-bound row) of data/mlperf_llama2_70b.csv.
ANCHORS = {
    "TensorRT-LLM FP8": ("v5.0-nvidia-h200sxm141gbx8trt-offline",
                         "v5.0-nvidia-8xh200sxm-interactive"),
    "TensorRT-LLM FP4": ("v5.0-nvidia-8xb200-offline", "v5.0-nvidia-8xb200-interactive"),
    "vLLM ROCm FP8": ("v5.1-amd-8xmi325x2xepyc9575f1-offline", "v5.1-amd-8xmi325x-interactive"),
    # v4.1 had no Interactive scenario, and the model's Server result hardly moves with
    # the fixed cost, so these stacks fit only their efficiency, on Offline, and take
    # the fixed cost of the same software's later stack (BORROWS_FROM).
    "TensorRT-LLM FP8 (v4.1)": ("v4.1-nvidia-h200sxm141gbx8trt-offline", None),
    "vLLM ROCm FP8 (v4.1)": ("v4.1-amd-8xmi300x2xepyc9374f-offline", None),
}

#: Where a stack without a latency-bound anchor takes its fixed cost per step and its
#: ``clock_share`` from: the same software's later stack.
BORROWS_FROM = {"TensorRT-LLM FP8 (v4.1)": "TensorRT-LLM FP8",
                "vLLM ROCm FP8 (v4.1)": "vLLM ROCm FP8"}

#: Where a stack that runs on no lower-clocked card takes its ``clock_share``: the one
#: stack whose share an audited row measures. The share also says how much of the fixed
#: cost grows with a model's depth (:meth:`inferlab.serving.calibration.Stack.step_overhead_on`),
#: so it matters for every model but the fitted one even where no card's clock tests it.
CLOCK_SHARE_FROM = {"TensorRT-LLM FP4": "TensorRT-LLM FP8", "vLLM ROCm FP8": "TensorRT-LLM FP8"}

#: The latency-bound row each stack fits its ``clock_share`` on: a card that runs a
#: full-power part's die at a lower clock (:func:`inferlab.model.roofline.clock_slowdown`).
#: Of TensorRT-LLM's, the H200 NVL is the one with Interactive runs whose summaries
#: show a bound reached; the eight-card group is taken, as every other anchor has
#: eight GPUs.
CLOCK_ANCHORS = {"TensorRT-LLM FP8": "v5.1-dell-8xh200nvl-interactive"}

#: Search ranges: compute efficiency and fixed cost per step (seconds).
EFFICIENCY_RANGE = (0.05, 1.0)
OVERHEAD_RANGE = (0.0, 0.100)


def anchor(table, row_id: str) -> dict:
    """Row ``row_id`` of ``table`` with ``tokens_per_s`` the median of its group (the rows
    of the same :func:`~inferlab.serving.calibration.row_key`) and ``ids`` the group's ids. For a
    Server or Interactive row the group keeps only the runs that reached a bound
    (:func:`~inferlab.serving.calibration.at_bound`), where any is recorded to have."""
    named = table.loc[row_id].to_dict()
    key, reason = row_key(named)
    if key is None:
        raise ValueError(f"anchor {row_id}: {reason}")
    group = [row for row in table.to_dict("records") if row_key(row)[0] == key]
    limits = [row for row in group if at_bound(row["id"])]
    if named["scenario"] != "Offline" and limits:
        group = limits
    return {**named, "tokens_per_s": statistics.median(row["tokens_per_s"] for row in group),
            "ids": tuple(sorted(row["id"] for row in group))}


def _lender(name: str, fitted: dict[str, Stack] | None, lenders=None) -> Stack:
    """The stack ``lenders`` (default :data:`BORROWS_FROM`) names for ``name``: as fitted
    earlier in this run (``fitted``) or, if not refitted now, as stored."""
    source = (BORROWS_FROM if lenders is None else lenders)[name]
    return fitted[source] if fitted and source in fitted else stack(source)


def _predicted(row: dict, candidate: Stack) -> float:
    return predict(row["accelerator"], int(row["accelerators"]), "Llama 2 70B",
                   row["precision"], row["scenario"], stack=candidate,
                   rules=FIT_RULES[row["scenario"]]).tokens_per_s


def fit(name: str, offline: dict, bounded: dict | None,
        fitted: dict[str, Stack] | None = None) -> tuple[Stack, str]:
    """The stack whose predictions reproduce ``offline`` and ``bounded`` (two audited rows);
    with no ``bounded`` row, only the efficiency is fitted, with the fixed cost of
    :func:`_lender`'s stack."""
    def with_overhead(overhead_s: float) -> Stack:
        def offline_at(efficiency: float) -> float:
            return _predicted(offline, Stack(name, efficiency, overhead_s))
        efficiency = bisect(offline_at, offline["tokens_per_s"], *EFFICIENCY_RANGE,
                            iterations=10)
        return Stack(name, efficiency, overhead_s)

    if bounded is None:
        lender = _lender(name, fitted)
        overhead = lender.step_overhead_s
        found = with_overhead(overhead)
        return (Stack(name, found.compute_efficiency, overhead, fitted_on=offline["ids"]),
                f" The fixed cost is the {lender.name} stack's, not fitted here.")

    def bounded_at(overhead_s: float) -> float:
        candidate = with_overhead(overhead_s)
        value = _predicted(bounded, candidate)
        print(f"  {name}: overhead {overhead_s * 1e3:6.2f} ms, efficiency "
              f"{candidate.compute_efficiency:.3f} -> {bounded['scenario']} {value:,.0f} "
              f"(reported {bounded['tokens_per_s']:,.0f})", flush=True)
        return value

    # The largest fixed cost at which some efficiency still reaches the Offline figure.
    def offline_at_full_efficiency(overhead_s: float) -> float:
        return _predicted(offline, Stack(name, 1.0, overhead_s))

    try:
        most = bisect(offline_at_full_efficiency, offline["tokens_per_s"], *OVERHEAD_RANGE,
                      iterations=8, increasing=False)
    except ValueError:
        most = OVERHEAD_RANGE[1]  # long Offline steps hide even the largest cost searched
    high = 0.98 * most
    try:
        overhead = bisect(bounded_at, bounded["tokens_per_s"], OVERHEAD_RANGE[0], high,
                          iterations=9, increasing=False)
        edge = ""
    except ValueError as error:
        # The two anchors cannot both be met: keep the fixed cost that comes closest
        # (the largest one an efficiency <= 1 still allows) and say so.
        overhead = high
        edge = (f" At the edge: {error}; the fixed cost is the largest that still lets an "
                "efficiency of at most 1 reproduce the Offline row, and the latency-bound row "
                "is missed by what the log of the fit shows.")
        print(f"  {name}: {edge.strip()}", flush=True)
    found = with_overhead(overhead)
    return Stack(name, found.compute_efficiency, overhead,
                 fitted_on=offline["ids"] + bounded["ids"]), edge


def fit_clock_share(found: Stack, clocked: dict) -> tuple[Stack, str]:
    """``found`` with the ``clock_share`` that reproduces ``clocked``, an audited row of a
    lower-clocked card. The share does not move the other anchors (full-clock chips), so
    it is fitted last, alone."""
    @cache  # the edge case below asks again for an end the bisection has run
    def clocked_at(share: float) -> float:
        value = _predicted(clocked, replace(found, clock_share=share))
        print(f"  {found.name}: clock share {share:.3f} -> {clocked['accelerator']} "
              f"{clocked['scenario']} {value:,.0f} (reported {clocked['tokens_per_s']:,.0f})",
              flush=True)
        return value

    try:
        share, edge = bisect(clocked_at, clocked["tokens_per_s"], 0.0, 1.0, iterations=9,
                             increasing=False), ""
    except ValueError as error:
        # Even all of the fixed cost at the card's clock (or none of it) misses: keep the
        # end of the range that comes closest, and say so.
        share = 1.0 if clocked_at(1.0) > clocked["tokens_per_s"] else 0.0
        edge = f" The clock share is at the edge of its range: {error}."
    return replace(found, clock_share=share, fitted_on=found.fitted_on + clocked["ids"]), edge


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", action="append", choices=list(ANCHORS),
                        help="refit only this stack (repeatable); the others keep their rows")
    args = parser.parse_args(argv)
    table = load_table("mlperf_llama2_70b").set_index("id", drop=False)
    path = Path(DATA_DIR) / "stacks.csv"
    kept = {}
    if path.is_file():
        with path.open(newline="", encoding="utf-8") as handle:
            kept = {row["name"]: row for row in csv.DictReader(handle)}
    rows, fitted = [], {}
    for name, (offline_id, bounded_id) in ANCHORS.items():
        if args.stack and name not in args.stack:
            if name in kept:
                rows.append(kept[name])
            continue
        print(f"fitting {name} on {offline_id}" + (f" and {bounded_id}" if bounded_id else ""),
              flush=True)
        bounded = None if bounded_id is None else anchor(table, bounded_id)
        found, edge = fit(name, anchor(table, offline_id), bounded, fitted)
        fitted_note = ("compute_efficiency reproduces the median of the Offline rows"
                       + (", step_overhead_ms that of the latency-bound rows" if bounded_id
                          else ""))
        assumed_note = ("memory_efficiency, overlap and allreduce_latency_us are assumed "
                        "(inferlab.serving.calibration.ASSUMED)")
        if name in CLOCK_ANCHORS:
            found, clock_edge = fit_clock_share(found, anchor(table, CLOCK_ANCHORS[name]))
            edge += clock_edge
            fitted_note += ", clock_share that of the lower-clocked card's row"
        elif name in BORROWS_FROM:
            lender = _lender(name, fitted)
            found = replace(found, clock_share=lender.clock_share)
            assumed_note += f"; clock_share is the {lender.name} stack's"
        elif name in CLOCK_SHARE_FROM:
            # No card this stack runs on is clocked below its full-power part (the MI300X
            # has the MI325X's datasheet peaks), so no row measures its share; the one
            # measured share is taken.
            lender = _lender(name, fitted, CLOCK_SHARE_FROM)
            found = replace(found, clock_share=lender.clock_share)
            assumed_note += (f"; clock_share is the {lender.name} stack's, the one share an "
                             "audited row measures (no card this stack runs on is clocked "
                             "below its full-power part)")
        fitted[name] = found
        rows.append({
            "name": name,
            "compute_efficiency": f"{found.compute_efficiency:.4f}",
            "step_overhead_ms": f"{found.step_overhead_s * 1e3:.3f}",
            "memory_efficiency": ASSUMED["memory_efficiency"],
            "overlap": ASSUMED["overlap"],
            "allreduce_latency_us": ASSUMED["allreduce_latency_s"] * 1e6,
            "clock_share": f"{found.clock_share:.3f}",
            "fitted_on": "; ".join(found.fitted_on),
            "source": "fitted by scripts/calibrate.py on the rows named in fitted_on "
                      "(data/mlperf_llama2_70b.csv)",
            "note": f"{fitted_note}; {assumed_note}.{edge}",
        })
    # Another calibration may have written its stacks meanwhile: keep them.
    if path.is_file():
        with path.open(newline="", encoding="utf-8") as handle:
            now = {row["name"]: row for row in csv.DictReader(handle)}
        fitted = {row["name"]: row for row in rows
                  if not args.stack or row["name"] in args.stack}
        rows = [fitted.get(name, now.get(name)) for name in ANCHORS
                if name in fitted or name in now]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
