"""Where two implementations' float32 gradients part: per tensor, how many cells differ and by how many
ULPs, folded chunk by chunk so memory stays flat in the batch size.

A ULP distance is the number of float32 values between two numbers: both are mapped to integers in the
order of the values they stand for (-0.0 and +0.0 to the same one), and the distance is the difference.
Cells that differ in sign, or where either side is NaN or Inf, are counted apart from the histogram; the
largest distance covers every finite cell, sign differences included (they are close when both are tiny).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

#: the histogram's buckets: (label, lowest distance, highest distance)
BUCKETS = (("0", 0, 0), ("1", 1, 1), ("2-3", 2, 3), ("4-15", 4, 15), ("16+", 16, None))
FIRST_CELLS = 10  #: differing cells listed one by one
ROWS = 16  #: examples compared at a time (temporaries stay small whatever the chunk)


class Tensor(NamedTuple):
    """A tensor's place in a gradient row: cells ``start .. start + rows*cols - 1``, row-major."""

    name: str
    start: int
    rows: int
    cols: int

    @property
    def stop(self) -> int:
        return self.start + self.rows * self.cols


class Cell(NamedTuple):
    example: int
    tensor: str
    row: int
    col: int
    ours: float
    theirs: float
    ulps: int | None  #: None where either side is NaN or Inf


def ordered(values: np.ndarray) -> np.ndarray:
    """float32 values as int64 in the order of the numbers (+0.0 and -0.0 both 0)."""
    i = values.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cell by cell, how many float32 values apart ``a`` and ``b`` are (meaningful where both are finite)."""
    return np.abs(ordered(np.ascontiguousarray(a, np.float32)) - ordered(np.ascontiguousarray(b, np.float32)))


@dataclass
class UlpReport:
    """The comparison of ours against theirs, folded chunk by chunk in example order."""

    tensors: tuple[Tensor, ...]
    cells: dict[str, int] = field(default_factory=dict)
    differing: dict[str, int] = field(default_factory=dict)
    histogram: dict[str, int] = field(default_factory=lambda: {label: 0 for label, _, _ in BUCKETS})
    sign: int = 0  #: differing cells of opposite signs (both finite)
    nonfinite: int = 0  #: differing cells where either side is NaN or Inf
    max_ulps: int = 0  #: the largest distance over finite cells
    first: list[Cell] = field(default_factory=list)

    def add(self, first_example: int, ours: np.ndarray, theirs: np.ndarray) -> None:
        """Rows ``first_example ..`` of both, (n, NP) float32 each."""
        for r0 in range(0, ours.shape[0], ROWS):
            self._add(first_example + r0, ours[r0 : r0 + ROWS], theirs[r0 : r0 + ROWS])

    def _add(self, first_example: int, ours: np.ndarray, theirs: np.ndarray) -> None:
        n = ours.shape[0]
        for t in self.tensors:
            a, b = ours[:, t.start : t.stop], theirs[:, t.start : t.stop]
            differ = a.view(np.uint32) != b.view(np.uint32)
            count = int(np.count_nonzero(differ))
            self.cells[t.name] = self.cells.get(t.name, 0) + n * t.rows * t.cols
            self.differing[t.name] = self.differing.get(t.name, 0) + count
            self.histogram["0"] += n * t.rows * t.cols - count
            if not count:
                continue
            rows, cols = np.nonzero(differ)
            x, y = a[rows, cols], b[rows, cols]
            finite = np.isfinite(x) & np.isfinite(y)
            dist = ulp_distance(x, y)
            opposite = finite & (np.signbit(x) != np.signbit(y))
            self.nonfinite += int(np.count_nonzero(~finite))
            self.sign += int(np.count_nonzero(opposite))
            if finite.any():
                self.max_ulps = max(self.max_ulps, int(dist[finite].max()))
            same_sign = dist[finite & ~opposite]
            for label, low, high in BUCKETS[1:]:
                inside = same_sign >= low if high is None else (same_sign >= low) & (same_sign <= high)
                self.histogram[label] += int(np.count_nonzero(inside))
            self._note_first(first_example, t, rows, cols, x, y, dist, finite)

    def _note_first(self, first_example: int, t: Tensor, rows: np.ndarray, cols: np.ndarray, x: np.ndarray,
                    y: np.ndarray, dist: np.ndarray, finite: np.ndarray) -> None:
        """The first differing cells in (example, tensor, cell) order: this block's are kept until the list is
        full, then only those before the last one kept."""
        take = min(rows.size, FIRST_CELLS)
        for k in range(take):
            row, col = divmod(int(cols[k]), t.cols)
            self.first.append(Cell(first_example + int(rows[k]), t.name, row, col, float(x[k]), float(y[k]),
                                   int(dist[k]) if finite[k] else None))
        order = {tensor.name: i for i, tensor in enumerate(self.tensors)}
        self.first.sort(key=lambda c: (c.example, order[c.tensor], c.row, c.col))
        del self.first[FIRST_CELLS:]

    @property
    def total_differing(self) -> int:
        return sum(self.differing.values())

    def passes(self, ulps: int) -> bool:
        """Within ``ulps`` everywhere: 0 asks for identical bits; otherwise every differing cell must be
        finite on both sides and at most ``ulps`` apart."""
        if ulps == 0:
            return self.total_differing == 0
        return self.nonfinite == 0 and self.max_ulps <= ulps

    def lines(self) -> list[str]:
        """The report, one line each: per tensor, the histogram, then the first differing cells."""
        out = []
        for t in self.tensors:
            cells, diff = self.cells.get(t.name, 0), self.differing.get(t.name, 0)
            out.append(f"   {t.name}: {diff}/{cells} cells differ ({_share(diff, cells)})")
        hist = " ".join(f"{label}:{n}" for label, n in self.histogram.items())
        out.append(f"   ULP distances: {hist} sign:{self.sign} non-finite:{self.nonfinite}; "
                   f"largest {self.max_ulps} ULP")
        for c in self.first:
            ulps = "non-finite" if c.ulps is None else f"{c.ulps} ULP"
            out.append(f"   example {c.example} {c.tensor}[{c.row},{c.col}]: ours={c.ours!r} "
                       f"theirs={c.theirs!r} ({ulps})")
        return out

    def metrics(self) -> dict[str, Any]:
        """The same, for the JSON report (non-finite values as strings: JSON has no NaN)."""
        return {
            "differing_cells": self.total_differing,
            "tensors": {t.name: {"cells": self.cells.get(t.name, 0), "differing": self.differing.get(t.name, 0),
                                 "share": self.differing.get(t.name, 0) / max(1, self.cells.get(t.name, 0))}
                        for t in self.tensors},
            "max_ulps": self.max_ulps,
            "histogram": dict(self.histogram),
            "sign_differences": self.sign,
            "nonfinite": self.nonfinite,
            "first_differing": [{"example": c.example, "tensor": c.tensor, "row": c.row, "col": c.col,
                                 "ours": _json_float(c.ours), "theirs": _json_float(c.theirs), "ulps": c.ulps}
                                for c in self.first],
        }


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}%" if whole else "no cells"


def _json_float(v: float) -> float | str:
    return v if np.isfinite(v) else repr(v)
