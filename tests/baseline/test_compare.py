"""The lines that say what moved between a baseline and a run (nxgates/baseline/compare.py): scalars bit for bit,
figures that appear or vanish, moved cells by value or by block, a changed dtype or shape."""

import numpy as np

from nxgates.baseline.cells import cell_fingerprint
from nxgates.baseline.compare import figure_lines, same

LORA = "lora[T=3 DM=6 R=2]"


def lines(old, new):
    return list(figure_lines(LORA, old, new))


def test_a_moved_scalar_is_one_line_with_both_values():
    assert lines({"loss_q": 1329684529960}, {"loss_q": 1329684529961}) == [
        "lora[T=3 DM=6 R=2] loss_q: 1329684529960 -> 1329684529961"]
    assert lines({"loss_q": 1, "d": "ab"}, {"loss_q": 1, "d": "ab"}) == []
    assert lines({"d": "ab"}, {"d": "ac"}) == ["lora[T=3 DM=6 R=2] d: ab -> ac"]


def test_floats_compare_bit_for_bit():
    assert same(float("nan"), float("nan")) and not same(0.0, -0.0) and not same(0.1, 0.1 + 1e-17 * 2)
    assert not same(1, 1.0) and not same(True, 1)


def test_figures_that_appear_or_vanish_are_named():
    assert lines({"a": 1}, {"b": 2}) == ["lora[T=3 DM=6 R=2] b: (none) -> 2", "lora[T=3 DM=6 R=2] a: 1 -> (none)"]


def test_moved_cells_are_named_with_both_values_first_five_in_order():
    old = np.arange(12).reshape(3, 4)
    new = old.copy()
    new[0, 1] += 1
    new[2, 3] -= 2
    assert lines({"g": cell_fingerprint(old)}, {"g": cell_fingerprint(new)}) == [
        "lora[T=3 DM=6 R=2] g: 2 of 12 cells moved, first [0, 1] 1 -> 2, [2, 3] 11 -> 9"]
    many = old + 1
    (line,) = lines({"g": cell_fingerprint(old)}, {"g": cell_fingerprint(many)})
    assert line.startswith("lora[T=3 DM=6 R=2] g: 12 of 12 cells moved, first [0, 0] 0 -> 1,") and line.count("->") == 5


def test_moved_cells_of_a_large_array_are_named_by_their_blocks():
    old = np.arange(2000).reshape(1000, 2)
    new = old.copy()
    new[500, 1] = 0
    (line,) = lines({"g": cell_fingerprint(old)}, {"g": cell_fingerprint(new)})
    assert line == "lora[T=3 DM=6 R=2] g: cells moved in 1 of 250 blocks of 8, first [500, 0]..[503, 1]"


def test_a_changed_dtype_or_shape_is_named_as_such():
    (line,) = lines({"g": cell_fingerprint(np.zeros(4, "<i8"))}, {"g": cell_fingerprint(np.zeros(4, "<i4"))})
    assert line.startswith("lora[T=3 DM=6 R=2] g: <i8 (4,) sha256 ") and " -> <i4 (4,) sha256 " in line
