"""Measure the NumPy engine against this machine's roofline.

    python benchmarks/engine.py [--size NAME] [--rounds 7] [--context 256] [--prompt 256]

Probes the machine (last-level cache, memory bandwidth with a GEMV over an array
far larger than the cache, SGEMM FLOP/s at a prefill-like shape), builds the
smallest named engine size whose weights are at least 4x the last-level cache
(or ``--size``), then runs ``--rounds`` rounds. Each round measures the
bandwidth and the FLOP/s again and, right after, a batch-1 and a batch-8
decode step at ``--context`` tokens of context and a prefill of ``--prompt``
tokens, so each fraction compares times taken under the same conditions (the
bandwidth of a shared machine drifts). Each round gives

* the fraction of the bandwidth floor a batch-1 decode step reaches,
  ``(weight bytes + KV bytes) / bandwidth / step time`` (target >= 0.6);
* the fraction of the measured FLOP/s the prefill reaches,
  ``prefill_flop / FLOP/s / prefill time`` (target >= 0.5);
* the gain in aggregate decode tokens/s of batch 8 over batch 1 (target >= 2.5).

The medians over rounds are printed, the last line exactly as

    decode_floor_fraction=F prefill_flops_fraction=P batch8_throughput_gain=G

All figures are measured on the machine that runs the script.
"""

from __future__ import annotations

import argparse
import statistics

from inferlab.lab.engine import Engine
from inferlab.lab.engine_sizes import SIZES, available_memory_bytes, estimate
from inferlab.lab.machine import blas_threads, last_level_cache, probe_bandwidth, probe_matmul
from inferlab.lab.measure import decode_step_times, ttft_by_prompt_length

MIB = 2**20
CACHE_MULTIPLE = 4
TARGETS = {"decode_floor_fraction": 0.6, "prefill_flops_fraction": 0.5,
           "batch8_throughput_gain": 2.5}


def benchmark_size(cache_bytes: int) -> str:
    """The smallest named size whose weights are at least 4x the last-level cache."""
    for name, config in sorted(SIZES.items(), key=lambda item: item[1].weight_bytes):
        if config.weight_bytes >= CACHE_MULTIPLE * cache_bytes:
            return name
    raise SystemExit(f"no named size has weights >= {CACHE_MULTIPLE} x {cache_bytes} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default=None)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--prompt", type=int, default=256)
    args = parser.parse_args()

    cache = last_level_cache()
    threads, threads_source = blas_threads()
    available, available_source = available_memory_bytes()
    print(f"last-level cache: {cache.bytes / MIB:.0f} MiB (L{cache.level}, {cache.source})")
    print(f"BLAS threads: {threads} ({threads_source})")
    print(f"available memory: {available / 2**30:.1f} GiB ({available_source})")

    bandwidth = probe_bandwidth()
    matmul = probe_matmul()
    print(f"bandwidth: {bandwidth.bandwidth_bytes_per_s / 1e9:.1f} GB/s; {bandwidth.what_was_run}")
    print(f"matmul: {matmul.flop_per_s / 1e9:.0f} GFLOP/s; {matmul.what_was_run}")

    name = args.size or benchmark_size(cache.bytes)
    config = SIZES[name]
    print(f"model: {name}, {config.params / 1e6:.1f} M parameters, "
          f"{config.weight_bytes / MIB:.0f} MiB of weights = "
          f"{config.weight_bytes / cache.bytes:.1f} x the last-level cache")
    print(estimate(config, bandwidth.bandwidth_bytes_per_s, matmul.flop_per_s,
                   context_tokens=max(args.context, args.prompt)).describe())
    engine = Engine(config, seed=0, show=None)

    rounds = {key: [] for key in TARGETS}
    bandwidths, flop_rates = [], []
    for index in range(args.rounds):
        bandwidth_bytes_per_s = probe_bandwidth(repeats=5).bandwidth_bytes_per_s
        flop_per_s = probe_matmul(repeats=5).flop_per_s
        decode = decode_step_times(engine, [1, 8], [args.context], bandwidth_bytes_per_s,
                                   repeats=9, seed=index).set_index("batch")
        prefill = ttft_by_prompt_length(engine, [args.prompt], flop_per_s, repeats=3,
                                        seed=index).iloc[0]
        rounds["decode_floor_fraction"].append(decode.loc[1, "floor_fraction"])
        rounds["prefill_flops_fraction"].append(prefill["floor_fraction"])
        rounds["batch8_throughput_gain"].append(
            decode.loc[8, "tokens_per_s"] / decode.loc[1, "tokens_per_s"]
        )
        bandwidths.append(bandwidth_bytes_per_s)
        flop_rates.append(flop_per_s)
        print(
            f"round {index + 1}: bandwidth {bandwidth_bytes_per_s / 1e9:.1f} GB/s, "
            f"matmul {flop_per_s / 1e9:.0f} GFLOP/s, "
            f"decode b1 {decode.loc[1, 'median_s'] * 1e3:.2f} ms "
            f"(floor {decode.loc[1, 'floor_s'] * 1e3:.2f} ms), "
            f"decode b8 {decode.loc[8, 'median_s'] * 1e3:.2f} ms, "
            f"prefill {args.prompt} tokens {prefill['median_s'] * 1e3:.1f} ms "
            f"(floor {prefill['floor_s'] * 1e3:.1f} ms)",
            flush=True,
        )

    medians = {key: statistics.median(values) for key, values in rounds.items()}
    print(f"median bandwidth: {statistics.median(bandwidths) / 1e9:.1f} GB/s, "
          f"median matmul: {statistics.median(flop_rates) / 1e9:.0f} GFLOP/s "
          f"(measured on this machine, {args.rounds} rounds)")
    for key, value in medians.items():
        verdict = "meets" if value >= TARGETS[key] else "MISSES"
        print(f"{key}: {value:.2f} ({verdict} target {TARGETS[key]})")
    print(" ".join(f"{key}={value:.2f}" for key, value in medians.items()))


if __name__ == "__main__":
    main()
