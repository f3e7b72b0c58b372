"""The built site as a reader sees it: headless Chromium, network off.

The strict build (``built_book`` in conftest.py) is served from 127.0.0.1 and every
page in ``_toc.yml``, plus ``index.html`` and ``search.html``, is opened once. A page
passes if it loads with no console error, no uncaught exception, no failed request and
no request leaving the local server (anything else is aborted, as it would be offline).
The other tests read the same visits: math is typeset by the vendored MathJax with its
fonts served locally, every figure has a loaded image, and search finds results.

Chromium comes from the system (``CHROMIUM`` or ``chromium`` on the PATH); Playwright
only drives it, so no browser download is needed. Without one these tests are skipped.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin

import pytest
import yaml
from conftest import ROOT

pytestmark = pytest.mark.browser

TIMEOUT_MS = 15_000  # the longest any one wait may take; a healthy page needs far less
SEARCH_TERM = "token"  # appears on many pages of this book
# MyST role syntax that reached the page as text, e.g. {glue:text}`key` or {numref}`fig`.
RAW_ROLE = re.compile(r"\{[a-z][\w:-]*\}`")
META_REFRESH = re.compile(r'http-equiv="refresh"\s+content="\d+;\s*url=([^"]+)"', re.I)


def toc_pages(toc_file: Path = ROOT / "_toc.yml") -> list[str]:
    """Every page of the table of contents (root, parts, chapters and their sections,
    recursively) as html paths relative to the site root."""
    toc = yaml.safe_load(toc_file.read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            for key in ("parts", "chapters", "sections"):
                walk(entry.get(key))

    walk([{key: toc.get(key) for key in ("parts", "chapters", "sections")}])
    return [re.sub(r"\.(md|ipynb|rst)$", "", name) + ".html" for name in files]


PAGES = [*toc_pages(), "index.html", "search.html"]


# ---------------------------------------------------------------- serving the site


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a browser closing a connection early is not the site's fault


@dataclass(frozen=True)
class Site:
    root: Path  # the html folder
    base: str  # http://127.0.0.1:PORT

    def url(self, page: str) -> str:
        return f"{self.base}/{page}"

    def source(self, page: str) -> str:
        """The html file behind ``page`` as built ('' if there is none: the browser
        reports that as a 404)."""
        path = self.root / page.split("?")[0].split("#")[0]
        return path.read_text(encoding="utf-8") if path.is_file() else ""


def serve(root: Path):
    """Serve ``root`` on a free port of 127.0.0.1 from a daemon thread; returns the
    server (``server.server_address[1]`` is the port)."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = _QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="site").start()
    return server


@pytest.fixture(scope="session")
def site(built_book) -> Site:
    if built_book.returncode != 0:
        # An error, not a skip: a broken build must not leave the browser tests green.
        log = re.sub(r"\x1b\[[0-9;]*m", "", built_book.log)  # no terminal colours
        problems = [line for line in log.splitlines() if "IPKernelApp" not in line
                    and ("WARNING" in line or "ERROR" in line or "Error" in line)]
        pytest.fail("the book did not build, so there is no site to test; the full log is "
                    "in tests/test_build.py::test_book_builds_strictly_with_every_notebook_"
                    "executed. First problems:\n" + "\n".join(problems[:8]), pytrace=False)
    server = serve(built_book.html)
    yield Site(built_book.html, f"http://127.0.0.1:{server.server_address[1]}")
    server.shutdown()
    server.server_close()


# ------------------------------------------------------------------ visiting pages


@dataclass
class Visit:
    """What one page load did and showed."""

    url: str
    final_url: str = ""
    console_errors: list[str] = field(default_factory=list)
    console_warnings: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    external: dict[str, None] = field(default_factory=dict)  # requests that left 127.0.0.1
    failed: dict[str, str] = field(default_factory=dict)  # url: why (failed, 4xx or 5xx)
    responses: list[tuple[str, int, str]] = field(default_factory=list)  # url, status, type
    timeouts: list[str] = field(default_factory=list)
    has_math: bool = False
    math: dict = field(default_factory=dict)
    images: dict = field(default_factory=dict)
    raw_roles: list[str] = field(default_factory=list)
    search_results: int = 0

    def problems(self) -> list[str]:
        return ([f"console error: {text}" for text in self.console_errors]
                + [f"uncaught exception: {text}" for text in self.page_errors]
                + [f"external request (the site must work offline): {url}"
                   for url in self.external]
                + [f"failed request: {url} ({why})" for url, why in self.failed.items()]
                + [f"timed out: {text}" for text in self.timeouts])

    def report(self, problems: list[str]) -> str:
        lines = [f"{self.url}:", *(f"  - {p}" for p in problems)]
        if self.console_warnings:
            lines += ["  console warnings (for context, not failures):",
                      *(f"    {text}" for text in self.console_warnings)]
        return "\n".join(lines)


