"""A progress bar for the chapters' long cells that leaves nothing behind.

A cell that runs for more than a few seconds (a load run, a rate search, a sweep
of simulations) wraps its loop in :func:`progress`. In a live notebook the reader
sees a bar fill and a label say what is being done; when the loop ends the bar
is replaced by an empty output, so the executed notebook that the website is built
from holds nothing of it, and no widget state is left to render. Outside a
Jupyter kernel (a script, the tests) nothing is shown at all.

Used in chapters 'Batching', 'Benchmark scenarios' and 'The endpoint lab'.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Iterator


def _in_kernel() -> bool:
    """Whether this code runs in a Jupyter kernel (a notebook or the book's build)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def progress(items: Iterable, *, label: str, total: int | None = None) -> Iterator:
    """Yield every item of ``items``, showing ``label`` and a bar that fills as they go.

    ``total`` is the number of items if ``items`` has no length. The bar shows only
    in a Jupyter kernel and is gone, output and widget, when the loop ends or
    stops early (an exception or a ``break``). Raises ``ValueError`` for an empty
    label or a ``total`` that is not a positive whole number, and ``TypeError``
    if the length is unknown and no ``total`` is given.
    """
    if not isinstance(label, str) or not label.strip():
        raise ValueError(f"label: {label!r} is not allowed; say what the loop does")
    if total is None:
        try:
            total = len(items)
        except TypeError:
            raise TypeError("total: give the number of items; this iterable has no "
                            "length") from None
    if (not isinstance(total, numbers.Integral) or isinstance(total, bool)
            or total < 1):
        raise ValueError(f"total: {total!r} is not allowed; give a whole number >= 1")
    return _shown(items, label, int(total)) if _in_kernel() else iter(items)


def _shown(items: Iterable, label: str, total: int) -> Iterator:
    import ipywidgets
    from IPython.display import display

    bar = ipywidgets.IntProgress(value=0, min=0, max=total, description="",
                                 layout=ipywidgets.Layout(width="320px"))
    text = ipywidgets.Label(f"{label}: 0 of {total}")
    box = ipywidgets.HBox([bar, text])
    handle = display(box, display_id=True)
    try:
        for done, item in enumerate(items, 1):
            yield item
            bar.value = min(done, total)
            text.value = f"{label}: {done} of {total}"
    finally:
        for widget in (text, bar, box):
            widget.close()
        # An empty output in the bar's place: the site shows nothing where it was.
        handle.update({}, raw=True)
