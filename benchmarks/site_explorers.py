"""Time an explorer's redraw on the built static site, as a reader of the page meets it.

    python benchmarks/site_explorers.py hw_plan [--site _build/html] [--moves 8]

Opens the explorer's chapter page of a built site (``jupyter-book build .``, or one
chapter's ``scripts/build_chapter.py`` output: ``--site OUT/_build/html``) in headless
Chromium (the system one) over a local HTTP server, scrolls to the explorer so it draws,
then moves each input the site lets move ``--moves`` times: a slider to its next value
(or back at its end), a menu to its next option. Each redraw is timed in the page, from
the input event to the chart's SVG last changing (a ``MutationObserver`` on the view,
so the figure is the browser's own, not a polling interval's). A move that leaves the figure as
it was is not counted. Printed:

    explorer=NAME control=PARAM median_ms=X max_ms=Y moves=N
    explorer=NAME median_ms=X moves=N

On the site every value was computed when the book was built, so a redraw is a lookup
and Vega's re-render; the notebook's live redraw, which runs the function, is timed by
``benchmarks/explorers.py``.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import shutil
import statistics
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Moves one input and resolves with the milliseconds from the input event to the chart's
# SVG last changing, or null if it did not change.
TIMED_MOVE = """async ([explorer, param, k]) => {
    const root = document.querySelector(`.inferlab-explorer[data-explorer="${explorer}"]`);
    const view = root.querySelector('.inferlab-explorer-view');
    const input = root.querySelector(`[name="${param}"]`);
    const before = view.querySelector('svg').outerHTML;
    let value;
    if (input.tagName === 'SELECT') {
        value = input.options[(input.selectedIndex + 1) % input.options.length].value;
    } else {
        const step = +input.step, now = +input.value;
        value = (k % 2 === 0 && now + step <= +input.max) || now - step < +input.min
            ? now + step : now - step;
    }
    // The redraw ends at the chart's last change: wait for 300 ms without one.
    return await new Promise(resolve => {
        let start, last = null, quiet;
        const finish = () => {
            observer.disconnect();
            resolve(last === null ? null : last - start);
        };
        const changed = () => {
            const svg = view.querySelector('svg');
            if (svg && svg.outerHTML !== before) last = performance.now();
            clearTimeout(quiet);
            quiet = setTimeout(finish, 300);
        };
        const observer = new MutationObserver(changed);
        observer.observe(view, {subtree: true, childList: true, attributes: true,
                                characterData: true});
        quiet = setTimeout(finish, 2000);
        start = performance.now();
        input.value = value;
        input.dispatchEvent(new Event('input', {bubbles: true}));
        input.dispatchEvent(new Event('change', {bubbles: true}));
    });
}"""


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:  # one line a file would bury the figures
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("explorer", help="an explorer's name, e.g. hw_plan")
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--moves", type=int, default=8)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from inferlab.pages.explorers import registered_explorers

    explorers = registered_explorers()
    if args.explorer not in explorers:
        parser.error(f"explorer: {args.explorer!r}; give one of {', '.join(sorted(explorers))}")
    page_path = f"book/{explorers[args.explorer].chapter}.html"
    if not (args.site / page_path).is_file():
        parser.error(f"site: no {page_path} under {args.site}; build the book first")
    if args.moves < 1:
        parser.error("moves: give at least 1")
    chromium = shutil.which("chromium")
    if chromium is None:
        parser.error("chromium: none on PATH (Debian: apt-get install chromium)")
    server, base = serve(args.site)
    selector = f'.inferlab-explorer[data-explorer="{args.explorer}"]'
    every = []
    try:
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=chromium)
            tab = browser.new_page()
            tab.goto(f"{base}/{page_path}", wait_until="load")
            tab.locator(selector).scroll_into_view_if_needed()
            tab.wait_for_selector(f"{selector} .vega-bindings", state="attached")
            spec = json.loads(tab.locator(f"{selector} script.inferlab-explorer-spec")
                              .text_content())
            fixed = set(spec["usermeta"]["fixed"])
            for param in (p["name"] for p in spec["params"] if "bind" in p):
                if param in fixed:
                    continue
                times = [ms for k in range(args.moves)
                         if (ms := tab.evaluate(TIMED_MOVE, [args.explorer, param, k]))
                         is not None]
                every.extend(times)
                if times:
                    print(f"explorer={args.explorer} control={param} "
                          f"median_ms={statistics.median(times):.1f} "
                          f"max_ms={max(times):.1f} moves={len(times)}")
            browser.close()
    finally:
        server.shutdown()
    if not every:
        print(f"explorer={args.explorer}: no move changed the figure", file=sys.stderr)
        return 1
    print(f"explorer={args.explorer} median_ms={statistics.median(every):.1f} "
          f"moves={len(every)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
