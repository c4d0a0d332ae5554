"""Machine-readable reports: the JSON document (a stable interface) and JUnit XML for CI systems."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from nxgates import __version__
from nxgates.errors import ConfigError
from nxgates.runner import GateReport

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET


def to_json(reports: list[GateReport], interrupted: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "nxgates": __version__,
        "passed": bool(reports) and not interrupted and all(r.passed for r in reports),
        "gates": [gate_json(r) for r in reports],
    }
    if interrupted:
        doc["interrupted"] = True
    return doc


def gate_json(r: GateReport) -> dict[str, Any]:
    return {
        "name": r.name,
        "passed": r.passed,
        "seconds": round(r.seconds, 6),
        "params": dict(r.params),
        "fault": r.fault,
        "error": r.error,
        "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in r.output.checks],
        "metrics": r.output.metrics,
    }


def to_junit(reports: list[GateReport]) -> ET.Element:
    """One <testsuite> per gate, one <testcase> per check; <failure> for a FAIL, <error> for crash/timeout."""
    import xml.etree.ElementTree as ET
    suites = ET.Element("testsuites", name="nxgates")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for r in reports:
        checks = r.output.checks
        failures = sum(not c.passed for c in checks) if r.error is None else 0
        errors = 1 if r.error is not None else 0
        suite = ET.SubElement(
            suites, "testsuite", name=r.name, tests=str(len(checks)), failures=str(failures),
            errors=str(errors), skipped="0", time=f"{r.seconds:.6f}",
        )
        for c in checks:
            case = ET.SubElement(suite, "testcase", classname=f"nxgates.{r.name}", name=c.name,
                                 time=f"{c.seconds:.6f}")
            if r.error is not None:
                err = ET.SubElement(case, "error", message=r.error, type=r.error_kind or "error")
                err.text = r.traceback or r.error
            elif not c.passed:
                fail = ET.SubElement(case, "failure", message=c.detail or c.name, type="GateCheckFailed")
                fail.text = c.detail
        totals["tests"] += len(checks)
        totals["failures"] += failures
        totals["errors"] += errors
    for key, value in totals.items():
        suites.set(key, str(value))
    return suites


def check_writable(path: str | None, flag: str) -> None:
    """Fail before any gate runs when a report could not be written (exit 2, one line)."""
    if path is None or path == "-":
        return
    p = Path(path)
    try:  # pathlib's is_dir() and friends raise, not answer False, for e.g. a name too long
        if p.is_dir():
            raise ConfigError(f"{flag} {path}: is a directory")
        if p.is_fifo() or p.is_socket():  # opening one would block until a reader comes, maybe forever
            raise ConfigError(f"{flag} {path}: is a FIFO or socket; write to '-' and pipe that instead")
        if not p.parent.is_dir():
            raise ConfigError(f"{flag} {path}: directory {p.parent} does not exist")
        existed = p.exists()
        with open(p, "a", encoding="utf-8"):
            pass
        if not existed:
            p.unlink()  # leave no empty report behind if the run stops before writing it
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot write: {exc.strerror or exc}") from None


def write_text(path: str, text: str, flag: str) -> None:
    """Write a report to ``path``, or to stdout for ``-``."""
    if path == "-":
        from nxgates.streams import write_stdout

        write_stdout(text)  # closed stdout: exit 2; a reader gone (EPIPE): dropped, the verdict stands
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot write: {exc.strerror or exc}") from None


def json_text(reports: list[GateReport], interrupted: bool = False) -> str:
    import json

    return json.dumps(to_json(reports, interrupted), indent=2) + "\n"


def junit_text(reports: list[GateReport]) -> str:
    import xml.etree.ElementTree as ET

    root = to_junit(reports)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
