"""float32 gradients compared cell by cell: ULP distances at their edges, the histogram, the first differing
cells, and the report's lines and metrics."""

import math

import numpy as np
import pytest

from nxgates.core import ulp
from nxgates.core.ulp import Cell, Tensor, UlpReport

F32 = np.float32
MAX = np.finfo(F32).max
TINY = np.nextafter(F32(0), F32(1))  # the smallest subnormal


def up(x, n=1):
    """``x`` moved ``n`` float32 values towards +inf."""
    x = F32(x)
    for _ in range(n):
        x = np.nextafter(x, F32(np.inf))
    return x


# --- the distance ---------------------------------------------------------------------------------------


def test_ordered_maps_both_zeros_to_zero_and_keeps_the_order_of_the_values():
    values = np.array([-MAX, -1.0, -TINY, -0.0, 0.0, TINY, 1.0, MAX], F32)
    got = ulp.ordered(values)
    assert got.dtype == np.int64
    assert list(got) == [-0x7F7FFFFF, -0x3F800000, -1, 0, 0, 1, 0x3F800000, 0x7F7FFFFF]


@pytest.mark.parametrize(("a", "b", "want"), [
    (0.0, -0.0, 0),
    (1.0, 1.0, 0),
    (1.0, up(1.0), 1),
    (up(1.0, 3), 1.0, 3),
    (0.0, TINY, 1),
    (-TINY, TINY, 2),
    (-0.0, TINY, 1),
    (MAX, np.nextafter(MAX, F32(0)), 1),
    (-MAX, MAX, 2 * 0x7F7FFFFF),
    (np.finfo(F32).tiny, np.nextafter(np.finfo(F32).tiny, F32(0)), 1),  # normal to subnormal
])
def test_ulp_distance_counts_the_float32_values_between(a, b, want):
    got = ulp.ulp_distance(np.array([a], F32), np.array([b], F32))
    assert got.tolist() == [want]


def test_ulp_distance_takes_python_floats_as_float32():
    near = float(up(1.0))
    assert ulp.ulp_distance([1.0, 2.0], [near, 2.0]).tolist() == [1, 0]
    assert ulp.ulp_distance(np.array([near]), [1.0]).tolist() == [1]


def test_ulp_distance_of_strided_views():
    a = np.array([[1.0, 5.0], [2.0, 6.0]], F32)
    b = np.array([[up(1.0, 2), 5.0], [2.0, 6.0]], F32)
    assert ulp.ulp_distance(a[:, 0], b[:, 0]).tolist() == [2, 0]


# --- the report -----------------------------------------------------------------------------------------

TENSORS = (Tensor("W1", 0, 2, 3), Tensor("W2", 6, 1, 2))  # rows of 8 cells


def rows(n, value=1.0):
    return np.full((n, 8), value, F32)


def test_a_tensor_knows_where_it_stops():
    assert Tensor("x", 5, 2, 3).stop == 11


def test_identical_rows_are_all_in_the_zero_bucket():
    r = UlpReport(TENSORS)
    r.add(0, rows(3), rows(3))
    assert r.cells == {"W1": 18, "W2": 6} and r.differing == {"W1": 0, "W2": 0}
    assert r.histogram == {"0": 24, "1": 0, "2-3": 0, "4-15": 0, "16+": 0}
    assert r.total_differing == 0 and r.first == [] and r.max_ulps == 0
    assert r.passes(0) and r.passes(1)


def test_the_histogram_buckets_at_their_edges():
    ours, theirs = rows(1), rows(1)
    for col, n in zip(range(8), (1, 2, 3, 4, 15, 16, 17, 0), strict=True):
        theirs[0, col] = up(1.0, n)
    r = UlpReport(TENSORS)
    r.add(0, ours, theirs)
    assert r.histogram == {"0": 1, "1": 1, "2-3": 2, "4-15": 2, "16+": 2}
    assert r.max_ulps == 17 and r.sign == 0 and r.nonfinite == 0
    assert r.differing == {"W1": 6, "W2": 1}


