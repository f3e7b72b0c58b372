"""The command line of :func:`inferlab.predict.predict`: one configuration, or a file of them.

``python -m inferlab.predict --chip NAME --chips N --model NAME ...`` prints one
prediction (``--json`` for one JSON object); ``--csv IN --out OUT`` predicts every row of
a file of configurations, writing a row the model refuses with its reason in a
``refused`` column and no number, while a malformed file fails with its file, line and
column. ``--list-chips`` and ``--list-models`` print the accepted names.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys

from inferlab.benchmark.mlperf import BOUNDS, SCENARIOS, benchmark_of
from inferlab.benchmark.verdict import mlperf_rules
from inferlab.benchmark.workload import Workload, datasets
from inferlab.common import checks
from inferlab.model import specs
from inferlab.predict import Prediction, accepted_chips, accepted_models, predict

CSV_COLUMNS = ("chip", "chips", "model", "precision", "scenario")

#: Columns a configuration file may add, one value per row (empty: the default).
CSV_OPTIONAL = ("tp", "pp", "input_tokens", "output_tokens")


def _format(prediction: Prediction) -> str:
    lines = [f"{prediction.chips} x {prediction.chip}, {prediction.model} at "
             f"{prediction.precision}, {prediction.scenario} (modelled; stack: "
             f"{prediction.stack})",
             f"  workload: {prediction.workload}; judged by {prediction.rules}"]
    if prediction.unit == "s":
        lines.append(f"  p90 latency: {prediction.result:.3f} s "
                     f"({prediction.tokens_per_s:,.0f} tokens/s in one stream)")
    else:
        lines.append(f"  tokens/s: {prediction.tokens_per_s:,.0f} (output tokens, whole system)")
    lines.append(f"  valid: {'yes' if prediction.valid else 'NO'}")
    layout_text = f"tp={prediction.tp}" + (f" x pp={prediction.pp}" if prediction.pp > 1 else "") \
        + (f", ep={prediction.ep}" if prediction.ep > 1 else "")
    lines.append(f"  layout: {layout_text} x {prediction.replicas} replica(s) "
                 f"({prediction.tp_from}); peak batch per lane {prediction.batch:,}")
    if prediction.rate_per_s is not None:
        lines.append(f"  query rate: {prediction.rate_per_s:,.2f} per second")
    if math.isfinite(prediction.started_share):
        # Well under 100 %, the system starts queries slower than they come: a queue grows.
        lines.append(f"  queries started while the stream ran: "
                     f"{prediction.started_share:.1%} of those sent")
    if math.isfinite(prediction.ttft_p99_s):
        label = "p90" if prediction.scenario == "SingleStream" else "p99"
        # Offline sends every query at once, so its first tokens wait for the whole queue.
        since = " (from the run's start)" if prediction.scenario == "Offline" else ""
        lines.append(f"  TTFT {label}{since}: {prediction.ttft_p99_s * 1e3:,.0f} ms; "
                     f"TPOT {label}: {prediction.tpot_p99_s * 1e3:,.1f} ms")
    return "\n".join(lines)


def _whole_cell(path: str, line: int, row: dict, column: str) -> int | None:
    value = (row.get(column) or "").strip()
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ValueError(f"{path}, line {line}, column '{column}': {value!r} is not a whole "
                         "number >= 1")
    return number


def _rows(path: str) -> list[tuple[int, dict]]:
    """The configurations of a CSV file; a malformed one fails with its file, line and column."""
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [column for column in CSV_COLUMNS if column not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; "
                             f"give {','.join(CSV_COLUMNS)} (optional: {','.join(CSV_OPTIONAL)})")
        rows = []
        for line, row in enumerate(reader, start=2):
            if None in row:
                raise ValueError(f"{path}, line {line}: more cells than the header's "
                                 f"{len(reader.fieldnames)} columns")
            row["chips"] = _whole_cell(path, line, row, "chips")
            if row["chips"] is None:
                raise ValueError(f"{path}, line {line}, column 'chips': empty; give a whole "
                                 "number >= 1")
            for column in CSV_OPTIONAL:
                row[column] = _whole_cell(path, line, row, column)
            if (row["input_tokens"] is None) != (row["output_tokens"] is None):
                raise ValueError(f"{path}, line {line}, column 'output_tokens': give both "
                                 "input_tokens and output_tokens, or neither")
            rows.append((line, row))
        return rows


def workload_of(args) -> Workload | str | None:
    """The workload a command line's ``--input-tokens``/``--output-tokens``, ``--dataset`` or
    ``--trace`` names (``None`` for none: the model's own data set); ``python -m
    inferlab.plan`` takes the same options."""
    if (args.input_tokens is None) != (args.output_tokens is None):
        raise ValueError("--output-tokens: give both --input-tokens and --output-tokens")
    given = [args.input_tokens is not None, args.dataset is not None, args.trace is not None]
    if sum(given) > 1:
        raise ValueError("--dataset: give one of --input-tokens/--output-tokens, --dataset "
                         "and --trace")
    if args.input_tokens is not None:
        return Workload.fixed(args.input_tokens, args.output_tokens)
    if args.trace is not None:
        from inferlab.lab.tool_files import read_trace

        return Workload.from_trace(read_trace(args.trace), name=f"trace {args.trace}")
    return args.dataset


def _predict_csv(args, rules) -> int:
    rows = _rows(args.csv)
    written = []
    for line, row in rows:
        base = {**{key: row[key] for key in CSV_COLUMNS},
                **{key: "" if row[key] is None else row[key] for key in CSV_OPTIONAL}}
        try:
            workload = (Workload.fixed(row["input_tokens"], row["output_tokens"])
                        if row["input_tokens"] is not None else None)
            found = predict(row["chip"], row["chips"], row["model"], row["precision"],
                            row["scenario"], workload=workload, stack=args.stack,
                            rules=rules, tps=None if row["tp"] is None else [row["tp"]],
                            pp=row["pp"], ep=args.ep)
        except (ValueError, TypeError) as error:
            written.append({**base, "tokens_per_s": "", "valid": "", "ttft_p99_s": "",
                            "tpot_p99_s": "", "refused": str(error)})
            print(f"line {line}: refused: {error}", file=sys.stderr)
            continue
        written.append({**base, "tp": found.tp, "pp": found.pp,
                        "tokens_per_s": f"{found.tokens_per_s:.1f}",
                        "valid": "yes" if found.valid else "no",
                        "ttft_p99_s": f"{found.ttft_p99_s:.4f}",
                        "tpot_p99_s": f"{found.tpot_p99_s:.5f}", "refused": ""})
        print(f"line {line}: {found.tokens_per_s:,.0f} tok/s "
              f"({'valid' if found.valid else 'INVALID'})", file=sys.stderr)
    columns = [*CSV_COLUMNS, *CSV_OPTIONAL, "tokens_per_s", "valid", "ttft_p99_s",
               "tpot_p99_s", "refused"]
    with open(args.out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(written)
    return 0


def main(argv=None) -> int:
    """Run the command line on ``argv`` (default: the program's arguments); return the exit
    status: 0, or 2 with the reason on standard error for what cannot be predicted."""
    parser = argparse.ArgumentParser(
        prog="python -m inferlab.predict",
        description="Predict what a system serves from the book's step-time model.")
    parser.add_argument("--chip", help="a chip name from --list-chips")
    parser.add_argument("--chips", type=int, default=8, help="accelerators in the system")
    parser.add_argument("--model", default="Llama 2 70B", help="a model from --list-models")
    parser.add_argument("--precision", default="fp8", help="weights: fp8, fp4, bf16, ...")
    parser.add_argument("--scenario", default="Offline", choices=SCENARIOS)
    parser.add_argument("--input-tokens", type=int, metavar="I",
                        help="every request this many prompt tokens (with --output-tokens)")
    parser.add_argument("--output-tokens", type=int, metavar="O",
                        help="every request this many output tokens (with --input-tokens)")
    parser.add_argument("--dataset", metavar="NAME",
                        help="an MLPerf data set: " + ", ".join(datasets()))
    parser.add_argument("--trace", metavar="FILE", help="a run recorded by aiperf (raw "
                        "export), guidellm (JSON report) or vllm bench serve (result JSON)")
    parser.add_argument("--tp", type=int, metavar="N",
                        help="only this tensor-parallel width (default: the submission's "
                        "own for a chip it ran, else the best that fits)")
    parser.add_argument("--pp", type=int, metavar="N", help="pipeline stages per replica")
    parser.add_argument("--ep", type=int, default=1, metavar="N",
                        help="expert-parallel chips of each stage's tp (mixtures of experts)")
    parser.add_argument("--stack", metavar="NAME", help="a stack of data/stacks.csv "
                        "(default: the chip vendor's calibrated stack)")
    parser.add_argument("--ttft-p99", type=float, metavar="S",
                        help="a service level of your own for --scenario Server: p99 time to "
                        "first token, in seconds (alone or with --tpot-p99)")
    parser.add_argument("--tpot-p99", type=float, metavar="S",
                        help="p99 time per output token, in seconds, for --scenario Server")
    parser.add_argument("--rate", type=float, metavar="REQ_PER_S",
                        help="run --scenario Server or Interactive at this many requests a "
                        "second to the whole system instead of searching for the most it "
                        "holds: the latencies at a load you measured yourself")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="scale MLPerf's minimum duration and Offline samples (0, 1]")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--list-chips", action="store_true", help="print the chip names")
    parser.add_argument("--list-models", action="store_true", help="print the model names")
    parser.add_argument("--csv", metavar="IN", help="configurations, one per row: "
                        + ",".join(CSV_COLUMNS) + " (optional: " + ",".join(CSV_OPTIONAL) + ")")
    parser.add_argument("--out", metavar="OUT", help="where --csv writes its results")
    args = parser.parse_args(argv)
    if args.list_chips:
        print("\n".join(accepted_chips()))
        return 0
    if args.list_models:
        print("\n".join(accepted_models()))
        return 0
    try:
        rules = None if args.scale == 1.0 else mlperf_rules(scale=args.scale)
        if args.scale != 1.0:
            checks.fraction("scale", args.scale, low_open=True)
        if args.csv:
            if not args.out:
                parser.error("--csv needs --out")
            return _predict_csv(args, rules)
        if not args.chip:
            parser.error("give --chip (or --list-chips, --list-models, or --csv)")
        workload = workload_of(args)
        spec = specs.as_model(args.model)
        if rules is not None:
            chosen = workload if workload is not None else benchmark_of(spec.name)
            name = chosen if isinstance(chosen, str) else getattr(chosen, "benchmark", "")
            rules = mlperf_rules(name, scale=args.scale) if name in BOUNDS else None
        found = predict(args.chip, args.chips, spec, args.precision, args.scenario,
                        workload=workload, stack=args.stack, rules=rules,
                        tps=None if args.tp is None else [args.tp], pp=args.pp, ep=args.ep,
                        ttft_p99_s=args.ttft_p99, tpot_p99_s=args.tpot_p99,
                        rate_per_s=args.rate)
    except (ValueError, TypeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(found.as_dict()) if args.json else _format(found))
    return 0
