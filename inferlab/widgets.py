"""The legacy widget pattern: a slider panel over a tested pure function, drawn by matplotlib.

Explorers are moving to ``inferlab.explorers`` (issue 16), which draws one Vega-Lite
chart both in the notebook and on the site; this module keeps the explorers not yet
moved working until they are, and goes when the last one has.

An :class:`Explorer` holds three things:

- ``compute(**values)``: a pure function from the slider values to a result. It
  lives in a chapter's module, is unit-tested on its own, and raises
  ``ValueError`` for values it cannot handle;
- ``render(result)``: updates the artists of one matplotlib figure in place (and
  may return a line of text to print under it); it never builds a new figure;
- the controls: ipywidgets keyed by the argument names of ``compute``.

When a slider moves, the explorer computes first and draws only if that
succeeded; a ``ValueError`` replaces the figure with its message, so nothing
half-computed is shown. :meth:`Explorer.update` does the same work without
widgets, which is what the tests call.

Factories that build the book's explorers are registered with :func:`register`,
so the tests can list every widget still here. On the static site a slider
cannot recompute, so chapters tag the explorer's cell ``remove-output`` and show
a sweep of the same ``compute`` beside it (see "How to use this book").
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass

import ipywidgets as w
from IPython.display import display
from matplotlib.ticker import NullLocator

WIDGET_KINDS = ("analytic", "simulation", "measurement")


@dataclass(frozen=True)
class RegisteredExplorer:
    """A factory of one of the book's explorers, with the chapter that shows it."""

    name: str
    kind: str
    chapter: str
    factory: Callable[[], Explorer]


REGISTRY: dict[str, RegisteredExplorer] = {}


def register(name: str, kind: str, chapter: str):
    """Decorator that records an explorer factory under ``name`` for the benchmarks.

    ``kind`` is ``"analytic"`` (must redraw under 100 ms), ``"simulation"``
    (under 1,000 ms) or ``"measurement"`` (runs real timings on a button press).
    """
    if kind not in WIDGET_KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(WIDGET_KINDS)}")

    def decorate(factory: Callable[[], Explorer]) -> Callable[[], Explorer]:
        if name in REGISTRY:
            raise ValueError(f"name: an explorer called {name!r} is already registered")
        REGISTRY[name] = RegisteredExplorer(name, kind, chapter, factory)
        return factory

    return decorate


def registered_explorers() -> dict[str, RegisteredExplorer]:
    """Every explorer of the book, by name: imports each ``inferlab`` module, so that
    every ``@register``-ed factory is recorded, and returns ``REGISTRY``."""
    import importlib
    import pkgutil

    import inferlab

    for module in pkgutil.iter_modules(inferlab.__path__):
        importlib.import_module(f"inferlab.{module.name}")
    return REGISTRY


def control_value(control: w.ValueWidget, fraction: float):
    """The value ``control`` shows a ``fraction`` (0 to 1) of the way along its range.

    Options are taken in order (0 is the first, 1 the last); a log slider moves along
    its exponents (its ``min`` and ``max`` are powers of ``base``); whole-number sliders
    give whole numbers. A control without a range (a text box) keeps its value.
    """
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction: {fraction!r} is not allowed; give a number in [0, 1]")
    options = getattr(control, "options", None)
    if options:
        values = [option[1] if isinstance(option, tuple) else option for option in options]
        return values[round(fraction * (len(values) - 1))]
    if not hasattr(control, "min"):
        return control.value
    value = control.min + (control.max - control.min) * fraction
    if isinstance(control, w.FloatLogSlider):
        return control.base ** value
    return round(value) if isinstance(control.value, int) else value


def _freeze_layout(fig, render, first_view) -> None:
    """Draw ``first_view`` once, fix the layout it produced, and drop minor ticks.

    Constrained layout and log-axis minor ticks are most of the cost of a redraw;
    the explorers' axes keep their size and range scale, so one layout serves all.
    """
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                axis.set_minor_locator(NullLocator())
    render(first_view)
    fig.draw_without_rendering()
    fig.set_layout_engine("none")


class Explorer:
    """Sliders over ``compute`` drawn by ``render`` into one figure (see the module docstring)."""

    def __init__(
        self,
        compute: Callable[..., object],
        render: Callable[[object], str | None],
        controls: dict[str, w.ValueWidget],
        figure,
        *,
        manual: bool = False,
    ) -> None:
        if not controls:
            raise ValueError("controls: give at least one control")
        self.compute = compute
        self.render = render
        self.controls = controls
        self.figure = figure
        self.output = w.Output()
        self.message = w.HTML()
        children = list(controls.values())
        if manual:
            # Measurement explorers time real work, which should not start on every drag.
            button = w.Button(description="Run", button_style="primary")
            button.on_click(lambda _: self.refresh())
            children.append(button)
        else:
            for control in controls.values():
                control.observe(lambda _: self.refresh(), names="value")
        self.widget = w.VBox([w.HBox(children, layout=w.Layout(flex_flow="row wrap")),
                              self.message, self.output])

    def values(self) -> dict[str, object]:
        """The current value of every control, keyed by argument name."""
        return {name: control.value for name, control in self.controls.items()}

    def update(self, **values) -> str | None:
        """Compute for ``values`` and redraw the figure in place; return the caption text.

        Raises ``ValueError`` from ``compute`` before anything is drawn.
        """
        result = self.compute(**values)
        # No draw here: showing the figure renders it, and a second render would double the cost.
        return self.render(result)

    def refresh(self) -> None:
        """Recompute from the controls and show the figure, or the error instead of it."""
        try:
            text = self.update(**self.values())
        except ValueError as error:
            self.message.value = f"<b>Cannot compute:</b> {html.escape(str(error))}"
            self.output.clear_output()
            return
        self.message.value = html.escape(text) if text else ""
        with self.output:
            self.output.clear_output(wait=True)
            display(self.figure)

    def _ipython_display_(self) -> None:
        self.refresh()
        display(self.widget)
