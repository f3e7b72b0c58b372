"""Argument checks shared by every public function of the package.

Each check returns the value in the type the caller computes with, or raises with a
message that names the argument, the value and what is allowed:

- a value of the wrong type raises :class:`ArgumentTypeError`, a ``TypeError``;
- a value of the right type outside what is allowed raises ``ValueError``.

Booleans are refused wherever a number is asked for (``True`` is an ``int`` to Python,
never a count or a rate to a reader). Counts have a documented maximum, so that a huge
count raises here instead of allocating or looping for ever: :data:`MAX_COUNT` for a
number that is only computed with, :data:`MAX_ITEMS` for one that sizes an array or a
loop, :data:`MAX_ITERATIONS` for the steps of a search.

Used by every chapter, through the modules that the chapters call.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

import numpy as np

#: The largest count a function computes with: 2**53, the last integer a float holds
#: exactly, so a count converted to float for a formula is still the same count.
MAX_COUNT = 2**53

#: The largest count that sizes an array or a loop (requests, samples, draft tokens):
#: ten million items of 8 bytes each are 80 MB, as much as a page should ask for.
MAX_ITEMS = 10**7

#: The most steps a search (a bisection, a fit) may take; 200 halvings resolve any
#: float interval to its last bit.
MAX_ITERATIONS = 200


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type: a ``TypeError``, and a ``ValueError`` as well.

    The package refused wrong types with ``ValueError`` before; the explorers, the
    command lines and readers' code catch ``ValueError`` to show a refusal, and they
    still catch this.
    """


def _wrong_type(name: str, value, allowed: str) -> ArgumentTypeError:
    return ArgumentTypeError(f"{name}: {value!r} is a {type(value).__name__}; give {allowed}")


def _refused(name: str, value, allowed: str) -> ValueError:
    return ValueError(f"{name}: {value!r} is not allowed; give {allowed}")


def _interval(low: float, high: float, low_open: bool, high_open: bool) -> str:
    # An infinite end is never reached by a finite value, so it is shown open.
    left = "(" if low_open or math.isinf(low) else "["
    right = ")" if high_open or math.isinf(high) else "]"
    return f"{left}{low:g}, {high:g}{right}"


