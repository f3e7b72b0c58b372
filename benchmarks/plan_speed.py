"""How long one plan over every chip kind takes, as a reader meets it on the command line.

    python benchmarks/plan_speed.py [--repeats N]

Runs ``python -m inferlab.plan`` as a whole process (start-up, table loading and the
search, every chip of ``data/hardware.csv``) ``N`` times for each of the issue's two
services, and prints each run's seconds, then one line per service

    plan_8b_median_s=S plan_8b_max_s=M
    plan_405b_median_s=S plan_405b_max_s=M

with the cheapest plan's chips, layout and $/M output tokens, so that a change that
makes the planner faster by planning something else shows.

Target (issue 30): one plan over every chip kind in at most 10 s on the 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

#: The issue's two services: (label, arguments of python -m inferlab.plan).
SERVICES = (
    ("8b", ["--model", "Llama 3.1 8B", "--input-tokens", "1000", "--output-tokens", "200",
            "--ttft-p99", "2", "--tpot-p99", "0.05", "--rate", "20"]),
    ("405b", ["--model", "Llama 3.1 405B", "--input-tokens", "2000", "--output-tokens", "500",
              "--ttft-p99", "6", "--tpot-p99", "0.1", "--rate", "5"]),
)


def run(arguments: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "inferlab.plan", *arguments, "--json"],
                          capture_output=True, text=True, check=True)
    return time.perf_counter() - start, json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for label, arguments in SERVICES:
        times, result = [], None
        for _ in range(args.repeats):
            seconds, result = run(arguments)
            times.append(seconds)
            print(f"{label}: {seconds:.2f} s", flush=True)
        best = result["plans"][0]
        layout = " + ".join(f"{p['role']} tp{p['tp']}xpp{p['pp']} x{p['replicas']}"
                            for p in best["pools"])
        print(f"{label}: cheapest {best['chip']}, {best['chips']} chips ({best['mode']}: "
              f"{layout}), ${best['usd_per_mtok']:.3f}/M output tokens; "
              f"{len(result['plans'])} chip kinds planned, {len(result['refused'])} refused")
        print(f"plan_{label}_median_s={statistics.median(times):.2f} "
              f"plan_{label}_max_s={max(times):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
