"""A workload: the requests a system is asked to serve, as lengths and (optionally) arrival times.

One idea with four sources, all built here:

- **fixed lengths** (:meth:`Workload.fixed`): every request exactly ``input_tokens`` in and
  ``output_tokens`` out, as vendors run their maximum-throughput tables;
- **a length distribution** (``Workload(prompt=Lengths(...), output=Lengths(...))``):
  log-normal lengths of a given mean and spread (:class:`inferlab.benchmark.traffic.Lengths`);
- **an MLPerf data set** (:meth:`Workload.dataset`): the per-sample lengths of a
  benchmark's own data set (``data/mlperf_dataset_lengths.csv``), issued in passes in a
  fresh random order each, as LoadGen issues them;
- **a real trace** (:meth:`Workload.from_trace`): the prompt and output lengths and the
  send times of a run that aiperf, guidellm or ``vllm bench serve`` recorded.

Whatever the source, :meth:`Workload.lengths` gives the prompt and output lengths of the
first ``n`` requests and :meth:`Workload.unit_arrivals` their arrival times at a mean rate of
one request per second: Poisson for the first three, the trace's own pattern for a trace,
so that a rate search scales a recorded burst rather than replacing it. Draws are seeded and
prefix-consistent (the first ``n`` requests are the same whatever the total), so runs at
different rates differ only in how fast the same requests come.

The default workload is MLPerf's Llama 2 70B benchmark: the 24,576 Open Orca prompts of its
data set, and log-normal answers of the mean the reference model generates (294 tokens; the
data set does not record what Llama 2 70B answers sample by sample), the mix the stacks in
:mod:`inferlab.serving.calibration` are fitted on.

Used in chapters 'Batching' and 'Benchmark scenarios'; :mod:`inferlab.serving.loadgen` runs its
scenarios on a workload and :mod:`inferlab.predict` takes one from the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numpy as np

from inferlab.benchmark.mlperf import LLAMA2_70B_MEAN_OUTPUT_TOKENS
from inferlab.benchmark.traffic import DatasetLengths, Lengths, mlperf_input_lengths
from inferlab.common import checks
from inferlab.common.data import load_table

#: The most requests a workload may hold or draw at once.
MAX_REQUESTS = checks.MAX_ITEMS

#: The fewest output tokens a request may ask for where latency bounds are judged, since
#: LoadGen's time per output token divides by ``tokens - 1`` and logs a one-token answer as
#: an error.
MIN_OUTPUT_TOKENS = 2

#: The most tokens each MLPerf benchmark's reference implementation generates per answer
#: (mlcommons/inference: ``max_new_tokens`` in ``language/llama2-70b/SUT.py`` and
#: ``language/mixtral-8x7b/SUT.py``, ``max_tokens`` in ``language/llama3.1-8b/SUT_VLLM.py``
#: and ``language/llama3.1-405b/SUT_VLLM.py``, ``MAX_OSL`` in
#: ``language/deepseek-r1/utils/backend_registry.py``). A data set's recorded answer longer
#: than this (83 of DeepSeek-R1's reach up to 32,768) is cut at it, as the benchmark cuts it.
MAX_OUTPUT_TOKENS = {"llama2-70b": 1024, "mixtral-8x7b": 1024, "llama3.1-8b": 128,
                     "llama3.1-405b": 2000, "deepseek-r1": 20_000}

#: What Llama 2 70B answers in MLPerf's benchmark, which its data set does not record per
#: sample: log-normal of the reference model's mean (294 tokens), an assumed spread of 1,
#: MLPerf's cap of 1,024 and at least two tokens.
LLAMA2_70B_OUTPUT = Lengths(LLAMA2_70B_MEAN_OUTPUT_TOKENS, cv=1.0, min_tokens=MIN_OUTPUT_TOKENS,
                            max_tokens=MAX_OUTPUT_TOKENS["llama2-70b"])

#: The characters Llama 3.1 8B generates over MLPerf's 13,368 CNN/DailyMail samples, the
#: figure the submission checker holds its answers to (``GEN_LEN`` 8,167,644 in
#: ``tools/submission/submission_checker/constants.py``): 611 characters an answer.
LLAMA31_8B_GENERATED_CHARS = 8_167_644

#: What Llama 3.1 8B answers in MLPerf's benchmark, which its data set does not record in
#: tokens: 611 characters an answer is 128 tokens at the 4.78 characters per token the
#: Llama 3 tokenizer averages on English prose (``tests/test_workload.py`` recounts it with
#: the book's own tokenizer), which is the reference's cap of 128, so every answer is taken
#: to run to the cap (an assumption about the spread: the mean is the checker's).
LLAMA31_8B_OUTPUT = Lengths(MAX_OUTPUT_TOKENS["llama3.1-8b"], cv=0.0,
                            min_tokens=MIN_OUTPUT_TOKENS,
                            max_tokens=MAX_OUTPUT_TOKENS["llama3.1-8b"])


@dataclass(frozen=True)
class Workload:
    """Requests to serve: their prompt and output lengths and, for a trace, their send times.

    ``prompt`` and ``output`` are the length distributions drawn when no per-request
    ``pairs`` are given. ``pairs`` are ``(prompt, output)`` lengths of real requests (a
    data set's samples, a trace's requests): a data set is drawn in passes, each a fresh
    random order of all its samples; a trace (``arrival_s`` given, one send time per pair)
    is replayed in its own order. ``benchmark`` names the MLPerf benchmark whose data set
    this is (``""`` for any other workload); ``name`` says what it is in a sentence.

    Build one with :meth:`fixed`, :meth:`dataset` or :meth:`from_trace`, or give two
    :class:`~inferlab.benchmark.traffic.Lengths`. The default is MLPerf's Llama 2 70B mix (module
    docstring).

    Used in chapters 'Batching' and 'Benchmark scenarios'.
    """

    prompt: Lengths = field(default_factory=mlperf_input_lengths)
    output: Lengths = LLAMA2_70B_OUTPUT
    seed: int = 0
    pairs: tuple[tuple[int, int], ...] = field(default=(), repr=False)
    arrival_s: tuple[float, ...] = field(default=(), repr=False)
    benchmark: str = "llama2-70b"
    name: str = "MLPerf Llama 2 70B (Open Orca prompts, modelled answers)"

    def __post_init__(self) -> None:
        checks.instance("prompt", self.prompt, Lengths)
        checks.instance("output", self.output, Lengths)
        checks.seed("seed", self.seed)
        checks.instance("benchmark", self.benchmark, str)
        checks.instance("name", self.name, str)
        if self.pairs:
            values = checks.wholes("pairs", np.asarray(self.pairs).ravel(), size=2 * MAX_REQUESTS)
            if len(values) != 2 * len(self.pairs):
                raise ValueError("pairs: give (prompt, output) pairs of whole token counts")
        if self.arrival_s:
            if len(self.arrival_s) != len(self.pairs):
                raise ValueError(f"arrival_s: {len(self.arrival_s)} send times for "
                                 f"{len(self.pairs)} requests; give one per request")
            times = np.asarray(self.arrival_s, dtype=float)
            if not np.all(np.isfinite(times)) or np.any(times < 0) or np.any(np.diff(times) < 0):
                raise ValueError("arrival_s: give finite, non-decreasing send times >= 0")

    # ---- builders --------------------------------------------------------------------

    @classmethod
    def fixed(cls, input_tokens: int, output_tokens: int, *, seed: int = 0) -> Workload:
        """Every request ``input_tokens`` in and ``output_tokens`` out.

        Raises ``ValueError`` naming the argument for a length below 1.
        """
        prompt = checks.whole("input_tokens", input_tokens, maximum=checks.MAX_COUNT)
        output = checks.whole("output_tokens", output_tokens, maximum=checks.MAX_COUNT)
        return cls(Lengths(prompt, 0.0, 1, prompt), Lengths(output, 0.0, 1, output), seed,
                   benchmark="", name=f"fixed lengths: {prompt:,} in, {output:,} out")

    @classmethod
    def dataset(cls, name: str, *, seed: int = 0) -> Workload:
        """The data set of the MLPerf benchmark ``name`` (one of :func:`datasets`).

        Llama 2 70B's and Llama 3.1 8B's record prompts only, so their answers are
        modelled (:data:`LLAMA2_70B_OUTPUT`, :data:`MODELLED_OUTPUTS`); the others record
        what the reference model answered, sample by sample, cut at the benchmark's
        :data:`MAX_OUTPUT_TOKENS`. Raises ``ValueError`` naming the data sets for another name.
        """
        checks.option("name", name, datasets())
        if name == "llama2-70b":
            return cls(seed=seed)
        pairs = _dataset_pairs(name)
        prompts, outputs = zip(*pairs, strict=True)
        return cls(_spread(prompts), _spread(outputs), seed, pairs, (), name,
                   f"MLPerf {name} data set ({len(pairs):,} samples)")

    @classmethod
    def from_trace(cls, trace, *, seed: int = 0, name: str = "") -> Workload:
        """The requests of a recorded run (a :class:`inferlab.benchmark.traces.Trace`).

        Each succeeded request gives its prompt length (the server's count, else the
        client's), its output length (the server's count) and its send time. Raises
        ``ValueError`` if a request lacks a length or no request succeeded.
        """
        requests = sorted(getattr(trace, "succeeded", None) or (), key=lambda r: r.send_s)
        if not requests:
            raise ValueError("trace: it holds no succeeded request to take lengths from")
        pairs, sends = [], []
        for r in requests:
            prompt = r.prompt_tokens or r.requested_prompt_tokens
            if not prompt or not r.completion_tokens:
                raise ValueError(f"trace: request {r.index} records no prompt or output token "
                                 "count; save the run with the server's usage counts")
            pairs.append((int(prompt), int(r.completion_tokens)))
            sends.append(float(r.send_s))
        start = sends[0]
        prompts, outputs = zip(*pairs, strict=True)
        return cls(_spread(prompts), _spread(outputs), seed, tuple(pairs),
                   tuple(s - start for s in sends), "",
                   name or f"recorded trace ({len(pairs):,} requests)")

    # ---- what a run draws --------------------------------------------------------------

    @property
    def is_trace(self) -> bool:
        """Whether the requests come with their own send times."""
        return bool(self.arrival_s)

    @property
    def longest_request_tokens(self) -> int | None:
        """The most tokens (prompt plus output) one request can hold, ``None`` if unbounded."""
        if self.pairs:
            return int(max(p + o for p, o in self.pairs))
        if self.prompt.max_tokens is None or self.output.max_tokens is None:
            return None
        return int(self.prompt.max_tokens + self.output.max_tokens)

    def lengths(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Prompt and output lengths of the first ``n`` requests."""
        n = checks.whole("n", n, maximum=MAX_REQUESTS)
        if not self.pairs:
            prompts = self.prompt.sample(n, np.random.default_rng([self.seed, 0]))
            outputs = self.output.sample(n, np.random.default_rng([self.seed, 1]))
            return prompts, outputs
        pairs = np.asarray(self.pairs, dtype=np.int64)
        if self.is_trace:
            order = np.arange(n) % len(pairs)
        else:
            rng = np.random.default_rng([self.seed, 0])
            passes = -(-n // len(pairs))
            order = np.concatenate([rng.permutation(len(pairs)) for _ in range(passes)])[:n]
        return pairs[order, 0].copy(), pairs[order, 1].copy()

    def unit_arrivals(self, n: int) -> np.ndarray:
        """Arrival times of the first ``n`` requests at a mean rate of one per second.

        Poisson, unless the workload is a trace: then its own send times, scaled to one
        request per second, repeated end to end past its last request.
        """
        n = checks.whole("n", n, maximum=MAX_REQUESTS)
        if not self.is_trace:
            return np.cumsum(np.random.default_rng([self.seed, 2]).exponential(1.0, size=n))
        sends = np.asarray(self.arrival_s, dtype=float)
        count = len(sends)
        # One mean gap after the last send starts the next repetition.
        span = sends[-1] + (sends[-1] / (count - 1) if count > 1 and sends[-1] > 0 else 1.0)
        index = np.arange(n)
        times = sends[index % count] + span * (index // count)
        return times * (count / span)

    @property
    def native_rate_per_s(self) -> float | None:
        """A trace's own mean request rate (its requests over their span), else ``None``."""
        if not self.is_trace or len(self.arrival_s) < 2 or self.arrival_s[-1] <= 0:
            return None
        return (len(self.arrival_s) - 1) / self.arrival_s[-1]

    def mean_tokens(self, sample: int = 10_000) -> tuple[float, float]:
        """Mean prompt and output lengths over the first ``sample`` requests."""
        prompts, outputs = self.lengths(checks.whole("sample", sample, maximum=MAX_REQUESTS))
        return float(np.mean(prompts)), float(np.mean(outputs))


def _spread(values) -> Lengths:
    """The mean, spread and range of observed lengths, as a :class:`Lengths` that says so."""
    array = np.asarray(values, dtype=float)
    mean = float(array.mean())
    return Lengths(max(mean, 1.0), float(array.std() / mean) if mean else 0.0,
                   int(array.min()), int(array.max()))


@cache
def _lengths_table():
    return load_table("mlperf_dataset_lengths")


def datasets() -> tuple[str, ...]:
    """The MLPerf benchmarks whose data set :meth:`Workload.dataset` knows, by benchmark name."""
    return ("llama2-70b", *dict.fromkeys(_lengths_table()["dataset"]))


#: Data sets whose answers ``data/mlperf_dataset_lengths.csv`` leaves empty, and the
#: lengths drawn for them instead.
MODELLED_OUTPUTS = {"llama3.1-8b": LLAMA31_8B_OUTPUT}


@cache
def _dataset_pairs(name: str) -> tuple[tuple[int, int], ...]:
    table = _lengths_table()
    rows = table[table["dataset"] == name]
    prompts = rows["input_tokens"].to_numpy(dtype=np.int64)
    if name in MODELLED_OUTPUTS:
        outputs = MODELLED_OUTPUTS[name].sample(len(rows), np.random.default_rng(0))
    else:
        outputs = rows["output_tokens"].to_numpy(dtype=np.int64)
    # At least two output tokens (LoadGen has no time per output token for a one-token
    # answer), at most the benchmark's own cap.
    outputs = np.clip(outputs, MIN_OUTPUT_TOKENS, MAX_OUTPUT_TOKENS.get(name))
    counts = rows["samples"].to_numpy(dtype=np.int64)
    return tuple((int(p), int(o)) for p, o, c in zip(prompts, outputs, counts, strict=True)
                 for _ in range(c))


def dataset_lengths(name: str) -> DatasetLengths:
    """The prompt lengths of data set ``name`` as a
    :class:`~inferlab.benchmark.traffic.DatasetLengths`."""
    checks.option("name", name, datasets())
    if name == "llama2-70b":
        return mlperf_input_lengths()
    prompts = [p for p, _ in _dataset_pairs(name)]
    values, counts = np.unique(prompts, return_counts=True)
    return DatasetLengths.from_counts(values, counts, f"MLPerf {name} prompts")


def check_fits_context(workload: Workload, context_tokens: int, model_name: str) -> None:
    """Refuse a workload one of whose requests would outgrow a model's context window.

    Raises ``ValueError`` naming ``input_tokens``/``output_tokens`` (fixed lengths) or the
    workload, with the limit, where the longest request (prompt plus output) exceeds
    ``context_tokens``, or the lengths are unbounded.
    """
    longest = workload.longest_request_tokens
    if longest is None:
        raise ValueError(f"workload: {workload.name} has unbounded lengths; give max_tokens to "
                         f"both Lengths (at most {context_tokens:,} together for {model_name})")
    if longest > context_tokens:
        what = ("input_tokens + output_tokens" if not workload.pairs and workload.prompt.cv == 0
                and workload.output.cv == 0 else f"workload ({workload.name})")
        raise ValueError(f"{what}: {longest:,} tokens in one request exceed {model_name}'s "
                         f"context of {context_tokens:,} tokens; allowed: at most "
                         f"{context_tokens:,}")
