"""The hyper-parameter checks: canonical values back, and a message naming the parameter, the value
and what is allowed otherwise."""

import doctest

import numpy as np
import pytest

from nctl import params


def test_docstring_examples():
    assert doctest.testmod(params).failed == 0


def test_integers_accept_whole_numbers_of_any_type_and_nothing_else():
    assert [params.check_int("n", v, 0, 9) for v in (3, 3.0, np.int64(3), np.float32(3))] == [3] * 4
    for bad in (True, 3.5, float("nan"), float("inf"), "3", None, -1, 10):
        with pytest.raises(ValueError, match=rf"n must be an integer in \[0, 9\], got {bad!r}"):
            params.check_int("n", bad, 0, 9)


def test_float_bounds_are_open_or_closed_as_asked():
    assert params.check_float("p", 0, 0, 1) == 0.0
    with pytest.raises(ValueError, match=r"p must be a finite number in \(0, 1\], got 0"):
        params.check_float("p", 0, 0, 1, low_open=True)
    with pytest.raises(ValueError, match=r"p must be a finite number < 1, got 1"):
        params.check_float("p", 1, high=1, high_open=True)
    with pytest.raises(ValueError, match="p must be a finite number, got nan"):
        params.check_float("p", float("nan"))


def test_powers_of_two_layer_sizes_and_unknown_names():
    assert [params.check_power_of_two("m", v, 1, 64) for v in (1, 2, 64, 32.0)] == [1, 2, 64, 32]
    for bad in (0, 3, 12, 128, 2.5):
        with pytest.raises(ValueError, match=rf"m must be a power of two in \[1, 64\], got {bad!r}"):
            params.check_power_of_two("m", bad, 1, 64)
    assert params.check_layer_sizes("sizes", np.array([4, 2, 1])) == (4, 2, 1)
    for bad in ("41", 41, [], [4, 2], [0, 1], [4, None, 1]):
        with pytest.raises(ValueError, match="sizes"):
            params.check_layer_sizes("sizes", bad)
    with pytest.raises(ValueError, match="unknown parameter.* colour; valid: layer_sizes"):
        params.checked(params.GLN_RULES, {"colour": 1})
