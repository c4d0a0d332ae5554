"""What an overflow refusal says: the limit it names is the one that tripped (2^62, or 2^63 less a margin
for a sum of squares), since the user reads it to choose smaller sizes or delta."""

import numpy as np
import pytest

from nxgates.core import q20


def test_a_plain_guard_names_2_to_the_62():
    with pytest.raises(q20.Q20Overflow, match=r"in x@W \(\|value\| could reach 4\.61e\+18 >= 2\^62\)$"):
        q20.check_bound(float(1 << 62), "x@W")
    assert str(q20.Q20Overflow("h@B", 5.0)).endswith("(|value| could reach 5 >= 2^62)")


def test_a_sum_of_squares_guard_names_2_to_the_63_less_a_margin():
    with pytest.raises(q20.Q20Overflow, match=r"in L = sum y\^2 .* >= 2\^63 \(less a margin\)\)$"):
        q20.sum_squares(np.array([3 << 30] * 2, np.int64), what="L = sum y^2")
    q20.check_bound(float(q20.SQUARES_LIMIT) - 2.0**11, "L", q20.SQUARES_LIMIT)  # just below: no refusal
