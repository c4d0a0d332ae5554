"""Integer gradients compared exactly: counts per tensor, the first differing cells, lines, metrics, the check."""

import numpy as np

from nxgates.gatekit import GateOutput
from nxgates.gatekit.output import Check, Line
from nxgates.tensors.exact import ExactReport, IntCell, judge_foreign


def pair():
    ours = {"dA": np.arange(6, dtype=np.int64).reshape(3, 2), "dB": np.arange(8, dtype=np.int64).reshape(2, 4)}
    return ours, {k: v.copy() for k, v in ours.items()}


def test_equal_tensors_differ_nowhere():
    ours, theirs = pair()
    r = ExactReport.of(ours, theirs)
    assert r.cells == {"dA": 6, "dB": 8} and r.differing == {"dA": 0, "dB": 0}
    assert r.first == [] and r.total_differing == 0


def test_the_differing_cells_in_the_order_of_ours_then_row_major():
    ours, theirs = pair()
    theirs["dB"][1, 0] = -5
    theirs["dA"][2, 1] += 7
    theirs["dA"][0, 1] -= 1
    r = ExactReport.of({"dB": ours["dB"], "dA": ours["dA"]}, theirs)
    assert list(r.cells) == ["dB", "dA"] and r.differing == {"dB": 1, "dA": 2}
    assert r.first == [IntCell("dB", 1, 0, 4, -5), IntCell("dA", 0, 1, 1, 0), IntCell("dA", 2, 1, 5, 12)]
    assert r.total_differing == 3
    assert all(type(v) is int for c in r.first for v in c[1:])


def test_at_most_ten_first_cells_over_all_tensors():
    ours = {"a": np.zeros((3, 3), np.int64), "b": np.zeros((4, 4), np.int64)}
    theirs = {k: v + 1 for k, v in ours.items()}
    r = ExactReport.of(ours, theirs)
    assert r.differing == {"a": 9, "b": 16}
    assert [(c.tensor, c.row, c.col) for c in r.first] == \
        [("a", i // 3, i % 3) for i in range(9)] + [("b", 0, 0)]


def test_the_lines_give_shares_then_cells_with_the_difference():
    ours, theirs = pair()
    theirs["dA"][1, 0] = 10
    r = ExactReport.of(ours, theirs)
    assert r.lines() == [
        "   dA: 1/6 cells differ (16.67%)",
        "   dB: 0/8 cells differ (0.00%)",
        "   dA[1,0]: ours=2 theirs=10 (difference 8)",
    ]


def test_the_metrics():
    ours, theirs = pair()
    theirs["dB"][0, 3] = 1
    theirs["dB"][1, 1] = 2
    assert ExactReport.of(ours, theirs).metrics() == {
        "differing_cells": 2,
        "tensors": {"dA": {"cells": 6, "differing": 0, "share": 0.0},
                    "dB": {"cells": 8, "differing": 2, "share": 0.25}},
        "first_differing": [{"tensor": "dB", "row": 0, "col": 3, "ours": 3, "theirs": 1},
                            {"tensor": "dB", "row": 1, "col": 1, "ours": 5, "theirs": 2}],
    }


def test_judge_foreign_passes_equal_gradients_without_detail_lines():
    ours, theirs = pair()
    out = GateOutput()
    metrics = judge_foreign(out, "L5", ours, theirs, "g.npz")
    assert out.items == [Check("L5", True, "14 cells equal g.npz", out.items[0].seconds)]
    assert metrics["differing_cells"] == 0


def test_judge_foreign_fails_differing_gradients_and_says_where():
    ours, theirs = pair()
    theirs["dA"][0, 0] = -3
    out = GateOutput()
    metrics = judge_foreign(out, "L5", ours, theirs, "g.npz")
    assert out.items[:-1] == [Line("   dA: 1/6 cells differ (16.67%)", "detail"),
                              Line("   dB: 0/8 cells differ (0.00%)", "detail"),
                              Line("   dA[0,0]: ours=0 theirs=-3 (difference -3)", "detail")]
    check = out.items[-1]
    assert (check.name, check.passed, check.detail) == ("L5", False, "1 of 14 cells differ from g.npz")
    assert metrics == ExactReport.of(ours, theirs).metrics()
