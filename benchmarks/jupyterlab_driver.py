"""Drive the book's chapters in a real JupyterLab, in headless Chromium.

Used by ``benchmarks/explorers.py`` (redraw times) and ``tests/test_jupyterlab.py``.
A chapter is copied into a fresh folder first, so that JupyterLab's autosave cannot
touch the repository; JupyterLab serves that folder on a free port of 127.0.0.1 with
no token, jupytext opens the ``.md`` as a notebook, and Playwright drives the system
Chromium (as ``tests/test_site.py`` does).

A redraw is timed in the page, from the input event (``keydown`` on a slider's handle,
``change`` on a menu, caught before any handler runs) to the last change of the
explorer's chart (a MutationObserver on its SVG) before it stays still for
:data:`SETTLE_MS`: the moment the new picture is complete.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: How long a chart must stay unchanged for its redraw to count as finished.
SETTLE_MS = 400

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update"]

# Stamps the time of every input event in the capture phase, before a widget sees it.
_STAMP_INPUTS = """() => {
    window.__inputAt = 0;
    for (const type of ["keydown", "change", "input"]) {
        document.addEventListener(type, () => {
            if (!window.__inputAt) window.__inputAt = performance.now();
        }, true);
    }
}"""

_WATCH = """(element) => {
    window.__inputAt = 0;
    window.__changedAt = 0;
    window.__chart = element;
    window.__before = element.innerHTML;
    if (window.__observer) window.__observer.disconnect();
    window.__observer = new MutationObserver(() => { window.__changedAt = performance.now(); });
    window.__observer.observe(element, {subtree: true, childList: true, attributes: true,
                                        characterData: true});
}"""

_STATE = """() => [window.__inputAt, window.__changedAt, performance.now(),
                  window.__chart.innerHTML !== window.__before]"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Lab:
    """A JupyterLab server over a folder holding copies of chapters."""

    root: Path
    url: str
    process: subprocess.Popen

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}"


# User settings of the lab's own: a chapter's .md opens with jupytext's notebook view (the
# README's "Open With > Jupytext Notebook") in the kernel it names, and no dialog or news
# prompt covers the page.
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
        # Every cell in the page, so that an explorer far down is there to be found.
        '{"autoStartDefaultKernel": true, "windowingMode": "none"}',
    # No autosave: jupytext rewriting the file on disk would raise a "File Changed" dialog.
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings":
        '{"autosave": false, "defaultViewers": {"markdown": "Jupytext Notebook",'
        ' "myst": "Jupytext Notebook"}}',
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        '{"fetchNews": "false", "checkForUpdates": false}',
}


