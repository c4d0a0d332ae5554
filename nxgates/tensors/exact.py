"""Integer gradients compared exactly (the Q20 gates' ``--compare-grads``): per tensor, how many cells
differ, and the first differing cells with both values and their difference."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from nxgates.core.ulp import FIRST_CELLS
from nxgates.gatekit import GateOutput
from nxgates.streams import shown


class IntCell(NamedTuple):
    tensor: str
    row: int
    col: int
    ours: int
    theirs: int


class ExactReport(NamedTuple):
    """Where two implementations' integer tensors differ."""

    cells: dict[str, int]
    differing: dict[str, int]
    first: list[IntCell]

    @classmethod
    def of(cls, ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray]) -> ExactReport:
        """Compare same-shaped 2-D int64 tensors, name by name, in the order of ``ours``."""
        cells, differing, first = {}, {}, []
        for name, a in ours.items():
            b = theirs[name]
            rows, cols = np.nonzero(a != b)
            cells[name], differing[name] = int(a.size), int(rows.size)
            first += [IntCell(name, int(r), int(c), int(a[r, c]), int(b[r, c]))
                      for r, c in zip(rows[:FIRST_CELLS], cols[:FIRST_CELLS], strict=True)]
        return cls(cells, differing, first[:FIRST_CELLS])

    @property
    def total_differing(self) -> int:
        return sum(self.differing.values())

    def lines(self) -> list[str]:
        out = [f"   {name}: {self.differing[name]}/{n} cells differ ({100 * self.differing[name] / n:.2f}%)"
               for name, n in self.cells.items()]
        out += [f"   {c.tensor}[{c.row},{c.col}]: ours={c.ours} theirs={c.theirs} (difference {c.theirs - c.ours})"
                for c in self.first]
        return out

    def metrics(self) -> dict[str, Any]:
        return {
            "differing_cells": self.total_differing,
            "tensors": {name: {"cells": n, "differing": self.differing[name], "share": self.differing[name] / n}
                        for name, n in self.cells.items()},
            "first_differing": [c._asdict() for c in self.first],
        }


def judge_foreign(out: GateOutput, check: str, ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray],
                  path: str) -> dict:
    """Another implementation's gradients against ours, exactly; where they differ, the report says where.
    Returns the report's metrics."""
    report = ExactReport.of(ours, theirs)
    n = report.total_differing
    for line in report.lines() if n else ():
        out.detail(line)
    total = sum(report.cells.values())
    shown_path = shown(path)  # the user's file name, on one line of the check's detail
    out.check(check, n == 0, f"{n} of {total} cells differ from {shown_path}" if n
              else f"{total} cells equal {shown_path}")
    return report.metrics()
