"""JUnit XML, --repeat, --timeout and the progress bar."""

import io
import json
import xml.etree.ElementTree as ET

from nxgates.gatekit import GateDef, GateOutput
from nxgates.registry import GateEntry
from nxgates.reporting.console import RichProgress
from nxgates.runner import run_repeated


def suites(path):
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    return root, {s.get("name"): s for s in root.findall("testsuite")}


def test_junit_has_a_suite_per_gate_and_a_case_per_check(invoke, tmp_path):
    r = invoke("run", "lora", "parallel-grad", "--junit", "out.xml")
    assert r.exit_code == 0
    root, by_name = suites(tmp_path / "out.xml")
    assert set(by_name) == {"lora", "parallel-grad"}
    assert root.get("tests") == "6" and root.get("failures") == "0" and root.get("errors") == "0"
    cases = by_name["lora"].findall("testcase")
    assert [c.get("name") for c in cases] == ["gradcheck A (lora)", "gradcheck B (lora)", "base W frozen"]
    for case in cases:
        assert float(case.get("time")) >= 0 and case.get("classname") == "nxgates.lora"
        assert case.find("failure") is None and case.find("error") is None


def test_junit_failure_carries_the_detail(invoke, tmp_path):
    r = invoke("run", "lora", "--inject", "train-base", "--junit", "out.xml")
    assert r.exit_code == 1
    root, by_name = suites(tmp_path / "out.xml")
    assert root.get("failures") == "1"
    (failed,) = [c for c in by_name["lora"].findall("testcase") if c.find("failure") is not None]
    assert failed.get("name") == "base W frozen"
    assert "cells of W changed" in failed.find("failure").get("message")


def test_timeout_is_a_failed_gate_and_a_junit_error(invoke, tmp_path):
    r = invoke("run", "lora", "parallel-grad", "--preset", "medium", "--timeout", "0.001",
               "--junit", "out.xml", "--json", "out.json")
    assert r.exit_code == 1
    assert "RED -- timed out after 0.001 s" in r.stdout
    root, by_name = suites(tmp_path / "out.xml")
    assert root.get("errors") == "2"
    assert by_name["parallel-grad"].find("testcase/error").get("type") == "timeout"
    doc = json.loads((tmp_path / "out.json").read_text())
    assert [g["error"] for g in doc["gates"]] == ["timed out after 0.001 s"] * 2


def test_repeat_reports_agreement(invoke):
    r = invoke("run", "lora", "parallel-grad", "--repeat", "3", "--json", "-")
    assert r.exit_code == 0
    for gate in json.loads(r.stdout)["gates"]:
        (check,) = [c for c in gate["checks"] if c["name"] == "repeat: 3 runs agree"]
        assert check["passed"] and check["detail"].startswith("3/3 runs agreed")


def flaky_entry():
    """A stand-in gate whose numbers change on every run: what --repeat exists to catch."""
    runs = iter(range(100))

    def run(ctx):
        out = GateOutput()
        out.check("always passes", True)
        out.digest = f"run-{next(runs) % 2}"
        return out

    gate = GateDef(params={}, checks=("always passes",), run=run)
    return GateEntry.of("flaky", gate, {})


def test_repeat_fails_when_runs_disagree():
    report = run_repeated(flaky_entry(), {}, 4)
    assert not report.passed
    (check,) = [c for c in report.output.checks if c.name.startswith("repeat")]
    assert not check.passed and check.detail.startswith("2/4 runs agreed")


def test_progress_bar_on_a_terminal_only():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    bar = RichProgress(tty, delay=0)
    bar.start("cells checked", 10)
    bar.advance(4)
    bar.stop()
    assert "cells checked" in tty.getvalue()


def test_no_progress_or_colour_when_piped(invoke):
    r = invoke("run", "parallel-grad", "--preset", "medium")
    assert r.exit_code == 0
    assert "\x1b[" not in r.stdout and "\r" not in r.stdout and "━" not in r.stdout


def test_no_colour_with_no_color_even_on_a_terminal(monkeypatch):
    from nxgates.reporting.console import Renderer

    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert Renderer(Tty()).console is not None
    monkeypatch.setenv("NO_COLOR", "1")
    assert Renderer(Tty()).console is None


def test_verbose_lines_are_formatted_only_where_shown():
    """lora's per-cell lines cost more to format than its gradcheck at xl: made only for -v, in their place."""
    from nxgates.reporting.console import Renderer
    from nxgates.runner import GateReport

    made = []

    def cells():
        made.append("made")
        yield from ("   cell 0", "   cell 1")

    out = GateOutput()
    out.info("first")
    out.verbose_lines(cells)
    out.info("last")
    out.check("a check", True)
    report = GateReport("g", {}, out, 0.1)
    for quiet in (False, True):
        shown = io.StringIO()
        Renderer(shown, quiet=quiet).gate(report)
        assert made == [] and "cell" not in shown.getvalue()
    shown = io.StringIO()
    Renderer(shown, verbose=True).gate(report)
    assert made == ["made"]
    assert shown.getvalue().splitlines()[1:5] == ["first", "   cell 0", "   cell 1", "last"]
    expanded = [i.name if hasattr(i, "passed") else i.text for i in out.lines()]
    assert expanded == ["first", "   cell 0", "   cell 1", "last", "a check"]
