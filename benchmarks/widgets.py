"""Time the redraw of every explorer in the book.

    python benchmarks/widgets.py [--repeats 15]

Imports every ``inferlab`` module (so every ``@register``-ed explorer is known),
builds each explorer once, then times what a reader waits for after moving a
slider: :meth:`inferlab.widgets.Explorer.update` (compute, update the artists)
and rendering the figure to PNG, as the notebook's inline display does, over
values spread across each control's range. Prints one line per widget:

    widget=NAME kind=K median_ms=X

Analytic explorers must redraw under 100 ms, simulation explorers under 1,000 ms;
measurement explorers run real timings on a button press and are listed for
information (timed with their default values only).
"""

from __future__ import annotations

import argparse
import io
import statistics
import time

import matplotlib

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

from inferlab.widgets import control_value, registered_explorers  # noqa: E402

LIMITS_MS = {"analytic": 100.0, "simulation": 1000.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="redraws timed per widget")
    args = parser.parse_args()
    failures = 0
    for name, entry in sorted(registered_explorers().items()):
        explorer = entry.factory()
        # Factories close their figure (so only the explorer shows it), which leaves a
        # canvas that cannot draw; give it a real one, as the inline display does.
        FigureCanvasAgg(explorer.figure)
        defaults = explorer.values()
        count = 1 if entry.kind == "measurement" else args.repeats
        timings = []
        explorer.update(**defaults)  # first draw builds caches; not what a slider move costs
        for index in range(count):
            values = dict(defaults)
            if entry.kind != "measurement":
                # Move one control at a time, as a reader dragging a slider does.
                key = list(explorer.controls)[index % len(explorer.controls)]
                values[key] = control_value(explorer.controls[key],
                                            index / max(count - 1, 1))
            start = time.perf_counter()
            try:
                explorer.update(**values)
                explorer.figure.savefig(io.BytesIO(), format="png")
            except ValueError:
                continue  # a combination the function refuses shows a message, not a figure
            timings.append((time.perf_counter() - start) * 1000)
        median_ms = statistics.median(timings) if timings else float("nan")
        print(f"widget={name} kind={entry.kind} median_ms={median_ms:.1f}")
        limit = LIMITS_MS.get(entry.kind)
        if limit is not None and not median_ms < limit:
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
