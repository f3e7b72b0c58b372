"""One bisection for every search in the book: rates, efficiencies, overheads.

Used wherever a model is inverted (the highest valid rate, the efficiency that
reproduces a result); see :mod:`inferlab.calibration` and :mod:`inferlab.predict`.
"""

from __future__ import annotations

import math
import numbers


def bisect(function, target: float, low: float, high: float, *, iterations: int,
           increasing: bool = True) -> float:
    """The ``x`` in ``[low, high]`` with ``function(x)`` nearest ``target``, by bisection.

    ``function`` must be monotonic (``increasing`` or not). Raises ``ValueError``
    naming the range reached if ``target`` lies outside it, and for bounds that are
    not finite with ``low < high`` or a non-positive ``iterations``.
    """
    for name, value in (("low", low), ("high", high), ("target", target)):
        if (not isinstance(value, numbers.Real) or isinstance(value, bool)
                or not math.isfinite(value)):
            raise ValueError(f"{name}: {value!r} is not allowed; give a finite number")
    if not low < high:
        raise ValueError(f"low: {low!r} is not below high: {high!r}")
    if not isinstance(iterations, numbers.Integral) or isinstance(iterations, bool) \
            or not 1 <= iterations <= 200:
        raise ValueError(f"iterations: {iterations!r} is not allowed; give a whole number "
                         "in [1, 200]")
    at_low, at_high = function(low), function(high)
    lo_value, hi_value = (at_low, at_high) if increasing else (at_high, at_low)
    if not lo_value <= target <= hi_value:
        raise ValueError(f"target: {target:.4g} is outside what [{low:g}, {high:g}] gives "
                         f"({min(at_low, at_high):.4g} to {max(at_low, at_high):.4g})")
    for _ in range(iterations):
        middle = (low + high) / 2
        below = function(middle) < target
        if below == increasing:
            low = middle
        else:
            high = middle
    return (low + high) / 2