def real(name: str, value, *, low: float = -math.inf, high: float = math.inf,
         low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a finite float in the interval from ``low`` to ``high``.

    The ends are included unless ``low_open`` / ``high_open``; an infinite end is
    never reached, since the value must be finite.
    """
    allowed = f"a finite number in {_interval(low, high, low_open, high_open)}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _wrong_type(name, value, allowed)
    try:
        number = float(value)
    except OverflowError:
        raise _refused(name, value, allowed) from None
    below = number <= low if low_open else number < low
    above = number >= high if high_open else number > high
    if not math.isfinite(number) or below or above:
        raise _refused(name, value, allowed)
    return number


def positive(name: str, value, *, high: float = math.inf) -> float:
    """``value`` as a finite float above 0 (and at most ``high``)."""
    return real(name, value, low=0.0, low_open=True, high=high)


#: The least rate, per second, a rate argument may take. No system serves a millionth of a
#: token per second, and a smaller rate's reciprocal overflows the formulas that divide
#: by it (the least positive float's reciprocal is infinite).
MIN_RATE = 1e-6


def rate(name: str, value, *, high: float = math.inf) -> float:
    """``value`` as a finite rate per second, from :data:`MIN_RATE` to ``high``."""
    return real(name, value, low=MIN_RATE, high=high)


def non_negative(name: str, value, *, high: float = math.inf) -> float:
    """``value`` as a finite float of at least 0 (and at most ``high``)."""
    return real(name, value, low=0.0, high=high)


def fraction(name: str, value, *, low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a float in [0, 1], either end excluded on request."""
    return real(name, value, low=0.0, high=1.0, low_open=low_open, high_open=high_open)


def whole(name: str, value, *, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """``value`` as an int from ``minimum`` to ``maximum``.

    A float with a whole value (``300.0``) is accepted, as a slider or a formula
    gives one; a fractional, infinite or NaN one is refused.
    """
    allowed = f"a whole number in [{minimum:,}, {maximum:,}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _wrong_type(name, value, allowed)
    if not isinstance(value, numbers.Integral) and not float(value).is_integer():
        raise _refused(name, value, allowed)
    if not minimum <= value <= maximum:
        raise _refused(name, value, allowed)
    return int(value)


def seed(name: str, value) -> int:
    """``value`` as a seed NumPy's generators take: a whole number >= 0."""
    return whole(name, value, minimum=0, maximum=2**63 - 1)


def iterations(name: str, value) -> int:
    """``value`` as a number of search steps, from 1 to :data:`MAX_ITERATIONS`."""
    return whole(name, value, maximum=MAX_ITERATIONS)


def text(name: str, value, *, empty: bool = False) -> str:
    """``value`` as a string, refusing the empty string unless ``empty``."""
    if not isinstance(value, str):
        raise _wrong_type(name, value, "a string")
    if not empty and not value.strip():
        raise _refused(name, value, "a non-empty string")
    return value


def option(name: str, value, allowed: Iterable[str]) -> str:
    """``value`` if it is one of ``allowed``, else an error listing them."""
    choices = list(allowed)
    listed = f"one of {', '.join(map(str, choices))}"
    if not isinstance(value, str):
        raise _wrong_type(name, value, listed)
    if value not in choices:
        raise _refused(name, value, listed)
    return value


def instance(name: str, value, kind: type | tuple[type, ...]):
    """``value`` if it is an instance of ``kind``, else :class:`ArgumentTypeError`."""
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        raise _wrong_type(name, value, " or ".join(f"a {k.__name__}" for k in kinds))
    return value


def shown(name: str, progress, items, *, label: str):
    """``items`` wrapped by ``progress`` (a function like :func:`inferlab.pages.progress.progress`,
    which a chapter passes to show a bar) with ``label``, or yielded as they are for
    ``None``. The package's loops take the bar as an argument so that no module below the
    book's presentation imports the notebook display.
    """
    if progress is None:
        # A generator, as progress's own result is, so that a caller may close it.
        return (item for item in items)
    if not callable(progress):
        raise _wrong_type(name, progress,
                          "a function like inferlab.pages.progress.progress, or None")
    return progress(items, label=label)


def _array(name: str, values, allowed: str, *, empty: bool, size: int) -> np.ndarray:
    if isinstance(values, (str, bytes, bool)):
        raise _wrong_type(name, values, allowed)
    try:
        array = np.asarray(values)
    except (TypeError, ValueError, OverflowError):
        raise _refused(name, values, allowed) from None
    if array.dtype.kind == "b" or (array.size and array.dtype.kind not in "iuf"):
        raise _wrong_type(name, values, allowed)
    if array.size > size:
        raise ValueError(f"{name}: {array.size:,} values is more than the {size:,} allowed")
    if not empty and array.size == 0:
        raise ValueError(f"{name}: {values!r} is empty; give {allowed}")
    return array


def reals(name: str, values, *, low: float = -math.inf, high: float = math.inf,
          low_open: bool = False, empty: bool = False, size: int = MAX_ITEMS) -> np.ndarray:
    """``values`` as a float array, every element finite and in the interval.

    At most ``size`` elements, and none at all only if ``empty``.
    """
    allowed = f"finite numbers in {_interval(low, high, low_open, False)}"
    array = _array(name, values, allowed, empty=empty, size=size).astype(float)
    below = array <= low if low_open else array < low
    if not np.all(np.isfinite(array)) or np.any(below | (array > high)):
        raise _refused(name, values, allowed)
    return array


def wholes(name: str, values, *, minimum: int = 1, maximum: int = MAX_COUNT,
           empty: bool = False, size: int = MAX_ITEMS, increasing: bool = False) -> np.ndarray:
    """``values`` as an int64 array of whole numbers from ``minimum`` to ``maximum``.

    Checked before the cast: NaN cast to int64 becomes -9,223,372,036,854,775,808
    with no error, and a huge float wraps round. ``increasing``: each value must be
    above the one before (compiled buckets, sorted sizes).
    """
    allowed = f"whole numbers in [{minimum:,}, {maximum:,}]"
    if increasing:
        allowed = f"strictly increasing {allowed}"
    array = _array(name, values, allowed, empty=empty, size=size)
    if array.dtype.kind == "f" and (not np.all(np.isfinite(array))
                                    or np.any(array != np.round(array))):
        raise _refused(name, values, allowed)
    if np.any((array < minimum) | (array > maximum)):
        raise _refused(name, values, allowed)
    if increasing and np.any(np.diff(array.ravel()) <= 0):
        raise _refused(name, values, allowed)
    return array.astype(np.int64)


def finite_result(value, *names: str):
    """``value`` if every number in it is finite; else an error naming ``names``.

    For results of formulas whose finite arguments can still overflow (a byte count
    over a bandwidth of 1e-300 bytes/s) or underflow.
    """
    if np.all(np.isfinite(np.asarray(value, dtype=float))):
        return value
    raise ValueError(f"{', '.join(names)}: these values give {value!r}, not a finite "
                     "result; give values of a realistic size")
