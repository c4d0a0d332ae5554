"""The comparison: every figure of a parsed log against nxgates' value for it, as a gate report."""

from __future__ import annotations

import time
from typing import Any

from nxgates.crosscheck.seedlogs import declared
from nxgates.errors import GateTimeout
from nxgates.gatekit import GateOutput, ParamValue, ParsedLog, RunContext
from nxgates.runner import GateReport


def crosscheck(name: str, module: str, log: ParsedLog, params: dict[str, ParamValue], *,
               timeout: float | None = None, source: str | None = None, options: dict[str, Any] | None = None
               ) -> GateReport:
    """Recompute the log's figures; a report with one check per figure (``error`` set on a timeout).
    ``options``: the run's gate options (``inputs``: the tensors the logged run computed from)."""
    seed_log = declared(module)
    ctx = RunContext(params=dict(params), options=dict(options or {}),
                     deadline=None if timeout is None else time.monotonic() + timeout)
    start = time.perf_counter()
    out = GateOutput()
    out.metrics = {"log_verdict": seed_log.verdict(log), "source": source}
    seed_log.notes(log, out)
    try:
        figures = seed_log.figures(log, ctx)
    except GateTimeout:
        seconds = time.perf_counter() - start
        out.check("timeout", False, f"timed out after {timeout:g} s")
        return GateReport(name, dict(params), out, seconds, None, f"timed out after {timeout:g} s", "timeout")
    seconds = time.perf_counter() - start
    for fig in figures:
        detail = _show(fig.log) if fig.agrees else f"log {_show(fig.log)}, nxgates {_show(fig.nxgates)}"
        out.check(fig.name, fig.agrees, detail, seconds=0.0)
    bad = sum(not f.agrees for f in figures)
    out.metrics.update({
        "figures": len(figures),
        "disagreements": bad,
        "log": {f.name: f.log for f in figures},
        "nxgates": {f.name: f.nxgates for f in figures},
    })
    out.green = f"CROSSCHECK GREEN -- nxgates agrees with all {len(figures)} figures of the {name} log"
    out.red = f"CROSSCHECK RED -- {bad} of {len(figures)} figures of the {name} log disagree with nxgates"
    return GateReport(name, dict(params), out, seconds)


def _show(value: Any, most: int = 16) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, list):
        if not value:
            return "(none)"
        shown = ", ".join(map(str, value[:most]))
        return f"[{shown}, ... ({len(value)} in all)]" if len(value) > most else f"[{shown}]"
    return str(value)
