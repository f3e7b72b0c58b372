"""The notebook's explorer: ipywidgets controls, recomputing for any value, over one live
Vega view.

The chart is embedded once, in a small anywidget (:class:`VegaView`). When a control
moves, the explorer computes, turns the result into its tables and sends only their
rows; the view swaps its datasets in place (Vega's ``view.data``), with no new spec, no
Vega-Lite compile and no new view. Measured in JupyterLab in headless Chromium
(``benchmarks/explorers.py``), that redraws in a fraction of the time of displaying a new
Vega-Lite output or of handing Altair's ``JupyterChart`` a new chart, both of which
build the view afresh.

A refused value (``ValueError``) empties the chart and shows the message under it.
"""

from __future__ import annotations

import math

import anywidget
import ipywidgets as w
import numpy as np
import traitlets

from inferlab.pages.explorers.base import REFUSAL, Choice, Explorer, Slider, Text
from inferlab.pages.explorers.prefetch import Memo, neighbours
from inferlab.pages.explorers.vega import bundle

# The widget's module: the Vega bundle (which sets window.vegaEmbed), then this.
_RENDER = """
export default {
  async render({ model, el }) {
    const result = await window.vegaEmbed(el, model.get("spec"),
                                          { renderer: "svg", actions: false });
    const update = () => {
      for (const [name, rows] of Object.entries(model.get("values"))) {
        result.view.data(name, rows);
      }
      return result.view.runAsync();
    };
    model.on("change:values", update);
    await update();
    return () => { model.off("change:values", update); result.finalize(); };
  },
};
"""


class VegaView(anywidget.AnyWidget):
    """One Vega-Lite chart, embedded once, whose named datasets ``values`` replaces."""

    spec = traitlets.Dict().tag(sync=True)
    values = traitlets.Dict().tag(sync=True)

    def __init__(self, **kwargs) -> None:
        # Set on first use, not at import: making the bundle takes about two seconds.
        if not getattr(VegaView, "_esm_ready", False):
            VegaView._esm = bundle() + "\n" + _RENDER
            VegaView._esm_ready = True
        super().__init__(**kwargs)


def records(table: dict[str, np.ndarray]) -> list[dict]:
    """A table's rows (as :func:`~inferlab.pages.explorers.base.columns` gives it) as JSON
    objects; ``nan`` and infinities become ``null``."""
    values = [[None if isinstance(v, float) and not math.isfinite(v) else v
               for v in column.tolist()] for column in table.values()]
    return [dict(zip(table, row, strict=True)) for row in zip(*values, strict=True)]


def widget(control) -> w.ValueWidget:
    """The ipywidget for a control, its label shown whole."""
    style = {"description_width": "initial"}
    layout = w.Layout(width="auto", min_width="22em", margin="0 1.5em 0.2em 0")
    if isinstance(control, Text):
        return w.Textarea(value=control.default, description=control.label, style=style,
                          layout=w.Layout(width="95%", height="5em"))
    if isinstance(control, Choice):
        return w.Dropdown(options=list(control.options), value=control.default,
                          description=control.label, style=style, layout=layout)
    if isinstance(control, Slider) and control.log:
        return w.FloatLogSlider(value=control.default, base=10,
                                min=math.log10(control.minimum),
                                max=math.log10(control.maximum), step=control.step,
                                readout_format=".4g", description=control.label,
                                style=style, layout=layout)
    kind = w.IntSlider if control.whole else w.FloatSlider
    return kind(value=control.default, min=control.minimum, max=control.maximum,
                step=control.step, description=control.label, style=style, layout=layout)


class LiveView:
    """An explorer's controls and chart in a notebook, recomputing as the controls move.

    A simulation explorer remembers what it computed and, once a control has moved,
    computes the neighbouring values in the background (:mod:`inferlab.pages.explorers.prefetch`).
    """

    def __init__(self, explorer: Explorer) -> None:
        self.explorer = explorer
        self.controls = {control.name: widget(control) for control in explorer.controls}
        self.memo = Memo(self._compute) if explorer.kind == "simulation" else None
        first = self.tables()
        self.parts = [name for name in first if name != REFUSAL]
        import altair as alt

        spec = explorer.figure(lambda name: alt.Chart(alt.Data(name=name))).to_dict(
            validate=False)
        spec["datasets"] = first
        self.view = VegaView(spec=spec, values=first)
        for control in self.controls.values():
            control.observe(lambda _: self.refresh(), names="value")
        self._grey_out()
        box = w.Box(list(self.controls.values()),
                    layout=w.Layout(display="flex", flex_flow="row wrap"))
        self.widget = w.VBox([box, self.view])
        self.widget.add_class("inferlab-explorer")
        self.widget.add_class(f"inferlab-explorer-{explorer.name}")

    def values(self) -> dict[str, object]:
        """The current value of every control, keyed by the function's argument names."""
        return {name: control.value for name, control in self.controls.items()}

    def tables(self) -> dict[str, list[dict]]:
        """Every dataset of the chart at the controls' values, as rows."""
        values = self.values()
        return self._compute(values) if self.memo is None else self.memo.get(values)

    def _compute(self, values: dict) -> dict[str, list[dict]]:
        try:
            tables = self.explorer.tables_at(**values)
        except ValueError as error:
            parts = getattr(self, "parts", [])
            return {**{name: [] for name in parts},
                    REFUSAL: [{"text": f"Cannot compute: {error}"}]}
        return {**{name: records(table) for name, table in tables.items()}, REFUSAL: []}

    def refresh(self) -> None:
        """Recompute from the controls and swap the chart's data."""
        self._grey_out()
        self.view.values = self.tables()
        if self.memo is not None:
            self.memo.ahead(neighbours(self.explorer, self.values()))

    def _grey_out(self) -> None:
        values = self.values()
        for control in self.explorer.controls:
            self.controls[control.name].disabled = not self.explorer.active(control, values)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.widget._repr_mimebundle_(include=include, exclude=exclude)

    def __repr__(self) -> str:
        return f"<live explorer {self.explorer.name}>"
