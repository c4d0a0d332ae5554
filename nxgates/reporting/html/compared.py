"""``--compare-grads`` reports (and invariance's per-check ULP reports) as a histogram and a table.

Two report shapes reach the page: a float comparison (parallel-grad, invariance) has a ``histogram`` of ULP
distances; an integer one (lora, lora-train: Q20 gradients compared exactly) has only its differing cells,
whose integer difference is their distance in units of the last place, so the page buckets them itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

#: the buckets a float report uses, and the page uses for integer differences: label, lowest, highest
BUCKETS = (("0", 0, 0), ("1", 1, 1), ("2-3", 2, 3), ("4-15", 4, 15), ("16+", 16, None))
#: rows of a first-differing table; the reports keep at most 10 today
MAX_ROWS = 20


class Histogram(NamedTuple):
    """Bars to draw: bucket label -> cells, which buckets fail, and what the caption must say."""

    counts: dict[str, float]
    failing: set[str]
    note: str


def histogram_counts(histogram: Any) -> dict[str, float] | None:
    """A ULP histogram as bucket label -> count, from a mapping, a list of counts or of (bucket, count) pairs."""
    if isinstance(histogram, Mapping):
        items = list(histogram.items())
    elif isinstance(histogram, Sequence) and not isinstance(histogram, str):
        if all(isinstance(v, Sequence) and not isinstance(v, str) and len(v) == 2 for v in histogram):
            items = [(k, v) for k, v in histogram]
        else:
            items = list(enumerate(histogram))
    else:
        return None
    counts = {}
    for k, v in items:
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        counts[str(k)] = v
    return counts or None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _lowest(bucket: str) -> int | None:
    head = bucket.split("-")[0].rstrip("+")
    return int(head) if head.isdigit() else None


def histogram(report: Any) -> Histogram | None:
    """The report's bars: its distance buckets (or, for integers, the page's from its listed cells), then
    the cells counted apart (opposite signs, NaN or Inf) when there are any, so every compared cell is
    drawn once. A bucket fails when its lowest distance is beyond the report's ``ulp`` (0: bit for bit)."""
    if not isinstance(report, dict):
        return None
    allowed = _count(report.get("ulp"))
    counts = histogram_counts(report.get("histogram"))
    note = ""
    if counts is None:
        counts, note = _integer_buckets(report)
        if counts is None:
            return None
    for key, name in (("sign_differences", "sign"), ("nonfinite", "non-finite")):
        if _count(report.get(key)) > 0:
            counts[name] = report[key]
    failing = {k for k, v in counts.items() if v and _fails(k, allowed)}
    return Histogram(counts, failing, note)


def _fails(bucket: str, allowed: int) -> bool:
    """Beyond ``allowed`` ULP: a bucket starting above it, opposite signs, non-finite values, and any
    differing integer cell (integers are compared exactly)."""
    if bucket.startswith("not listed"):
        return True
    lowest = _lowest(bucket)
    return lowest is None or lowest > allowed


def _integer_buckets(report: dict[str, Any]) -> tuple[dict[str, float] | None, str]:
    """An exact (integer) report bucketed by |theirs - ours| of its listed cells; the cells it differs in
    but does not list are one bar of their own, so no cell is drawn where it may not belong."""
    tensors, first = report.get("tensors"), report.get("first_differing")
    if not isinstance(tensors, dict) or not isinstance(first, list):
        return None, ""
    cells = sum(_count(t.get("cells")) for t in tensors.values() if isinstance(t, dict))
    differing = _count(report.get("differing_cells"))
    counts: dict[str, float] = {name: 0 for name, _, _ in BUCKETS}
    counts["0"] = cells - differing
    listed = 0
    for cell in first:
        ours, theirs = (cell.get(k) if isinstance(cell, dict) else None for k in ("ours", "theirs"))
        if isinstance(ours, int) and isinstance(theirs, int):
            distance = abs(theirs - ours)
            name = next(n for n, lo, hi in BUCKETS if distance >= lo and (hi is None or distance <= hi))
            counts[name] += 1
            listed += 1
    note = "distance: |theirs - ours| in units of the last place (1 = one Q20 unit)"
    if differing > listed:
        counts[f"not listed ({differing - listed})"] = differing - listed
        note += f"; the report lists {listed} of the {differing} differing cells, the rest are one bar"
    return counts, note


def first_rows(report: Any) -> tuple[list[str], list[list[str]], int]:
    """The first differing cells as table columns and rows (at most :data:`MAX_ROWS`), and how many cells
    differ in all. Floats are written shortest-round-trip, so two values one ULP apart read differently."""
    if not isinstance(report, dict) or not isinstance(report.get("first_differing"), list):
        return [], [], 0
    cells = [c for c in report["first_differing"] if isinstance(c, dict)][:MAX_ROWS]
    total = _count(report.get("differing_cells")) or len(cells)
    if not cells:
        return [], [], total
    has = {k for c in cells for k in c}
    columns = (["example"] if "example" in has else []) + ["cell"]
    sides = [("ours", "theirs") if "ours" in has else ("expected", "got")][0]
    columns += [*sides, "ULP" if "ulps" in has else "difference"]
    rows = []
    for c in cells:
        row = [_value(c.get("example"))] if "example" in has else []
        where = c.get("tensor", "")
        index = (f"{c.get('row')},{c.get('col')}" if "col" in c else
                 f"{c.get('row')},{c.get('index')}" if "index" in c else _value(c.get("row")))
        row.append(f"{where}[{index}]" if where else f"[{index}]")
        a, b = c.get(sides[0]), c.get(sides[1])
        row += [_value(a), _value(b)]
        if "ulps" in has:
            row.append("non-finite" if c.get("ulps") is None else _value(c.get("ulps")))
        else:
            row.append(_value(b - a) if isinstance(a, int) and isinstance(b, int) else "")
        rows.append(row)
    return columns, rows, total


def _value(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return "" if value is None else str(value)
