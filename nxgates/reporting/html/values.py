"""A gate's parameters, figures and pinned fingerprints as tables a person reads: arrays with their shape as
small tables or sparklines (never a Python repr), records as tables, everything escaped and bounded."""

from __future__ import annotations

from html import escape as html_escape
from typing import Any

from nxgates.reporting.html.cells import adapter_shape
from nxgates.streams import shown

#: a 2-D array is a table of its cells while it has at most this many; larger ones are a sparkline
MAX_TABLE_CELLS = 64
#: a sparkline draws at most this many points (a longer array is drawn as the min and max of each stretch)
MAX_POINTS = 200
#: a list of records (dicts) shows at most this many rows
MAX_RECORDS = 20


def escape(text: object) -> str:
    """Outside text as HTML: markup characters as entities, control characters and lone surrogates (a
    non-UTF-8 file name) as visible escapes, so the page is well-formed and can be written as UTF-8."""
    return html_escape(shown(str(text), keep_newlines=True))


def table(rows: dict[str, str], css: str = "kv") -> str:
    """Key -> cell HTML (already escaped) as a two-column table."""
    body = "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in rows.items())
    return f'<table class="{css}">{body}</table>'


def scalar(value: Any) -> str:
    """One scalar as escaped text: floats to 6 significant figures, the rest as written."""
    if isinstance(value, float):
        return escape(f"{value:.6g}")
    if value is None:
        return "<i>none</i>"
    return escape(value)


def parameters(params: dict[str, Any], execution: dict[str, Any]) -> str:
    """Each parameter once; where the run resolved it (``workers = 0`` ran on 2, ``executor = auto`` as
    thread) the value used beside it; what the run reports that is no parameter, as a row of its own."""
    rows = {}
    for key, value in params.items():
        cell = f"<code>{scalar(value)}</code>"
        used = execution.get(key)
        if key in execution and used != value:
            cell += f" <span class=\"used\">ran with <code>{scalar(used)}</code></span>"
        rows[key] = cell
    for key, value in execution.items():
        if key != "name" and key not in params:
            rows[key] = f"<code>{scalar(value)}</code> <span class=\"used\">(as run)</span>"
    return table(rows) if rows else "<p>No parameters.</p>"


def figures(metrics: dict[str, Any], params: dict[str, Any], shapes: dict[str, list[int]],
            skip: set[str], loss_bits: int | None = None) -> dict[str, str]:
    """The metrics as rows: scalars as they are, arrays with their shape, records as small tables. Keys in
    ``skip`` (the same as a parameter's resolved value) are left out; an integer ``loss_q`` is also shown
    in real units when the loss is fixed point with ``loss_bits`` fraction bits."""
    rows: dict[str, str] = {}
    for key, value in metrics.items():
        if key in skip:
            continue
        rows.update(_rows(key, value, params, shapes))
        if key == "loss_q" and loss_bits is not None and isinstance(value, int) and not isinstance(value, bool):
            rows[key] += f" = {scalar(value / 2 ** loss_bits)} (Q{loss_bits}: loss_q / 2^{loss_bits})"
    return rows


def _rows(key: str, value: Any, params: dict[str, Any], shapes: dict[str, list[int]]) -> dict[str, str]:
    if isinstance(value, dict):
        if value and all(_is_number(v) for v in value.values()) and len(value) <= MAX_TABLE_CELLS:
            return {key: _record_table([value])}
        out: dict[str, str] = {}
        for sub, v in value.items():
            out.update(_rows(f"{key}.{sub}", v, params, shapes))
        return out
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            return {key: _record_table(value)}
        if all(_is_number(v) or v is None for v in value):
            shape = _shape(key, len(value), params, shapes)
            return {key: array(value, shape)}
        return {key: escape(", ".join(shown(v) for v in value[:MAX_RECORDS]) + (" ..." if len(value) > MAX_RECORDS
                                                                               else ""))}
    return {key: f"<code>{scalar(value)}</code>"}


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _shape(key: str, size: int, params: dict[str, Any], shapes: dict[str, list[int]]) -> list[int]:
    """The array's shape: its pinned fingerprint's (``A.analytic`` is pinned as ``A_analytic``), a LoRA
    adapter's from DM and R, else flat."""
    for name in (key.replace(".", "_"), key):
        shape = shapes.get(name)
        if shape and _product(shape) == size:
            return list(shape)
    adapter = adapter_shape(key.split(".")[0], params)
    if adapter and adapter[0] * adapter[1] == size:
        return list(adapter)
    return [size]


