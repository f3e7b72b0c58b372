"""One bisection for every search in the book: rates, efficiencies, overheads, counts.

Used wherever a model is inverted: the value that reproduces a result
(:func:`bisect`), the highest rate a run passes at (:func:`highest_passing`), the
fewest queries a statistical test needs (:func:`least_integer`); see
:mod:`inferlab.calibration`, :mod:`inferlab.loadgen` and :mod:`inferlab.simulator`.
"""

from __future__ import annotations

import math
import numbers


def _check_finite(name: str, value) -> None:
    if (not isinstance(value, numbers.Real) or isinstance(value, bool)
            or not math.isfinite(value)):
        raise ValueError(f"{name}: {value!r} is not allowed; give a finite number")


def _check_range(low, high, iterations) -> None:
    _check_finite("low", low)
    _check_finite("high", high)
    if not low < high:
        raise ValueError(f"low: {low!r} is not below high: {high!r}")
    if not isinstance(iterations, numbers.Integral) or isinstance(iterations, bool) \
            or not 1 <= iterations <= 200:
        raise ValueError(f"iterations: {iterations!r} is not allowed; give a whole number "
                         "in [1, 200]")


def bisect(function, target: float, low: float, high: float, *, iterations: int,
           increasing: bool = True) -> float:
    """The ``x`` in ``[low, high]`` with ``function(x)`` nearest ``target``, by bisection.

    ``function`` must be monotonic (``increasing`` or not). Raises ``ValueError``
    naming the range reached if ``target`` lies outside it, and for bounds that are
    not finite with ``low < high`` or a non-positive ``iterations``.
    """
    _check_finite("target", target)
    _check_range(low, high, iterations)
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




def highest_passing(trial, low: float, high: float, *, iterations: int):
    """The highest ``x`` in ``[low, high)`` found to pass, by ``iterations`` halvings.

    ``trial(x)`` returns ``(passed, result)``; passing is assumed to stop at one
    point of the range (a rate a server sustains, an overhead a bound allows).
    ``low`` is taken to pass and ``high`` to fail without being tried. Returns
    ``(x, result)`` of the highest trial that passed, or ``(low, None)`` if none did.
    """
    _check_range(low, high, iterations)
    best = None
    for _ in range(iterations):
        middle = (low + high) / 2
        passed, result = trial(middle)
        if passed:
            low, best = middle, result
        else:
            high = middle
    return low, best


def least_integer(passes, low: int, high: int) -> int:
    """The least integer in ``(low, high]`` for which ``passes`` holds, ``passes`` being
    false up to some point and true from there on; ``passes(high)`` must hold and
    ``passes(low)`` is not asked."""
    if not (isinstance(low, numbers.Integral) and isinstance(high, numbers.Integral)
            and low < high):
        raise ValueError(f"low: {low!r} and high: {high!r} must be integers with low < high")
    while high - low > 1:
        middle = (low + high) // 2
        if passes(middle):
            high = middle
        else:
            low = middle
    return high
