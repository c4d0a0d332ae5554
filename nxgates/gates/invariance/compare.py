"""Two calls' outputs, cell by cell: floats by their ULP distance, everything else exactly.

A float cell passes when the two values are at most ``ulp`` float values apart (``ulp`` 0: the same value):
-0.0 and +0.0 are 0 apart, a NaN equals only a NaN of the same bits, and an infinity only itself. The
counts per output follow ``--compare-grads``'s report (:mod:`nxgates.core.ulp`): the same histogram
buckets, sign differences and non-finite cells apart, the largest distance and the first differing cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from nxgates.core.ulp import BUCKETS, FIRST_CELLS
from nxgates.core.ulp import ordered as ordered_f32

#: the signed integer of each float width: a float's bits read as one, for its place in the order of values
_INTS = {2: np.int16, 4: np.int32, 8: np.int64}
#: the histogram's buckets past "0", by their lowest distance: each starts where the one before ends and
#: the last is open, so a distance's bucket is where it sorts among these
_BUCKET_LABELS = tuple(label for label, _, _ in BUCKETS[1:])
_BUCKET_LOWS = np.array([low for _, low, _ in BUCKETS[1:]], np.uint64)
if [high for _, _, high in BUCKETS[1:]] != [*(_BUCKET_LOWS[1:] - 1).tolist(), None]:
    raise RuntimeError("the ULP histogram's buckets must be contiguous, the last one open")


class Cell(NamedTuple):
    """One differing cell: the batch row, the output, the flat index inside the row, and both values."""

    row: int
    output: str
    index: int
    expected: Any  #: a numpy scalar of the output's dtype
    got: Any
    ulps: int | None  #: None where either side is NaN or Inf, or the dtype is compared exactly
    fails: bool  #: beyond the tolerance (a differing cell within ``ulp`` passes)


def ordered(values: np.ndarray) -> np.ndarray:
    """Floats as int64 in the order of the numbers they stand for (+0.0 and -0.0 both 0)."""
    if values.dtype == np.float32:
        return ordered_f32(values)
    ints = _INTS[values.dtype.itemsize]
    i = np.ascontiguousarray(values).view(ints).astype(np.int64)
    return np.where(i < 0, -(i & np.iinfo(ints).max), i)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many float values apart ``a`` and ``b`` are, cell by cell (uint64: float64's span needs it all)."""
    oa, ob = ordered(a), ordered(b)
    ua, ub = oa.view(np.uint64), ob.view(np.uint64)
    return np.where(oa >= ob, ua - ub, ub - ua)  # modulo 2^64, the true difference (it is below 2^64)


def is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" and dtype.itemsize in _INTS


@dataclass
class OutputTally:
    """One output's comparisons in one check, folded call by call."""

    cells: int = 0
    differing: int = 0  #: cells whose bits differ (within the tolerance or not)
    failing: int = 0  #: cells beyond the tolerance
    histogram: dict[str, int] = field(default_factory=lambda: {label: 0 for label, _, _ in BUCKETS})
    sign: int = 0
    nonfinite: int = 0
    exact: int = 0  #: differing cells of an output compared exactly (ints, bools)
    max_ulps: int = 0
    first: list[Cell] = field(default_factory=list)

    def metrics(self) -> dict[str, Any]:
        """The ``--compare-grads`` report's figures for this output."""
        return {"cells": self.cells, "differing_cells": self.differing, "failing_cells": self.failing,
                "max_ulps": self.max_ulps, "histogram": dict(self.histogram), "sign_differences": self.sign,
                "nonfinite": self.nonfinite, "exact_differences": self.exact,
                "first_differing": [{"row": c.row, "index": c.index, "expected": json_value(c.expected),
                                     "got": json_value(c.got), "ulps": c.ulps} for c in self.first]}


