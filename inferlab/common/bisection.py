"""One bisection for every search in the book: rates, efficiencies, overheads, counts.

Used wherever a model is inverted: the value that reproduces a result
(:func:`bisect`), the highest rate a run passes at (:func:`highest_passing`), the
fewest queries a statistical test needs (:func:`least_integer`); see
:mod:`inferlab.serving.calibration`, :mod:`inferlab.serving.loadgen` and
:mod:`inferlab.serving.simulator`.
"""

from __future__ import annotations

from inferlab.common import checks


def _range(low, high, iterations) -> tuple[float, float, int]:
    low, high = checks.real("low", low), checks.real("high", high)
    if not low < high:
        raise ValueError(f"low: {low!r} is not below high: {high!r}")
    return low, high, checks.iterations("iterations", iterations)


def _at(function, x: float, bounds: str):
    # A function refusing a point of the range (math.sqrt below 0, a division by 0)
    # means a range the caller chose badly: say which bounds, not only what the function
    # said. Subclasses of ValueError (Infeasible, ...) are the function's own refusals,
    # which its callers catch by type: they pass unchanged.
    try:
        return function(x)
    except (ArithmeticError, ValueError) as error:
        if type(error) is not ValueError and not isinstance(error, ArithmeticError):
            raise
        raise ValueError(f"function: fails at {x!r}, in the range {bounds}: {error}") from error


def bisect(function, target: float, low: float, high: float, *, iterations: int,
           increasing: bool = True) -> float:
    """The ``x`` in ``[low, high]`` with ``function(x)`` nearest ``target``, by bisection.

    ``function`` must be monotonic (``increasing`` or not). Raises ``ValueError``
    naming the range reached if ``target`` lies outside it, and for bounds that are
    not finite with ``low < high`` or a non-positive ``iterations``.
    """
    target = checks.real("target", target)
    low, high, iterations = _range(low, high, iterations)
    bounds = f"low={low:g} to high={high:g}"
    at_low, at_high = _at(function, low, bounds), _at(function, high, bounds)
    lo_value, hi_value = (at_low, at_high) if increasing else (at_high, at_low)
    if not lo_value <= target <= hi_value:
        raise ValueError(f"target: {target:.4g} is outside what [{low:g}, {high:g}] gives "
                         f"({min(at_low, at_high):.4g} to {max(at_low, at_high):.4g})")
    for _ in range(iterations):
        middle = (low + high) / 2
        below = _at(function, middle, bounds) < target
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
    low, high, iterations = _range(low, high, iterations)
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
    low = checks.whole("low", low, minimum=-checks.MAX_COUNT)
    high = checks.whole("high", high, minimum=-checks.MAX_COUNT)
    if not low < high:
        raise ValueError(f"low: {low!r} and high: {high!r} must be integers with low < high")
    while high - low > 1:
        middle = (low + high) // 2
        if passes(middle):
            high = middle
        else:
            low = middle
    return high
