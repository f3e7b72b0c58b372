"""The long cells' progress bar: every item passes through, and nothing is left behind."""

from __future__ import annotations

import pytest

from inferlab.pages import progress as p


class Handle:
    def __init__(self, shown):
        self.shown = shown

    def update(self, data, raw=False):
        self.shown.append(("update", data, raw))


@pytest.fixture
def kernel(monkeypatch):
    """Pretend to run in a Jupyter kernel and record what is displayed."""
    import IPython.display

    shown = []

    def display(obj, display_id=False):
        assert display_id, "the bar must be a display that can be updated in place"
        shown.append(("display", obj))
        return Handle(shown)

    monkeypatch.setattr(p, "_in_kernel", lambda: True)
    monkeypatch.setattr(p, "UPDATE_EVERY_S", 0.0)  # draw every step, to see each one
    monkeypatch.setattr(IPython.display, "display", display)
    return shown


def test_outside_a_kernel_items_pass_through_and_nothing_is_shown(capsys):
    assert list(p.progress(range(4), label="counting")) == [0, 1, 2, 3]
    assert capsys.readouterr().out == ""


def test_in_a_kernel_the_bar_fills_and_is_replaced_by_an_empty_output(kernel):
    seen = []
    for item in p.progress("abc", label="letters <&>"):
        seen.append((item, len(kernel)))
    assert seen == [("a", 1), ("b", 2), ("c", 3)]  # one redraw after each item
    bars = [kernel[0][1].data] + [entry[1].data for entry in kernel[1:-1]]
    assert [bar.count('value="') for bar in bars] == [1, 1, 1, 1]
    assert ['value="0"' in bars[0], 'value="3" max="3"' in bars[-1]] == [True, True]
    assert "letters &lt;&amp;&gt;: 3 of 3" in bars[-1]  # the label is escaped
    assert kernel[-1] == ("update", {}, True)  # an empty output where the bar was


@pytest.mark.parametrize("stop", ["break", "raise"])
def test_the_bar_goes_when_the_loop_stops_early(kernel, stop):
    def run():
        for item in p.progress(range(10), label="stopping"):
            if item == 2:
                if stop == "raise":
                    raise RuntimeError("stopped")
                break

    if stop == "raise":
        with pytest.raises(RuntimeError):
            run()
    else:
        run()
    assert kernel[-1] == ("update", {}, True)


@pytest.mark.parametrize(("kwargs", "error", "word"), [
    ({"label": ""}, ValueError, "label"),
    ({"label": "x", "total": 0}, ValueError, "total"),
    ({"label": "x", "total": True}, ValueError, "total"),
    ({"label": "x", "total": 2.5}, ValueError, "total"),
])
def test_bad_labels_and_totals_are_refused(kwargs, error, word):
    with pytest.raises(error, match=word):
        p.progress([1, 2], **kwargs)  # refused at the call, before any item


def test_an_iterable_without_a_length_needs_a_total():
    with pytest.raises(TypeError, match="total"):
        p.progress(iter([1, 2]), label="x")
    assert list(p.progress(iter([1, 2]), label="x", total=2)) == [1, 2]


def test_a_loop_takes_the_bar_as_an_argument_and_refuses_what_is_not_one():
    from inferlab.common import checks
    from inferlab.serving.example import example_system
    from inferlab.serving.loadgen import find_server_rate

    # None passes the items through, closable as a bar is; a bar wraps them with its label.
    quiet = checks.shown("progress", None, range(3), label="ignored")
    assert list(quiet) == [0, 1, 2]
    quiet.close()
    labels = []

    def bar(items, *, label):
        labels.append(label)
        return iter(items)

    assert list(checks.shown("progress", bar, "ab", label="letters")) == ["a", "b"]
    assert labels == ["letters"]
    with pytest.raises(ValueError, match="progress: 'yes' is a str; give a function"):
        find_server_rate(example_system(), "Server", progress="yes")