def _product(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def array(values: list[Any], shape: list[int]) -> str:
    """An array as its shape and range, then its cells as a table (small 2-D) or a sparkline."""
    numbers = [float(v) for v in values if v is not None]
    head = f"<code>[{'x'.join(str(d) for d in shape)}]</code>"
    if numbers:
        head += f" min {scalar(_tidy(min(numbers)))}, max {scalar(_tidy(max(numbers)))}"
    if len(shape) == 2 and len(values) <= MAX_TABLE_CELLS:
        rows, cols = shape
        body = "".join("<tr>" + "".join(f"<td>{scalar(values[r * cols + c])}</td>" for c in range(cols)) + "</tr>"
                       for r in range(rows))
        return f'{head}<table class="cells">{body}</table>'
    if len(values) <= 8 and len(shape) == 1:
        return f"{head}: <code>{escape(', '.join(scalar(v) for v in values))}</code>"
    return f"{head} {sparkline(values)}"


def _tidy(v: float) -> float | int:
    return int(v) if v.is_integer() and abs(v) < 2**53 else v


def sparkline(values: list[Any], width: int = 160, height: int = 24) -> str:
    """The values as a small inline line (flattened, C order), a gap where one is missing; a long array as
    the band between the min and max of each stretch, so a spike still shows. Hand-drawn SVG: no
    matplotlib for a glance."""
    points = [None if v is None else float(v) for v in values]
    finite = [v for v in points if v is not None]
    if not finite:
        return ""
    lo, hi = min(finite), max(finite)
    span = (hi - lo) or 1.0

    def xy(i: int, n: int, v: float) -> str:
        return f"{i * width / max(1, n - 1):.1f},{height - 2 - (v - lo) / span * (height - 4):.1f}"

    if len(points) > MAX_POINTS:
        step = -(-len(points) // MAX_POINTS)
        chunks = [[v for v in points[i:i + step] if v is not None] or [lo] for i in range(0, len(points), step)]
        upper = [xy(i, len(chunks), max(c)) for i, c in enumerate(chunks)]
        lower = [xy(i, len(chunks), min(c)) for i, c in enumerate(chunks)][::-1]
        shape = (f'<path d="M{" L".join(upper + lower)} Z" fill="#1f77b4" fill-opacity="0.45" stroke="#1f77b4" '
                 f'stroke-width="0.6"/>')
    else:
        path, pen = [], "M"
        for i, v in enumerate(points):
            if v is None:
                pen = "M"
                continue
            path.append(f"{pen}{xy(i, len(points), v)}")
            pen = "L"
        shape = f'<path d="{" ".join(path)}" fill="none" stroke="#1f77b4" stroke-width="1.2"/>'
    return (f'<svg class="spark" role="img" aria-label="sparkline of {len(values)} values" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}">{shape}</svg>')


def _record_table(records: list[dict[str, Any]]) -> str:
    """Records (e.g. differing cells) as a table with a column per key, at most :data:`MAX_RECORDS` rows."""
    columns: list[str] = []
    for r in records[:MAX_RECORDS]:
        columns += [k for k in r if k not in columns]
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>"
                   for r in records[:MAX_RECORDS])
    more = (f'<tr><td colspan="{len(columns)}">... {len(records) - MAX_RECORDS} more</td></tr>'
            if len(records) > MAX_RECORDS else "")
    return f'<table class="records"><tr>{head}</tr>{body}{more}</table>'


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return escape(repr(value))
    if isinstance(value, dict | list):
        return escape(", ".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict)
                      else ", ".join(str(v) for v in value))
    return scalar(value)


def pinned(fingerprints: dict[str, Any]) -> dict[str, str]:
    """A fingerprint as a person reads it: a scalar as is, an array's record as its type, shape and digest."""
    rows = {}
    for key, value in fingerprints.items():
        if isinstance(value, dict) and "sha256" in value:
            shape = "x".join(str(n) for n in value.get("shape", ()))
            rows[key] = (f"<code>{escape(value.get('dtype', ''))} [{escape(shape)}]</code> sha256 "
                         f"<code>{escape(str(value['sha256'])[:16])}...</code>")
        else:
            rows[key] = f"<code>{scalar(value)}</code>"
    return rows


def shapes_of(fingerprints: dict[str, Any]) -> dict[str, list[int]]:
    """Each pinned array's shape by its name, so the figures can show a metric's list with its shape."""
    out = {}
    for key, value in fingerprints.items():
        if isinstance(value, dict) and isinstance(value.get("shape"), list):
            out[key] = [int(d) for d in value["shape"] if isinstance(d, int)]
    return out