def test_opposite_signs_and_non_finite_cells_are_counted_apart_from_the_histogram():
    ours, theirs = rows(1), rows(1)
    ours[0, 0], theirs[0, 0] = 0.0, -0.0  # 0 ULP apart, but different bits
    ours[0, 1], theirs[0, 1] = TINY, -TINY
    theirs[0, 2] = np.nan
    theirs[0, 3] = np.inf
    ours[0, 4], theirs[0, 4] = -np.inf, np.inf
    r = UlpReport(TENSORS)
    r.add(0, ours, theirs)
    assert r.sign == 2 and r.nonfinite == 3
    assert r.histogram == {"0": 3, "1": 0, "2-3": 0, "4-15": 0, "16+": 0}
    assert r.max_ulps == 2  # over finite cells: the sign differences count
    assert [c.ulps for c in r.first] == [0, 2, None, None, None]
    assert not r.passes(0) and not r.passes(100)


def test_a_signed_zero_alone_fails_only_the_exact_comparison():
    ours, theirs = rows(1), rows(1)
    ours[0, 7], theirs[0, 7] = 0.0, -0.0
    r = UlpReport(TENSORS)
    r.add(0, ours, theirs)
    assert r.total_differing == 1 and r.max_ulps == 0
    assert not r.passes(0) and r.passes(1)


def test_passes_within_the_given_distance_and_not_beyond():
    ours, theirs = rows(1), rows(1)
    theirs[0, 0] = up(1.0, 1)
    r = UlpReport(TENSORS)
    r.add(0, ours, theirs)
    assert not r.passes(0) and r.passes(1)
    theirs[0, 1] = up(1.0, 4)
    r = UlpReport(TENSORS)
    r.add(0, ours, theirs)
    assert not r.passes(3) and r.passes(4)


def test_max_finite_against_inf_is_non_finite_not_a_distance():
    ours, theirs = rows(1), rows(1)
    ours[0, 5], theirs[0, 5] = MAX, np.inf
    r = UlpReport(TENSORS)
    r.add(0, ours, theirs)
    assert r.nonfinite == 1 and r.max_ulps == 0 and r.first[0].ulps is None
    assert not r.passes(1 << 40)


def test_counts_accumulate_over_chunks_and_rows_of_sixteen():
    ours, theirs = rows(40), rows(40)
    theirs[3, 0] = np.nan
    theirs[20, 6] = np.nan
    theirs[39, 7] = up(1.0, 5)
    r = UlpReport(TENSORS)
    r.add(0, ours[:30], theirs[:30])
    r.add(30, ours[30:], theirs[30:])
    assert r.cells == {"W1": 240, "W2": 80}
    assert r.differing == {"W1": 1, "W2": 2}
    assert r.nonfinite == 2 and r.max_ulps == 5
    assert r.histogram == {"0": 317, "1": 0, "2-3": 0, "4-15": 1, "16+": 0}
    assert [(c.example, c.tensor, c.row, c.col) for c in r.first] == [(3, "W1", 0, 0), (20, "W2", 0, 0),
                                                                      (39, "W2", 0, 1)]


def test_the_first_cells_are_in_example_then_declared_tensor_order_and_at_most_ten():
    tensors = (Tensor("zeta", 0, 1, 2), Tensor("alpha", 2, 1, 2))
    ours = np.ones((8, 4), F32)
    theirs = ours.copy()
    theirs[:, :] = up(1.0)
    r = UlpReport(tensors)
    r.add(0, ours[:4], theirs[:4])
    r.add(4, ours[4:], theirs[4:])
    got = [(c.example, c.tensor, c.col) for c in r.first]
    assert len(got) == ulp.FIRST_CELLS == 10
    assert got[:6] == [(0, "zeta", 0), (0, "zeta", 1), (0, "alpha", 0), (0, "alpha", 1),
                       (1, "zeta", 0), (1, "zeta", 1)]
    assert got[-2:] == [(2, "zeta", 0), (2, "zeta", 1)]


def test_first_cells_fill_up_to_ten_then_only_earlier_examples_displace_them():
    ours, theirs = rows(2), rows(2)
    theirs[1, :] = up(1.0)
    r = UlpReport(TENSORS)
    r.add(5, ours, theirs)
    assert [c.example for c in r.first] == [6] * 8
    r.add(7, ours, theirs)
    assert [c.example for c in r.first] == [6] * 8 + [8] * 2
    r.add(9, ours, theirs)
    assert [c.example for c in r.first] == [6] * 8 + [8] * 2
    r.add(0, ours, theirs)
    assert [c.example for c in r.first] == [1] * 8 + [6] * 2


