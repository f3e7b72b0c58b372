"""Remember a slow explorer's tables, and compute the values a reader is likely to try next.

A simulation explorer runs the simulator on every move: a tenth of a second to most of
one, which a reader feels. The values next to the current ones (a slider one step either
way, a menu's other options) are where a reader goes next, so once a control has moved,
a background thread computes them while the reader looks at the chart. A move to one of
them is then a lookup; a move anywhere else computes live, as before.

Nothing starts before the first move: a notebook's later cells run at full speed while
it executes, and the book's build, which draws the site's explorer, never starts it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from inferlab.common import checks
from inferlab.pages.explorers.base import Choice, Explorer, Slider

#: Tables kept per explorer. Each is a few hundred rows; a long session of moves stays
#: within a few megabytes.
LIMIT = 256

#: Steps either way of a slider that are computed ahead.
REACH = 2


def key(values: dict) -> tuple:
    """A hashable form of the controls' values. Floats are rounded to nine decimals: a
    slider stepped by 0.1 in the browser and one stepped here must meet."""
    return tuple((name, round(value, 9) if isinstance(value, float) else value)
                 for name, value in sorted(values.items()))


def neighbours(explorer: Explorer, values: dict) -> list[dict]:
    """The values one move away from ``values`` (each other option of a menu, each linear
    slider that applies one step either way), then those ``REACH`` steps away; nearest
    first. ``values`` holds a value for every control of ``explorer``."""
    checks.instance("explorer", explorer, Explorer)
    missing = [c.name for c in explorer.controls if c.name not in values] \
        if isinstance(values, dict) else None
    if missing is None or missing:
        raise ValueError(f"values: needs a value for every control of {explorer.name} "
                         f"({', '.join(c.name for c in explorer.controls)}); got {values!r}")
    found: list[dict] = []
    for distance in range(1, REACH + 1):
        for control in explorer.controls:
            if not explorer.active(control, values):
                continue
            if isinstance(control, Choice):
                if distance == 1:
                    found += [{**values, control.name: option} for option in control.options
                              if option != values[control.name]]
            elif isinstance(control, Slider) and not control.log:
                for sign in (1, -1):
                    moved = round(values[control.name] + sign * distance * control.step, 9)
                    if control.minimum <= moved <= control.maximum:
                        if control.whole:
                            moved = int(moved)
                        found.append({**values, control.name: moved})
    return found


class Memo:
    """Tables by controls' values, filled by the reader's moves and by one background
    thread that computes the values :meth:`inferlab.pages.explorers.prefetch.Memo.ahead` is
    given.

    ``compute(values)`` must return the tables for ``values``; it is called from the
    notebook's thread and from the background one, so it must not touch widgets.
    """

    def __init__(self, compute: Callable[[dict], dict], limit: int = LIMIT) -> None:
        if not callable(compute):
            raise ValueError(f"compute: {compute!r} is not callable")
        self._compute = compute
        self._limit = checks.whole("limit", limit)
        self._done: OrderedDict = OrderedDict()
        self._wanted: list[dict] = []
        self._working_on: tuple | None = None
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self.computed = 0  # how many times compute ran, for tests and benchmarks

    def __contains__(self, values: dict) -> bool:
        with self._lock:
            return key(values) in self._done

    def get(self, values: dict) -> dict:
        """The tables for ``values``: remembered, finished by the background thread if it
        is on them now, or computed here."""
        wanted = key(values)
        with self._lock:
            while self._working_on == wanted:
                self._lock.wait()
            if wanted in self._done:
                self._done.move_to_end(wanted)
                return self._done[wanted]
        result = self._compute(values)
        self._store(wanted, result)
        return result

    def ahead(self, candidates: list[dict]) -> None:
        """Compute ``candidates`` in the background, in order, dropping what an earlier
        call asked for and has not started. ``candidates`` is a list of values."""
        if not isinstance(candidates, list) or not all(isinstance(c, dict) for c in candidates):
            raise ValueError(f"candidates: expected a list of dicts of values, got {candidates!r}")
        with self._lock:
            self._wanted = [c for c in candidates if key(c) not in self._done]
            self._lock.notify_all()
            if self._thread is None:
                # A daemon: a kernel shutting down does not wait for values nobody asked for.
                self._thread = threading.Thread(target=self._work, name="explorer-prefetch",
                                                daemon=True)
                self._thread.start()

    def idle(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the background thread to finish what it was given;
        whether it did. ``timeout_s`` is a finite number of seconds >= 0."""
        timeout_s = checks.non_negative("timeout_s", timeout_s)
        with self._lock:
            return self._lock.wait_for(lambda: not self._wanted and self._working_on is None,
                                       timeout=timeout_s)

    def _store(self, wanted: tuple, result: dict) -> None:
        with self._lock:
            self._done[wanted] = result
            self._done.move_to_end(wanted)
            while len(self._done) > self._limit:
                self._done.popitem(last=False)
            self.computed += 1

    def _work(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._wanted)
                values = self._wanted.pop(0)
                wanted = key(values)
                if wanted in self._done:
                    self._lock.notify_all()  # idle() may be waiting for this one
                    continue
                self._working_on = wanted
            try:
                self._store(wanted, self._compute(values))
            except Exception:  # noqa: BLE001 - the reader's own move will show the error
                pass
            finally:
                with self._lock:
                    self._working_on = None
                    self._lock.notify_all()
