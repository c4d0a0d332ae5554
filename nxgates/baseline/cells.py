"""An array figure as a small record: enough to decide that it moved, and to say where.

The record (JSON-ready) holds:

* ``sha256``: of the dtype, the shape and the C-order little-endian bytes; it alone decides "moved".
* ``dtype`` and ``shape``: so a change of either is named as such.
* ``block`` and ``blocks``: the flat cells are cut into at most :data:`BLOCKS` runs of ``block`` cells,
  each kept as a 16-hex-digit digest; a moved block names the cells it spans. With at most
  :data:`BLOCKS` cells every block is one cell, so the moved cells are named exactly.
* ``values``: the cells themselves when there are at most :data:`VALUES_LIMIT`, so a line shows both
  values; larger arrays keep only digests, so a baseline file stays small at any size.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

BLOCKS = 256  #: the most block digests kept per figure
VALUES_LIMIT = 256  #: arrays up to this many cells keep their values too


def canonical(cells: Any) -> np.ndarray:
    """The array as hashed: C-contiguous, little-endian (so a digest does not depend on the machine)."""
    array = np.asarray(cells)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return np.ascontiguousarray(array)


def cell_fingerprint(cells: Any) -> dict[str, Any]:
    """The JSON-ready record of an array figure (see the module's docstring)."""
    array = canonical(cells)
    flat = array.reshape(-1)
    whole = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    whole.update(flat.tobytes())
    block = block_size(flat.size)
    record: dict[str, Any] = {
        "dtype": array.dtype.str,
        "shape": list(array.shape),
        "sha256": whole.hexdigest(),
        "block": block,
        "blocks": [hashlib.sha256(flat[i:i + block].tobytes()).hexdigest()[:16] for i in range(0, flat.size, block)],
    }
    if flat.size <= VALUES_LIMIT:
        record["values"] = flat.tolist()
    return record


def block_size(n_cells: int) -> int:
    """Cells per block: one when there are few, else as many as make at most :data:`BLOCKS` blocks."""
    return max(1, -(-n_cells // BLOCKS))


def is_cells(value: Any) -> bool:
    """Whether a stored figure is an array record (a scalar figure is a plain JSON value)."""
    return isinstance(value, dict) and "sha256" in value and "shape" in value


def cell_index(flat: int, shape: list[int]) -> str:
    """A flat position as the cell's index, e.g. ``[1, 2]`` (``[]`` for a 0-d array)."""
    if not shape:
        return "[]"
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(flat, tuple(shape))) + "]"