MATH_STATE = """() => {
    const math = [...document.querySelectorAll('.bd-article .math, main .math')];
    return {
        elements: math.length,
        containers: document.querySelectorAll('mjx-container').length,
        untypeset: math.filter(el => !el.querySelector('mjx-container'))
                       .map(el => el.textContent.trim().slice(0, 80)),
        raw_tex: math.map(el => el.innerText)
                     .filter(text => /\\\\[(\\[]|\\$\\$/.test(text))
                     .map(text => text.trim().slice(0, 80)),
        tex_errors: [...document.querySelectorAll('mjx-merror')]
                     .map(el => el.getAttribute('data-mjx-error') || el.textContent),
        broken_fonts: [...document.fonts].filter(f => f.status === 'error')
                          .map(f => f.family),
    };
}"""

IMAGES_STATE = """() => {
    const main = document.querySelector('main') || document.body;
    const describe = img => img.getAttribute('src') || img.outerHTML.slice(0, 120);
    const figures = [...main.querySelectorAll('figure')];
    const images = [...main.querySelectorAll('img')];
    return {
        figures: figures.length,
        images: images.length,
        empty_figures: figures.filter(f => !f.querySelector('img, svg, object, canvas'))
                              .map(f => f.id || f.textContent.trim().slice(0, 80)),
        broken: images.filter(img => !(img.complete && img.naturalWidth > 0))
                      .map(describe),
    };
}"""

RAW_ROLE_TEXT = """() => {
    const main = (document.querySelector('main') || document.body).cloneNode(true);
    main.querySelectorAll('pre, code, script, style').forEach(el => el.remove());
    return main.textContent;
}"""


