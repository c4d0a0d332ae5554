"""The lines that say what moved: one per figure, ``LABEL NAME: OLD -> NEW``.

Shared by ``run --baseline`` and ``nxgates diff``, so a figure that moved reads the same in both. Scalars
compare as their JSON text (an int digit for digit, a float bit for bit: NaN equals NaN, -0.0 differs from
0.0); array figures by their digest, and a moved one names its first moved cells (see
:mod:`nxgates.baseline.cells`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from nxgates.baseline.cells import cell_index, is_cells

FIRST_CELLS = 5  #: moved cells (or blocks) a line names, the first in C order
ABSENT = "(none)"  #: how a figure one side lacks is shown


def same(old: Any, new: Any) -> bool:
    """Whether two stored figures are the same figure."""
    if is_cells(old) and is_cells(new):
        return old["sha256"] == new["sha256"]
    return json.dumps(old, sort_keys=True) == json.dumps(new, sort_keys=True)


def figure_lines(label: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[str]:
    """One line per figure that moved, appeared or vanished between ``old`` and ``new``, in ``new``'s order."""
    for name in [*new, *(n for n in old if n not in new)]:
        if name not in new:
            yield f"{label} {name}: {shown(old[name])} -> {ABSENT}"
        elif name not in old:
            yield f"{label} {name}: {ABSENT} -> {shown(new[name])}"
        elif not same(old[name], new[name]):
            yield f"{label} {name}: {moved(old[name], new[name])}"


def shown(value: Any) -> str:
    """A figure as a line shows it: text as it is, an array by its dtype, shape and digest, else JSON."""
    if isinstance(value, str):
        return value
    if is_cells(value):
        return f"{value['dtype']} {tuple(value['shape'])} sha256 {value['sha256'][:16]}"
    return json.dumps(value, sort_keys=True)


def moved(old: Any, new: Any) -> str:
    """How one figure moved: its two values, or for cells the first that moved."""
    if is_cells(old) and is_cells(new):
        return cells_moved(old, new)
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new) and old:
        return list_moved(old, new)
    return f"{shown(old)} -> {shown(new)}"


def cells_moved(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The moved cells of an array figure: each with both values when kept, else the blocks they lie in."""
    if old["dtype"] != new["dtype"] or old["shape"] != new["shape"]:
        return f"{shown(old)} -> {shown(new)}"
    shape = old["shape"]
    if "values" in old and "values" in new:
        cells = [i for i, (a, b) in enumerate(zip(old["values"], new["values"], strict=True)) if not same(a, b)]
        return _listed(cells, old["values"], new["values"], shape, "cells") if cells else _digest_moved(old, new)
    if "block" in old and old.get("block") == new.get("block") and len(old["blocks"]) == len(new.get("blocks", ())):
        block, n_cells = old["block"], _cells(shape)
        blocks = [i for i, (a, b) in enumerate(zip(old["blocks"], new["blocks"], strict=True)) if a != b]
        if not blocks:
            return _digest_moved(old, new)
        spans = ", ".join(f"{cell_index(i * block, shape)}..{cell_index(min((i + 1) * block, n_cells) - 1, shape)}"
                          for i in blocks[:FIRST_CELLS])
        return f"cells moved in {len(blocks)} of {len(old['blocks'])} blocks of {block}, first {spans}"
    return f"{shown(old)} -> {shown(new)}"


def _digest_moved(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """An array whose kept cells (or block digests) are all as before, but whose digest moved: say so, with
    both digests (a hand-edited file, or a change the kept cells do not show)."""
    return (f"sha256 {old['sha256'][:16]} -> {new['sha256'][:16]} (the digest alone moved: every cell kept "
            f"is as before)")


def list_moved(old: list, new: list) -> str:
    """A list figure (e.g. a metric's per-cell integers) of unchanged length: its first moved items."""
    return _listed([i for i, (a, b) in enumerate(zip(old, new, strict=True)) if not same(a, b)], old, new,
                   [len(old)], "items")


def _listed(indices: list[int], old: list, new: list, shape: list[int], what: str) -> str:
    first = ", ".join(f"{cell_index(i, shape)} {shown(old[i])} -> {shown(new[i])}" for i in indices[:FIRST_CELLS])
    return f"{len(indices)} of {len(old)} {what} moved, first {first}"


def _cells(shape: list[int]) -> int:
    n = 1
    for size in shape:
        n *= size
    return n
