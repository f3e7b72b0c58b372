"""Probes of the reader's own machine: memory bandwidth, matrix-multiply FLOP/s, cache size.

The roofline floors of the chapters "bandwidth floor", "prefill and decode"
and "batching" divide bytes by a bandwidth and FLOPs by a FLOP/s. On an
accelerator those come from a datasheet; here they are measured, with the
same NumPy and BLAS the engine (:mod:`inferlab.lab.engine`) uses, so a floor is
what this machine can really do, not what a vendor prints. Every probe returns
a frozen dataclass whose ``what_was_run`` says exactly what was timed.

Each probe times ``repeats`` runs after one untimed warm-up and keeps the
median with the 10th and 90th percentiles of the times. Its rate is work over
the 10th-percentile time, the rate of the fastest tenth of the runs
(:func:`probe_bandwidth` says why). The chapters take
the bandwidth behind their floors from :func:`measured_bandwidth`, one
measurement per machine shared by every chapter of a build.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from inferlab.common import checks
from inferlab.lab.measure import spread, time_repeats

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
    """Achieved memory read bandwidth: ``array_bytes / p10_s``, the rate of the fastest
    tenth of the runs of ``kernel``."""

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
    array_bytes: int | None = None, repeats: int = 9, kernel: str = "matvec", *,
    progress=None,
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
    pages all map to one physical page and would be read from cache.

    The bandwidth is ``array_bytes / p10_s``: the rate of the fastest tenth of
    the runs, not of the median run. A floor is a bound no real step should
    beat, so it must divide by the most the memory can sustain, and on a shared
    machine the slower runs measure the neighbours (other processes taking the
    cores and the memory bus), not the hardware. The fastest single run is the
    other extreme: one lucky run, or a timer's jitter, would set the bound. The
    10th percentile is a high percentile of the rate that several runs reach,
    so it stays close to what the hardware sustains while one outlier cannot
    move it; the median and both percentiles are kept for the spread. ``progress``
    draws a bar over the runs (pass :func:`inferlab.pages.progress.progress`; ``None`` shows
    nothing). Chapter "bandwidth floor"; the chapters call it through
    :func:`measured_bandwidth`.
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
    stats = spread(time_repeats(run, repeats, label="Reading memory (bandwidth probe)",
                                progress=progress))
    threads, threads_source = blas_threads()
    if kernel == "sum":
        threads, threads_source = 1, "NumPy's reductions run on one thread"
    return BandwidthProbe(
        bandwidth_bytes_per_s=read_bytes / stats["p10_s"],
        array_bytes=read_bytes,
        repeats=repeats,
        threads=threads,
        kernel=kernel,
        what_was_run=(
            f"{description}: {read_bytes / MIB:.0f} MiB read per run, {_rate_rule(repeats)}, "
            f"{threads} thread(s) ({threads_source})"
        ),
        **stats,
    )


def _rate_rule(repeats: int) -> str:
    """How a probe's rate was taken from its runs, for its ``what_was_run``."""
    return f"rate of the fastest tenth of {repeats} runs (10th-percentile time) after a warm-up"


#: Runs behind :func:`measured_bandwidth`. With 21 the 10th-percentile time is that of
#: the third-fastest run, not an interpolation, and the runs take seconds.
FLOOR_PROBE_REPEATS = 21

#: The environment variable naming the folder where :func:`measured_bandwidth` keeps its
#: measurement. The book build sets it to a folder beside its notebook cache
#: (``book/_ext/freshness.py``), so every chapter of one build reads one figure.
BANDWIDTH_CACHE_ENV = "INFERLAB_BANDWIDTH_CACHE"

#: How long a kept measurement stands, a day, longer than any build and short enough that
#: a reader's laptop is measured again on another day.
BANDWIDTH_MAX_AGE_S = 24 * 3600.0


