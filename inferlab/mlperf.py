"""MLPerf Inference's latency bounds and mean lengths for Llama 2 70B: the one place the
book defines them.

The p99 bounds on time to first token and time per output token come from
MLCommons' ``loadgen/mlperf.conf``: Server 2,000 ms and 200 ms, Interactive 450 ms
and 40 ms. A bound on time per output token is also a floor on each user's rate,
one token per TPOT: 5 and 25 tokens per second.

:mod:`inferlab.loadgen` holds the bounds of the other models and the run rules;
:mod:`inferlab.simulator`, :mod:`inferlab.steptime` and :mod:`inferlab.token_counts`
take Llama 2 70B's from here. Used in chapters 'Batching' and 'Benchmark scenarios'.
"""

from __future__ import annotations

from types import MappingProxyType

#: The bounds (TTFT in s, TPOT in s) at the 99th percentile, by scenario.
MLPERF_LLAMA2_70B_BOUNDS = MappingProxyType({
    "Server": (2.0, 0.200),
    "Interactive": (0.450, 0.040),
})

#: The mean prompt of Llama 2 70B's MLPerf data set (24,576 Open Orca samples), in Llama 2
#: tokens, rounded; it is the mean of ``data/mlperf_llama2_70b_input_lengths.csv``, which a
#: test holds this figure to.
LLAMA2_70B_MEAN_PROMPT_TOKENS = 222

#: The mean answer of MLCommons' reference Llama 2 70B on that data set, in tokens; the
#: answers are published only as this mean, not sample by sample.
LLAMA2_70B_MEAN_OUTPUT_TOKENS = 294

#: The per-user rate each bound guarantees to 99 % of requests, one over its TPOT bound.
MLPERF_PER_USER_TOK_S = MappingProxyType({
    name: 1.0 / tpot_s for name, (_, tpot_s) in MLPERF_LLAMA2_70B_BOUNDS.items()})
