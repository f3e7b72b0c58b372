"""Shared fixtures: the strict executed build of the whole book, run once per test session."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import live_tools
import pytest
import yaml

from inferlab.common import memo
from inferlab.lab.machine import BANDWIDTH_CACHE_ENV

ROOT = Path(__file__).resolve().parent.parent
#: The book's remembered predictions (book/_ext/freshness.py points its builds there).
RESULTS_STORE = Path("book") / "_computed"

# jupyter-book's CLI module has no __main__ guard, so "-m" would silently do nothing.
# Its CLI has no option for Sphinx's worker processes either, so the command hands its
# build function two (book/_ext/parallel.py says why the book can be read in parallel):
# reading a chapter executes it, and two chapters then run at once on a two-core machine.
BUILD_JOBS = 2
JUPYTER_BOOK = [sys.executable, "-c",
                "import functools, jupyter_book.sphinx as s; "
                f"s.build_sphinx = functools.partial(s.build_sphinx, jobs={BUILD_JOBS}); "
                "from jupyter_book.cli.main import main; main()"]

# The README's build command with the strict flags: warnings are errors (-W), every
# cross-reference must resolve (-n), and all problems are reported before failing.
STRICT_FLAGS = ["-W", "-n", "--keep-going"]

# The jupytext header that makes a MyST Markdown file a notebook (for one-page test books).
MYST_HEADER = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""


@dataclass(frozen=True)
class Build:
    returncode: int
    log: str
    html: Path
    results_misses: Path | None = None


def _build_command(source: Path, output: Path) -> list[str]:
    return [*JUPYTER_BOOK, "build", str(source), "--path-output", str(output), *STRICT_FLAGS]


def build_book(source: Path, output: Path) -> Build:
    """Run ``jupyter-book build`` strictly on ``source`` into ``output`` (a fresh folder,
    so every notebook executes: nothing can come from a stale cache)."""
    completed = subprocess.run(_build_command(source, output), capture_output=True,
                               text=True, cwd=source)
    return Build(completed.returncode, with_failed_cells(completed.stdout + completed.stderr),
                 output / "_build" / "html")


def with_failed_cells(log: str) -> str:
    """The build's log with each failed notebook's cell traceback repeated at its end.

    myst-nb logs the traceback (``execute.show_tb`` in ``_config.yml``) where the notebook
    failed, and the log goes on past it (Sphinx's own traceback, other pages): a failure
    that quotes the log's end would lose the cause."""
    for failure in log.split("Executing notebook failed")[1:]:
        cell = re.sub(r"\x1b\[[0-9;]*m", "", failure).split("[mystnb.exec]")[0]
        log += f"\n--- the failed cell, as logged above ---\n{cell[-2500:]}"
    return log


def write_one_page_book(source: Path, page_text: str, *, page: str = "page",
                        config: dict | None = None) -> Path:
    """Write a book of one page into ``source`` that uses the real book's configuration
    (or ``config``, a changed copy of it), extensions, static files and bibliography."""
    (source / "book").mkdir(parents=True)
    if config is None:
        shutil.copy(ROOT / "_config.yml", source / "_config.yml")
    else:
        (source / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    shutil.copytree(ROOT / "book" / "_ext", source / "book" / "_ext")
    shutil.copytree(ROOT / "book" / "_static", source / "book" / "_static")
    shutil.copy(ROOT / "book" / "references.bib", source / "book" / "references.bib")
    (source / "_toc.yml").write_text(f"format: jb-book\nroot: book/{page}\n")
    (source / "book" / f"{page}.md").write_text(page_text)
    return source


#: Where the session's build lists the predictions it found no stored answer for.
RESULTS_MISSES = "results-misses.txt"


def start_book_build(source: Path, output: Path) -> subprocess.Popen:
    """Start :func:`build_book`'s command in the background, its output going to
    ``output/build.log`` (a file, so that a long log cannot fill a pipe and stall it).

    The pages' predictions are recomputed, every one, and checked against the answers
    remembered in ``book/_computed`` (:mod:`inferlab.common.memo`'s check mode); one it
    finds none for is stored there and listed in ``output/results-misses.txt``."""
    output.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, memo.FOLDER_ENV: str(source / RESULTS_STORE), memo.MODE_ENV: "check",
           memo.MISSES_ENV: str(output / RESULTS_MISSES)}
    # The child writes through its own copy of the file; this process closes its copy.
    with (output / "build.log").open("w", encoding="utf-8") as log:
        # A session of its own, so that stopping it stops the notebook kernels it started.
        return subprocess.Popen(_build_command(source, output), stdout=log,
                                stderr=subprocess.STDOUT, text=True, cwd=source,
                                start_new_session=True, env=env)


# The whole book takes minutes to build, one notebook at a time on one core. When the
# session holds tests that need it, the build starts as soon as the tests are collected
# and those tests run last, so the other tests use the second core meanwhile.
_BACKGROUND: dict[str, object] = {}
_BACKGROUND_LOCK = threading.Lock()


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected what will not run
def pytest_collection_modifyitems(session, config, items):
    start_tool_installs(items)
    needs = [item for item in items if "built_book" in getattr(item, "fixturenames", ())]
    if not needs:
        return
    items[:] = [item for item in items if item not in needs] + needs
    output = Path(tempfile.mkdtemp(prefix="inferlab-book-"))
    _BACKGROUND.update(output=output, process=start_book_build(ROOT, output),
                       started=time.perf_counter())
    # The tests that run a chapter (JupyterLab's, the exported notebooks') read the
    # bandwidth the build measures, as a reader's second chapter reads the first one's:
    # on the CI machine a measurement is half a minute of faulting in 4 GiB, and one is
    # enough. Whichever asks first measures; the other waits on its lock and reads it.
    os.environ.setdefault(BANDWIDTH_CACHE_ENV, str(output / "_build" / _build_machine_folder()))
    if any("decks" in getattr(item, "fixturenames", ()) for item in needs):
        # The decks are built from the book's executed notebooks, once it is done, on the
        # core its build frees while the other tests still run.
        thread = threading.Thread(target=_build_decks_after_the_book, args=(output,),
                                  daemon=True)
        _BACKGROUND["decks_thread"] = thread
        thread.start()


def _build_machine_folder() -> str:
    """The folder, beside a build's notebook cache, where the build keeps its bandwidth
    measurement (``book/_ext/freshness.py``, loaded by its path: ``book/_ext`` on
    ``sys.path`` would let its modules shadow others of the same name)."""
    spec = importlib.util.spec_from_file_location(
        "inferlab_book_freshness", ROOT / "book" / "_ext" / "freshness.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MACHINE_FOLDER


def _build_decks_after_the_book(output: Path) -> None:
    if _BACKGROUND["process"].wait() != 0:
        return
    with _BACKGROUND_LOCK:
        if _BACKGROUND.get("stopping"):
            return
        start = time.perf_counter()
        with (output / "decks.log").open("w", encoding="utf-8") as log:
            process = subprocess.Popen(
                [sys.executable, str(ROOT / "scripts" / "build_slides.py"), "--out",
                 str(output / "decks"), "--cache", str(output / "_build" / ".jupyter_cache")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                start_new_session=True)
        _BACKGROUND["decks_process"] = process
    process.wait()
    _BACKGROUND["decks_seconds"] = time.perf_counter() - start


def background_decks() -> tuple[int, str, Path, float] | None:
    """The decks built in the background after the session's book build, as
    ``(returncode, log, folder, seconds)``, once done; ``None`` if this session did not
    start them (the caller builds them itself then)."""
    thread = _BACKGROUND.get("decks_thread")
    if thread is None:
        return None
    thread.join()
    process = _BACKGROUND.get("decks_process")
    if process is None:  # the book's build failed, so no decks were built
        return None
    output = _BACKGROUND["output"]
    log = (output / "decks.log").read_text(encoding="utf-8")
    return process.returncode, log, output / "decks", _BACKGROUND["decks_seconds"]


def pytest_terminal_summary(terminalreporter):
    # Where CI's time goes: the build runs beside the other tests, and the book's tests
    # wait for it; the wait is the part of the build that the other tests did not cover.
    if "build_s" in _BACKGROUND:
        terminalreporter.write_line(
            f"book build: {_BACKGROUND['build_s']:.0f} s in the background; the book's "
            f"tests waited {_BACKGROUND['waited_s']:.0f} s for it")
        slowest = ", ".join(f"{page} {seconds:.0f} s" for seconds, page in
                            _BACKGROUND.get("pages_s", [])[:6])
        terminalreporter.write_line(f"slowest pages to execute: {slowest}")


def pytest_sessionfinish(session, exitstatus):
    with _BACKGROUND_LOCK:
        _BACKGROUND["stopping"] = True
    for name in ("process", "decks_process"):
        process = _BACKGROUND.get(name)
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # an interrupted session leaves nothing
            process.wait()
    if "output" in _BACKGROUND:
        shutil.rmtree(_BACKGROUND["output"], ignore_errors=True)
    for process in _INSTALLS.values():
        if process.poll() is None:  # a half-made environment is redone next time
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    if "logs" in _TOOL_LOGS:
        shutil.rmtree(_TOOL_LOGS["logs"], ignore_errors=True)


@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> Build:
    if "process" not in _BACKGROUND:  # collected some other way: build here and now
        return build_book(ROOT, tmp_path_factory.mktemp("book"))
    output, process = _BACKGROUND["output"], _BACKGROUND["process"]
    waited = time.perf_counter()
    returncode = process.wait()
    now = time.perf_counter()
    _BACKGROUND.update(build_s=now - _BACKGROUND["started"], waited_s=now - waited)
    log = with_failed_cells((output / "build.log").read_text(encoding="utf-8"))
    _BACKGROUND["pages_s"] = sorted(
        ((float(seconds), Path(page).stem) for page, seconds in
         re.findall(r"(\S+\.md): Executed notebook in ([0-9.]+) seconds", log)), reverse=True)
    return Build(returncode, log, output / "_build" / "html", output / RESULTS_MISSES)



# The real benchmark tools of the live tests (tests/test_live_clients.py), each in a virtual
# environment of its own in a cache outside the repository (tests/live_tools.py). A test
# asks for one by a fixture (aiperf_tool, guidellm_tool). When such tests are collected and
# a tool's environment is not made yet, its install starts at once in the background: it
# waits on the network and the disk, so it overlaps the rest of the suite, and those tests
# run after the others (but before the book's, which wait for the whole build).
TOOL_FIXTURES = {f"{name}_tool": name for name in live_tools.TOOLS}


def pytest_configure(config):
    config.addinivalue_line("markers", "live: runs a real benchmark tool against the lab "
                                       "server (installs it once, outside the repository)")
_INSTALLS: dict[str, subprocess.Popen] = {}
_TOOL_LOGS: dict[str, Path] = {}


def start_tool_installs(items) -> None:
    uses = {item: {TOOL_FIXTURES[name] for name in getattr(item, "fixturenames", ())
                   if name in TOOL_FIXTURES} for item in items}
    live = [item for item in items if uses[item]]
    items[:] = [item for item in items if not uses[item]] + live
    for name in sorted(set().union(*uses.values())):
        if not live_tools.TOOLS[name].ready():
            _INSTALLS[name] = _start_install(name)


def _start_install(name: str) -> subprocess.Popen:
    if "logs" not in _TOOL_LOGS:
        _TOOL_LOGS["logs"] = Path(tempfile.mkdtemp(prefix="inferlab-tools-"))
    with (_TOOL_LOGS["logs"] / f"{name}.log").open("w", encoding="utf-8") as log:
        # A session of its own, so that stopping it stops pip too; niced, so that the
        # tests running meanwhile keep the cores.
        return subprocess.Popen(["nice", "-n", "10", sys.executable,
                                 str(ROOT / "tests" / "live_tools.py"), name], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def ready_tool(name: str) -> live_tools.Tool:
    """The tool's finished environment, after waiting for its background install; skips
    (or, with INFERLAB_REQUIRE_LIVE_TOOLS set, as in CI, fails) when it cannot be had."""
    tool = live_tools.TOOLS[name]
    if not tool.ready() and name not in _INSTALLS:  # collected some other way
        _INSTALLS[name] = _start_install(name)
    process = _INSTALLS.get(name)
    verdict = ""
    if process is not None:
        try:
            process.wait(timeout=live_tools.INSTALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            verdict = f" (it did not finish in {live_tools.INSTALL_TIMEOUT_S} s)"
    if tool.ready():
        return tool
    log = _TOOL_LOGS["logs"] / f"{name}.log"
    output = log.read_text(encoding="utf-8", errors="replace")[-3000:]
    message = (
        f"{name} {tool.version} could not be installed{verdict}, so its live test against "
        f"the lab server cannot run. The install (pip install --no-deps -r "
        f"tests/tools/{name}.txt into a virtual environment at {tool.home}) needs PyPI "
        f"once; the environment is reused afterwards. To enable it, run `python "
        f"tests/live_tools.py {name}` where PyPI can be reached, then the tests. "
        f"{live_tools.REQUIRE_ENV}=1 (set by .ci/run) makes this a failure instead of a "
        f"skip. The install's output ends:\n{output}")
    if os.environ.get(live_tools.REQUIRE_ENV):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def aiperf_tool() -> live_tools.Tool:
    return ready_tool("aiperf")


@pytest.fixture(scope="session")
def guidellm_tool() -> live_tools.Tool:
    return ready_tool("guidellm")


def import_statements(path: Path) -> list[tuple[str, str | None]]:
    """Every absolute import in the Python file ``path``, at its top or inside a function,
    as ``(module, name)``: ``import a.b`` is ``("a.b", None)`` and ``from a import b`` is
    ``("a", "b")``, where ``b`` may be a module of ``a`` or a name defined in it (the
    caller, which knows the tree, tells which). The package has no relative imports.

    Read by the layer test (the arrows between inferlab's modules) and the wheel test
    (the third-party modules each one needs)."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.extend((node.module, alias.name) for alias in node.names)
    return found


def glued(build: Build, chapter: str) -> dict[str, object]:
    """Every value that page ``book/<chapter>`` glued in ``build``, by key.

    myst-nb takes the glued outputs out of the executed notebook and writes them to
    ``jupyter_execute/book/<chapter>.glue.json`` beside the site, each as the value's
    ``text/plain`` form. A Python literal (number, string, tuple, list, dict) comes back
    as that value, so a float is exact; anything else comes back as its text."""
    path = build.html.parent / "jupyter_execute" / "book" / f"{chapter}.glue.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: page {chapter!r} glued nothing, or the build did "
                                f"not execute it; the build log ends:\n{build.log[-3000:]}")
    values = {}
    for key, output in json.loads(path.read_text(encoding="utf-8")).items():
        text = output["data"]["text/plain"]
        try:
            values[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            values[key] = text
    return values


# The browser: one Playwright-driven system Chromium for the whole session. Playwright's
# sync API runs an event loop in this thread, so every browser test must share this one.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
NO_CHROMIUM = ("no Chromium found, so the browser tests are skipped; install Debian's "
               "chromium: sudo apt-get install chromium (or set the CHROMIUM environment "
               "variable to a Chromium or Chrome binary)")
NO_PLAYWRIGHT = ("Playwright is not installed, so the browser tests are skipped: "
                 "pip install -r requirements.txt (or pip install playwright); it drives "
                 "the system Chromium, so `playwright install` is not needed")

def find_chromium() -> str | None:
    candidates = [os.environ.get("CHROMIUM")]
    candidates += [shutil.which(name) for name in
                   ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")]
    return next((path for path in candidates if path and Path(path).is_file()), None)


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(NO_PLAYWRIGHT)
    executable = find_chromium()
    if executable is None:
        pytest.skip(NO_CHROMIUM)
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
    except Exception:
        playwright.stop()
        raise
    yield chromium
    chromium.close()
    playwright.stop()
