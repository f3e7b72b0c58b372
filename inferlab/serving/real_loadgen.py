"""Run MLCommons' own LoadGen against a scripted Python system under test.

:mod:`inferlab.serving.loadgen` re-implements LoadGen's rules; this module runs the real
thing (the ``mlcommons-loadgen`` package, imported as ``mlperf_loadgen``) so that
the re-implementation can be checked against it on the same run:

1. :class:`Script` fixes, per sample of a small dataset, a time to first token, a
   time per output token and a token count, drawn from a seed.
2. :class:`ScriptedSUT` plays it: when LoadGen issues a sample, a worker thread
   reports the first token (``FirstTokenComplete``) after the script's TTFT and the
   whole answer, with its token count (``QuerySamplesComplete``), after the
   remaining tokens.
3. :func:`run` starts the test with token latencies on and reads back what LoadGen
   wrote: ``mlperf_log_detail.txt`` (its verdict and figures) and
   ``mlperf_log_trace.json`` (when it scheduled each sample, and when each first
   token and each answer came back, in its own nanoseconds). The trace becomes a
   :class:`inferlab.benchmark.verdict.QueryLog`, which :func:`inferlab.benchmark.verdict.judge` can
   judge.

LoadGen measures every latency from the sample's *scheduled* time (for
Single-Stream, the time it was issued), so the log is rebuilt from LoadGen's clock,
not from the SUT's.

Used in chapter 'Benchmark scenarios' and by ``tests/test_real_loadgen.py``.
"""

from __future__ import annotations

import array
import heapq
import itertools
import json
import numbers
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from inferlab.benchmark.verdict import QueryLog
from inferlab.common import checks

#: The seeds LoadGen draws its schedule and samples from (``mlperf.conf``'s values).
SEEDS = {"qsl_rng_seed": 2085463073848966840, "sample_index_rng_seed": 2747215439041700203,
         "schedule_rng_seed": 16159082839903944936}


def _loadgen():
    try:
        import mlperf_loadgen
    except ImportError as error:  # pragma: no cover - the package is in requirements.txt
        raise ImportError("the real LoadGen needs the mlcommons-loadgen package "
                          "(pip install mlcommons-loadgen)") from error
    return mlperf_loadgen


@dataclass(frozen=True, eq=False)
class Script:
    """What the scripted SUT does for each sample of its dataset.

    ``ttft_s`` and ``tpot_s`` in seconds and ``tokens`` (at least 2) per sample index.

    Used in chapter 'Benchmark scenarios'.
    """

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    tokens: np.ndarray

    def __post_init__(self) -> None:
        tokens = np.asarray(self.tokens)
        n = tokens.size
        if n == 0 or tokens.ndim != 1 or np.any(tokens < 2):
            raise ValueError("tokens: give one whole number >= 2 per sample")
        for name in ("ttft_s", "tpot_s"):
            values = np.asarray(getattr(self, name), dtype=float)
            if values.shape != (n,) or not np.all(np.isfinite(values)) or np.any(values < 0):
                raise ValueError(f"{name}: give {n} finite times >= 0, one per sample")
            object.__setattr__(self, name, values)
        object.__setattr__(self, "tokens", tokens.astype(np.int64))

    def __len__(self) -> int:
        return int(self.tokens.size)

    @classmethod
    def seeded(cls, samples: int, seed: int, *, ttft_s=(0.002, 0.010), tpot_s=(0.0002, 0.0006),
               tokens=(2, 24)) -> Script:
        """``samples`` samples with TTFT, TPOT and token count drawn uniformly from the
        given ``(low, high)`` ranges (tokens inclusive) by a generator seeded with ``seed``."""
        if not isinstance(samples, numbers.Integral) or samples < 1:
            raise ValueError(f"samples: {samples!r} is not allowed; give a whole number >= 1")
        if tokens[0] < 2 or tokens[1] < tokens[0]:
            raise ValueError(f"tokens: {tokens!r} is not allowed; give (low, high) with "
                             "2 <= low <= high")
        rng = np.random.default_rng(seed)
        return cls(rng.uniform(*ttft_s, samples), rng.uniform(*tpot_s, samples),
                   rng.integers(tokens[0], tokens[1] + 1, samples))


