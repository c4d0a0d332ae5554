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
MAX_RANK = 64  #: numpy's most dimensions: a record of more cannot be an array's
CELLS_LIMIT = 2 ** 62  #: cells of the largest array a record may describe (numpy indexes with int64)


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
    """Whether a stored figure is an array record (a scalar figure is a plain JSON value). A dict that
    looks like one but is malformed (a hand edit) is not: it compares as the plain JSON value it is."""
    return isinstance(value, dict) and "sha256" in value and "shape" in value and record_problem(value) is None


def figure_problem(value: Any) -> str | None:
    """What is wrong with a stored figure, None if nothing: it must be a scalar (int, float, str, bool, as
    ``GateOutput.fingerprint`` records them) or a well-formed array record."""
    if isinstance(value, int | float | str):
        return None
    if isinstance(value, dict):
        if "sha256" not in value or "shape" not in value:
            return "a table without sha256 and shape: neither a value nor an array record"
        return record_problem(value)
    return f"{kind_of(value)}: neither a value (int, float, str or bool) nor an array record"


def record_problem(record: dict[str, Any]) -> str | None:
    """What is wrong with an array record (see the module's docstring), None if nothing; every field a
    comparison reads is checked, so none can fail on it."""
    shape, dtype, digest = record.get("shape"), record.get("dtype"), record.get("sha256")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        return f"shape {_short(shape)} is not a list of lengths (integers >= 0)"
    n_cells = _cells(shape)
    if len(shape) > MAX_RANK or n_cells > CELLS_LIMIT:
        return f"shape {_short(shape)} is beyond any array"
    if not isinstance(dtype, str):
        return f"dtype {_short(dtype)} is not text"
    if not isinstance(digest, str):
        return f"sha256 {_short(digest)} is not text"
    if "block" in record or "blocks" in record:
        block, blocks = record.get("block"), record.get("blocks")
        if type(block) is not int or block < 1:
            return f"block {_short(block)} is not a positive integer"
        if not isinstance(blocks, list) or not all(isinstance(b, str) for b in blocks):
            return f"blocks {_short(blocks)} is not a list of digests"
        if len(blocks) != -(-n_cells // block):
            return f"{len(blocks)} blocks of {block} cells do not cover shape {shape} ({n_cells} cells)"
    if "values" in record:
        values = record["values"]
        if not isinstance(values, list) or not all(isinstance(v, int | float | str) for v in values):
            return f"values {_short(values)} is not a list of numbers"
        if len(values) != n_cells:
            return f"values hold {len(values)} cells, shape {shape} has {n_cells}"
    return None


def kind_of(value: Any) -> str:
    """A JSON value's kind, as a message names it."""
    return {type(None): "null", list: "a list", dict: "a table", str: "text", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _cells(shape: list[int]) -> int:
    n = 1
    for size in shape:
        n *= size
    return n


def cell_index(flat: int, shape: list[int]) -> str:
    """A flat position as the cell's index, e.g. ``[1, 2]`` (``[]`` for a 0-d array)."""
    if not shape:
        return "[]"
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(flat, tuple(shape))) + "]"