def test_a_cell_gives_row_and_column_in_its_tensor():
    ours, theirs = rows(1), rows(1)
    theirs[0, 4] = up(1.0, 2)  # W1 is 2 x 3: cell 4 is [1, 1]
    r = UlpReport(TENSORS)
    r.add(9, ours, theirs)
    assert r.first == [Cell(9, "W1", 1, 1, 1.0, float(up(1.0, 2)), 2)]


# --- lines and metrics ----------------------------------------------------------------------------------


def test_the_lines_of_a_report():
    ours, theirs = rows(1), rows(1)
    theirs[0, 1] = up(1.0, 2)
    theirs[0, 7] = np.nan
    r = UlpReport(TENSORS)
    r.add(0, ours, theirs)
    near = repr(float(up(1.0, 2)))
    assert r.lines() == [
        "   W1: 1/6 cells differ (16.67%)",
        "   W2: 1/2 cells differ (50.00%)",
        "   ULP distances: 0:6 1:0 2-3:1 4-15:0 16+:0 sign:0 non-finite:1; largest 2 ULP",
        f"   example 0 W1[0,1]: ours=1.0 theirs={near} (2 ULP)",
        "   example 0 W2[0,1]: ours=1.0 theirs=nan (non-finite)",
    ]


def test_the_lines_of_a_report_that_saw_no_rows():
    assert UlpReport(TENSORS).lines() == [
        "   W1: 0/0 cells differ (no cells)",
        "   W2: 0/0 cells differ (no cells)",
        "   ULP distances: 0:0 1:0 2-3:0 4-15:0 16+:0 sign:0 non-finite:0; largest 0 ULP",
    ]


def test_the_metrics_of_a_report():
    ours, theirs = rows(1), rows(1)
    theirs[0, 0] = up(1.0, 3)
    ours[0, 6], theirs[0, 6] = -np.inf, np.nan
    r = UlpReport(TENSORS)
    r.add(4, ours, theirs)
    assert r.metrics() == {
        "differing_cells": 2,
        "tensors": {"W1": {"cells": 6, "differing": 1, "share": 1 / 6},
                    "W2": {"cells": 2, "differing": 1, "share": 0.5}},
        "max_ulps": 3,
        "histogram": {"0": 6, "1": 0, "2-3": 1, "4-15": 0, "16+": 0},
        "sign_differences": 0,
        "nonfinite": 1,
        "first_differing": [
            {"example": 4, "tensor": "W1", "row": 0, "col": 0, "ours": 1.0, "theirs": float(up(1.0, 3)),
             "ulps": 3},
            {"example": 4, "tensor": "W2", "row": 0, "col": 0, "ours": "-inf", "theirs": "nan", "ulps": None},
        ],
    }
    first = r.metrics()["first_differing"][0]
    assert type(first["ours"]) is float and type(first["theirs"]) is float


def test_the_metrics_of_a_one_cell_tensor_and_of_a_report_that_saw_no_rows():
    r = UlpReport((Tensor("s", 0, 1, 1),))
    assert r.metrics()["tensors"] == {"s": {"cells": 0, "differing": 0, "share": 0.0}}
    r.add(0, np.array([[1.0]], F32), np.array([[2.0]], F32))
    assert r.metrics()["tensors"] == {"s": {"cells": 1, "differing": 1, "share": 1.0}}


def test_the_histogram_in_the_metrics_is_a_copy():
    r = UlpReport(TENSORS)
    r.metrics()["histogram"]["0"] = 99
    assert r.histogram["0"] == 0


def test_share_and_json_float():
    assert ulp._share(1, 3) == "33.33%"
    assert ulp._share(0, 5) == "0.00%"
    assert ulp._share(0, 0) == "no cells"
    assert ulp._json_float(1.5) == 1.5
    assert ulp._json_float(math.inf) == "inf" and ulp._json_float(math.nan) == "nan"
