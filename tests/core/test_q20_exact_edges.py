"""The Q20 kernels at their edges: C division on all of int64, the overflow guard exactly at 2^62, empty
and one-dimensional operands, sums along one axis, and refusals that name the computation."""

import numpy as np
import pytest

from nxgates.core import q20
from tests.gates.seed_lora import cdiv

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
EDGES = [INT64_MIN, INT64_MIN + 1, -(1 << 62), -7, -6, -1, 0, 1, 6, 7, (1 << 62) - 1, INT64_MAX]


@pytest.mark.parametrize("d", [1, 2, 3, 5, 7, 10, 12, 1 << 20, (1 << 20) + 1, 3 << 40])
def test_tdiv_truncates_on_the_whole_int64_range(d):
    assert q20.tdiv(np.array(EDGES, dtype=np.int64), d).tolist() == [cdiv(v, d) for v in EDGES]


def test_tdiv_of_int64_minimum_by_three_is_negative():
    """Regression: |INT64_MIN| wraps in np.abs, which once made this quotient positive."""
    assert int(q20.tdiv(INT64_MIN, 3)) == -3074457345618258602


@pytest.mark.parametrize("d", [0, -1, -4])
def test_tdiv_refuses_a_divisor_that_is_not_positive(d):
    with pytest.raises(ValueError, match="tdiv divides by a positive integer"):
        q20.tdiv(np.array([5, -5]), d)