@dataclass
class CheckTally:
    """A check's comparisons: a tally per output, the first failing cell (by row) and where it was seen."""

    ulp: int
    outputs: dict[str, OutputTally] = field(default_factory=dict)
    first: Cell | None = None
    where: str = ""  #: the comparison that found :attr:`first` (e.g. "split 3")
    labels: tuple[str, str] = ("expected", "got")  #: how the line names the two sides there
    failing_rows: set[int] = field(default_factory=set)

    @property
    def passed(self) -> bool:
        return self.first is None

    def compare(self, expected: dict[str, np.ndarray], got: dict[str, np.ndarray], rows: np.ndarray, where: str,
                labels: tuple[str, str]) -> bool:
        """Fold one comparison: ``rows[k]`` is the batch row of leading index ``k`` of both. True: it passed."""
        ok = True
        for name, a in expected.items():
            tally = self.outputs.setdefault(name, OutputTally())
            cell, failing = _fold(tally, name, a.reshape(a.shape[0], -1), got[name].reshape(a.shape[0], -1), rows,
                                  self.ulp)
            if cell is not None:
                ok = False
                self.failing_rows.update(int(r) for r in failing)
                if self.first is None or cell.row < self.first.row:
                    self.first, self.where, self.labels = cell, where, labels
        return ok

    def line(self) -> str:
        """The FAIL line's detail: the first failing cell, both values, the distance, and how much failed."""
        c = self.first
        assert c is not None
        distance = "non-finite" if c.ulps is None and is_float(np.asarray(c.expected).dtype) else (
            "exact compare" if c.ulps is None else f"{c.ulps} ULP")
        failing = sum(t.failing for t in self.outputs.values())
        cells = sum(t.cells for t in self.outputs.values())
        rows = len(self.failing_rows)
        return (f"row {c.row} output {c.output!r} [{c.index}]: {self.labels[0]}={c.expected!s} "
                f"{self.labels[1]}={c.got!s} ({distance}; {self.where}); {failing}/{cells} cells in "
                f"{rows} row{'' if rows == 1 else 's'} beyond {self.ulp} ULP")

    def metrics(self) -> dict[str, Any]:
        return {name: t.metrics() for name, t in self.outputs.items()}


def _bits(a: np.ndarray) -> np.ndarray:
    """Each cell's bits, as one comparable value per cell."""
    a = np.ascontiguousarray(a)
    width = a.dtype.itemsize
    return a.view(f"u{width}" if width in (1, 2, 4, 8) else f"V{width}")


def _fold(tally: OutputTally, name: str, a: np.ndarray, b: np.ndarray, rows: np.ndarray, ulp: int
          ) -> tuple[Cell | None, np.ndarray]:
    """Fold (n, cells) ``a`` against ``b`` into ``tally``: the first failing cell (or None), and the batch
    rows with a failing cell."""
    tally.cells += a.size
    if a.dtype.kind == "c":  # a complex cell as its two float parts
        a, b = a.view(a.real.dtype), b.view(b.real.dtype)
    differ = _bits(a) != _bits(b)
    count = int(np.count_nonzero(differ))
    tally.differing += count
    tally.histogram["0"] += a.size - count
    if not count:
        return None, rows[:0]
    flat = np.flatnonzero(differ)  # the differing cells in row-major order: by position, then index
    r, c = np.divmod(flat, a.shape[1])
    x, y = a.reshape(-1)[flat], b.reshape(-1)[flat]
    if is_float(a.dtype):
        finite = np.isfinite(x) & np.isfinite(y)
        dist = ulp_distance(x, y)
        opposite = finite & (np.signbit(x) != np.signbit(y))
        tally.nonfinite += count - int(np.count_nonzero(finite))
        tally.sign += int(np.count_nonzero(opposite))
        if finite.any():
            tally.max_ulps = max(tally.max_ulps, int(dist[finite].max()))
        buckets = np.bincount(np.searchsorted(_BUCKET_LOWS, dist[finite & ~opposite], side="right"),
                              minlength=_BUCKET_LOWS.size + 1)
        for label, n in zip(_BUCKET_LABELS, buckets[1:].tolist(), strict=True):
            tally.histogram[label] += n
        fails = ~finite | (dist > ulp)
        ulps = [int(d) if f else None for d, f in zip(dist[:FIRST_CELLS], finite[:FIRST_CELLS], strict=True)]
    else:
        tally.exact += count
        fails = np.ones(count, bool)
        ulps = [None] * min(count, FIRST_CELLS)
    failing = np.flatnonzero(fails)
    tally.failing += failing.size
    cells = [Cell(int(rows[r[k]]), name, int(c[k]), x[k], y[k], ulps[k], bool(fails[k]))
             for k in range(min(count, FIRST_CELLS))]
    tally.first = sorted([*tally.first, *cells], key=lambda cell: (cell.row, cell.index))[:FIRST_CELLS]
    if not failing.size:
        return None, rows[:0]
    # the positions with a failing cell, and of those the first whose batch row is the lowest
    at = r[failing]  # ascending
    hit = np.zeros(a.shape[0], bool)
    hit[at] = True
    positions = np.flatnonzero(hit)
    lowest = positions[np.argmin(rows[positions])]
    k = int(failing[np.searchsorted(at, lowest)])  # its first failing cell
    d = int(dist[k]) if is_float(a.dtype) and finite[k] else None
    first = Cell(int(rows[r[k]]), name, int(c[k]), x[k], y[k], d, True)
    return first, np.unique(rows[positions])


def json_value(value: Any) -> Any:
    """A cell's value for the JSON report: a Python number, or its text where JSON has none (NaN, Inf)."""
    v = value.item() if hasattr(value, "item") else value
    if isinstance(v, complex):
        return repr(v)
    if isinstance(v, float) and not np.isfinite(v):
        return repr(v)
    return v
