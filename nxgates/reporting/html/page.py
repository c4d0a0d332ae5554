"""The HTML page: per gate its checks, parameters, environment, figures and plots; inline CSS, no script.

Nothing on the page is fetched: no script, font, style or image comes from the network, so the file
opens the same from a CI artifact, an e-mail or a laptop offline.
"""

from __future__ import annotations

from html import escape as html_escape
from typing import Any

from nxgates.reporting.html import cells, plots
from nxgates.streams import shown

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.pass { color: #16691c; font-weight: bold; } .fail { color: #b00020; font-weight: bold; }
.verdict-pass { background: #e6f4e7; padding: 0.5em 1em; } .verdict-fail { background: #fde8ea; padding: 0.5em 1em; }
code, .detail { font-family: ui-monospace, monospace; font-size: 0.9em; word-break: break-all; }
figure { margin: 1em 0; } figcaption { font-size: 0.9em; color: #555; }
svg { max-width: 100%; height: auto; }
"""

def escape(text: str) -> str:
    """Outside text as HTML: markup characters as entities, control characters and lone surrogates (a
    non-UTF-8 file name) as visible escapes, so the page is well-formed and can be written as UTF-8."""
    return html_escape(shown(text, keep_newlines=True))


#: a list in the metrics longer than this is summarised, not printed (the cells of a gradcheck at xl)
MAX_LIST = 16


def render(doc: dict[str, Any]) -> str:
    """The whole page."""
    passed = doc["passed"]
    verdict = "PASSED" if passed else ("INTERRUPTED" if doc.get("interrupted") else "FAILED")
    names = ", ".join(g["name"] for g in doc["gates"]) or "no gate"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>nxgates {escape(verdict)}: {escape(names)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>nxgates {escape(str(doc.get('nxgates', '')))}: {escape(names)}</h1>",
        f'<p class="{"verdict-pass" if passed else "verdict-fail"}">{escape(verdict)}</p>',
        _overview(doc),
    ]
    executions = {e.get("name"): e for e in doc.get("environment", {}).get("gates", [])}
    for i, gate in enumerate(doc["gates"]):
        parts.append(_gate(gate, executions.get(gate["name"], {}), i))
    parts.append("<h2>Environment</h2>")
    machine = {k: v for k, v in doc.get("environment", {}).items() if k != "gates"}
    parts.append(_table(machine))
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


def _overview(doc: dict[str, Any]) -> str:
    rows = ["<table>", "<tr><th>gate</th><th>result</th><th>checks passed</th><th>seconds</th></tr>"]
    for gate in doc["gates"]:
        ok = sum(c["passed"] for c in gate["checks"])
        rows.append(f'<tr><td><a href="#gate-{_anchor(gate["name"])}">{escape(gate["name"])}</a></td>'
                    f"<td>{_result(gate['passed'])}</td><td>{ok}/{len(gate['checks'])}</td>"
                    f"<td>{gate['seconds']:.3f}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _anchor(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name)


def _result(passed: bool) -> str:
    return '<span class="pass">PASS</span>' if passed else '<span class="fail">FAIL</span>'


def _gate(gate: dict[str, Any], execution: dict[str, Any], index: int) -> str:
    name = gate["name"]
    parts = [f'<h2 id="gate-{_anchor(name)}">{escape(gate.get("label") or name)}: {_result(gate["passed"])}</h2>']
    if gate.get("fault"):
        parts.append(f"<p>Fault planted: <code>{escape(gate['fault'])}</code> (the gate must FAIL).</p>")
    if gate.get("error"):
        parts.append(f'<p class="fail">{escape(gate["error"])}</p>')
    parts.append("<h3>Checks</h3>")
    rows = ["<table>", "<tr><th>check</th><th>result</th><th>detail</th></tr>"]
    for c in gate["checks"]:
        rows.append(f"<tr><td>{escape(c['name'])}</td><td>{_result(c['passed'])}</td>"
                    f'<td class="detail">{escape(c["detail"])}</td></tr>')
    rows.append("</table>")
    parts.append("\n".join(rows))
    parts += ["<h3>Parameters</h3>", _table(gate.get("params", {}))]
    if execution:
        parts += ["<h3>Execution</h3>", _table({k: v for k, v in execution.items() if k != "name"})]
    figures = _scalars(gate.get("metrics") or {})
    if figures:
        parts += ["<h3>Figures</h3>", _table(figures)]
    pinned = {name: _pinned(value) for name, value in (gate.get("fingerprints") or {}).items()}
    if pinned:
        parts += ["<h3>Pinned figures (<code>--baseline</code>)</h3>", _table(pinned)]
    plotted = _plots(gate)
    if plotted:
        parts.append("<h3>Plots</h3>")
        parts += plotted
    return "\n".join(parts)


def _pinned(value: Any) -> Any:
    """A fingerprint as a person reads it: a scalar as is, an array's record as its type, shape and digest."""
    if isinstance(value, dict) and "sha256" in value:
        shape = "x".join(str(n) for n in value.get("shape", ()))
        return f"{value.get('dtype', '')} [{shape}] sha256 {str(value['sha256'])[:16]}..."
    return value


def _scalars(metrics: dict[str, Any]) -> dict[str, Any]:
    """The metrics a table can show: scalars and short lists; long lists are named by their length."""
    shown: dict[str, Any] = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            for sub, v in _scalars(value).items():
                shown[f"{key}.{sub}"] = v
        elif isinstance(value, list) and len(value) > MAX_LIST:
            shown[key] = f"({len(value)} values)"
        else:
            shown[key] = value
    return shown


def _table(values: dict[str, Any]) -> str:
    rows = ["<table>"]
    for key, value in values.items():
        rows.append(f"<tr><th>{escape(str(key))}</th><td><code>{escape(_text(value))}</code></td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value)
    return str(value)


def _figure(svg: str, caption: str, kind: str) -> str:
    return f'<figure class="plot" data-plot="{escape(kind)}">{svg}<figcaption>{escape(caption)}</figcaption></figure>'


def _plots(gate: dict[str, Any]) -> list[str]:
    """Every plot the gate's metrics allow, each a ``<figure>`` with an inline ``<svg>``."""
    metrics = gate.get("metrics") or {}
    out = []
    for grid in cells.gradcheck_grids(gate):
        caption = f"gradcheck {grid.name}: {grid.failing_cells} cell(s) beyond {grid.tol_permil} permil"
        if grid.failing_cells:
            caption += ", marked red (crossed while few)"
        if grid.block != (1, 1):
            caption += f"; max-pooled by {grid.block[0]} x {grid.block[1]} cells to keep the page small"
        figure = _figure(plots.heatmap(grid), caption, f"gradcheck-{grid.name}")
        out.append(figure.replace("<figure ", f'<figure data-failing-cells="{grid.failing_cells}" ', 1))
    losses = metrics.get("losses")
    if isinstance(losses, list) and losses:
        out.append(_figure(plots.loss_curve(losses, f"{gate['name']}: loss per step"),
                           f"the loss the gate recorded at each of {len(losses)} steps", "loss"))
    tasks = metrics.get("tasks_per_worker")
    if isinstance(tasks, dict) and tasks:
        out.append(_figure(plots.bars(tasks, "tasks per worker", "worker", "tasks completed"),
                           f"{sum(tasks.values())} tasks on {len(tasks)} worker(s)", "tasks-per-worker"))
    times = {label: metrics[key] for key, label in (("serial_seconds", "serial pass"),
                                                    ("parallel_seconds", "parallel pass"),
                                                    ("pool_start_seconds", "pool start"))
             if isinstance(metrics.get(key), int | float)}
    if times:
        out.append(_figure(plots.bars(times, "pass times", "seconds", "", horizontal=True),
                           "wall time of each pass", "pass-times"))
    histogram = _ulp_histogram(metrics.get("compare_grads"))
    if histogram:
        out.append(_figure(plots.bars(histogram, "gradient differences in ULP", "ULP distance", "cells"),
                           "cells per ULP distance from the --compare-grads file (sign: opposite signs, "
                           "non-finite: NaN or Inf on either side)", "ulp-histogram"))
    return out


def _ulp_histogram(compared: Any) -> dict[str, float] | None:
    """parallel-grad's ``compare_grads`` metric as bars: its distance buckets, then the cells counted apart
    from them (opposite signs, NaN or Inf) when there are any, so every compared cell is drawn once."""
    if not isinstance(compared, dict):
        return None
    counts = plots.histogram_counts(compared.get("histogram"))
    if counts is None:
        return None
    for key, label in (("sign_differences", "sign"), ("nonfinite", "non-finite")):
        value = compared.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            counts[label] = value
    return counts
