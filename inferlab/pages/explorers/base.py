"""The Explorer: declared controls over a pure function, drawn by one Vega-Lite chart.

An :class:`Explorer` is a description, not a widget. It holds

- its **controls**, :class:`Slider` and :class:`Choice`: which argument of the function
  each sets, its label in full words, the notebook's range or options, the default (the
  number the chapter's text uses) and the **grid** of values the site precomputes;
- ``compute(**values)``: the model module's pure function, unit-tested on its own, which
  raises ``ValueError`` for values it refuses;
- ``tables(result)``: the result as tidy tables, one per layer of the chart (its
  **parts**), keyed by part name. A table is a pandas DataFrame or a mapping of column
  names to equal-length columns, which is what ``pandas.DataFrame`` builds one from:
  the site calls ``tables`` at every point of the grid, and pandas takes 165 us to build
  a one-row DataFrame, three times what the roofline's functions take to compute it;
- ``chart(part)``: one Altair chart over those tables, where ``part(name)`` is an
  ``alt.Chart`` whose rows are that table's.

Displayed in a notebook it becomes a live view (``inferlab.pages.explorers.live``):
ipywidgets call ``compute`` for any value and the tables replace the data of one live
Vega view. Displayed while the book is built (:data:`SITE_ENV` is set by
``book/_ext/explorers.py``) it becomes the site's static explorer
(``inferlab.pages.explorers.site``): the same chart over tables precomputed on the grid,
filtered by Vega-Lite parameters bound to HTML inputs. So one chapter cell serves both.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from inferlab.common import checks

#: What an explorer runs when a control moves, a promise about its speed. Analytic
#: explorers evaluate formulas, simulation explorers run the simulator, measurement
#: explorers time real work (on a button press in the notebook).
KINDS = ("analytic", "simulation", "measurement")

#: The environment variable the book's build sets (to anything), which the kernels it
#: starts inherit. An explorer displayed then is the site's static explorer, with its
#: grid precomputed.
SITE_ENV = "INFERLAB_EXPLORER_SITE"

#: The table every explorer has besides its own parts: the refusal's message, if any.
REFUSAL = "refusal"


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Slider:
    """A number, set by a slider.

    ``minimum``, ``maximum`` and ``step`` are the notebook slider's; with ``log`` it
    moves along the base-10 logarithm of the value, by ``step`` in that logarithm.
    ``grid`` holds the values the site precomputes, in increasing order, the default
    among them; the default alone fixes the slider on the site (:func:`fixed_on_site`).
    ``only_when`` = ``(control, value)`` says the slider changes the figure only while
    that other control has that value (it is greyed out otherwise).
    All of them whole numbers make it a whole-number slider.

    ``default`` is the number the chapter's text uses, so the explorer opens on the text's
    example; ``glued`` names the chapter's glue key holding that number, when there is one
    (``tests/test_explorers.py`` compares the two in the book's build).
    """

    name: str
    label: str
    minimum: float
    maximum: float
    step: float
    default: float
    grid: tuple[float, ...]
    log: bool = False
    only_when: tuple[str, object] | None = None
    glued: str | None = None

    def __post_init__(self) -> None:
        _check_label(self)
        numbers = (self.minimum, self.maximum, self.step, self.default, *self.grid)
        if not all(_number(n) and math.isfinite(n) for n in numbers):
            raise ValueError(f"{self.name}: minimum, maximum, step, default and grid must "
                             "be finite numbers")
        if not (self.minimum < self.maximum and self.step > 0):
            raise ValueError(f"{self.name}: give minimum < maximum and step > 0")
        if self.log and self.minimum <= 0:
            raise ValueError(f"{self.name}: a log slider needs minimum > 0")
        if not self.minimum <= self.default <= self.maximum:
            raise ValueError(f"{self.name}: default {self.default!r} is outside "
                             f"[{self.minimum!r}, {self.maximum!r}]")
        _check_grid(self, self.grid)
        if list(self.grid) != sorted(set(self.grid)):
            raise ValueError(f"{self.name}: grid {self.grid!r} must increase")
        if not (self.minimum <= self.grid[0] and self.grid[-1] <= self.maximum):
            raise ValueError(f"{self.name}: grid {self.grid!r} leaves the slider's range")

    @property
    def default_on_a_step(self) -> bool:
        """Whether the notebook's slider can show the default exactly.

        The slider snaps its value to ``minimum + k x step`` as it is drawn, so a default
        between two steps opens the explorer off the text (550 shown as 551). Move
        ``minimum`` or ``step`` to put it on one (:func:`log_range` does it for a log
        slider); ``tests/test_explorers.py`` checks every slider.
        """
        if self.log:
            steps = (math.log10(self.default) - math.log10(self.minimum)) / self.step
        else:
            steps = (self.default - self.minimum) / self.step
        return abs(steps - round(steps)) <= 1e-6

    @property
    def whole(self) -> bool:
        """Whether every value is a whole number (an ``int``)."""
        return all(isinstance(n, int) for n in
                   (self.minimum, self.maximum, self.step, self.default, *self.grid))

    @property
    def site_values(self) -> tuple[float, ...]:
        """The grid, the values the site offers."""
        return self.grid


def log_range(default: float, low: float, high: float, step: float) -> tuple[float, float]:
    """The ends of a log slider nearest ``low`` and ``high`` that put ``default`` on one
    of its steps of ``step`` (in log10): ``minimum`` and ``maximum`` for :class:`Slider`.

    ``log_range(68.976648192, 1, 1000, 0.01)`` is about ``(0.997, 997.0)``: each end moves
    by less than a step, and the slider opens on Llama 2 70B's exact size. Give
    ``low <= default <= high``, all within 1e-150 and 1e150, and a step from 1e-6 to 10.
    """
    # Within 1e-150 and 1e150 the ends stay finite floats, whatever the step.
    default = checks.real("default", default, low=1e-150, high=1e150)
    low = checks.real("low", low, low=1e-150, high=default)
    high = checks.real("high", high, low=default, high=1e150)
    step = checks.real("step", step, low=1e-6, high=10.0)
    centre = math.log10(default)
    below = round((centre - math.log10(low)) / step)
    above = round((math.log10(high) - centre) / step)
    return default / 10 ** (below * step), default * 10 ** (above * step)


@dataclass(frozen=True)
class Choice:
    """One of several values, chosen from a menu.

    ``options`` are passed to the function as they are and shown as text; ``grid`` is
    the options the site offers (all of them if ``None``), the default among them.
    ``only_when`` and ``glued`` as for :class:`Slider`.
    """

    name: str
    label: str
    options: tuple
    default: object
    grid: tuple | None = None
    only_when: tuple[str, object] | None = None
    glued: str | None = None

    def __post_init__(self) -> None:
        _check_label(self)
        if self.default not in self.options:
            raise ValueError(f"{self.name}: default {self.default!r} is not an option")
        if len(set(self.options)) != len(self.options):
            raise ValueError(f"{self.name}: options repeat")
        unknown = [value for value in self.grid or () if value not in self.options]
        if unknown:
            raise ValueError(f"{self.name}: grid values {unknown!r} are not options")
        _check_grid(self, self.site_values)

    @property
    def site_values(self) -> tuple:
        """The options the site offers, in the notebook's order."""
        offered = set(self.options if self.grid is None else self.grid)
        return tuple(value for value in self.options if value in offered)


@dataclass(frozen=True)
class Text:
    """Text the reader types (a prompt, a sentence to tokenize).

    The site cannot take any text: it offers the texts of ``grid`` in a menu, the default
    among them.
    """

    name: str
    label: str
    default: str
    grid: tuple[str, ...]
    only_when: tuple[str, object] | None = None
    glued: str | None = None

    def __post_init__(self) -> None:
        _check_label(self)
        if not all(isinstance(text, str) for text in (self.default, *self.grid)):
            raise ValueError(f"{self.name}: the default and the grid must be text")
        _check_grid(self, self.grid)

    @property
    def site_values(self) -> tuple[str, ...]:
        """The texts the site offers."""
        return self.grid


Control = Slider | Choice | Text


def fixed_on_site(control: Control) -> bool:
    """Whether the site offers one value of ``control`` alone, its default.

    A control whose every value would multiply the simulations of the book's build is
    fixed there: the site shows it disabled at that value and its note says so, while
    the notebook moves it as any other.
    """
    return len(control.site_values) == 1

#: A tidy table: a pandas DataFrame, or a mapping of column names to columns.
Table = pd.DataFrame | dict


def columns(table: Table) -> dict[str, np.ndarray]:
    """A table's columns as one-dimensional arrays of one length, keyed by name."""
    found = {str(name): np.asarray(table[name]) for name in table}
    lengths = {name: column.shape for name, column in found.items()}
    if len(set(lengths.values())) > 1 or any(len(shape) != 1 for shape in lengths.values()):
        raise ValueError(f"table: columns must be one-dimensional and of one length, not "
                         f"{lengths}")
    return found


def _check_label(control) -> None:
    if not control.name.isidentifier():
        raise ValueError(f"name: {control.name!r} is not a Python identifier")
    if not control.label.strip():
        raise ValueError(f"{control.name}: give a label in words")


def _check_grid(control, values) -> None:
    if not values:
        raise ValueError(f"{control.name}: grid {values!r}: give the site at least one "
                         "value (one alone fixes the control there)")
    if control.default not in values:
        raise ValueError(f"{control.name}: the default {control.default!r} is not in the "
                         f"site's values {values!r}")


@dataclass(frozen=True)
class Explorer:
    """Controls, a pure function, its tidy tables and one chart (see the module docstring).

    ``name`` is unique in the book; ``chapter`` the stem of the chapter's file that shows
    it; ``kind`` one of :data:`KINDS`.
    """

    name: str
    kind: str
    chapter: str
    controls: tuple[Control, ...]
    compute: Callable[..., Any]
    tables: Callable[[Any], dict[str, Table]]
    chart: Callable[[Callable[[str], Any]], Any]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind: {self.kind!r} is not one of {', '.join(KINDS)}")
        names = [control.name for control in self.controls]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"controls: give at least one, each name once (got {names})")
        parameters = set(inspect.signature(self.compute).parameters)
        if set(names) != parameters:
            raise ValueError(f"controls: {sorted(names)} do not match the arguments of "
                             f"{self.compute.__name__}, {sorted(parameters)}")
        for control in self.controls:
            if control.only_when is None:
                continue
            other, value = control.only_when
            target = next((c for c in self.controls if c.name == other), None)
            if target is None or target.only_when is not None:
                raise ValueError(f"{control.name}: only_when names {other!r}, which must "
                                 "be another control that is always active")
            if fixed_on_site(target):
                raise ValueError(f"{control.name}: only_when names {other!r}, which the "
                                 "site fixes, so it could never switch it on there")
            if value not in target.site_values:
                raise ValueError(f"{control.name}: only_when value {value!r} is not among "
                                 f"the site's values of {other}")

    def defaults(self) -> dict[str, object]:
        """Every control's default, keyed by the function's argument names."""
        return {control.name: control.default for control in self.controls}

    def control(self, name: str) -> Control:
        """The control that sets argument ``name``."""
        for control in self.controls:
            if control.name == name:
                return control
        raise ValueError(f"name: {self.name} has no control {name!r}")

    def tables_at(self, **values) -> dict[str, dict[str, np.ndarray]]:
        """``tables(compute(**values))``, each table as one-dimensional arrays of one
        length keyed by column; raises ``ValueError`` when compute refuses."""
        result = self.compute(**values)
        return {name: columns(table) for name, table in self.tables(result).items()}

    def active(self, control: Control, values: dict[str, object]) -> bool:
        """Whether ``control`` changes the figure at ``values``."""
        return control.only_when is None or values[control.only_when[0]] == control.only_when[1]

    def figure(self, part: Callable[[str], Any]):
        """The explorer's chart with a line under it for the refusal's message, if any:
        what both the notebook and the site show."""
        import altair as alt

        refusal = part(REFUSAL).mark_text(
            align="left", baseline="top", fontSize=13, color="#b2182b", limit=0,
        ).encode(text="text:N", x=alt.value(0), y=alt.value(2)).properties(height=20)
        # No frame round a view: the text lines under a chart are views too.
        return alt.vconcat(self.chart(part), refusal, spacing=4).configure_view(stroke=None)

    def _repr_mimebundle_(self, include=None, exclude=None):
        # The views import this module, so it names none of them: the package sets
        # RENDER when it is imported, which any import of this module first does.
        return RENDER(self, include, exclude)


