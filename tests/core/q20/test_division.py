"""Q20's division, as C's: ``tdiv`` truncates toward zero on the whole int64 range (by shifts for powers of
two too), ``tdiv_s_inplace`` is ``tdiv`` by S in the array itself, and a divisor must be positive."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nxgates.core import q20
from nxgates.core.q20 import S
from tests.oracles.seed_lora import cdiv


def test_tdiv_truncates_toward_zero_like_c():
    assert int(q20.tdiv(-3 * S, 10)) == -314572  # floor division would give -314573
    assert int(q20.tdiv(3 * S, 10)) == 314572
    assert q20.tdiv(np.array([-7, -1, 0, 1, 7]), 2).tolist() == [-3, 0, 0, 0, 3]


@given(st.lists(st.integers(-(1 << 61), (1 << 61)), min_size=1, max_size=50), st.integers(1, 1 << 40))
def test_tdiv_matches_python_reference(values, d):
    assert q20.tdiv(np.array(values, dtype=np.int64), d).tolist() == [cdiv(v, d) for v in values]


@given(st.lists(st.integers(-(1 << 61), (1 << 61)), min_size=1, max_size=50), st.integers(0, 40))
def test_tdiv_by_a_power_of_two_uses_shifts_and_still_truncates(values, k):
    d = 1 << k
    assert q20.tdiv(np.array(values, dtype=np.int64), d).tolist() == [cdiv(v, d) for v in values]


I64_MIN = np.iinfo(np.int64).min


@pytest.mark.parametrize("d", [1, 2, 3, 10, 16, S, 12])
def test_tdiv_truncates_toward_zero(d):
    a = np.array([-3 * d - 1, -2 * d, -1, 0, 1, d - 1, d, 5 * d + 3, -(d + 1)], np.int64)
    want = [int(v / d) if abs(v) < 1 << 52 else None for v in a.tolist()]
    assert q20.tdiv(a, d).tolist() == want


def test_tdiv_examples():
    assert q20.tdiv(-3, 2).tolist() == -1
    assert q20.tdiv(np.array([-7, 7, -6]), 4).tolist() == [-1, 1, -1]
    assert q20.tdiv(np.array([-7, 7, -6, -5]), 3).tolist() == [-2, 2, -2, -1]
    assert q20.tdiv(np.array([I64_MIN, np.iinfo(np.int64).max]), S).tolist() == [-(1 << 43), (1 << 43) - 1]
    assert q20.tdiv(np.array([I64_MIN]), 3).tolist() == [-(1 << 63) // 3 + 1]


def test_tdiv_divides_by_positive_integers_only():
    for d in (0, -2):
        with pytest.raises(ValueError, match=r"^tdiv divides by a positive integer$"):
            q20.tdiv(np.array([4]), d)


def test_tdiv_s_inplace_is_tdiv_by_s_in_the_array_itself():
    a = np.array([-S - 1, -S, -1, 0, 1, S - 1, S, 3 * S + 5, I64_MIN], np.int64)
    want = q20.tdiv(a, S).tolist()
    out = q20.tdiv_s_inplace(a)
    assert out is a and a.tolist() == want == [-1, -1, 0, 0, 0, 0, 1, 3, -(1 << 43)]


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


EDGES = [INT64_MIN, INT64_MIN + 1, -(1 << 62), -7, -6, -1, 0, 1, 6, 7, (1 << 62) - 1, INT64_MAX]


@pytest.mark.parametrize("d", [1, 2, 3, 5, 7, 10, 12, 1 << 20, (1 << 20) + 1, 3 << 40])
def test_tdiv_truncates_on_the_whole_int64_range(d):
    assert q20.tdiv(np.array(EDGES, dtype=np.int64), d).tolist() == [cdiv(v, d) for v in EDGES]


def test_tdiv_by_s_in_place_rounds_as_tdiv_on_the_whole_int64_range():
    S = q20.S
    values = [*EDGES, -2 * S - 1, -2 * S, -2 * S + 1, -S - 1, -S, -S + 1, -2, S - 1, S, S + 1]
    a = np.array(values, dtype=np.int64)
    assert q20.tdiv_s_inplace(a) is a  # no new array
    assert a.tolist() == [cdiv(v, S) for v in values]


def test_tdiv_of_int64_minimum_by_three_is_negative():
    """|INT64_MIN| wraps in np.abs: the quotient must still come out negative."""
    assert int(q20.tdiv(INT64_MIN, 3)) == -3074457345618258602


@pytest.mark.parametrize("d", [0, -1, -4])
def test_tdiv_refuses_a_divisor_that_is_not_positive(d):
    with pytest.raises(ValueError, match="^tdiv divides by a positive integer$"):
        q20.tdiv(np.array([5, -5]), d)
