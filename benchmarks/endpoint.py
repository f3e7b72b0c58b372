"""What the HTTP server adds to each token: the server's per-token time against the engine's.

    python benchmarks/endpoint.py [--size small] [--rounds 5] [--tokens 64] [--prompt 64]

Builds one engine and serves it with :class:`inferlab.lab.server.LabServer` on
127.0.0.1. Each round first times ``--tokens`` in-process decode steps
(``engine.decode_step`` plus the greedy pick, after a ``--prompt``-token
prefill: the loop the server's worker runs at concurrency 1) and takes their
median; then sends one streamed request of the same prompt length and
``--tokens`` output tokens through :func:`inferlab.lab.loadclient.run_load` at
concurrency 1 and takes its time per output token,
``(e2e - TTFT) / (tokens - 1)``. The overhead of a round is
``server TPOT / engine step - 1``: scheduling, detokenization, JSON, SSE and
the HTTP client, per token. Prints each round and, as its last line, the median
over rounds exactly as

    server_overhead_fraction=F

(target: at most 0.15). Measured on the machine that runs the script.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from inferlab.lab.endpoint_metrics import tpot_s
from inferlab.lab.engine import Engine, greedy
from inferlab.lab.engine_sizes import EngineConfig
from inferlab.lab.loadclient import LoadSpec, run_load
from inferlab.lab.server import LabServer, ServerConfig

TARGET = 0.15


def engine_step_s(engine: Engine, prompt_tokens: int, tokens: int, seed: int) -> float:
    """Median time of one decode step plus greedy pick, batch 1, after a prefill."""
    rng = np.random.default_rng(seed)
    prompt = rng.integers(0, engine.config.vocab_size, (1, prompt_tokens))
    logits, cache = engine.prefill(prompt, capacity=prompt_tokens + tokens + 1)
    token = greedy(logits)
    times = []
    for _ in range(tokens):
        start = time.perf_counter()
        token = greedy(engine.decode_step(token, cache))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=64)
    args = parser.parse_args()
    engine = Engine(EngineConfig.named(args.size), show=print)
    config = ServerConfig(size=args.size)
    fractions = []
    with LabServer(config, engine=engine) as server:
        # One warm-up request, so first-use costs (imports, tokenizer files) stay out.
        run_load(server.base_url, config.model_name,
                 LoadSpec(requests=1, concurrency=1, prompt_tokens=8, output_tokens=4))
        for round_ in range(args.rounds):
            step = engine_step_s(engine, args.prompt, args.tokens, round_)
            trace = run_load(server.base_url, config.model_name,
                             LoadSpec(requests=1, concurrency=1, prompt_tokens=args.prompt,
                                      output_tokens=args.tokens, seed=round_))
            request = trace.requests[0]
            if not request.ok:
                raise SystemExit(f"round {round_}: the request failed: {request.error}")
            per_token = tpot_s(request)
            fractions.append(per_token / step - 1.0)
            print(f"round {round_}: engine step {step * 1e3:.2f} ms, server TPOT "
                  f"{per_token * 1e3:.2f} ms, overhead {fractions[-1]:+.3f}", flush=True)
    overhead = statistics.median(fractions)
    verdict = "meets" if overhead <= TARGET else "misses"
    print(f"median over {args.rounds} rounds {verdict} the target of {TARGET}")
    print(f"server_overhead_fraction={overhead:.3f}")


if __name__ == "__main__":
    main()
