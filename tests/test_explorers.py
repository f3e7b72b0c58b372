"""Every registered explorer, by one parametrised test: a new explorer is covered at once.

Each one must belong to a chapter that exists and show its figure; and every
control of a non-measurement explorer must change what the reader sees, because
a slider that moves but changes nothing is worse than none.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from conftest import ROOT  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

from inferlab.widgets import WIDGET_KINDS, control_value, registered_explorers  # noqa: E402

REGISTRY = registered_explorers()


def _ends(control):
    """Two values far apart for a control: the ends of its range or options, or for a
    text box its text and a longer one."""
    if isinstance(control.value, str) and not getattr(control, "options", None):
        return control.value, control.value + " and a few more words to count"
    return control_value(control, 0.0), control_value(control, 1.0)


def _picture(explorer, values) -> tuple[bytes, str | None]:
    text = explorer.update(**values)
    buffer = io.BytesIO()
    explorer.figure.savefig(buffer, format="png")
    return buffer.getvalue(), text


def test_every_chapter_with_sliders_registers_its_explorers():
    assert {entry.kind for entry in REGISTRY.values()} <= set(WIDGET_KINDS)
    with_sliders = {path.stem for path in (ROOT / "book").glob("0*.md")
                    if "Explorer" in path.read_text(encoding="utf-8")
                    or "explorer()" in path.read_text(encoding="utf-8")}
    assert with_sliders <= {entry.chapter for entry in REGISTRY.values()}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_control_of_every_explorer_changes_what_it_shows(name):
    entry = REGISTRY[name]
    assert (ROOT / "book" / f"{entry.chapter}.md").is_file(), entry.chapter
    explorer = entry.factory()
    # Factories close their figure (only the explorer shows it); give it a canvas to draw on.
    FigureCanvasAgg(explorer.figure)
    defaults = explorer.values()
    assert set(defaults) == set(explorer.controls)
    if entry.kind == "measurement":
        return  # these time real work on a button press; their compute has its own tests
    _picture(explorer, defaults)
    for key, control in explorer.controls.items():
        if control.disabled:
            continue  # greyed out for these values: the reader cannot move it
        low, high = _ends(control)
        shown = [_picture(explorer, {**defaults, key: value}) for value in (low, high)]
        assert shown[0] != shown[1], (
            f"{name}: moving {key} from {low!r} to {high!r} changed nothing")


def test_control_value_walks_each_kind_of_control_along_its_range():
    import ipywidgets as w

    log = w.FloatLogSlider(value=70, base=10, min=0, max=3)
    assert control_value(log, 0.0) == 1 and control_value(log, 1.0) == 1000
    assert control_value(w.IntSlider(value=4, min=1, max=256), 0.5) == 128
    assert control_value(w.Dropdown(options=[("a", 1), ("b", 2), ("c", 3)]), 1.0) == 3
    assert control_value(w.Text(value="hi"), 1.0) == "hi"
    with pytest.raises(ValueError, match="fraction"):
        control_value(log, 1.5)
