"""Cached notebook outputs are thrown away when the package or the data change."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

from conftest import ROOT

from inferlab.common import memo
from inferlab.lab.machine import BANDWIDTH_CACHE_ENV, measured_bandwidth, probe_bandwidth

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import freshness  # noqa: E402


def _app(tmp_path):
    cache = tmp_path / "_build" / ".jupyter_cache"
    env = SimpleNamespace(mystnb_config=SimpleNamespace(execution_cache_path=str(cache)),
                          found_docs={"book/intro", "book/glossary"})
    return SimpleNamespace(env=env, srcdir=str(tmp_path)), cache


def test_fingerprint_changes_with_any_byte_of_a_watched_file(tmp_path):
    (tmp_path / "data").mkdir()
    table = tmp_path / "data" / "t.csv"
    table.write_text("a,b\n1,2\n")
    before = memo.digest([table], tmp_path)
    assert memo.digest([table], tmp_path) == before
    table.write_text("a,b\n1,3\n")
    assert memo.digest([table], tmp_path) != before


def test_the_pages_predictions_are_remembered_beside_the_sources_unless_told_otherwise(
        tmp_path, monkeypatch):
    monkeypatch.delenv(BANDWIDTH_CACHE_ENV, raising=False)
    monkeypatch.delenv(memo.FOLDER_ENV, raising=False)
    app, _ = _app(tmp_path)
    freshness._refresh_cache(app)
    assert os.environ[memo.FOLDER_ENV] == str(tmp_path / "book" / "_computed")
    monkeypatch.setenv(memo.FOLDER_ENV, str(tmp_path / "elsewhere"))
    freshness._refresh_cache(app)
    assert os.environ[memo.FOLDER_ENV] == str(tmp_path / "elsewhere")


def test_cache_is_emptied_and_every_page_reread_only_when_the_fingerprint_changes(
        tmp_path, monkeypatch):
    monkeypatch.delenv(BANDWIDTH_CACHE_ENV, raising=False)  # _refresh_cache sets these
    monkeypatch.delenv(memo.FOLDER_ENV, raising=False)
    app, cache = _app(tmp_path)
    monkeypatch.setattr(freshness, "fingerprint", lambda: "first")
    freshness._refresh_cache(app)  # no stamp yet: stale
    assert app.env.inferlab_stale
    cache.mkdir(parents=True)
    (cache / "executed-notebook").write_text("outputs")

    freshness._refresh_cache(app)  # same fingerprint: keep the cache
    assert not app.env.inferlab_stale
    assert (cache / "executed-notebook").exists()
    assert freshness._outdated(app, app.env, set(), set(), set()) == []

    monkeypatch.setattr(freshness, "fingerprint", lambda: "second")
    freshness._refresh_cache(app)  # package or data changed: empty the cache, reread all
    assert app.env.inferlab_stale
    assert not cache.exists()
    assert freshness._outdated(app, app.env, set(), set(), set()) == [
        "book/glossary", "book/intro"]


def test_the_build_measures_bandwidth_once_and_again_only_with_a_fresh_cache(
        tmp_path, monkeypatch):
    """Every chapter of a build reads one bandwidth; emptying the cache drops it too."""
    monkeypatch.delenv(BANDWIDTH_CACHE_ENV, raising=False)
    monkeypatch.delenv(memo.FOLDER_ENV, raising=False)
    app, cache = _app(tmp_path)
    monkeypatch.setattr(freshness, "fingerprint", lambda: "first")
    freshness._refresh_cache(app)
    folder = cache.parent / freshness.MACHINE_FOLDER
    assert os.environ[BANDWIDTH_CACHE_ENV] == str(folder)
    calls = []

    def probe():
        calls.append(1)
        return probe_bandwidth(array_bytes=2**22, repeats=3)

    first = measured_bandwidth(probe=probe)  # chapter 1 of the build measures
    freshness._refresh_cache(app)  # a cached rebuild keeps the figure
    assert measured_bandwidth(probe=probe) == first and calls == [1]
    monkeypatch.setattr(freshness, "fingerprint", lambda: "second")
    freshness._refresh_cache(app)  # the package changed: every chapter runs again, and measures
    assert not folder.exists()
    measured_bandwidth(probe=probe)
    assert calls == [1, 1]
