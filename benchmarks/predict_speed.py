"""How long the predictor takes: one configuration, and a CSV of 250 configurations.

    python benchmarks/predict_speed.py [--repeats N]

Times, in one process after a warm-up (the tables loaded once, as a reader's session
has them), ``inferlab.predict.predict`` on fixed lengths for a spread of models, chips
and layouts, and the command line ``python -m inferlab.predict --csv`` on a 250-row file
of such configurations as a whole process. Prints the median and the slowest
configuration, then

    one_configuration_median_s=S one_configuration_max_s=M csv_250_rows_s=C

Targets (issue 29): one configuration in at most 1 s; 250 rows in at most 2 minutes on
the 2-core machine.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from inferlab.benchmark.workload import Workload
from inferlab.predict import predict

#: The configurations timed: (chip, chips, model, precision).
CONFIGURATIONS = (
    ("NVIDIA H200 SXM", 8, "Llama 3.1 8B", "fp8"),
    ("NVIDIA H200 SXM", 8, "Llama 3.1 70B", "fp8"),
    ("NVIDIA B200", 8, "Llama 3.1 405B", "fp4"),
    ("NVIDIA H100 SXM", 8, "Mixtral 8x7B", "fp8"),
    ("NVIDIA B200", 8, "DeepSeek-R1", "fp4"),
    ("NVIDIA B200", 8, "Qwen3 30B-A3B", "fp8"),
    ("AMD MI325X", 8, "Llama 3.3 70B", "fp8"),
    ("NVIDIA GB200 (per GPU)", 72, "Llama 4 Maverick", "fp4"),
)

#: Lengths the timed workloads take, (input, output).
LENGTHS = ((1000, 200), (128, 1024), (4000, 500))


def one_each(repeats: int) -> list[tuple[float, tuple]]:
    times = []
    for config in CONFIGURATIONS:
        for lengths in LENGTHS:
            best = []
            for _ in range(repeats):
                start = time.perf_counter()
                predict(*config, workload=Workload.fixed(*lengths))
                best.append(time.perf_counter() - start)
            times.append((statistics.median(best), (*config, lengths)))
    return times


def csv_run() -> float:
    with tempfile.TemporaryDirectory() as folder:
        source, out = Path(folder) / "in.csv", Path(folder) / "out.csv"
        with source.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["chip", "chips", "model", "precision", "scenario",
                             "input_tokens", "output_tokens"])
            rows = 0
            while rows < 250:
                for chip, chips, model, precision in CONFIGURATIONS:
                    for prompt, output in LENGTHS:
                        if rows < 250:
                            writer.writerow([chip, chips, model, precision, "Offline",
                                             prompt + rows, output])
                            rows += 1
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "inferlab.predict", "--csv", str(source),
                        "--out", str(out)], check=True, capture_output=True)
        took = time.perf_counter() - start
        with out.open(encoding="utf-8") as handle:
            written = list(csv.DictReader(handle))
        if len(written) != 250:
            raise SystemExit(f"the CSV run wrote {len(written)} rows, not 250")
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    predict(*CONFIGURATIONS[0], workload=Workload.fixed(*LENGTHS[0]))  # load the tables
    times = one_each(args.repeats)
    for took, config in times:
        print(f"{took:6.3f} s  {config}")
    median = statistics.median(took for took, _ in times)
    slowest = max(times)
    print(f"slowest: {slowest[0]:.3f} s for {slowest[1]}")
    total = csv_run()
    print(f"one_configuration_median_s={median:.3f} one_configuration_max_s={slowest[0]:.3f} "
          f"csv_250_rows_s={total:.1f}")


if __name__ == "__main__":
    main()
