"""A progress bar for the chapters' long cells that leaves nothing behind.

A cell that runs for more than a few seconds (a load run, a rate search, a sweep
of simulations) wraps its loop in :func:`progress`. In a live notebook the reader
sees a bar fill and a label say what is being done; when the loop ends the bar
is replaced by an empty output, so the executed notebook that the website is built
from holds nothing of it. The bar is an HTML display updated in place, not an
ipywidget, because a widget's state stays in the executed notebook, and so in the
page, even after the widget is closed. Outside a Jupyter kernel (a script, the
tests) nothing is shown at all.

Used in chapters 'Batching', 'Benchmark scenarios' and 'The endpoint lab'.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Iterator

from inferlab.common import checks

#: Redraw the bar at most this often (seconds), so that a fast loop sends few messages.
UPDATE_EVERY_S = 0.1


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
    in a Jupyter kernel and is gone when the loop ends or
    stops early (an exception or a ``break``), or when the generator returned is
    closed: code that cannot loop over it (a callback, a search) takes one item with
    ``next`` per step and closes it at the end (``contextlib.closing``). Raises
    ``ValueError`` for an empty label or a ``total`` that is not a positive whole
    number, and ``TypeError`` if the length is unknown and no ``total`` is given.
    """
    if not isinstance(label, str) or not label.strip():
        raise ValueError(f"label: {label!r} is not allowed; say what the loop does")
    if total is None:
        try:
            total = len(items)
        except TypeError:
            raise TypeError("total: give the number of items; this iterable has no "
                            "length") from None
    total = checks.whole("total", total)
    return _shown(items, label, total) if _in_kernel() else _plain(items)


def _plain(items: Iterable) -> Iterator:
    # A generator either way, so that a caller driving the bar with next() can close() it.
    yield from items


def _shown(items: Iterable, label: str, total: int) -> Iterator:
    from IPython.display import HTML, display

    def bar(done: int) -> HTML:
        text = html.escape(f"{label}: {done} of {total}")
        return HTML(f'<progress value="{done}" max="{total}" style="width: 18em"></progress>'
                    f' <span>{text}</span>')

    # A display that is updated in place, not a widget: widgets leave their state in the
    # executed notebook (and so in the page) even once closed; a display output does not.
    handle = display(bar(0), display_id=True)
    shown_at = time.monotonic()
    try:
        for done, item in enumerate(items, 1):
            yield item
            if time.monotonic() - shown_at >= UPDATE_EVERY_S or done == total:
                handle.update(bar(min(done, total)))
                shown_at = time.monotonic()
    finally:
        # An empty output in the bar's place: the site shows nothing where it was.
        handle.update({}, raw=True)
