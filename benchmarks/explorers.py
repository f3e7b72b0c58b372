"""Time every explorer's redraw in JupyterLab, and weigh each built page's explorer data.

    python benchmarks/explorers.py [book/02_bandwidth_floor.md ...] [--moves 8]
                                   [--site _build/html]

For each chapter (by default every chapter with an explorer registered in
``inferlab.pages.explorers``) it starts JupyterLab on a free port, opens a copy of the chapter
as a notebook in headless Chromium (the system one), runs every cell, then moves each
control of each explorer ``--moves`` times: a slider one step right and back, a menu to
its next option (a move that leaves the figure as it was, say between fp8 and int8,
which weigh the same, is not counted), a text box one more key (of the word " more").
A control that applies only while another has some value (``only_when``) is moved with
that value chosen. Each redraw is timed from the input event to the chart's last change
(``benchmarks/jupyterlab_driver.py``). Printed:

    explorer=NAME kind=K median_ms=X moves=N first_ms=F [walk_ms=W]
      control="LABEL" median_ms=X moves=N first_ms=F [walk_median_ms=W walk_moves=M]

``first_ms`` is the median over controls of each one's first move, to a value the
kernel has not computed before: a simulation explorer remembers the values it has run
and, after a move, computes the neighbouring ones in the background
(``inferlab.pages.explorers.prefetch``), so its later moves back and forth are lookups. For
such an explorer each slider also walks ``--moves`` steps in one direction, each to a
value never shown, waiting for the chart to settle in between: ``walk_ms`` (per control,
``walk_median_ms``) is what a reader stepping along it meets. A control the site fixes
(``fixed_on_site``) is moved like any other: the notebook moves it.

and, for each chapter page of the built site (``--site``, a ``jupyter-book build``'s
``_build/html``), the bytes of explorer data it carries and of the script that draws it:

    page=book/NAME.html explorer_data_bytes=B explorers=N vega_bundle_bytes=V

Analytic explorers should redraw within 100 ms (issue 16); the data of a page must stay
under 2 MB, which the build itself enforces.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import jupyterlab_driver as lab  # noqa: E402

from inferlab.pages.explorers import Choice, Text, registered_explorers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: What is typed into a text box, one key a move: a word more at a time.
_TYPED = " more"
_SIZE = re.compile(r'class="inferlab-explorer" data-explorer="[^"]+" data-bytes="(\d+)"')


def control_moves(page, name: str, control, moves: int, busy) -> list[float]:
    """Redraw times of ``moves`` moves of one control that changed the chart; a move
    counts as one that changed nothing only once the kernel is idle (``busy``), since a
    simulation explorer computes for seconds first."""
    times: list[float] = []
    wait = {"busy": busy, "timeout_s": 60}
    if isinstance(control, Text):
        # One keystroke a move, as a slider's move is one step: the text box sends its
        # value on every key. The cursor goes to the end first, untimed.
        lab.to_end(page, name, control.label)
        for step in range(3 * moves):
            key = _TYPED[step % len(_TYPED)]
            ms = lab.redraw_ms(page, name, lambda k=key: page.keyboard.type(k), **wait)
            if ms is not None:
                times.append(ms)
            if len(times) == moves:
                break
        return times
    if isinstance(control, Choice):
        offered = lab.options(page, name, control.label)
        current = offered.index(str(control.default)) if str(control.default) in offered else 0
        for step in range(1, 3 * moves + 1):
            option = offered[(current + step) % len(offered)]
            ms = lab.redraw_ms(page, name, lambda o=option: lab.choose(page, name,
                                                                       control.label, o),
                               **wait)
            if ms is not None:
                times.append(ms)
            if len(times) == moves:
                break
        lab.choose(page, name, control.label, str(control.default))
        return times
    keys = ["ArrowRight", "ArrowLeft"]
    for attempt in range(2 * moves):
        key = keys[attempt % 2]
        ms = lab.redraw_ms(page, name, lambda k=key: lab.press(page, name, control.label, k),
                           **wait)
        if ms is None and attempt == 0:
            keys.reverse()  # at the end of its range: step the other way first
            continue
        if ms is not None:
            times.append(ms)
        if len(times) == moves:
            break
    return times


def walk_moves(page, name: str, control, moves: int, busy) -> list[float]:
    """Redraw times of ``moves`` steps of a slider in one direction, each to a value not
    shown before: what a simulation explorer's prefetch (``inferlab.pages.explorers.prefetch``)
    is for. Each step waits for the chart to settle, as a reader pausing on it would."""
    times: list[float] = []
    key = "ArrowRight"
    for attempt in range(moves + 1):
        ms = lab.redraw_ms(page, name, lambda k=key: lab.press(page, name, control.label, k),
                           busy=busy, timeout_s=60)
        if ms is None and attempt == 0:
            key = "ArrowLeft"  # at the end of its range
            continue
        if ms is None:
            break
        times.append(ms)
        if len(times) == moves:
            break
    return times


def benchmark(chapter: Path, moves: int, chromium: str) -> int:
    """Print the redraw medians of every explorer of ``chapter``; returns how many
    analytic explorers missed 100 ms."""
    registry = registered_explorers()
    missed = 0
    with lab.lab([chapter]) as server, lab.chromium(chromium) as browser:
        expected = [n for n, e in registry.items() if e.chapter == chapter.stem]
        page, errors = lab.open_and_run(browser, server, chapter.name, expected)
        for name in lab.explorers(page):
            explorer = registry[name]
            everything, firsts, lines, walks = [], [], [], []
            for control in explorer.controls:
                switch = None
                if control.only_when is not None:
                    switch = explorer.control(control.only_when[0])
                    lab.choose(page, name, switch.label, str(control.only_when[1]))
                times = control_moves(page, name, control, moves,
                                      lambda: lab.kernel_busy(server))
                walk = []
                if explorer.kind == "simulation" and not isinstance(control, (Choice, Text)):
                    walk = walk_moves(page, name, control, moves,
                                      lambda: lab.kernel_busy(server))
                    walks += walk
                if switch is not None:
                    lab.choose(page, name, switch.label, str(switch.default))
                everything += times
                firsts += times[:1]
                median = f"{statistics.median(times):.1f}" if times else "nan"
                first = f"{times[0]:.1f}" if times else "nan"
                walked = (f" walk_median_ms={statistics.median(walk):.1f} walk_moves={len(walk)}"
                          if walk else "")
                lines.append(f'  control="{control.label}" median_ms={median} '
                             f"moves={len(times)} first_ms={first}{walked}")
            median_ms = statistics.median(everything) if everything else float("nan")
            first_ms = statistics.median(firsts) if firsts else float("nan")
            walked = f" walk_ms={statistics.median(walks):.1f}" if walks else ""
            print(f"explorer={name} kind={explorer.kind} median_ms={median_ms:.1f} "
                  f"moves={len(everything)} first_ms={first_ms:.1f}{walked}", flush=True)
            print("\n".join(lines), flush=True)
            if explorer.kind == "analytic" and not median_ms <= 100:
                missed += 1
        if errors:
            # jupyterlab-myst logs its unresolved cross-references on every render.
            unique = sorted({line for error in errors for line in error.splitlines()})
            print(f"console errors in {chapter.name}: {len(errors)}, {len(unique)} distinct "
                  f"lines: {unique}", flush=True)
    return missed


def page_weights(site: Path) -> None:
    """Print the explorer data of every chapter page of a built site."""
    bundle = site / "_static" / "explorers" / "vega.js"
    size = bundle.stat().st_size if bundle.is_file() else 0
    for page in sorted((site / "book").glob("[0-9][0-9]_*.html")):
        found = [int(b) for b in _SIZE.findall(page.read_text(encoding="utf-8"))]
        print(f"page={page.relative_to(site).as_posix()} explorer_data_bytes={sum(found)} "
              f"explorers={len(found)} vega_bundle_bytes={size if found else 0}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path, help="chapters' .md files")
    parser.add_argument("--moves", type=int, default=8, help="timed moves per control")
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html",
                        help="a built site, for the page weights")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    chapters = args.chapters or sorted(
        {ROOT / "book" / f"{e.chapter}.md" for e in registered_explorers().values()})
    missed = sum(benchmark(chapter.resolve(), args.moves, args.chromium)
                 for chapter in chapters)
    if args.site.is_dir():
        page_weights(args.site)
    else:
        print(f"no built site at {args.site}: build the book (or a chapter, with "
              "scripts/build_chapter.py) and pass --site for the page weights")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
