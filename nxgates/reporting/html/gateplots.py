"""Which plots a gate's metrics allow, each tied to the checks it explains, so a failing check's plot can
lead the page. Built from the metric names, not the gate names, so a plugin gate writing the same metrics
gets the same plots."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from nxgates.reporting.html import cells, compared, plots
from nxgates.reporting.html.values import escape

#: integer losses of these gates are fixed point with this many fraction bits (Q40: the sum of squares of
#: Q20 outputs); a gate's ``loss_frac_bits`` metric says so itself and wins
LOSS_FRAC_BITS = {"lora": 40, "lora-train": 40}
#: a loss table beside the curve lists every step up to this many, else the first and last half of it
MAX_LOSS_ROWS = 16


class Plot(NamedTuple):
    """One figure: ``kind`` names it for the page's ``data-plot``, ``explains`` the checks it is the picture
    of; ``side`` is escaped HTML shown beside it (a table of the exact values)."""

    kind: str
    svg: str
    caption: str
    explains: tuple[str, ...] = ()
    side: str = ""
    attrs: tuple[tuple[str, str], ...] = ()


def gate_plots(gate: dict[str, Any]) -> list[Plot]:
    """Every plot the gate's metrics allow, in the order a person reads them."""
    out: list[Plot] = []
    for build in BUILDERS:
        out += build(gate)
    return out


def _checks(gate: dict[str, Any], match: Callable[[str], bool]) -> tuple[str, ...]:
    return tuple(c["name"] for c in gate.get("checks", []) if match(str(c["name"])))


def _uid(gate: dict[str, Any], kind: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in f"{gate.get('name', '')}-{kind}")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# ---- lora: the gradcheck heatmaps -------------------------------------------------------------------------


def _heatmaps(gate: dict[str, Any]) -> list[Plot]:
    grids = cells.gradcheck_grids(gate)
    positive = [float(g.error[g.error > 0].min()) for g in grids if np.any(g.error > 0)]
    tol = max([g.tol_permil for g in grids] + [1])
    # one scale for A and B: from the decade of the smallest error (at most 5 decades under tol) to tol
    vmin = max(tol * 1e-5, 10.0 ** math.floor(math.log10(min(positive)))) if positive else tol / 1000
    out = []
    for grid in grids:
        caption = (f"gradcheck {grid.name}: each cell's |numeric - analytic| in permil of max|grad|, on a log "
                   f"scale up to the tolerance ({grid.tol_permil} permil, the red line on the colour bar); "
                   f"{grid.failing_cells} cell(s) beyond it, red")
        if grid.block != (1, 1):
            caption += f"; max-pooled by {grid.block[0]} x {grid.block[1]} cells to keep the page small"
        explains = _checks(gate, lambda n, g=grid.name: n.startswith(f"gradcheck {g}"))
        out.append(Plot(f"gradcheck-{grid.name}", plots.heatmap(grid, vmin), caption, explains,
                        attrs=(("data-failing-cells", str(grid.failing_cells)),)))
    return out


# ---- gradchecks without cells: worst error against the tolerance ------------------------------------------


def _worst(gate: dict[str, Any]) -> list[Plot]:
    """ta-gradcheck's ops (pinned ``<op>_worst_permil``), its MLP, lora-train's final A and B, dp-train's D4."""
    params, metrics = gate.get("params") or {}, gate.get("metrics") or {}
    prints = gate.get("fingerprints") or {}
    tol = params.get("tol_permil")
    if not isinstance(tol, int):
        return []
    rows: list[tuple[str, int, str]] = []
    explains: list[str] = []
    for check in gate.get("checks", []):
        name = str(check["name"])
        op = name[3:] if name.startswith("op ") else None
        if op and isinstance(prints.get(f"{op}_worst_permil"), int):
            passed, total = prints.get(f"{op}_cells_passed"), prints.get(f"{op}_cells")
            rows.append((op, prints[f"{op}_worst_permil"], f"{passed}/{total} cells" if total else ""))
            explains.append(name)
        elif name.startswith("MLP") and isinstance(metrics.get("mlp_worst_permil"), int):
            total = metrics.get("mlp_cells")
            rows.append(("MLP per-example", metrics["mlp_worst_permil"],
                         f"{metrics.get('mlp_cells_passed')}/{total} cells" if total else ""))
            explains.append(name)
        elif "gradcheck" in name.lower() and isinstance(metrics.get("final_worst_permil"), dict):
            rows += [(f"{k} at the final weights", v, "") for k, v in metrics["final_worst_permil"].items()
                     if isinstance(v, int)]
            explains.append(name)
        elif "central differences" in name and isinstance(metrics.get("d4_worst_permil"), int):
            rows.append(("batch gradient, step 0", metrics["d4_worst_permil"], ""))
            explains.append(name)
    if not rows:
        return []
    title = f"{gate.get('name', '')}: worst error per op against the tolerance" if any(
        n.startswith("op ") for n in explains) else f"{gate.get('name', '')}: worst gradcheck error"
    caption = (f"the worst cell's |numeric - analytic| in permil of max|grad|, as the gate judges it (whole "
               f"permil: 0 means under 1); the dashed line is the tolerance, {tol} permil; red bars fail")
    return [Plot("worst-vs-tolerance", plots.worst_vs_tolerance(rows, tol, title), caption, tuple(explains))]