class ScriptedSUT:
    """A system under test that answers on a :class:`Script`'s timetable.

    One worker thread keeps a heap of due events (first token, last token) and
    reports each to LoadGen when its time comes; LoadGen is called outside the lock.

    Used in chapter 'Benchmark scenarios'.
    """

    def __init__(self, script: Script) -> None:
        if not isinstance(script, Script):
            raise ValueError(f"script: {script!r} is not a Script")
        self.script = script
        self._lg = _loadgen()
        self._events: list = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._stopping = False
        self._payload = array.array("B", b"ok")
        self._thread = threading.Thread(target=self._work, name="scripted-sut", daemon=True)
        self._thread.start()

    def issue(self, samples) -> None:
        """LoadGen's ``IssueQuery`` callback: schedule each sample's first token."""
        now = time.monotonic()
        with self._wake:
            for sample in samples:
                due = now + self.script.ttft_s[sample.index]
                heapq.heappush(self._events, (due, next(self._order), True, sample.id,
                                              sample.index))
            self._wake.notify()

    def flush(self) -> None:
        """LoadGen's ``FlushQueries`` callback (nothing is buffered)."""

    def close(self) -> None:
        """Stop the worker once every scheduled event has been reported."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join()

    def _next(self):
        with self._wake:
            while True:
                if self._events and self._events[0][0] <= time.monotonic():
                    return heapq.heappop(self._events)
                if self._stopping and not self._events:
                    return None
                wait = self._events[0][0] - time.monotonic() if self._events else None
                self._wake.wait(wait)

    def _work(self) -> None:
        lg = self._lg
        address, size = self._payload.buffer_info()
        while (event := self._next()) is not None:
            _, _, first, sample_id, index = event
            if first:
                lg.FirstTokenComplete([lg.QuerySampleResponse(sample_id, address, size)])
                rest = self.script.tpot_s[index] * (self.script.tokens[index] - 1)
                with self._wake:
                    heapq.heappush(self._events, (time.monotonic() + rest, next(self._order),
                                                  False, sample_id, index))
                    self._wake.notify()
            else:
                lg.QuerySamplesComplete([lg.QuerySampleResponse(
                    sample_id, address, size, int(self.script.tokens[index]))])


@dataclass(frozen=True, eq=False)
class RealRun:
    """One real LoadGen run: its own figures and the per-query log rebuilt from its trace.

    ``detail`` maps every ``:::MLLOG`` key of ``mlperf_log_detail.txt`` to its value;
    ``summary`` is ``mlperf_log_summary.txt``; ``log`` the queries in issue order, in
    seconds from the first scheduled query; ``sample_index`` the dataset sample of each.

    Used in chapter 'Benchmark scenarios'.
    """

    scenario: str
    detail: dict
    summary: str
    log: QueryLog
    sample_index: np.ndarray
    outdir: Path

    def figure(self, key: str):
        """One value of the detail log, by its key (``KeyError`` naming it if absent)."""
        if key not in self.detail:
            raise KeyError(f"{key!r} is not in {self.outdir / 'mlperf_log_detail.txt'}")
        return self.detail[key]

    def estimate_s(self, metric: str) -> float | None:
        """Single-Stream's early-stopping percentile estimate of ``metric`` ("ttft" or
        "tpot"), read from LoadGen's wording; ``None`` if it gave none."""
        text = self.figure(f"early_stopping_{metric}_result")
        marker = "percentile estimate: "
        if marker not in text:
            return None
        return int(text.split(marker)[1].split()[0]) / 1e9


def settings(scenario: str, *, ttft_bound_s: float, tpot_bound_s: float,
             min_duration_s: float, min_queries: int = 100, target_qps: float = 100.0,
             expected_latency_s: float = 0.01, max_duration_s: float = 0.0,
             equal_issue: bool = True):
    """LoadGen ``TestSettings`` for a PerformanceOnly run with token latencies.

    ``scenario`` is "Server" or "SingleStream"; the bounds are Server's p99 TTFT and
    TPOT; ``max_duration_s`` (0: none) cuts a run short, as LoadGen's
    ``max_duration_ms`` does; ``equal_issue`` is ``sample_concatenate_permutation``.
    The seeds are :data:`SEEDS`.

    Used in chapter 'Benchmark scenarios'.
    """
    checks.option("scenario", scenario, ("Server", "SingleStream"))
    # LoadGen holds the times as int64 nanoseconds or milliseconds: a time past 2**63 of
    # them raises inside its bindings, where no argument is named.
    longest_s = (2**63 - 1) / 1e9
    for name, value in (("ttft_bound_s", ttft_bound_s), ("tpot_bound_s", tpot_bound_s),
                        ("min_duration_s", min_duration_s),
                        ("expected_latency_s", expected_latency_s)):
        checks.positive(name, value, high=longest_s)
    checks.non_negative("max_duration_s", max_duration_s, high=longest_s)
    checks.positive("target_qps", target_qps)
    min_queries = checks.whole("min_queries", min_queries, maximum=2**63 - 1)
    lg = _loadgen()
    test = lg.TestSettings()
    test.scenario = getattr(lg.TestScenario, scenario)
    test.mode = lg.TestMode.PerformanceOnly
    test.use_token_latencies = True
    test.ttft_latency = round(ttft_bound_s * 1e9)
    test.tpot_latency = round(tpot_bound_s * 1e9)
    test.server_target_qps = float(target_qps)
    test.single_stream_expected_latency_ns = round(expected_latency_s * 1e9)
    test.min_duration_ms = round(min_duration_s * 1e3)
    test.max_duration_ms = round(max_duration_s * 1e3)
    test.min_query_count = min_queries
    test.sample_concatenate_permutation = bool(equal_issue)
    for name, value in SEEDS.items():
        setattr(test, name, value)
    return test


