"""Probes of the reader's own machine: memory bandwidth, matrix-multiply FLOP/s, cache size.

The roofline floors of the chapters "bandwidth floor", "prefill and decode"
and "batching" divide bytes by a bandwidth and FLOPs by a FLOP/s. On an
accelerator those come from a datasheet; here they are measured, with the
same NumPy and BLAS the engine (:mod:`inferlab.engine`) uses, so a floor is
what this machine can really do, not what a vendor prints. Every probe returns
a frozen dataclass whose ``what_was_run`` says exactly what was timed.

Each probe times ``repeats`` runs after one untimed warm-up and reports the
median (robust to a run disturbed by another process) with the 10th and 90th
percentiles.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from inferlab.measure import spread, time_repeats

MIB = 2**20

#: The cache size assumed when it cannot be read. It is larger than the
#: last-level cache of common laptop and desktop CPUs, so "arrays far larger
#: than the cache" stays true when it is the yardstick.
ASSUMED_CACHE_BYTES = 64 * MIB

#: The bandwidth probe's array is at least this large, and at least
#: :data:`CACHE_MULTIPLE` x the last-level cache: then at most an eighth of it
#: could be served from cache, whatever the replacement policy.
MIN_PROBE_BYTES = 256 * MIB
#: See :data:`MIN_PROBE_BYTES`.
CACHE_MULTIPLE = 8


@dataclass(frozen=True)
class CacheInfo:
    """The largest (last-level) CPU cache, in bytes, and where the figure came from."""

    bytes: int
    level: int
    source: str


def last_level_cache(sysfs: Path | str = "/sys/devices/system/cpu/cpu0/cache") -> CacheInfo:
    """Size of the highest-level cache of CPU 0.

    Read from Linux's ``sysfs`` (``index*/level`` and ``index*/size``); then from
    ``os.sysconf("SC_LEVEL3_CACHE_SIZE")`` (glibc); otherwise
    :data:`ASSUMED_CACHE_BYTES`, saying so in ``source``. The benchmark sizes
    its model from it (weights >= 4 x this), chapter "bandwidth floor".
    """
    root = Path(sysfs)
    found: list[tuple[int, int, str]] = []
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text())
            size_bytes = _parse_cache_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        found.append((level, size_bytes, str(index)))
    if found:
        level, size_bytes, source = max(found)
        return CacheInfo(bytes=size_bytes, level=level, source=source)
    if "SC_LEVEL3_CACHE_SIZE" in os.sysconf_names:
        size_bytes = os.sysconf("SC_LEVEL3_CACHE_SIZE")
        if size_bytes > 0:
            return CacheInfo(bytes=size_bytes, level=3, source='os.sysconf("SC_LEVEL3_CACHE_SIZE")')
    return CacheInfo(bytes=ASSUMED_CACHE_BYTES, level=3,
                     source="assumed: the cache size could not be read on this OS")


def _parse_cache_size(text: str) -> int:
    """``"32768K"`` -> 33554432; sysfs writes sizes with a K or M suffix."""
    text = text.strip().upper()
    scale = {"K": 1024, "M": MIB, "G": 1024 * MIB}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * scale


def blas_threads() -> tuple[int, str]:
    """How many threads OpenBLAS runs a large matrix product on, and why.

    OpenBLAS's documented order: ``OPENBLAS_NUM_THREADS``, then
    ``GOTO_NUM_THREADS``, then ``OMP_NUM_THREADS``; with none set it uses every
    core the process may run on. Reported with each probe so a reader can see
    that the probe and the engine ran on the same threads.
    """
    for variable in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(variable, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value), f"{variable}={value}"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores or 1, "BLAS default: one thread per available core"


@dataclass(frozen=True)
class BandwidthProbe:
    """Achieved memory read bandwidth: ``array_bytes / median time`` of ``kernel``."""

    bandwidth_bytes_per_s: float
    array_bytes: int
    repeats: int
    threads: int
    kernel: str
    median_s: float
    p10_s: float
    p90_s: float
    what_was_run: str


# A kernel builder takes a float32 element count and returns the call to time
# and the bytes that call reads.
Kernel = Callable[[int], tuple[Callable[[], object], int]]


def _matvec(elements: int) -> tuple[Callable[[], object], int]:
    # Rows of 4096 float32 (16 KiB): the length of a weight row in a 4k-wide
    # model. W @ x reads W once and writes a vector: decode's access pattern.
    columns = 4096
    matrix = np.full((elements // columns, columns), 1.0, dtype=np.float32)
    vector = np.ones(columns, dtype=np.float32)
    return (lambda: matrix @ vector), matrix.nbytes


def _sum(elements: int) -> tuple[Callable[[], object], int]:
    array = np.full(elements, 1.0, dtype=np.float32)
    return (lambda: np.add.reduce(array)), array.nbytes


def _dot(elements: int) -> tuple[Callable[[], object], int]:
    first = np.full(elements // 2, 1.0, dtype=np.float32)
    second = np.full(elements // 2, 1.0, dtype=np.float32)
    return (lambda: first.dot(second)), first.nbytes + second.nbytes


_BANDWIDTH_KERNELS: dict[str, tuple[str, Kernel]] = {
    "matvec": ("float32 matrix-vector product W @ x (BLAS GEMV), reading W once", _matvec),
    "sum": ("np.add.reduce over a float32 array (NumPy's own loop, one thread)", _sum),
    "dot": ("dot product of two float32 arrays (BLAS SDOT)", _dot),
}


def probe_bandwidth(
    array_bytes: int | None = None, repeats: int = 9, kernel: str = "matvec"
) -> BandwidthProbe:
    """Measure how fast this machine reads memory, the denominator of the decode floor.

    ``kernel="matvec"`` (the default) times ``W @ x`` over a float32 matrix of
    ``array_bytes``, by default the larger of 256 MiB and 8 x the last-level
    cache, on the threads BLAS uses (:func:`blas_threads`). It is the honest
    probe for decode because it *is* decode's access pattern: every weight read
    once per token, with two multiply-adds per 4 bytes, far below what the cores
    can compute. ``"sum"`` and ``"dot"`` are there for comparison: measured on a
    2-core EPYC where GEMV read 67 GB/s, ``np.add.reduce`` (pairwise summation
    on one thread) read 24 GB/s and SDOT 43 GB/s, so a probe built on them would
    understate the floor and flatter the engine.
    The arrays are filled with ones, not ``np.zeros``, because untouched zero
    pages all map to one physical page and would be read from cache. Chapter
    "bandwidth floor".
    """
    if kernel not in _BANDWIDTH_KERNELS:
        raise ValueError(f"kernel: got {kernel!r}; allowed: {', '.join(_BANDWIDTH_KERNELS)}")
    if array_bytes is None:
        array_bytes = max(MIN_PROBE_BYTES, CACHE_MULTIPLE * last_level_cache().bytes)
    if not isinstance(array_bytes, int | np.integer) or array_bytes < 65536:
        raise ValueError(
            f"array_bytes: got {array_bytes!r}; must be a whole number of bytes >= 65536"
        )
    description, build = _BANDWIDTH_KERNELS[kernel]
    run, read_bytes = build(array_bytes // 4)
    stats = spread(time_repeats(run, repeats, label="Reading memory (bandwidth probe)"))
    threads, threads_source = blas_threads()
    if kernel == "sum":
        threads, threads_source = 1, "NumPy's reductions run on one thread"
    return BandwidthProbe(
        bandwidth_bytes_per_s=read_bytes / stats["median_s"],
        array_bytes=read_bytes,
        repeats=repeats,
        threads=threads,
        kernel=kernel,
        what_was_run=(
            f"{description}: {read_bytes / MIB:.0f} MiB read per run, median of {repeats} "
            f"runs after a warm-up, {threads} thread(s) ({threads_source})"
        ),
        **stats,
    )


@dataclass(frozen=True)
class MatmulProbe:
    """Achieved float32 matrix-multiply rate: ``2 m k n / median time``."""

    flop_per_s: float
    m: int
    k: int
    n: int
    repeats: int
    threads: int
    median_s: float
    p10_s: float
    p90_s: float
    what_was_run: str


def probe_matmul(m: int = 512, k: int = 2048, n: int = 2048, repeats: int = 9,
                 seed: int = 0) -> MatmulProbe:
    """Measure float32 matrix-multiply FLOP/s at a prefill-like shape, the prefill floor's rate.

    Times ``X @ W.T`` with ``X`` ``(m, k)`` (``m`` prompt tokens of width ``k``)
    and ``W`` ``(n, k)``, the layout and call the engine's prefill makes; a
    multiply-add counts as 2 FLOPs. The default (512 tokens through a
    2048 x 2048 weight) is large enough that BLAS runs near its peak on a
    laptop. Chapter "prefill and decode".
    """
    for argument, value in (("m", m), ("k", k), ("n", n), ("repeats", repeats)):
        if not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{argument}: got {value!r}; must be a whole number >= 1")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    stats = spread(time_repeats(lambda: x @ w.T, repeats))
    flop = 2.0 * m * k * n
    threads, threads_source = blas_threads()
    return MatmulProbe(
        flop_per_s=flop / stats["median_s"],
        m=m,
        k=k,
        n=n,
        repeats=repeats,
        threads=threads,
        what_was_run=(
            f"float32 X @ W.T (BLAS SGEMM), X {m}x{k}, W {n}x{k}: {flop / 1e9:.2f} GFLOP per "
            f"run, median of {repeats} runs after a warm-up, {threads} thread(s) "
            f"({threads_source})"
        ),
        **stats,
    )
