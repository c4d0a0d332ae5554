"""crosscheck's console report: a heading, one PASS/FAIL line per figure of the log, the count, the verdict.

The JSON and JUnit reports of a crosscheck are those of ``run`` (its result is a GateReport).
"""

from __future__ import annotations

from typing import NamedTuple

from nxgates.gatekit import ParamValue
from nxgates.reporting.console import Renderer
from nxgates.runner import GateReport


class CrosscheckHeading(NamedTuple):
    """What was compared with what: named in the report's first line."""

    gate: str
    log: str  #: the log's path as the user gave it ('-' = stdin)
    params: dict[str, ParamValue]  #: the sizes nxgates recomputed at
    source: str  #: where the sizes came from, in words


def render_crosscheck(renderer: Renderer, heading: CrosscheckHeading, report: GateReport) -> None:
    """The crosscheck's lines; ``renderer.quiet`` keeps only the FAIL lines and the verdict."""
    quiet = renderer.quiet
    sizes = " ".join(f"{k}={v}" for k, v in heading.params.items())
    if not quiet:
        renderer.line(f"# crosscheck {heading.gate}: {heading.log} against nxgates at {sizes} ({heading.source})",
                      "bold")
    for item in report.output.lines():  # Lines made into lines, as the run renderer does
        if hasattr(item, "passed"):
            if not (quiet and item.passed):
                renderer.line(f"{'PASS' if item.passed else 'FAIL'} {item.name}: {item.detail}",
                              "green" if item.passed else "bold red")
        elif not quiet:
            renderer.line(item.text)
    checks = report.output.checks
    if not quiet:
        renderer.line(f"---- crosscheck {heading.gate}: {sum(c.passed for c in checks)} / {len(checks)} figures "
                      f"agree (the log's own verdict: {report.output.metrics['log_verdict']})")
    renderer.line(report.verdict, "bold green" if report.passed else "bold red")