def machine_key() -> str:
    """A short fingerprint of the hardware and threads a probe ran on.

    A hash of the host name, the architecture, the CPU model (Linux's
    ``/proc/cpuinfo``, else ``platform.processor()``), the cores this process may
    use, the BLAS threads and the last-level cache: what a bandwidth depends on.
    A kept measurement is reused only on the machine whose key it carries.
    """
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    parts = [platform.node(), platform.machine(), cpu, str(cores), str(blas_threads()[0]),
             str(last_level_cache().bytes)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _bandwidth_folder(cache_dir: Path | str | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get(BANDWIDTH_CACHE_ENV):
        return Path(os.environ[BANDWIDTH_CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inferlab"


def _kept_probe(path: Path, key: str, max_age_s: float) -> BandwidthProbe | None:
    """The measurement kept at ``path`` if it is this machine's and young enough."""
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if kept["machine"] == key and time.time() - kept["measured_at"] <= max_age_s:
            return BandwidthProbe(**kept["probe"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # nothing kept, or not readable as a measurement
    return None


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path`` where the OS has ``fcntl`` (not Windows, which then
    goes unlocked: at worst two chapters measure and the later figure stands)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def measured_bandwidth(cache_dir: Path | str | None = None, *,
                       max_age_s: float = BANDWIDTH_MAX_AGE_S,
                       probe: Callable[[], BandwidthProbe] | None = None,
                       progress=None) -> BandwidthProbe:
    """This machine's memory bandwidth for a floor: one rule and one figure for every chapter.

    The rule: the default :func:`probe_bandwidth` (GEMV over an array far larger
    than the cache) with :data:`FLOOR_PROBE_REPEATS` runs, its rate that of the
    fastest tenth of them (:func:`probe_bandwidth` says why a floor takes that
    and not the median). The figure: measured once and kept in
    ``bandwidth-<machine_key()>.json`` in ``cache_dir`` (by default the folder
    in ``$INFERLAB_BANDWIDTH_CACHE``, which the book build sets, else
    ``~/.cache/inferlab``), then read back for ``max_age_s`` seconds by every
    later call on the same machine, so chapters "prefill and decode",
    "bandwidth floor", "batching" and "choosing hardware" quote the same
    bandwidth. A measurement from another machine or older than ``max_age_s``
    is taken again; so is an unreadable file. Calls at once (chapters built in
    parallel) wait for one another's measurement. ``probe`` replaces the
    measurement (tests). ``progress`` draws a bar while a measurement runs (pass
    :func:`inferlab.pages.progress.progress`; ``None`` shows nothing).
    """
    max_age_s = checks.non_negative("max_age_s", max_age_s)
    key = machine_key()
    path = _bandwidth_folder(cache_dir) / f"bandwidth-{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Chapters built in parallel ask at once: the lock lets the first measure and the
    # others wait for its figure, so one build still quotes one bandwidth.
    with _locked(path.with_suffix(".lock")):
        kept = _kept_probe(path, key, max_age_s)
        if kept is not None:
            return kept
        result = (probe or (lambda: probe_bandwidth(repeats=FLOOR_PROBE_REPEATS,
                                                    progress=progress)))()
        # Written whole and then renamed, so a reader never sees half a file.
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps({"machine": key, "measured_at": time.time(),
                                       "probe": dataclasses.asdict(result)}),
                           encoding="utf-8")
        partial.replace(path)
    return result


@dataclass(frozen=True)
class MatmulProbe:
    """Achieved float32 matrix-multiply rate: ``2 m k n / p10_s``, the rate of the fastest
    tenth of the runs, as for :class:`BandwidthProbe`."""

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
    laptop. The rate is that of the fastest tenth of the runs, as the bandwidth
    probe's is, so that the ridge point divides like by like. Chapter "prefill and
    decode".
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
        flop_per_s=flop / stats["p10_s"],
        m=m,
        k=k,
        n=n,
        repeats=repeats,
        threads=threads,
        what_was_run=(
            f"float32 X @ W.T (BLAS SGEMM), X {m}x{k}, W {n}x{k}: {flop / 1e9:.2f} GFLOP per "
            f"run, {_rate_rule(repeats)}, {threads} thread(s) ({threads_source})"
        ),
        **stats,
    )
