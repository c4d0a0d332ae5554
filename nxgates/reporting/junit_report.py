"""JUnit XML for CI systems: one <testsuite> per gate, one <testcase> per check.

Outside text (gate and check names, details, error messages) passes :func:`nxgates.streams.shown`: XML 1.0
forbids most control characters, lone surrogates (a non-UTF-8 file name) and U+FFFE/U+FFFF, and one of
them in a detail would make the whole file unreadable to the CI; each is written as a visible escape.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from nxgates.runner import GateReport
from nxgates.streams import shown


def _text(text: str) -> str:
    """A message or body: its own lines kept, everything XML cannot hold escaped."""
    return shown(text, keep_newlines=True)


def to_junit(reports: list[GateReport], interrupted: bool = False) -> ET.Element:
    """One <testsuite> per gate, one <testcase> per check; <failure> for a FAIL, <error> for crash/timeout.

    A stopped run (Ctrl-C, SIGTERM) adds a suite ``interrupted`` with one <error>: a CI reading only this file
    must not take the finished gates for the whole run.
    """
    suites = ET.Element("testsuites", name="nxgates")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for r in reports:
        checks = r.output.checks
        failures = sum(not c.passed for c in checks) if r.error is None else 0
        errors = 1 if r.error is not None else 0
        suite = ET.SubElement(
            suites, "testsuite", name=shown(r.name), tests=str(len(checks)), failures=str(failures),
            errors=str(errors), skipped="0", time=f"{r.seconds:.6f}",
        )
        for c in checks:
            case = ET.SubElement(suite, "testcase", classname=f"nxgates.{shown(r.name)}", name=shown(c.name),
                                 time=f"{c.seconds:.6f}")
            if r.error is not None:
                err = ET.SubElement(case, "error", message=_text(r.error), type=r.error_kind or "error")
                err.text = _text(r.traceback or r.error)
            elif not c.passed:
                fail = ET.SubElement(case, "failure", message=_text(c.detail or c.name), type="GateCheckFailed")
                fail.text = _text(c.detail)
        totals["tests"] += len(checks)
        totals["failures"] += failures
        totals["errors"] += errors
    if interrupted:
        suite = ET.SubElement(suites, "testsuite", name="interrupted", tests="1", failures="0", errors="1",
                              skipped="0", time="0.000000")
        case = ET.SubElement(suite, "testcase", classname="nxgates.interrupted", name="interrupted", time="0.000000")
        err = ET.SubElement(case, "error", message="the run was interrupted before every gate finished",
                            type="interrupted")
        err.text = "interrupted: only the gates that finished are reported"
        totals["tests"] += 1
        totals["errors"] += 1
    for key, value in totals.items():
        suites.set(key, str(value))
    return suites


def junit_text(reports: list[GateReport], interrupted: bool = False) -> str:
    """What ``--junit`` writes: indented, with the XML declaration CI parsers expect."""
    root = to_junit(reports, interrupted)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
