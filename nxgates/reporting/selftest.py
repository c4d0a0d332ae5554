"""The selftest's reports: the kill table, a line per run as it finishes, and its JSON document."""

from __future__ import annotations

from typing import Any

from nxgates import __version__
from nxgates.plan import LIAR_KILL
from nxgates.reporting.console import Renderer
from nxgates.runner import INERT, REFUSED
from nxgates.selftest import KillRow


class KillTable:
    """The kill table on the console: a header, one row per run (clean or with a fault), a summary."""

    def __init__(self, renderer: Renderer):
        self.renderer = renderer

    def header(self) -> None:
        self.renderer.line(f"{'GATE':<22}{'FAULT':<20}{'EXPECTED':<10}{'RESULT':<10}BY")

    def row(self, row: KillRow) -> None:
        gate = f"{row.gate}[{row.variant}]" if row.variant else row.gate
        if row.fault is None:
            result, by = ("PASS" if row.ok else "FAIL"), "all checks" if row.ok else ", ".join(row.failed_checks)
            if row.report.error_kind == REFUSED:  # the gate refused these parameters once running
                result, by = "REFUSED", row.report.error or ""
            line = f"{gate:<22}{'(clean)':<20}{'pass':<10}{result:<10}{by}"
        else:
            result, by = ("caught" if row.ok else "MISSED"), ", ".join(row.failed_checks)
            judged = [c.detail for c in row.report.output.checks if c.name == LIAR_KILL and not c.passed]
            if row.report.error_kind in (INERT, REFUSED):  # nothing was proved at these parameters
                result, by = "NO PROOF", row.report.error or ""
            elif judged:  # every check passed, yet the fault moved the gate's figures
                by = judged[0]
            by = by or row.report.error or "no check failed"
            line = f"{gate:<22}{row.fault:<20}{'fail':<10}{result:<10}{by}"
        self.renderer.line(line, "green" if row.ok else "bold red")

    def summary(self, rows: list[KillRow]) -> bool:
        """The closing line; whether the selftest is GREEN (every clean run passed, every fault caught)."""
        n_faults = sum(r.fault is not None for r in rows)
        caught = sum(r.ok for r in rows if r.fault is not None)
        clean_ok = sum(r.ok for r in rows if r.fault is None)
        ok = all(r.ok for r in rows)
        self.renderer.line(f"==== selftest: {clean_ok}/{len(rows) - n_faults} clean gates passed, {caught}/{n_faults} "
                           f"faults caught -- {'GREEN' if ok else 'RED'}", "bold green" if ok else "bold red")
        return ok


def selftest_json(rows: list[KillRow], interrupted: bool = False) -> dict[str, Any]:
    """The kill table and every run, as ``selftest --json`` writes them; a stopped selftest never passes."""
    from nxgates.reporting.json_report import environment_json, gate_json

    doc = {
        "nxgates": __version__,
        "passed": bool(rows) and not interrupted and all(r.ok for r in rows),
        "kills": [{"gate": r.gate, "variant": r.variant, "fault": r.fault, "ok": r.ok,
                   "caught": r.fault is not None and r.ok, "failed_checks": r.failed_checks,
                   "expected": list(r.expected)} for r in rows],
        "gates": [gate_json(r.report) for r in rows],
        "environment": environment_json([r.report for r in rows]),
    }
    if interrupted:
        doc["interrupted"] = True
    return doc


def selftest_json_text(rows: list[KillRow], interrupted: bool = False) -> str:
    from nxgates.reporting.json_report import dumps

    return dumps(selftest_json(rows, interrupted))
