"""The HTML page, leading with what matters: the verdict, a row per gate, then each failing check's detail
and its plot; then per gate its plots, and folded (``<details>``) its checks when green, parameters once,
figures, pinned figures, and the environment. Inline CSS, no script.

Nothing on the page is fetched: no script, font, style or image comes from the network, so the file
opens the same from a CI artifact, an e-mail or a laptop offline.
"""

from __future__ import annotations

from typing import Any

from nxgates.reporting.html import values
from nxgates.reporting.html.gateplots import Plot, gate_plots, loss_bits
from nxgates.reporting.html.values import escape

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.3em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ccc; }
h3 { margin: 1.2em 0 0.4em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } caption { text-align: left; font-size: 0.9em; color: #555; padding: 0.2em 0; }
.pass { color: #16691c; font-weight: bold; } .fail { color: #b00020; font-weight: bold; }
.verdict { font-size: 1.3em; padding: 0.5em 1em; margin: 0.5em 0; }
.verdict-pass { background: #e6f4e7; } .verdict-fail { background: #fde8ea; }
code, .detail { font-family: ui-monospace, monospace; font-size: 0.9em; }
pre.detail { white-space: pre-wrap; word-break: break-all; background: #fafafa; border-left: 3px solid #b00020;
  padding: 0.5em 0.8em; margin: 0.3em 0 0.8em; }
.failure { border: 1px solid #f1b0b7; border-radius: 4px; padding: 0.2em 1em 0.6em; margin: 0.8em 0; }
.failure h3 { margin-top: 0.6em; }
.plots { display: flex; flex-wrap: wrap; gap: 0 2em; align-items: flex-start; }
figure { margin: 1em 0; max-width: 100%; display: table; }
figcaption { display: table-caption; caption-side: bottom; font-size: 0.9em; color: #555; }
.plot-row { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
.plot-row > svg { max-width: 100%; height: auto; }
.plot-row table { font-size: 0.85em; }
details { margin: 0.4em 0; } summary { cursor: pointer; color: #333; font-weight: 600; }
details > :not(summary) { margin-left: 1em; }
table.cells td { text-align: right; font-family: ui-monospace, monospace; font-size: 0.85em; padding: 0.1em 0.4em; }
table.records td { font-family: ui-monospace, monospace; font-size: 0.85em; }
.used { color: #555; font-size: 0.9em; } .muted { color: #666; }
svg.spark { vertical-align: middle; margin-left: 0.5em; }
"""


def render(doc: dict[str, Any]) -> str:
    """The whole page."""
    gates = doc["gates"]
    passed = doc["passed"]
    verdict = "PASSED" if passed else ("INTERRUPTED" if doc.get("interrupted") else "FAILED")
    names = ", ".join(g["name"] for g in gates) or "no gate"
    green = sum(bool(g["passed"]) for g in gates)
    executions = {e.get("name"): e for e in doc.get("environment", {}).get("gates", []) if isinstance(e, dict)}
    drawn = {id(g): gate_plots(g) for g in gates}
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
        f'<p class="verdict {"verdict-pass" if passed else "verdict-fail"}">{escape(verdict)}: '
        f"{green} of {len(gates)} gate{'s' * (len(gates) != 1)} passed</p>",
        _overview(gates),
    ]
    failures = [_failures(g, drawn[id(g)]) for g in gates if not g["passed"]]
    if failures:
        parts += ['<h2 id="failures">What failed</h2>', *failures]
    for gate in gates:
        parts.append(_gate(gate, drawn[id(gate)], executions.get(gate["name"], {})))
    machine = {k: f"<code>{values.scalar(v)}</code>" for k, v in doc.get("environment", {}).items() if k != "gates"}
    if machine:
        parts.append(f'<details id="environment"><summary>Environment</summary>{values.table(machine)}</details>')
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


def _overview(gates: list[dict[str, Any]]) -> str:
    rows = ['<table class="gates">',
            "<tr><th>gate</th><th>result</th><th>checks passed</th><th>failing checks</th><th>seconds</th></tr>"]
    for gate in gates:
        ok = sum(bool(c["passed"]) for c in gate["checks"])
        failing = [escape(c["name"]) for c in gate["checks"] if not c["passed"]]
        if gate.get("error"):
            failing.insert(0, "<i>error</i>")
        rows.append(f'<tr><td><a href="#gate-{_anchor(gate["name"])}">{escape(gate["name"])}</a></td>'
                    f"<td>{_result(gate['passed'])}</td><td>{ok}/{len(gate['checks'])}</td>"
                    f"<td>{'<br>'.join(failing)}</td><td>{gate['seconds']:.3f}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _anchor(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name)


def _result(passed: bool) -> str:
    return '<span class="pass">PASS</span>' if passed else '<span class="fail">FAIL</span>'


def _failures(gate: dict[str, Any], drawn: list[Plot]) -> str:
    """A red gate's failing checks, each its detail in full and the plot that shows it."""
    name = gate["name"]
    parts = [f'<div class="failure" data-gate="{escape(name)}">']
    if gate.get("fault"):
        parts.append(f"<p>Fault planted: <code>{escape(gate['fault'])}</code> (the gate must FAIL).</p>")
    if gate.get("error"):
        parts.append(f"<h3>{escape(name)}: error</h3><pre class=\"detail\">{escape(gate['error'])}</pre>")
    placed: set[str] = set()
    for check in gate["checks"]:
        if check["passed"]:
            continue
        parts.append(f"<h3>{escape(name)}: {escape(check['name'])} {_result(False)}</h3>")
        parts.append(f'<pre class="detail">{escape(check["detail"])}</pre>')
        shown = [p for p in drawn if check["name"] in p.explains]
        fresh = [p for p in shown if p.kind not in placed]
        if fresh:
            parts.append(_figures(fresh, name))
        if len(fresh) < len(shown):
            again = ", ".join(p.kind for p in shown if p not in fresh)
            parts.append(f'<p class="muted">Its plot is above: {escape(again)}.</p>')
        if not shown:
            parts.append('<p class="muted">No plot for this check: its detail above is the whole story.</p>')
        placed |= {p.kind for p in fresh}
    parts.append("</div>")
    return "\n".join(parts)


def _gate(gate: dict[str, Any], drawn: list[Plot], execution: dict[str, Any]) -> str:
    """The gate's section: its plots (those a failing check led with are named, not drawn twice), then
    everything else folded."""
    name = gate["name"]
    anchor = _anchor(name)
    parts = [f'<section id="gate-{anchor}" data-gate="{escape(name)}">',
             f"<h2>{escape(gate.get('label') or name)}: {_result(gate['passed'])}</h2>"]
    if gate.get("fault"):
        parts.append(f"<p>Fault planted: <code>{escape(gate['fault'])}</code> (the gate must FAIL).</p>")
    failing = {c["name"] for c in gate["checks"] if not c["passed"]}
    above = [p for p in drawn if failing & set(p.explains)]
    rest = [p for p in drawn if p not in above]
    if above:
        kinds = ", ".join(p.kind for p in above)
        parts.append(f'<p class="muted">Shown under <a href="#failures">What failed</a>: {escape(kinds)}.</p>')
    if rest:
        parts.append(_figures(rest, name))
    if not drawn:
        parts.append('<p class="muted">This gate\'s metrics have nothing to plot.</p>')
    ok = sum(bool(c["passed"]) for c in gate["checks"])
    checks = _checks(gate["checks"])
    summary = f"Checks: {ok} of {len(gate['checks'])} passed"
    parts.append(f"<details{'' if gate['passed'] else ' open'}><summary>{summary}</summary>{checks}</details>")
    params = gate.get("params") or {}
    parts.append(f"<details><summary>Parameters</summary>{values.parameters(params, execution)}</details>")
    fingerprints = gate.get("fingerprints") or {}
    skip = {k for k, v in (gate.get("metrics") or {}).items() if k in execution and execution[k] == v}
    figures = values.figures(gate.get("metrics") or {}, params, values.shapes_of(fingerprints), skip,
                            loss_bits(gate))
    if figures:
        parts.append(f"<details><summary>Figures ({len(figures)})</summary>{values.table(figures)}</details>")
    pinned = values.pinned(fingerprints)
    if pinned:
        parts.append(f"<details><summary>Pinned figures (<code>--baseline</code>, {len(pinned)})</summary>"
                     f"{values.table(pinned)}</details>")
    parts.append("</section>")
    return "\n".join(parts)


def _checks(checks: list[dict[str, Any]]) -> str:
    rows = ["<table>", "<tr><th>check</th><th>result</th><th>detail</th></tr>"]
    for c in checks:
        rows.append(f"<tr><td>{escape(c['name'])}</td><td>{_result(c['passed'])}</td>"
                    f'<td class="detail">{escape(c["detail"])}</td></tr>')
    rows.append("</table>")
    return "\n".join(rows)


def _figures(drawn: list[Plot], gate: str) -> str:
    """Plots side by side while the page is wide enough (A beside B), each wrapping under the last."""
    return '<div class="plots">' + "".join(_figure(p, gate) for p in drawn) + "</div>"


def _figure(plot: Plot, gate: str) -> str:
    attrs = "".join(f' {k}="{escape(v)}"' for k, v in plot.attrs)
    return (f'<figure class="plot" data-plot="{escape(plot.kind)}" data-gate="{escape(gate)}"{attrs}>'
            f'<div class="plot-row">{plot.svg}{plot.side}</div>'
            f"<figcaption>{escape(plot.caption)}</figcaption></figure>")
