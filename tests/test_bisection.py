"""The one bisection module: each search shape finds its answer and refuses bad ranges."""

from __future__ import annotations

import math

import pytest

from inferlab.common import bisection as b


def test_bisect_inverts_a_monotonic_function_either_way():
    assert b.bisect(lambda x: x ** 3, 8.0, 0.0, 5.0, iterations=60) == pytest.approx(2.0)
    assert b.bisect(lambda x: -x, -1.5, 0.0, 4.0, iterations=60,
                    increasing=False) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="target"):
        b.bisect(lambda x: x, 9.0, 0.0, 5.0, iterations=10)


def test_highest_passing_returns_the_last_pass_and_its_result():
    tried = []

    def trial(x):
        tried.append(x)
        return x <= math.pi, f"ran at {x:.3f}"

    x, result = b.highest_passing(trial, 0.0, 4.0, iterations=30)
    assert x <= math.pi < x + 4.0 / 2 ** 29
    assert result == f"ran at {x:.3f}" and len(tried) == 30
    # The ends are taken as given, never tried.
    assert 0.0 not in tried and 4.0 not in tried


def test_highest_passing_with_no_pass_gives_the_low_end_and_no_result():
    assert b.highest_passing(lambda x: (False, x), 1.0, 2.0, iterations=5) == (1.0, None)


@pytest.mark.parametrize("threshold", [1, 2, 7, 64, 1000])
def test_least_integer_finds_the_first_true(threshold):
    asked = []

    def passes(n):
        asked.append(n)
        return n >= threshold

    assert b.least_integer(passes, 0, 1024) == threshold
    assert 0 not in asked and len(asked) <= 10  # log2(1024) questions


@pytest.mark.parametrize(("low", "high", "iterations", "word"), [
    (1.0, 1.0, 5, "low"), (0.0, math.inf, 5, "high"), (math.nan, 1.0, 5, "low"),
    (0.0, 1.0, 0, "iterations"), (0.0, 1.0, 201, "iterations"), (0.0, 1.0, True, "iterations"),
])
def test_highest_passing_refuses_bad_ranges(low, high, iterations, word):
    with pytest.raises(ValueError, match=word):
        b.highest_passing(lambda x: (True, x), low, high, iterations=iterations)


def test_least_integer_refuses_a_range_that_is_not_integers_in_order():
    with pytest.raises(ValueError, match="low"):
        b.least_integer(lambda n: True, 5, 5)
    with pytest.raises(ValueError, match="low"):
        b.least_integer(lambda n: True, 0.5, 5)