# ---- training: loss per step in real units ----------------------------------------------------------------


def _loss(gate: dict[str, Any]) -> list[Plot]:
    metrics, name = gate.get("metrics") or {}, str(gate.get("name", ""))
    losses = metrics.get("losses")
    if not isinstance(losses, list) or not losses or not all(v is None or _number(v) for v in losses):
        return []
    bits = loss_bits(gate)
    fixed = isinstance(bits, int) and all(v is None or isinstance(v, int) for v in losses)
    scale = float(2 ** bits) if fixed else 1.0
    real = [None if v is None else v / scale for v in losses]
    if fixed:
        tips = [f"step {i}: loss {_g(r)} (loss_q {v}, Q{bits}: loss_q / 2^{bits})" if v is not None
                else f"step {i}: not finite" for i, (v, r) in enumerate(zip(losses, real, strict=True))]
        ylabel = f"loss (loss_q / 2^{bits})"
        caption = (f"the loss at each of {len(losses)} steps, in real units: the gate's Q{bits} integers divided "
                   f"by 2^{bits}; point at a step for its integer, or read it in the table")
    else:
        tips = [f"step {i}: loss {v!r}" if v is not None else f"step {i}: not finite" for i, v in enumerate(losses)]
        ylabel = "loss"
        caption = f"the loss the gate recorded at each of {len(losses)} steps (a gap: not finite)"
    explains = _checks(gate, lambda n: "loss" in n.lower())
    svg = plots.loss_curve(real, f"{name}: loss per step", ylabel, tips, _uid(gate, "loss"))
    return [Plot("loss", svg, caption, explains, side=_loss_table(losses, real, fixed, bits))]


def loss_bits(gate: dict[str, Any]) -> int | None:
    """Fraction bits of the gate's integer losses (``losses``, ``loss_q``), or None when they are real."""
    bits = (gate.get("metrics") or {}).get("loss_frac_bits", LOSS_FRAC_BITS.get(str(gate.get("name", ""))))
    return bits if isinstance(bits, int) and not isinstance(bits, bool) and 0 <= bits < 128 else None


def _g(value: float | None) -> str:
    return "not finite" if value is None else f"{value:.6g}"


def _loss_table(losses: list[Any], real: list[float | None], fixed: bool, bits: Any) -> str:
    steps = list(range(len(losses)))
    if len(steps) > MAX_LOSS_ROWS:
        half = MAX_LOSS_ROWS // 2
        steps = steps[:half] + [-1] + steps[-half:]
    head = "<tr><th>step</th><th>loss</th>" + (f"<th>loss_q (Q{escape(bits)})</th>" if fixed else "") + "</tr>"
    rows = []
    for i in steps:
        if i < 0:
            rows.append(f'<tr><td colspan="{3 if fixed else 2}">...</td></tr>')
            continue
        exact = f"<td><code>{escape(losses[i])}</code></td>" if fixed else ""
        rows.append(f"<tr><td>{i}</td><td>{escape(_g(real[i]))}</td>{exact}</tr>")
    return f'<table class="loss-table">{head}{"".join(rows)}</table>'


# ---- the worker pool: tasks per worker and pass times -----------------------------------------------------


def _tasks(gate: dict[str, Any]) -> list[Plot]:
    """Tasks per worker; a pool worker that ran none (``single-worker``) is a bar of 0, and the even share
    is over the whole pool, so the skew shows."""
    metrics = gate.get("metrics") or {}
    tasks = metrics.get("tasks_per_worker")
    if not isinstance(tasks, dict) or not tasks or not all(_number(v) for v in tasks.values()):
        return []
    tasks = dict(tasks)
    pool = metrics.get("workers")
    if isinstance(pool, int) and not isinstance(pool, bool) and len(tasks) < pool <= 256:
        tasks |= {str(i): 0 for i in range(pool) if str(i) not in tasks}
        tasks = dict(sorted(tasks.items(), key=lambda kv: (0, int(kv[0])) if kv[0].isdecimal() else (1, 0)))
    total, busy = sum(tasks.values()), sum(1 for v in tasks.values() if v)
    title = f"{gate.get('name', '')}: {total:g} tasks on {busy} of {len(tasks)} worker(s)"
    caption = "tasks each pool worker completed; the dashed line is an even share"
    explains = _checks(gate, lambda n: "worker" in n.lower() and "task" in n.lower())
    return [Plot("tasks-per-worker", plots.tasks_per_worker(tasks, title), caption, explains)]


