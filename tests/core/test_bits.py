"""Raw float32 bit comparison: every differing bit pattern counts, -0.0 and NaN payloads included."""

import numpy as np

from nxgates.core.bits import BitComparison, compare_bits, count_differing, differing_cells


def _pair(rows=40, cols=3):
    ref = np.arange(1, rows * cols + 1, dtype=np.float32).reshape(rows, cols)
    return ref, ref.copy()


def test_identical_arrays_compare_equal_and_count_the_nonzero_cells():
    ref, other = _pair()
    ref[5, 1] = 0.0
    assert compare_bits(ref, ref.copy()) == BitComparison(0, 119, [])


def test_differing_rows_are_listed_with_their_cell_counts_across_blocks():
    ref, other = _pair()
    other[0, 0] += 1
    other[17, :] = -other[17, :]
    other[39, 1:] = 0.0
    cmp = compare_bits(ref, other)
    assert cmp == BitComparison(mismatches=6, nonzero=120, bad_rows=[(0, 1), (17, 3), (39, 2)])
    assert all(type(v) is int for v in (cmp.mismatches, cmp.nonzero, *[x for row in cmp.bad_rows for x in row]))


def test_negative_zero_differs_from_zero_and_counts_as_nonzero():
    ref = np.array([[0.0, -0.0, 0.0]], np.float32)
    other = np.array([[-0.0, -0.0, 0.0]], np.float32)
    assert compare_bits(ref, other) == BitComparison(1, 1, [(0, 1)])
    assert compare_bits(other, ref) == BitComparison(1, 2, [(0, 1)])


def test_nan_with_the_same_bits_is_equal_and_with_other_bits_differs():
    nan = np.array([0x7FC00000, 0x7FC00001], np.uint32).view(np.float32)
    ref = np.array([[nan[0], nan[0]]], np.float32)
    other = np.array([[nan[0], nan[1]]], np.float32)
    assert compare_bits(ref, other) == BitComparison(1, 2, [(0, 1)])


def test_nonzero_cells_are_not_counted_when_not_asked_for():
    ref, other = _pair()
    other[3, 2] = 0.5
    assert compare_bits(ref, other, count_nonzero=False) == BitComparison(1, 0, [(3, 1)])
    assert compare_bits(ref, other, count_nonzero=True).nonzero == 120
    assert compare_bits(ref, other).nonzero == 120


def test_differing_cells_of_one_row():
    a = np.array([1.0, 0.0, np.nan, 4.0], np.float32)
    b = np.array([1.0, -0.0, np.nan, 5.0], np.float32)
    assert differing_cells(a, b) == 2
    assert differing_cells(a, a.copy()) == 0
    assert type(differing_cells(a, b)) is int


def test_count_differing_compares_every_row_without_counts():
    ref, other = _pair()
    other[1, 0] = 0.0
    other[16, :2] = 7.5
    other[33, :] = 0.25
    per_row = count_differing(ref, other)
    assert per_row.dtype == np.int64
    expected = np.zeros(40, np.int64)
    expected[[1, 16, 33]] = [1, 2, 3]
    assert per_row.tolist() == expected.tolist()
    assert count_differing(ref, other, rows=3).tolist() == expected.tolist()
    assert count_differing(ref, other, None, 40).tolist() == expected.tolist()


def test_rows_counted_already_are_trusted_and_only_the_others_compared():
    """A row with a count >= 0 (a worker compared it) keeps that count, even 0; -1 means compare here."""
    ref, other = _pair(rows=5, cols=2)
    other[:, :] = 0.5  # every cell differs
    counted = np.array([0, -1, 9, -1, 1, 123, 456], np.int32)  # longer than the batch: its rows only
    per_row = count_differing(ref, other, counted, rows=2)
    assert per_row.dtype == np.int64
    assert per_row.tolist() == [0, 2, 9, 2, 1]
    assert counted.tolist() == [0, -1, 9, -1, 1, 123, 456]  # the caller's counts are left as they were


def test_a_block_counted_entirely_is_not_compared_again():
    ref, other = _pair(rows=4, cols=2)
    other[:, :] = 0.5
    counted = np.array([0, 0, -1, 0], np.int64)
    assert count_differing(ref, other, counted, rows=2).tolist() == [0, 0, 2, 0]
    assert count_differing(ref, other, np.array([0, 0, 0, 0]), rows=2).tolist() == [0, 0, 0, 0]


def test_an_empty_batch_has_no_rows():
    ref = np.zeros((0, 3), np.float32)
    assert count_differing(ref, ref.copy()).tolist() == []
    assert compare_bits(ref, ref.copy()) == BitComparison(0, 0, [])


def test_rows_of_other_widths_are_compared_per_example():
    ref = np.ones((3, 20), np.float32)
    other = ref.copy()
    other[2, 5:] = 2.0
    assert count_differing(ref, other).tolist() == [0, 0, 15]
