"""The JSON report: a stable interface, one document per ``run`` or ``crosscheck``."""

from __future__ import annotations

import json
from typing import Any

from nxgates import __version__
from nxgates.runner import GateReport


def to_json(reports: list[GateReport], interrupted: bool = False) -> dict[str, Any]:
    """The document: passed only when at least one gate ran, every gate passed and nothing stopped the run."""
    doc: dict[str, Any] = {
        "nxgates": __version__,
        "passed": bool(reports) and not interrupted and all(r.passed for r in reports),
        "gates": [gate_json(r) for r in reports],
    }
    if interrupted:
        doc["interrupted"] = True
    doc["environment"] = environment_json(reports)
    return doc


def environment_json(reports: list[GateReport]) -> dict[str, Any]:
    """Where the numbers came from: the machine, and each gate run's executor and workers, in run order."""
    from nxgates import environment

    return {**environment.machine(),
            "gates": [{"name": r.name, **environment.execution(r.params, r.output.metrics)} for r in reports]}


def gate_json(r: GateReport) -> dict[str, Any]:
    """One gate run as the ``gates`` items of every JSON document (``run``, ``crosscheck``, ``selftest``).

    A gate that pins figures adds them (``fingerprints``) and how lines name the run (``label``).
    """
    item = {
        "name": r.name,
        "passed": r.passed,
        "seconds": round(r.seconds, 6),
        "params": dict(r.params),
        "fault": r.fault,
        "error": r.error,
        "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in r.output.checks],
        "metrics": r.output.metrics,
    }
    figures = r.output.fingerprints
    if figures:
        item["label"] = r.label
        item["fingerprints"] = figures
    return item


def dumps(doc: dict[str, Any]) -> str:
    """The text every JSON report is written as: indented, one trailing newline, strict JSON (RFC 8259):
    a NaN or an infinity a gate put in its metrics is written as null."""
    try:
        return json.dumps(doc, indent=2, allow_nan=False) + "\n"
    except ValueError:
        from nxgates.contract import finite_or_null

        return json.dumps(finite_or_null(doc), indent=2, allow_nan=False) + "\n"


def json_text(reports: list[GateReport], interrupted: bool = False) -> str:
    """What ``--json`` writes."""
    return dumps(to_json(reports, interrupted))
