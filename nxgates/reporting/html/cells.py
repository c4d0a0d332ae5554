"""The lora gradcheck's per-cell error as grids a heatmap draws, max-pooled to a bounded size."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

#: a heatmap larger than this on either side is max-pooled, so the page stays small at the xl preset
MAX_SIDE = 256


class ErrorGrid(NamedTuple):
    """One tensor's error per cell (or per block of cells), and which cells (blocks) fail."""

    name: str
    error: np.ndarray  #: float permil of max|grad|, clipped so colour agrees with the gate's integer verdict
    failing: np.ndarray  #: bool, the gate's integer permil > tol
    tol_permil: int
    block: tuple[int, int]  #: cells per drawn pixel (rows, columns); (1, 1) when not pooled
    failing_cells: int  #: failing cells before pooling
    worst_permil: int  #: the gate's worst integer permil

    @property
    def permil(self) -> np.ndarray:
        """The gate's integer permil per drawn pixel (truncated), for tests and captions."""
        return np.floor(self.error).astype(np.int64)


def error_permil(tensor: dict[str, Any]) -> np.ndarray:
    """Each cell's error against max|grad|, the gate's integer ``rel``: trunc(|num - ana| * 1000 / max|grad|)."""
    ana, num, maxabs = _sides(tensor)
    return np.abs(num - ana) * 1000 // maxabs


def error_exact(tensor: dict[str, Any]) -> np.ndarray:
    """Each cell's error in permil of max|grad| before truncation: a passing run's 0-permil cells still differ."""
    ana, num, maxabs = _sides(tensor)
    return np.abs(num - ana).astype(np.float64) * 1000.0 / maxabs


def _sides(tensor: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    ana = np.asarray(tensor["analytic"], dtype=np.int64)
    num = np.asarray(tensor["numeric"], dtype=np.int64)
    return ana, num, max(1, int(tensor.get("max_abs_grad") or 1))


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


def adapter_shape(name: str, params: dict[str, Any]) -> tuple[int, int] | None:
    """A LoRA adapter tensor's shape from the gate's parameters: A and dA are DM x R, B and dB R x DM."""
    dm, r = params.get("DM"), params.get("R")
    if not (isinstance(dm, int) and isinstance(r, int)) or isinstance(dm, bool) or isinstance(r, bool):
        return None
    return {"A": (dm, r), "dA": (dm, r), "B": (r, dm), "dB": (r, dm)}.get(name)


def gradcheck_grids(gate: dict[str, Any]) -> list[ErrorGrid]:
    """A (DM x R) and B (R x DM) of a lora gate's metrics; empty when the metrics lack the cells."""
    metrics, params = gate.get("metrics") or {}, gate.get("params") or {}
    tol = params.get("tol_permil")
    if not isinstance(tol, int):
        return []
    grids = []
    for key in ("A", "B"):
        tensor, shape = metrics.get(key), adapter_shape(key, params)
        if shape is None or not isinstance(tensor, dict) or "analytic" not in tensor or "numeric" not in tensor:
            continue
        judged = error_permil(tensor)
        if judged.size != shape[0] * shape[1]:
            continue
        failing = judged > tol
        # the colour agrees with the verdict: a passing cell is drawn at most at tol, a failing one above it
        exact = error_exact(tensor)
        shown = np.where(failing, np.maximum(exact, tol + 0.5), np.minimum(exact, tol))
        pooled, block = max_pool(shown.reshape(shape))  # row-major, as the gate walks the cells
        pooled_failing, _ = max_pool(failing.reshape(shape).astype(np.int8))
        grids.append(ErrorGrid(key, pooled, pooled_failing.astype(bool), tol, block,
                               int(np.count_nonzero(failing)), int(judged.max(initial=0))))
    return grids
