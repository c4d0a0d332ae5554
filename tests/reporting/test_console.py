"""The console report: colour and a progress bar on a terminal only, per-cell lines made only when shown."""

import io

from nxgates.gatekit import GateOutput
from nxgates.reporting.console import RichProgress
from tests.reporting.test_progress import run_cli


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


def test_no_progress_or_colour_when_piped(tmp_path):
    """A real pipe, the bar's delay at 0: were the pipe taken for a terminal, a bar and colour would show, as
    the same run shows both on a pseudo-terminal (CliRunner's output is never a terminal: it cannot tell)."""
    code, piped = run_cli("run", "parallel-grad", "--preset", "medium", terminal=False, cwd=str(tmp_path))
    assert code == 0
    assert "\x1b[" not in piped and "\r" not in piped and "━" not in piped
    code, tty = run_cli("run", "parallel-grad", "--preset", "medium", terminal=True, cwd=str(tmp_path))
    assert code == 0
    assert "\x1b[" in tty and "━" in tty


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
