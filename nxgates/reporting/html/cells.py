"""The lora gradcheck's per-cell error as grids a heatmap draws, max-pooled to a bounded size."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

#: a heatmap larger than this on either side is max-pooled, so the page stays small at the xl preset
MAX_SIDE = 256


class ErrorGrid(NamedTuple):
    """One tensor's error permil per cell (or per block of cells), and which cells (blocks) fail."""

    name: str
    permil: np.ndarray  #: |num - ana| * 1000 // max|grad|, as the gate judges it
    failing: np.ndarray  #: bool, permil > tol
    tol_permil: int
    block: tuple[int, int]  #: cells per drawn pixel (rows, columns); (1, 1) when not pooled
    failing_cells: int  #: failing cells before pooling


def error_permil(tensor: dict[str, Any]) -> np.ndarray:
    """Each cell's error against max|grad|, the gate's integer ``rel``: trunc(|num - ana| * 1000 / max|grad|)."""
    ana = np.asarray(tensor["analytic"], dtype=np.int64)
    num = np.asarray(tensor["numeric"], dtype=np.int64)
    maxabs = max(1, int(tensor.get("max_abs_grad") or 1))
    return np.abs(num - ana) * 1000 // maxabs


def max_pool(grid: np.ndarray, side: int = MAX_SIDE) -> tuple[np.ndarray, tuple[int, int]]:
    """Shrink ``grid`` to at most ``side`` x ``side`` by the maximum of each block, so no bad cell vanishes."""
    rows, cols = grid.shape
    br, bc = -(-rows // side), -(-cols // side)
    if br == 1 and bc == 1:
        return grid, (1, 1)
    padded = np.full((-(-rows // br) * br, -(-cols // bc) * bc), grid.min(), dtype=grid.dtype)
    padded[:rows, :cols] = grid
    pooled = padded.reshape(padded.shape[0] // br, br, padded.shape[1] // bc, bc).max(axis=(1, 3))
    return pooled, (br, bc)


def gradcheck_grids(gate: dict[str, Any]) -> list[ErrorGrid]:
    """A (DM x R) and B (R x DM) of a lora gate's metrics; empty when the metrics lack the cells."""
    metrics, params = gate.get("metrics") or {}, gate.get("params") or {}
    dm, r, tol = params.get("DM"), params.get("R"), params.get("tol_permil")
    if not (isinstance(dm, int) and isinstance(r, int) and isinstance(tol, int)):
        return []
    grids = []
    for key, shape in (("A", (dm, r)), ("B", (r, dm))):
        tensor = metrics.get(key)
        if not isinstance(tensor, dict) or "analytic" not in tensor or "numeric" not in tensor:
            continue
        permil = error_permil(tensor)
        if permil.size != shape[0] * shape[1]:
            continue
        full = permil.reshape(shape)  # row-major, as the gate walks the cells
        pooled, block = max_pool(full)
        grids.append(ErrorGrid(key, pooled, pooled > tol, tol, block, int(np.count_nonzero(full > tol))))
    return grids