def _no_view(explorer: Explorer, include=None, exclude=None):
    raise RuntimeError(f"{explorer.name}: no view to show it with; import "
                       "inferlab.pages.explorers, which sets one")


#: How an explorer shows itself, as ``RENDER(explorer, include, exclude)`` giving its mime
#: bundle. ``inferlab.pages.explorers`` sets it to the site's static view when ``SITE_ENV`` is
#: set and to the live widget otherwise, so that this base imports neither view.
RENDER: Callable[..., dict] = _no_view

#: Every explorer of the book, by name, as the modules of inferlab.pages.explorers register them.
REGISTRY: dict[str, Explorer] = {}


def register(factory: Callable[[], Explorer],
             registry: dict[str, Explorer] | None = None) -> Callable[[], Explorer]:
    """Decorator: record the explorer ``factory`` builds in ``registry`` (the book's,
    :data:`REGISTRY`, unless given), and make the factory return it.

    An explorer is an immutable description, so one object serves every display.
    """
    registry = REGISTRY if registry is None else registry
    explorer = factory()
    if not isinstance(explorer, Explorer):
        raise TypeError(f"factory: {factory!r} built {explorer!r}, not an Explorer")
    if explorer.name in registry:
        raise ValueError(f"name: an explorer called {explorer.name!r} is already registered")
    registry[explorer.name] = explorer

    def registered() -> Explorer:
        return explorer

    registered.__name__, registered.__qualname__ = factory.__name__, factory.__qualname__
    registered.__doc__, registered.__module__ = factory.__doc__, factory.__module__
    return registered
