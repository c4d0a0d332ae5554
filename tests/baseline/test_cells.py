"""An array figure as digests: what decides "moved", and what names the moved cells."""

import numpy as np

from nxgates.baseline.cells import BLOCKS, VALUES_LIMIT, block_size, canonical, cell_fingerprint, cell_index


def test_the_digest_covers_values_dtype_and_shape():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    base = cell_fingerprint(a)["sha256"]
    assert cell_fingerprint(a.copy())["sha256"] == base
    moved = a.copy()
    moved[2, 3] += 1
    assert cell_fingerprint(moved)["sha256"] != base
    assert cell_fingerprint(a.astype(np.int32))["sha256"] != base
    assert cell_fingerprint(a.reshape(4, 3))["sha256"] != base


def test_the_digest_does_not_depend_on_byte_order_or_memory_layout():
    a = np.arange(12, dtype="<i8").reshape(3, 4)
    assert cell_fingerprint(a.astype(">i8"))["sha256"] == cell_fingerprint(a)["sha256"]
    assert cell_fingerprint(np.asfortranarray(a))["sha256"] == cell_fingerprint(a)["sha256"]
    assert canonical(a.astype(">i8")).dtype.str == "<i8"


def test_small_arrays_keep_their_values_and_one_block_per_cell():
    rec = cell_fingerprint(np.arange(6).reshape(2, 3))
    assert rec["values"] == [0, 1, 2, 3, 4, 5] and rec["block"] == 1 and len(rec["blocks"]) == 6
    assert rec["shape"] == [2, 3]


def test_large_arrays_keep_bounded_block_digests_only():
    n = VALUES_LIMIT * 10 + 7
    rec = cell_fingerprint(np.arange(n))
    assert "values" not in rec and len(rec["blocks"]) <= BLOCKS
    assert rec["block"] == block_size(n) and rec["block"] * len(rec["blocks"]) >= n
    moved = np.arange(n)
    moved[n - 1] = -1  # the last cell: only the last block differs
    diff = [i for i, (x, y) in enumerate(zip(rec["blocks"], cell_fingerprint(moved)["blocks"], strict=True)) if x != y]
    assert diff == [len(rec["blocks"]) - 1]


def test_cell_index_names_a_flat_position_by_its_indices():
    assert cell_index(5, [2, 3]) == "[1, 2]" and cell_index(0, []) == "[]" and cell_index(7, [9]) == "[7]"