def visit(browser, site: Site, page: str) -> Visit:
    """Open ``page`` in a fresh context with every non-local request aborted, wait until
    it has settled (load, MathJax, images, network idle) and record what happened."""
    from playwright.sync_api import Error as PlaywrightError

    record = Visit(site.url(page))
    local = site.base + "/"
    context = browser.new_context(service_workers="block")
    context.set_default_timeout(TIMEOUT_MS)

    def route(route):
        if route.request.url.startswith(local):
            route.continue_()
        else:
            route.abort("internetdisconnected")

    context.route("**/*", route)
    tab = context.new_page()

    def on_console(message):
        where = message.location.get("url", "")
        text = f"{message.text} ({where})" if where else message.text
        if message.type == "error":
            record.console_errors.append(text)
        elif message.type == "warning":
            record.console_warnings.append(text)

    def on_request(request):
        url = request.url
        if not (url.startswith(local) or url.startswith(("data:", "blob:"))):
            record.external[url] = None

    def on_request_failed(request):
        if request.url.startswith(local):  # external ones are reported as external
            record.failed.setdefault(request.url, str(request.failure))

    def on_response(response):
        record.responses.append((response.url, response.status,
                                 response.request.resource_type))
        if response.status >= 400:
            record.failed[response.url] = f"HTTP {response.status}"

    tab.on("console", on_console)
    tab.on("pageerror", lambda error: record.page_errors.append(str(error)))
    tab.on("request", on_request)
    tab.on("requestfailed", on_request_failed)
    tab.on("response", on_response)

    def wait(what: str, action):
        try:
            return action()
        except PlaywrightError as error:
            record.timeouts.append(f"{what}: {str(error).splitlines()[0]}")
            return None

    try:
        source = site.source(page)
        response = wait("loading the page", lambda: tab.goto(record.url, wait_until="load"))
        if response is not None and response.status >= 400:
            record.failed[record.url] = f"HTTP {response.status}"
        redirect = META_REFRESH.search(source)
        if redirect:  # index.html: a redirect to the root page, which is what gets checked
            target = urljoin(record.url, redirect.group(1))
            wait(f"the redirect to {target}", lambda: tab.wait_for_url(target))
            wait("loading the redirect", lambda: tab.wait_for_load_state("load"))
            source = site.source(target.removeprefix(local))
        record.has_math = 'class="math' in source
        if record.has_math:
            wait("MathJax to start", lambda: tab.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise"))
            wait("MathJax to typeset", lambda: tab.evaluate(
                "() => MathJax.startup.promise.then(() => document.fonts.ready)"
                ".then(() => true)"))
        # Images below the fold may be lazy; a reader scrolling would load them all.
        tab.evaluate("() => document.querySelectorAll('img').forEach(i => i.loading = 'eager')")
        wait("images to finish loading", lambda: tab.wait_for_function(
            "() => [...document.images].every(img => img.complete)"))
        if "?q=" in page:
            wait("search results", lambda: tab.wait_for_selector(
                "#search-results li, ul.search li", state="attached"))
            record.search_results = tab.locator("#search-results li, ul.search li").count()
        wait("the network to go idle", lambda: tab.wait_for_load_state("networkidle"))
        record.final_url = tab.url
        if record.has_math:
            record.math = tab.evaluate(MATH_STATE)
        record.images = tab.evaluate(IMAGES_STATE)
        record.raw_roles = RAW_ROLE.findall(tab.evaluate(RAW_ROLE_TEXT))
    finally:
        context.close()
    return record


@pytest.fixture(scope="session")
def visits(browser, site):
    """Each page is visited once per session, by whichever test asks for it first."""
    cache: dict[str, Visit] = {}

    def get(page: str) -> Visit:
        if page not in cache:
            cache[page] = visit(browser, site, page)
        return cache[page]

    return get


# ------------------------------------------------------------------------ the tests


@pytest.mark.parametrize("page", PAGES)
def test_page_loads_offline_without_errors(visits, page):
    record = visits(page)
    assert not record.problems(), record.report(record.problems())


def test_math_is_typeset_with_local_fonts(visits, site):
    with_math = [record for record in map(visits, PAGES) if record.has_math]
    assert with_math, ("no page of the book contains math (class=\"math\"), so MathJax "
                       "is untested; the introduction is expected to have some")
    failures = []
    for record in with_math:
        math, problems = record.math, []
        if not math:
            problems.append("MathJax did not run (see the time-outs below)")
        else:
            if math["containers"] == 0:
                problems.append(f"{math['elements']} math elements but no mjx-container")
            problems += [f"not typeset: {text}" for text in math["untypeset"]]
            problems += [f"raw TeX visible: {text}" for text in math["raw_tex"]]
            problems += [f"TeX error: {text}" for text in math["tex_errors"]]
            problems += [f"font failed to load: {family}" for family in math["broken_fonts"]]
        fonts = [url for url, status, kind in record.responses
                 if kind == "font" and status == 200
                 and url.startswith(f"{site.base}/_static/mathjax/")]
        if not fonts:
            problems.append("no MathJax font (woff) was loaded from _static/mathjax/")
        problems += [f"timed out: {text}" for text in record.timeouts]
        if problems:
            failures.append(record.report(problems))
    assert not failures, "\n".join(failures)


def test_every_figure_has_a_loaded_image(visits):
    failures = []
    for record in map(visits, PAGES):
        problems = [f"figure without an image: {name}"
                    for name in record.images.get("empty_figures", [])]
        problems += [f"image did not load: {src}" for src in record.images.get("broken", [])]
        if problems:
            failures.append(record.report(problems))
    assert not failures, "\n".join(failures)


def test_no_raw_myst_roles_in_page_text(visits):
    failures = [record.report([f"raw role text: {text}" for text in record.raw_roles])
                for record in map(visits, PAGES) if record.raw_roles]
    assert not failures, "\n".join(failures)


def test_search_finds_results(visits):
    record = visits(f"search.html?q={SEARCH_TERM}")
    problems = [f"timed out: {text}" for text in record.timeouts]
    if record.search_results == 0:
        problems.append(f"searching for {SEARCH_TERM!r} listed no results")
    assert not problems, record.report(problems)


# ------------------------------------------------------------------- the explorers

def _explorer_names() -> list[str]:
    from inferlab.pages.explorers import registered_explorers

    chapters = {page.removesuffix(".html") for page in PAGES}
    return sorted(name for name, explorer in registered_explorers().items()
                  if f"book/{explorer.chapter}" in chapters)


# Moves one input of an explorer and resolves with whether the chart's SVG changed. A
# range steps to its next value (or back, at the end); a menu tries each other option in
# turn, since neighbours can draw the same picture (fp16 and bf16 weigh the same).
MOVE_INPUT = """async ([explorer, param]) => {
    const root = document.querySelector(`.inferlab-explorer[data-explorer="${explorer}"]`);
    const chart = () => root.querySelector('.inferlab-explorer-view svg').outerHTML;
    const input = root.querySelector(`[name="${param}"]`);
    const settle = async (before) => {
        for (let i = 0; i < 40; i++) {
            await new Promise(r => setTimeout(r, 50));
            if (chart() !== before) return true;
        }
        return false;
    };
    const set = async (value) => {
        const before = chart();
        input.value = value;
        input.dispatchEvent(new Event('input', {bubbles: true}));
        input.dispatchEvent(new Event('change', {bubbles: true}));
        return settle(before);
    };
    if (input.tagName === 'SELECT') {
        const start = input.selectedIndex;
        for (let k = 1; k < input.options.length; k++) {
            if (await set(input.options[(start + k) % input.options.length].value)) {
                return true;
            }
        }
        return false;
    }
    const step = +input.step, value = +input.value;
    return set(value + step <= +input.max ? value + step : value - step);
}"""


@pytest.mark.parametrize("name", _explorer_names())
def test_every_input_of_an_explorer_moves_its_figure_offline(browser, site, name):
    """On the built page, with every request leaving the site aborted: the explorer draws,
    and each of its inputs, moved, changes its figure (a greyed-out input once the menu
    that switches it on has chosen so), with no console error. An input the site fixes
    at one value (``fixed_on_site``) is disabled instead; the notebook moves it, and
    tests/test_explorers.py checks that moving it there changes the figure."""
    from inferlab.pages.explorers import registered_explorers

    explorer = registered_explorers()[name]
    page = f"book/{explorer.chapter}.html"
    assert f'data-explorer="{name}"' in site.source(page), f"{page} shows no {name}"
    local, external, errors = site.base + "/", [], []
    context = browser.new_context(service_workers="block")
    context.set_default_timeout(TIMEOUT_MS)
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(
        local) else (external.append(route.request.url), route.abort("internetdisconnected")))
    tab = context.new_page()
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda error: errors.append(str(error)))
    try:
        tab.goto(site.url(page), wait_until="load")
        # An explorer is drawn when it comes near the window (book/_static/explorers.js).
        tab.locator(f'.inferlab-explorer[data-explorer="{name}"]').scroll_into_view_if_needed()
        tab.wait_for_selector(f'.inferlab-explorer[data-explorer="{name}"] .vega-bindings',
                              state="attached")
        spec = json.loads(tab.locator(f'.inferlab-explorer[data-explorer="{name}"] '
                                      "script.inferlab-explorer-spec").text_content())
        switches, fixed = spec["usermeta"]["only_when"], spec["usermeta"]["fixed"]
        unmoved, movable = [], []
        for param in (p["name"] for p in spec["params"] if "bind" in p):
            if param in fixed:  # one value on the site: shown, but it cannot move
                if not tab.locator(f'.inferlab-explorer[data-explorer="{name}"] '
                                   f'[name="{param}"]').is_disabled():
                    movable.append(param)
                continue
            if param in switches:  # choose what turns it on first
                other, value = switches[param]
                tab.locator(f'.inferlab-explorer[data-explorer="{name}"] '
                            f'[name="{other}"]').select_option(index=value)
            if not tab.evaluate(MOVE_INPUT, [name, param]):
                unmoved.append(param)
    finally:
        context.close()
    assert not unmoved, f"{name}: moving {unmoved} left the figure as it was"
    assert not movable, f"{name}: {movable} have one value on the site but are not disabled"
    assert not errors, f"{name}: console errors {errors}"
    assert not external, f"{name}: requests left the site: {external}"
