"""The machine probes return positive, finite rates and say what they ran (tiny sizes)."""

from __future__ import annotations

import json
import math

import pytest
from conftest import glued

from inferlab.lab import machine
from inferlab.lab.engine_sizes import available_memory_bytes
from inferlab.lab.machine import (
    BANDWIDTH_CACHE_ENV,
    FLOOR_PROBE_REPEATS,
    blas_threads,
    last_level_cache,
    measured_bandwidth,
    probe_bandwidth,
    probe_matmul,
)

MIB = 2**20


@pytest.mark.parametrize("kernel", ["matvec", "sum", "dot"])
def test_bandwidth_probe_returns_a_positive_rate_and_says_what_ran(kernel):
    probe = probe_bandwidth(array_bytes=4 * MIB, repeats=3, kernel=kernel)
    assert math.isfinite(probe.bandwidth_bytes_per_s) and probe.bandwidth_bytes_per_s > 0
    assert 0 < probe.array_bytes <= 4 * MIB
    assert probe.p10_s <= probe.median_s <= probe.p90_s
    assert probe.repeats == 3 and probe.kernel == kernel and probe.threads >= 1
    assert "MiB read per run" in probe.what_was_run
    assert "fastest tenth of 3 runs" in probe.what_was_run
    # A floor divides by the fastest tenth of the runs, not the median run.
    assert probe.bandwidth_bytes_per_s == pytest.approx(probe.array_bytes / probe.p10_s)


def test_bandwidth_probe_rejects_bad_arguments():
    with pytest.raises(ValueError, match="kernel: got 'memcpy'; allowed: matvec, sum, dot"):
        probe_bandwidth(array_bytes=4 * MIB, kernel="memcpy")
    with pytest.raises(ValueError, match="array_bytes: got 100"):
        probe_bandwidth(array_bytes=100)
    with pytest.raises(ValueError, match="repeats: 0 is not allowed"):
        probe_bandwidth(array_bytes=4 * MIB, repeats=0)


def test_matmul_probe_returns_a_positive_rate_and_says_what_ran():
    probe = probe_matmul(m=64, k=128, n=96, repeats=3)
    assert math.isfinite(probe.flop_per_s) and probe.flop_per_s > 0
    assert probe.flop_per_s == pytest.approx(2 * 64 * 128 * 96 / probe.p10_s)
    assert "X 64x128, W 96x128" in probe.what_was_run
    assert "SGEMM" in probe.what_was_run
    with pytest.raises(ValueError, match="k: got 0"):
        probe_matmul(k=0)


