"""The lines that say what moved, and the keys and labels that name a gate run."""

import numpy as np

from nxgates.baseline.cells import cell_fingerprint
from nxgates.baseline.compare import figure_lines, same
from nxgates.baseline.keys import entry_key, keyed_params, label, shown_params

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


def test_the_key_leaves_out_how_a_gate_computes_and_sorts_the_rest():
    params = {"T": 3, "DM": 6, "executor": "thread", "workers": 4, "algorithm": "fast"}
    assert keyed_params(params) == {"T": 3, "DM": 6, "algorithm": "fast"}
    assert entry_key("lora", params) == "lora[DM=6 T=3 algorithm=fast]"
    assert entry_key("lora", {**params, "executor": "process"}) == entry_key("lora", params)
    assert entry_key("lora", params, "ab12") == "lora[DM=6 T=3 algorithm=fast] inputs=ab12"


def test_a_label_shows_the_sizes_and_what_differs_from_the_defaults():
    declared = ["T", "DM", "R", "delta", "tol_permil", "algorithm", "workers", "executor"]
    defaults = {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast", "workers": 0,
                "executor": "auto"}
    presets = {"seed": {}, "medium": {"T": 8, "DM": 96, "R": 4}}
    at_defaults = shown_params(declared, defaults, presets, defaults)
    assert label("lora", defaults, at_defaults) == "lora[T=3 DM=6 R=2]"
    changed = {**defaults, "delta": 100, "workers": 3}
    assert label("lora", changed, shown_params(declared, defaults, presets, changed)) == "lora[T=3 DM=6 R=2 delta=100]"
    assert shown_params(declared, defaults, {"seed": {}}, defaults) is None  # no presets: every keyed param
    assert label("g", {"N": 1, "executor": "x"}) == "g[N=1]" and label("g", {"workers": 2}) == "g"
