"""Keep cached notebook outputs honest when the package or the data change.

jupyter-cache keys each notebook on its code cells only, so after an edit to
``inferlab/`` or ``data/`` a cached build would serve figures computed by the
old code. This extension fingerprints both folders; when the fingerprint
differs from the one stored beside the cache, it empties the cache and asks
Sphinx to re-read every page, so every notebook executes afresh.

The bandwidth every chapter's floor divides by is measured once per build: the
extension points :func:`inferlab.lab.machine.measured_bandwidth` (through
``$INFERLAB_BANDWIDTH_CACHE``, inherited by the notebook kernels) at a folder
beside the cache and empties it with the cache, so cached and re-executed
chapters quote one figure and a fresh build measures afresh.

The predictions the pages make (minutes of simulation, the same every build) are
remembered in ``book/_computed/`` (:mod:`inferlab.common.memo`, through
``$INFERLAB_RESULTS``), under keys that change with any edit of the model's code or
tables: a build in a fresh folder still takes them from there.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from inferlab.common import memo
from inferlab.lab.machine import BANDWIDTH_CACHE_ENV

STAMP = "inferlab-and-data.sha256"
#: The folder, beside the notebook cache, that holds the build's bandwidth measurement.
MACHINE_FOLDER = "inferlab-machine"
#: Where the pages' predictions are remembered (inferlab.common.memo), in the book's sources.
RESULTS_FOLDER = Path("book") / "_computed"


def fingerprint() -> str:
    """sha256 over the path and bytes of every file of ``inferlab/`` and ``data/``."""
    return memo.fingerprint()


def _refresh_cache(app) -> None:
    cache = Path(app.env.mystnb_config.execution_cache_path)
    stamp = cache.parent / STAMP
    current = fingerprint()
    app.env.inferlab_stale = not stamp.is_file() or stamp.read_text() != current
    machine = cache.parent / MACHINE_FOLDER
    if app.env.inferlab_stale:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(machine, ignore_errors=True)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(current)
    os.environ[BANDWIDTH_CACHE_ENV] = str(machine)
    # The kernels inherit it; a build started with its own setting (the tests' check
    # mode, or none) keeps that one.
    os.environ.setdefault(memo.FOLDER_ENV, str(Path(app.srcdir) / RESULTS_FOLDER))


def _outdated(app, env, added, changed, removed):
    return sorted(env.found_docs) if getattr(env, "inferlab_stale", False) else []


def setup(app):
    # After myst-nb's own builder-inited handler (priority 500) has set the cache path.
    app.connect("builder-inited", _refresh_cache, priority=900)
    app.connect("env-get-outdated", _outdated)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
