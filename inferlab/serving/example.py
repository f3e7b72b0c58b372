"""The book's running example server, the one its explorers and hand-worked cases share.

Llama 2 70B at FP8 on H200s, each GPU a replica of its own, at the assumed share of peak
(:data:`inferlab.model.steptime.ATTAINABLE_FRACTION`) and 1 ms of fixed cost a step; its
traffic has MLPerf's mean lengths for Llama 2 70B (prompts of 222 tokens, answers of 294),
both capped at 1,024 tokens as MLPerf's data set is. The chapters that move a slider move
it against this server, so that one page's answer can be checked against another's.

Used in chapters 'The memory-bandwidth floor', 'Batching', 'Benchmark scenarios' and 'Choosing
hardware', and on the page 'When a run counts'.
"""

from __future__ import annotations

from functools import cache

from inferlab.benchmark.mlperf import LLAMA2_70B_MEAN_OUTPUT_TOKENS, LLAMA2_70B_MEAN_PROMPT_TOKENS
from inferlab.benchmark.traffic import Lengths
from inferlab.model.steptime import ATTAINABLE_FRACTION, Replica, replica
from inferlab.serving.loadgen import System

#: The example's fixed cost per step, 1 ms.
EXAMPLE_OVERHEAD_S = 1e-3
#: The example's prompts, MLPerf's mean for Llama 2 70B exponentially spread, 1 to 1,024.
EXAMPLE_PROMPT = Lengths(LLAMA2_70B_MEAN_PROMPT_TOKENS, cv=1.0, min_tokens=1, max_tokens=1024)
#: The example's mean answer, MLPerf's for Llama 2 70B.
EXAMPLE_OUTPUT_MEAN = LLAMA2_70B_MEAN_OUTPUT_TOKENS
#: How many requests a simulated example run holds.
EXAMPLE_REQUESTS = 2000
#: The example's one fixed draw of traffic, so that a moved slider changes the server or
#: the load and not the luck of the arrivals.
EXAMPLE_SEED = 0
#: GPUs in the example system (:func:`example_system`).
EXAMPLE_GPUS = 8


@cache
def example_replica() -> Replica:
    """One GPU of the example: Llama 2 70B at FP8 on one H200 SXM, at the assumed share of
    peak and :data:`EXAMPLE_OVERHEAD_S` a step."""
    return replica("Llama 2 70B", "NVIDIA H200 SXM", 1, "fp8",
                   memory_efficiency=ATTAINABLE_FRACTION, compute_efficiency=ATTAINABLE_FRACTION,
                   step_overhead_s=EXAMPLE_OVERHEAD_S)


def example_system() -> System:
    """The example as a benchmark sees it: :data:`EXAMPLE_GPUS` H200s, each running
    :func:`example_replica`."""
    return System(f"Llama 2 70B on {EXAMPLE_GPUS}x H200 (modelled)", example_replica(),
                  EXAMPLE_GPUS)
