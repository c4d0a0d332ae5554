"""Raw float32 bit comparison: -0.0 differs from 0.0 and NaN never hides a difference, so "bit-identical"
means what it says."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class BitComparison:
    mismatches: int  #: cells whose float32 bits differ
    nonzero: int  #: cells of the reference whose raw bits are not 0 (as the seed counts them)
    bad_rows: list[tuple[int, int]]  #: (example, differing cells)


def compare_bits(reference: np.ndarray, other: np.ndarray, count_nonzero: bool = True) -> BitComparison:
    """Raw float32 bit equality per cell: -0.0 differs from 0.0 and NaN never hides a difference (compared
    a block of examples at a time, see :func:`count_differing`)."""
    per_row = count_differing(reference, other)
    nonzero = int(np.count_nonzero(reference.view(np.uint32))) if count_nonzero else 0
    return BitComparison(int(per_row.sum()), nonzero, [(int(r), int(per_row[r])) for r in np.flatnonzero(per_row)])


def differing_cells(reference: np.ndarray, row: np.ndarray) -> int:
    """Cells of a row whose raw float32 bits differ from the reference row's (as :func:`compare_bits`)."""
    return int(np.count_nonzero(reference.view(np.uint32) != row.view(np.uint32)))


def count_differing(reference: np.ndarray, other: np.ndarray, counted: np.ndarray | None = None, rows: int = 16
                    ) -> np.ndarray:
    """Differing cells per row. Where ``counted[r] >= 0`` the task that made row r counted them already;
    the other rows are compared here, ``rows`` at a time."""
    n = reference.shape[0]
    per_row = np.full(n, -1, np.int64) if counted is None else counted[:n].astype(np.int64)
    a, b = reference.view(np.uint32), other.view(np.uint32)
    for r0 in range(0, n, rows):
        block = per_row[r0 : r0 + rows]  # a view: filled in place
        if (block < 0).any():
            found = np.count_nonzero(a[r0 : r0 + rows] != b[r0 : r0 + rows], axis=1)
            np.copyto(block, found, where=block < 0)
    return per_row
