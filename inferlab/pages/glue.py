"""The chapters' one way to hand a computed value to their prose (myst-nb's ``glue``).

A chapter writes ``{glue:text}`key:,.0f``` in its prose, and the format spec is applied
to the glued value. Two things go wrong with NumPy results: a NumPy scalar's
formatting differs from a Python number's, and a value glued with ``display=True``
is printed into the page. :func:`glue` turns NumPy scalars into Python values and
never displays; :func:`number` glues a plain ``float``, so that every numeric spec
(``:.1f``, ``:,.0f``, ``:.0%``) applies.

myst-nb is imported when a value is first glued, so the package works without it
(it comes with the ``notebooks`` extra). Used in every chapter.
"""

from __future__ import annotations

import numbers

import numpy as np


def glue(key: str, value, display: bool = False) -> None:
    """Glue ``value`` under ``key`` for the page's prose, NumPy scalars as Python values."""
    from myst_nb import glue as myst_glue

    if not isinstance(key, str) or not key:
        raise ValueError(f"key: {key!r} is not allowed; give a non-empty string")
    myst_glue(key, value.item() if isinstance(value, np.generic) else value, display=display)


def number(key: str, value) -> None:
    """Glue ``value`` as a plain ``float``; ``ValueError`` for anything that is not a number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.number):
        raise ValueError(f"value: {value!r} for {key!r} is not a number")
    glue(key, float(value))