def run(script: Script, test_settings, outdir) -> RealRun:
    """Run LoadGen with ``test_settings`` against :class:`ScriptedSUT` playing ``script``,
    writing its logs (and its trace) to ``outdir``, and read them back.

    Used in chapter 'Benchmark scenarios'.
    """
    lg = _loadgen()
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    sut_impl = ScriptedSUT(script)
    sut = lg.ConstructSUT(sut_impl.issue, sut_impl.flush)
    qsl = lg.ConstructQSL(len(script), len(script), lambda indices: None, lambda indices: None)
    output = lg.LogOutputSettings()
    output.outdir = str(outdir)
    output.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = output
    log_settings.enable_trace = True
    try:
        lg.StartTestWithLogSettings(sut, qsl, test_settings, log_settings, "")
    finally:
        sut_impl.close()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    scenario = "Server" if test_settings.scenario == lg.TestScenario.Server else "SingleStream"
    log, index = read_trace(outdir / "mlperf_log_trace.json", scenario, script.tokens)
    return RealRun(scenario, read_detail(outdir / "mlperf_log_detail.txt"),
                   (outdir / "mlperf_log_summary.txt").read_text(encoding="utf-8"), log, index,
                   outdir)


def read_detail(path) -> dict:
    """Every ``:::MLLOG`` record of a detail log as ``{key: value}`` (the last one wins)."""
    values = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith(":::MLLOG "):
            record = json.loads(line[len(":::MLLOG "):])
            values[record["key"]] = record["value"]
    return values


def _event(line: str) -> dict:
    return json.loads(line.rstrip().rstrip(","))


def read_trace(path, scenario: str, tokens) -> tuple[QueryLog, np.ndarray]:
    """The per-sample log LoadGen's trace records, and each query's sample index.

    A ``Sample`` begin event carries the scheduled time (``ts``, microseconds with
    nanosecond digits) and, relative to it, the completion (``complete_ns``). The
    first token is a ``Token`` event of the same sample (Single-Stream) or a
    ``Token_Latency`` counter at the same scheduled time (Server: ``issue_delay +
    issue_to_done``). Only these lines are parsed: other trace lines are not always
    valid JSON. ``tokens`` gives each sample index's token count.
    """
    samples, firsts = {}, {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith('{"name":"Sample"') and '"ph":"b"' in line:
            event = _event(line)
            samples[event["args"]["sample_seq"]] = (line.split('"ts":')[1].split(",")[0],
                                                    event["args"])
        elif scenario == "SingleStream" and line.startswith('{"name":"Token"') \
                and '"ph":"b"' in line:
            event = _event(line)
            firsts[event["args"]["sample_seq"]] = event["args"]["complete_ns"]
        elif scenario == "Server" and line.startswith('{"name":"Token_Latency"'):
            event = _event(line)
            key = line.split('"ts":')[1].split(",")[0]
            firsts[key] = event["args"]["issue_delay"] + event["args"]["issue_to_done"]
    if not samples:
        raise ValueError(f"path: {path} holds no Sample events; was the trace enabled?")
    order = sorted(samples)
    stamp = np.array([float(samples[seq][0]) for seq in order]) * 1e-6
    done = np.array([samples[seq][1]["complete_ns"] for seq in order]) * 1e-9
    key = (lambda seq: seq) if scenario == "SingleStream" else (lambda seq: samples[seq][0])
    first = np.array([firsts[key(seq)] for seq in order]) * 1e-9
    index = np.array([samples[seq][1]["sample_idx"] for seq in order], dtype=np.int64)
    issued = stamp - stamp.min()
    log = QueryLog(issued, issued + first, issued + done, np.asarray(tokens)[index])
    return log, index
