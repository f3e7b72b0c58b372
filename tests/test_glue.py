"""The chapters' glue helper: NumPy scalars become Python values, numbers become floats."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.pages import glue as g


@pytest.fixture
def glued(monkeypatch):
    seen = {}
    import myst_nb

    monkeypatch.setattr(myst_nb, "glue",
                        lambda key, value, display=True: seen.update({key: (value, display)}))
    return seen


def test_numpy_scalars_are_glued_as_python_values_and_never_displayed(glued):
    g.glue("a", np.float64(2.5))
    g.glue("b", np.int64(7))
    g.glue("c", "text")
    assert glued["a"] == (2.5, False) and type(glued["a"][0]) is float
    assert type(glued["b"][0]) is int and glued["c"] == ("text", False)


def test_number_glues_a_float_and_refuses_what_is_not_a_number(glued):
    g.number("n", np.int32(3))
    assert glued["n"] == (3.0, False) and type(glued["n"][0]) is float
    for bad in ("3", None, True):
        with pytest.raises(ValueError, match="is not a number"):
            g.number("n", bad)
    with pytest.raises(ValueError, match="key"):
        g.glue("", 1.0)
