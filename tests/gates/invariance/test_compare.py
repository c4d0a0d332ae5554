"""Cell comparisons: floats by ULP distance (signed zeros 0 apart, NaN only equal to its own bits), other
dtypes exactly, and the per-output figures in --compare-grads' format."""

import numpy as np
import pytest

from nxgates.gates.invariance.compare import CheckTally, ulp_distance
from nxgates.gates.invariance.faults import flip_last_bit, mate_leak, step

ROWS = np.arange(2)


def compare(a, b, ulp=0):
    tally = CheckTally(ulp)
    tally.compare({"y": np.asarray(a)}, {"y": np.asarray(b)}, ROWS[: len(a)], "here", ("a", "b"))
    return tally


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ulp_distance_counts_the_floats_between_two_values(dtype):
    one = np.array([1.0], dtype)
    assert ulp_distance(one, np.nextafter(one, np.inf)).tolist() == [1]
    assert ulp_distance(np.array([-0.0], dtype), np.array([0.0], dtype)).tolist() == [0]
    tiny = np.nextafter(np.array([0.0], dtype), np.inf)
    assert ulp_distance(-tiny, tiny).tolist() == [2]


def test_float64_extremes_do_not_overflow_the_distance():
    big = np.finfo(np.float64).max
    assert int(ulp_distance(np.array([-big]), np.array([big]))[0]) == 2 * 0x7FEFFFFFFFFFFFFF


def test_signed_zeros_pass_at_ulp_0_and_count_as_a_sign_difference():
    tally = compare([[0.0, 1.0]], [[-0.0, 1.0]])
    assert tally.passed
    assert tally.metrics()["y"]["sign_differences"] == 1 and tally.metrics()["y"]["failing_cells"] == 0


def test_nan_equals_only_the_same_bits():
    nan = np.array([np.nan], np.float32)
    other = nan.copy()
    flip_last_bit(other)
    assert np.isnan(other[0])
    assert compare([nan], [nan.copy()]).passed
    failed = compare([nan], [other], ulp=100)
    assert not failed.passed and failed.metrics()["y"]["nonfinite"] == 1
    assert "(non-finite; here)" in failed.line()


def test_within_ulp_passes_beyond_fails_and_the_line_names_the_first_failing_row():
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    b = a.copy()
    b[0, 1] = np.nextafter(b[0, 1], np.float32(np.inf))
    b[1, 0] = np.nextafter(np.nextafter(b[1, 0], np.float32(np.inf)), np.float32(np.inf))
    assert not compare(a, b).passed and compare(a, b, ulp=2).passed
    tally = compare(a, b, ulp=1)
    assert tally.line() == "row 1 output 'y' [0]: a=3.0 b=3.0000005 (2 ULP; here); 1/4 cells in 1 row beyond 1 ULP"
    figures = tally.metrics()["y"]
    assert figures["histogram"] == {"0": 2, "1": 1, "2-3": 1, "4-15": 0, "16+": 0} and figures["max_ulps"] == 2


@pytest.mark.parametrize("a, b", [([[1, 2]], [[1, 3]]), ([[True, False]], [[True, True]])])
def test_integers_and_bools_are_compared_exactly(a, b):
    assert compare(a, a).passed
    tally = compare(a, b, ulp=1000)
    assert not tally.passed and "(exact compare; here)" in tally.line()
    assert tally.metrics()["y"]["exact_differences"] == 1


def test_the_fault_steps_move_every_dtype_by_one_step():
    assert step(np.array([1.0], np.float32))[0] == np.nextafter(np.float32(1), np.float32(2))
    assert step(np.array([1], np.int32)).tolist() == [2] and step(np.array([True])).tolist() == [False]
    leaked = mate_leak(np.array([[1.0], [3.0]], np.float32))
    assert leaked.tolist() == [[1.0 + 2.0 * 2**-20], [3.0 + 2.0 * 2**-20]]