def test_cache_size_is_read_or_assumed(tmp_path):
    cache = last_level_cache()
    assert cache.bytes > 0 and cache.level >= 1 and cache.source
    for index, (level, size) in enumerate([(1, "48K"), (2, "1024K"), (3, "32768K")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "size").write_text(f"{size}\n")
    fake = last_level_cache(tmp_path)
    assert (fake.bytes, fake.level) == (32 * MIB, 3)
    assert fake.source.endswith("index2")


def test_threads_and_free_memory_are_reported(monkeypatch):
    threads, source = blas_threads()
    assert threads >= 1 and source
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    assert blas_threads() == (3, "OPENBLAS_NUM_THREADS=3")
    available, source = available_memory_bytes()
    assert available > 0 and source


def _counting_probe(calls):
    """A stand-in for the probe: tiny, and counts how often it runs."""
    def run():
        calls.append(1)
        return probe_bandwidth(array_bytes=4 * MIB, repeats=5)
    return run


def test_measured_bandwidth_is_one_figure_for_every_call_on_one_machine(tmp_path):
    calls = []
    first = measured_bandwidth(tmp_path, probe=_counting_probe(calls))
    again = measured_bandwidth(tmp_path, probe=_counting_probe(calls))
    assert calls == [1]  # the second chapter reads the first one's measurement
    assert again == first
    assert first.bandwidth_bytes_per_s == pytest.approx(first.array_bytes / first.p10_s)


def test_measured_bandwidth_defaults_to_the_build_folder_and_the_floor_probe(
        tmp_path, monkeypatch):
    monkeypatch.setenv(BANDWIDTH_CACHE_ENV, str(tmp_path / "build"))
    asked = []

    def probe(**arguments):
        asked.append(arguments)
        return probe_bandwidth(array_bytes=4 * MIB, repeats=3)

    monkeypatch.setattr(machine, "probe_bandwidth", probe)
    first = measured_bandwidth()
    assert asked == [{"repeats": FLOOR_PROBE_REPEATS, "progress": None}]  # default kernel, size
    assert measured_bandwidth() == first and len(asked) == 1
    assert len(list((tmp_path / "build").glob("bandwidth-*.json"))) == 1


def test_measured_bandwidth_measures_again_on_another_machine_when_old_or_unreadable(
        tmp_path, monkeypatch):
    calls = []
    first = measured_bandwidth(tmp_path, probe=_counting_probe(calls))
    measured_bandwidth(tmp_path, max_age_s=0, probe=_counting_probe(calls))
    assert len(calls) == 2  # too old
    monkeypatch.setattr(machine, "machine_key", lambda: "another-machine")
    other = measured_bandwidth(tmp_path, probe=_counting_probe(calls))
    assert len(calls) == 3 and other != first  # a measurement is kept per machine
    (tmp_path / "bandwidth-another-machine.json").write_text("{not json")
    measured_bandwidth(tmp_path, probe=_counting_probe(calls))
    assert len(calls) == 4
    with pytest.raises(ValueError, match="max_age_s"):
        measured_bandwidth(tmp_path, max_age_s=-1, probe=_counting_probe(calls))


def _measure_in_parallel(folder, out):
    """One chapter's kernel: measure through the shared folder and write what it got."""
    import pathlib
    import time as clock

    def slow_probe():
        with open(pathlib.Path(folder) / "measured.log", "a") as log:
            log.write("measured\n")
        clock.sleep(0.3)  # long enough for the other chapter to ask meanwhile
        return probe_bandwidth(array_bytes=4 * MIB, repeats=3)

    figure = measured_bandwidth(folder, probe=slow_probe).bandwidth_bytes_per_s
    pathlib.Path(out).write_text(repr(figure))


def test_chapters_measuring_at_once_share_one_measurement(tmp_path):
    import multiprocessing

    context = multiprocessing.get_context("fork")
    outs = [tmp_path / f"chapter{k}.txt" for k in range(2)]
    workers = [context.Process(target=_measure_in_parallel, args=(tmp_path, out))
               for out in outs]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert all(worker.exitcode == 0 for worker in workers)
    assert (tmp_path / "measured.log").read_text().count("measured") == 1
    assert outs[0].read_text() == outs[1].read_text()


#: The bandwidth each chapter glues, in GB/s, by chapter.
GLUED_BANDWIDTH = {"01_prefill_decode": "pd_m_bw_gb_s", "02_bandwidth_floor": "bw_my_gb_s",
                   "03_batching": "batch_my_bw", "07_choosing_hardware": "hw_my_gb_s"}


@pytest.mark.build
def test_every_chapter_of_one_build_quotes_one_measured_bandwidth(built_book):
    """Chapter 1 used to quote the fastest tenth (27.6 GB/s) and chapters 2 and 3 medians
    (21.2 and 18.3 GB/s) of separate runs on one machine; now one measurement serves all."""
    figures = {chapter: glued(built_book, chapter)[key]
               for chapter, key in GLUED_BANDWIDTH.items()}
    assert len(set(figures.values())) == 1, figures
    kept = list((built_book.html.parent / "inferlab-machine").glob("bandwidth-*.json"))
    assert len(kept) == 1
    probe = machine.BandwidthProbe(**json.loads(kept[0].read_text())["probe"])
    assert next(iter(figures.values())) == pytest.approx(probe.bandwidth_bytes_per_s / 1e9)
    assert probe.bandwidth_bytes_per_s == pytest.approx(probe.array_bytes / probe.p10_s)
    assert probe.repeats == FLOOR_PROBE_REPEATS
