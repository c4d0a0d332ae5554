"""crosscheck's console lines, made from its report."""

import io

from nxgates.gatekit import GateOutput
from nxgates.reporting.console import Renderer
from nxgates.reporting.crosscheck import CrosscheckHeading, render_crosscheck
from nxgates.runner import GateReport

HEADING = CrosscheckHeading("lora", "seed.log", {"T": 3, "DM": 6}, "the seed's defaults")


def crosscheck_report():
    out = GateOutput(green="CROSSCHECK GREEN", red="CROSSCHECK RED")
    out.info("workers=16 (reported, not compared)")
    out.check("loss", True, "42")
    out.check("grad A[0]", False, "log 7, nxgates 8")
    out.metrics = {"log_verdict": "GREEN"}
    return GateReport("lora", {"T": 3, "DM": 6}, out, 0.1)


def lines(quiet):
    stream = io.StringIO()
    render_crosscheck(Renderer(stream, quiet=quiet), HEADING, crosscheck_report())
    return stream.getvalue().splitlines()


def test_every_figure_is_a_line_between_heading_and_verdict():
    assert lines(quiet=False) == [
        "# crosscheck lora: seed.log against nxgates at T=3 DM=6 (the seed's defaults)",
        "workers=16 (reported, not compared)",
        "PASS loss: 42",
        "FAIL grad A[0]: log 7, nxgates 8",
        "---- crosscheck lora: 1 / 2 figures agree (the log's own verdict: GREEN)",
        "CROSSCHECK RED",
    ]


def test_quiet_keeps_the_disagreements_and_the_verdict():
    assert lines(quiet=True) == ["FAIL grad A[0]: log 7, nxgates 8", "CROSSCHECK RED"]