def _times(gate: dict[str, Any]) -> list[Plot]:
    metrics, params = gate.get("metrics") or {}, gate.get("params") or {}
    workers = metrics.get("workers")
    labels = (("serial_seconds", "serial pass"),
              ("parallel_seconds", f"parallel pass ({workers} workers)" if workers else "parallel pass"),
              ("parallel_d2_seconds", f"parallel pass ({metrics.get('workers_d2')} workers)"),
              ("pool_start_seconds", "pool start (once)"))
    times = {label: float(metrics[key]) for key, label in labels if _number(metrics.get(key))}
    serial, parallel = metrics.get("serial_seconds"), metrics.get("parallel_seconds")
    if not times or not (_number(serial) and _number(parallel)):
        return []
    tasks = metrics.get("tasks_completed") or (params.get("B") or 0) * (metrics.get("steps") or 1)
    caption = "wall time of each pass over the same work"
    if _number(tasks) and tasks:
        per_task = serial / tasks
        caption += f"; one task (one example's gradient) is {per_task * 1e6:.0f} microseconds of serial work"
        if parallel >= serial:
            caption += (f". The parallel pass is slower here: every task is handed to a pool worker and its result "
                        f"collected, and at {per_task * 1e6:.0f} microseconds of work per task that dispatch overhead "
                        f"dominates; larger sizes (--preset medium or large) make each task outweigh it")
        else:
            caption += f". The parallel pass is {serial / parallel:.2g}x faster than serial here"
    if "pool start (once)" in times:
        caption += ". Pool start is paid once per run, outside both passes"
    title = f"{gate.get('name', '')}: pass times"
    return [Plot("pass-times", plots.pass_times(times, title, "serial pass"), caption)]


# ---- --compare-grads and invariance's comparisons ---------------------------------------------------------


def _compare(gate: dict[str, Any]) -> list[Plot]:
    metrics = gate.get("metrics") or {}
    reports: list[tuple[str, str, Any, tuple[str, ...]]] = []
    if isinstance(metrics.get("compare_grads"), dict):
        explains = _checks(gate, lambda n: "file" in n.lower())
        reports.append(("compare-grads", "--compare-grads", metrics["compare_grads"], explains))
    for check, outputs in (metrics.get("ulp_reports") or {}).items():
        for output, report in (outputs.items() if isinstance(outputs, dict) else ()):
            if isinstance(report, dict) and compared.first_rows(report)[2]:  # only comparisons that differ
                explains = _checks(gate, lambda n, c=str(check): n.split(" ")[0] == c)
                reports.append((f"ulp-{check}-{output}", f"{check} {output}", report, explains))
    out = []
    for kind, what, report, explains in reports:
        bars = compared.histogram(report)
        columns, rows, total = compared.first_rows(report)
        side = _first_table(columns, rows, total)
        if bars is None:
            continue
        integer = bool(bars.note)
        title = f"{gate.get('name', '')} {what}: cells per {'distance' if integer else 'ULP distance'}"
        caption = (f"cells per distance from the {what} values (sign: opposite signs, non-finite: NaN or Inf on "
                   f"either side); red bars are beyond the allowed distance")
        if bars.note:
            caption += f"; {bars.note}"
        svg = plots.ulp_histogram(bars.counts, bars.failing, title, "ULP distance" if not integer else
                                  "|theirs - ours| (units of the last place)")
        out.append(Plot("ulp-histogram" if kind == "compare-grads" else kind, svg, caption, explains, side,
                        (("data-differing-cells", str(total)),)))
    return out


def _first_table(columns: list[str], rows: list[list[str]], total: int) -> str:
    if not rows:
        return "<p>No cell differs.</p>"
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td><code>{escape(v)}</code></td>" for v in r) + "</tr>" for r in rows)
    shown = f"the first {len(rows)} of {total} differing cells" if total > len(rows) else \
        f"the {total} differing cell{'s' * (total != 1)}"
    return f'<table class="first-differing"><caption>{escape(shown)}</caption><tr>{head}</tr>{body}</table>'


BUILDERS: tuple[Callable[[dict[str, Any]], list[Plot]], ...] = (_heatmaps, _loss, _compare, _worst, _tasks, _times)