@contextlib.contextmanager
def lab(chapters: list[Path], timeout_s: float = 120):
    """A JupyterLab serving a fresh folder with copies of ``chapters``; stopped after."""
    folder = Path(tempfile.mkdtemp(prefix="inferlab-lab-"))
    for chapter in chapters:
        shutil.copy(chapter, folder / chapter.name)
    port = free_port()
    log = (folder / "jupyterlab.log").open("w")
    for name, text in SETTINGS.items():
        (folder / ".settings" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / ".settings" / name).write_text(text)
    # Settings and workspaces of its own, so a reader's JupyterLab setup cannot interfere.
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(folder / ".settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(folder / ".workspaces")}
    process = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
         # window.jupyterapp, so that a run is started by the lab's own command.
         "--LabApp.expose_app_in_browser=True",
         f"--ServerApp.root_dir={folder}", "--allow-root"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=2)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start; its log:\n"
                                       + (folder / "jupyterlab.log").read_text()) from None
                time.sleep(0.5)
        yield Lab(folder, url, process)
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # its kernels are in its session too
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def chromium(executable: str):
    """Playwright's Chromium from ``executable`` (the system one; no download)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_and_run(browser, server: Lab, chapter: str, expected: list[str],
                 timeout_s: float = 600):
    """Open ``chapter`` (a file name in the lab's folder) as a notebook, run every cell,
    and wait until the run is over and the explorers named ``expected`` are drawn.
    Returns the page and its console errors."""
    from playwright.sync_api import Error as PlaywrightError

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text)
            if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server.notebook_url(chapter))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    started = "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]" \
              ".some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))"
    for _ in range(3):
        # A dialog can open late on a busy machine (a kernel still being chosen or
        # restarted) and would swallow the run's command; clear it first.
        _clear_dialogs(page, server, chapter)
        _wait_for_kernel(page)
        _clear_dialogs(page, server, chapter)
        # The lab's own command rather than clicks on its menu, which a page still
        # settling can miss.
        # Not awaited: its promise settles only when the last cell has run.
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        try:
            page.wait_for_function(started, timeout=20_000)
            break
        except PlaywrightError:
            pass
    else:
        raise RuntimeError(f"{chapter}: Run All Cells did not start the run; "
                           f"{_lab_state(page, server)}")
    # The run is over when every code cell shows its execution count: "[*]" is pending,
    # "[ ]" not run yet.
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        waiting, failed = page.evaluate("""() => [
            [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
                .filter(p => /\\[[ *]\\]/.test(p.textContent)).length,
            [...document.querySelectorAll('.jp-OutputArea-output[data-mime-type='
                + '"application/vnd.jupyter.stderr"]')].map(e => e.textContent)]""")
        if failed:
            raise RuntimeError(f"{chapter}: a cell wrote to stderr or failed when run in "
                               f"JupyterLab:\n" + "\n".join(failed)[-3000:])
        if not waiting:
            break
        time.sleep(1)
    else:
        state = page.evaluate("""() => [document.querySelector('.jp-Dialog')?.textContent,
            document.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status,
            [...document.querySelectorAll('.jp-CodeCell')].find(c => /\\[[ *]\\]/.test(
                c.querySelector('.jp-InputPrompt').textContent))?.textContent.slice(0, 300)]""")
        raise RuntimeError(f"{chapter}: the notebook did not finish in {timeout_s} s "
                           f"(dialog, kernel, first cell not run: {state})")
    for name in expected:
        page.wait_for_selector(f".inferlab-explorer-{name} .vega-embed svg", timeout=60_000)
    page.evaluate(_STAMP_INPUTS)
    return page, errors


# Dialogs JupyterLab may raise on its own while a notebook opens, and the button that
# lets the run go on: the kernel the chapter names is the one preselected, and a kernel
# that restarted is idle again once acknowledged. Any other dialog fails the run, named.
_PASSING_DIALOGS = {"Select Kernel": "accept", "Kernel Restarting": "accept",
                    "Server Connection Error": "reject"}


def _clear_dialogs(page, server: Lab, chapter: str, wait_s: float = 30) -> None:
    """Answer the dialogs of :data:`_PASSING_DIALOGS`; wait ``wait_s`` for any other to
    close by itself, then raise with its text and the lab's log."""
    deadline = time.monotonic() + wait_s
    while True:
        dialog = page.locator(".jp-Dialog")
        if not dialog.count():
            return
        title = dialog.first.locator(".jp-Dialog-header").text_content(timeout=5_000) or ""
        button = _PASSING_DIALOGS.get(title.strip())
        if button is not None:
            dialog.first.locator(f".jp-Dialog-button.jp-mod-{button}").first.click(
                timeout=10_000)
        elif time.monotonic() > deadline:
            raise RuntimeError(f"{chapter}: a dialog covers the notebook; "
                               f"{_lab_state(page, server)}")
        time.sleep(0.5)


def _lab_state(page, server: Lab) -> str:
    """What a failed run left on the page, and the end of the lab's log."""
    dialog, kernel = page.evaluate("""() => [
        document.querySelector('.jp-Dialog')?.innerText,
        document.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status]""")
    log = (server.root / "jupyterlab.log").read_text(errors="replace")[-2000:]
    return f"dialog: {dialog!r}, kernel: {kernel!r}, the lab's log ends:\n{log}"


def _wait_for_kernel(page) -> None:
    # The notebook's own session, not the toolbar's indicator, which reads "idle" before
    # the kernel is connected: a run started then finds "Session has no kernel".
    page.wait_for_function(
        "() => { const k = window.jupyterapp?.shell.currentWidget?.sessionContext?.session"
        "?.kernel; return !!k && k.status === 'idle' && k.connectionStatus === 'connected'; }",
        timeout=120_000)


def explorers(page) -> list[str]:
    """The names of the live explorers shown in the notebook, in page order."""
    return page.evaluate("""() => [...document.querySelectorAll('.inferlab-explorer')]
        .map(e => [...e.classList].find(c => c.startsWith('inferlab-explorer-'))
                  .slice('inferlab-explorer-'.length))""")


def widget(page, name: str, label: str):
    """The ipywidget of explorer ``name`` whose label is ``label`` (the whole label)."""
    return page.locator(f".inferlab-explorer-{name}").locator(
        ".widget-dropdown, .widget-slider, .widget-textarea").filter(
        has=page.locator("label", has_text=re.compile(f"^{re.escape(label)}$"))).first


def enabled(page, name: str, label: str) -> bool:
    """Whether that control can be moved (an explorer greys out one that cannot change
    its figure)."""
    return not widget(page, name, label).evaluate(
        "w => !!(w.querySelector('select:disabled') || w.querySelector('[disabled]')"
        " || w.classList.contains('mod-disabled'))")


def options(page, name: str, label: str) -> list[str]:
    """The options of a menu."""
    return widget(page, name, label).locator("select").evaluate(
        "s => [...s.options].map(o => o.textContent)")


def choose(page, name: str, label: str, option: str) -> None:
    """Pick ``option`` in the menu labelled ``label``."""
    widget(page, name, label).locator("select").select_option(label=option)


def press(page, name: str, label: str, key: str) -> None:
    """Press ``key`` (ArrowRight, ArrowLeft) on the slider labelled ``label``: one step."""
    widget(page, name, label).locator(".noUi-handle").focus()
    page.keyboard.press(key)


def type_text(page, name: str, label: str, text: str) -> None:
    """Type ``text`` at the end of the text box labelled ``label``."""
    to_end(page, name, label)
    page.keyboard.type(text)


def to_end(page, name: str, label: str) -> None:
    """Put the cursor at the end of the text box labelled ``label``."""
    widget(page, name, label).locator("textarea").focus()
    page.keyboard.press("End")


def kernel_busy(server: Lab) -> bool:
    """Whether the lab's kernel is handling a message (a cell, or a widget's change)."""
    import json

    with urllib.request.urlopen(f"{server.url}/api/kernels", timeout=5) as response:
        return any(k["execution_state"] == "busy" for k in json.load(response))


def redraw_ms(page, name: str, move, timeout_s: float = 10, busy=None) -> float | None:
    """Run ``move()`` (an input to explorer ``name``) and return the milliseconds from its
    input event to the chart's last change, or ``None`` if the chart did not change.

    The chart is done once it has stayed still for :data:`SETTLE_MS`. With ``busy`` (a
    function saying whether the kernel is still computing, :func:`kernel_busy`), a
    chart still unchanged then counts as unchanged only once the kernel has been idle
    as long too: a simulation explorer computes for seconds before it redraws."""
    page.locator(f".inferlab-explorer-{name} .vega-embed").first.evaluate(_WATCH)
    move()
    idle_since = None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.05)
        started, changed, now, differs = page.evaluate(_STATE)
        if not started:
            continue
        computing = busy is not None and busy()
        idle_since = None if computing else (now if idle_since is None else idle_since)
        quiet = idle_since is not None and now - idle_since > SETTLE_MS
        if changed > started and now - changed > SETTLE_MS and (busy is None or quiet):
            return changed - started if differs else None
        if changed <= started and now - started > SETTLE_MS and (busy is None or quiet):
            return None
    raise RuntimeError(f"{name}: its chart was still changing after {timeout_s} s")


def svg(page, name: str) -> str:
    """The markup of explorer ``name``'s chart."""
    return page.locator(f".inferlab-explorer-{name} .vega-embed").first.evaluate(
        "e => e.innerHTML")
