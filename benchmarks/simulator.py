"""Time the serving simulator, the engine behind the batching and scenarios chapters.

    python benchmarks/simulator.py [--repeats 5] [--requests 10000]

Simulates ``--requests`` requests of Llama 2 70B at FP8 on one replica of
8 x H200 (tensor parallel), continuous batching with chunked prefill, under
Poisson arrivals at 90 % of the replica's saturation rate (its Offline request
rate, measured once beforehand with the same requests). Each repeat draws the
requests, runs the simulation and computes the TTFT/TPOT percentiles, which is
what one move of a simulation slider costs. The median over repeats is printed,
the last line exactly as

    requests_per_second_simulated=R

(target: at least 100,000 on the book's 2-core machine, with the four-term step
model of :mod:`inferlab.model.steptime`). The line before it is

    server_search_seconds=S

for one LoadGen Server-rate search under MLPerf's full rules (target: at most
5). To add a figure, append a function to ``MEASUREMENTS``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from inferlab.benchmark.traffic import Lengths, make_requests
from inferlab.model.steptime import replica
from inferlab.serving.simulator import Scheduler, offline_throughput, simulate

LOAD = 0.9
PROMPT = Lengths(300, cv=1.0, min_tokens=1, max_tokens=1024)
OUTPUT = Lengths(294, cv=1.0, min_tokens=1, max_tokens=1024)
SCHEDULER = Scheduler(max_batch=512, token_budget=2048)


def requests_per_second_simulated(args) -> str:
    """Median over repeats of simulated requests per wall-clock second, near saturation."""
    rep = replica("Llama 2 70B", "NVIDIA H200 SXM", 8, "fp8", memory_efficiency=0.65,
                  compute_efficiency=0.65, step_overhead_s=1e-3)
    probe = make_requests(args.requests, PROMPT, OUTPUT, rate_per_s=1.0, seed=0)
    saturation = offline_throughput(rep, probe, SCHEDULER).requests_per_s
    rates = []
    for repeat in range(args.repeats):
        start = time.perf_counter()
        requests = make_requests(args.requests, PROMPT, OUTPUT, rate_per_s=LOAD * saturation,
                                 seed=repeat + 1)
        run = simulate(rep, requests, SCHEDULER)
        run.summary()
        rates.append(args.requests / (time.perf_counter() - start))
    print(f"saturation_requests_per_s={saturation:.1f} load={LOAD} "
          f"requests={args.requests} repeats={args.repeats}")
    return f"requests_per_second_simulated={statistics.median(rates):.0f}"


def server_search_seconds(args) -> str:
    """Median wall-clock seconds over ``--repeats`` of one LoadGen Server-rate search for the
    scenarios chapter's example system (Llama 2 70B on 8x H200, MLPerf's full run rules with
    equal issue, its Offline-rate probe included)."""
    from inferlab.serving.example import example_system
    from inferlab.serving.loadgen import find_server_rate

    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        found = find_server_rate(example_system(), "Server")
        times.append(time.perf_counter() - start)
    print(f"server_search_rate_per_s={found.rate_per_s:.2f} "
          f"server_search_tok_s={found.result_tok_s:.0f} trials={len(found.trials)} "
          f"repeats={args.repeats} runs_s={','.join(f'{t:.2f}' for t in times)}")
    return f"server_search_seconds={statistics.median(times):.2f}"


#: Each entry prints its own lines and returns its ``name=value`` line; the last entry's
#: line is the script's last line.
MEASUREMENTS = [server_search_seconds, requests_per_second_simulated]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--requests", type=int, default=10_000)
    args = parser.parse_args()
    for measure in MEASUREMENTS:
        print(measure(args))


if __name__ == "__main__":
    main()
