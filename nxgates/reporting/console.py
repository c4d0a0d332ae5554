"""The human report of a gate run: rich colours on a terminal, plain grep-able lines everywhere else.

rich is imported here only, and only when the stream is a terminal and NO_COLOR is unset.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from nxgates.gatekit import Check, Lines, Progress
from nxgates.runner import GateReport
from nxgates.streams import printable_lines, safe_line, shown


def use_rich(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def console_width(stream: TextIO) -> int | None:
    """The width rich should use: None (rich reads ``COLUMNS`` and the terminal) unless ``COLUMNS`` is not a
    positive number, e.g. ``COLUMNS=0``, which would make rich print nothing at all; then the terminal's
    own width, else 80."""
    columns = os.environ.get("COLUMNS")
    if columns is None or (columns.strip().isdigit() and int(columns) > 0):
        return None
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError, AttributeError):
        return 80


class Renderer:
    """Writes gate reports line by line; ``quiet`` keeps FAIL lines and verdicts, ``verbose`` adds cells.

    Every line passes :func:`nxgates.streams.shown` here, the one place lines are written: a file name, a
    plugin's check or a seed's log line cannot split a line, start a GitHub workflow command, colour the
    terminal or be read as rich markup. Only a check's detail keeps its own line breaks (its lines are meant).
    """

    def __init__(self, stream: TextIO | None = None, quiet: bool = False, verbose: bool = False):
        self.stream = stream or sys.stdout
        self.quiet = quiet
        self.verbose = verbose
        self.console = None
        self._begun: str | None = None  #: the gate whose header is already shown (on a terminal, as it starts)
        if use_rich(self.stream):
            from rich.console import Console

            self.console = Console(file=self.stream, highlight=False, soft_wrap=True, width=console_width(self.stream))

    def _emit(self, text: str, style: str | None = None, *, keep_newlines: bool = False) -> None:
        lines = printable_lines(text) if keep_newlines else [safe_line(shown(text))]
        if self.console is not None:
            from rich.text import Text  # plain text, never markup: "[bold]" in a file name stays as typed

            for line in lines:
                self.console.print(Text(line, style=style or ""))
        else:
            self.stream.write("".join(line + "\n" for line in lines))
            self.stream.flush()

    def _header(self, name: str, fault: str | None) -> None:
        label = f" [fault injected: {fault}]" if fault else ""
        self._emit(f"# gate {name}{label}", "bold")

    def begin(self, name: str, fault: str | None = None) -> None:
        """A gate starts: on a terminal its header is shown now, above its progress bar, so the wait is
        labelled; plain output keeps each gate's lines together, written when it ends."""
        if self.console is not None and not self.quiet:
            self._header(name, fault)
            self._begun = name

    def gate(self, report: GateReport) -> None:
        begun, self._begun = self._begun, None
        if not self.quiet and begun != report.name:
            self._header(report.name, report.fault)
        for item in report.output.items:
            if isinstance(item, Check):
                self.check(item)
            elif self.quiet or (item.level == "verbose" and not self.verbose):
                continue  # hidden: Lines are not even made
            else:
                for text in item.make() if isinstance(item, Lines) else (item.text,):
                    self._emit(text, "dim" if item.level != "info" else None)
        checks = report.output.checks
        n_pass = sum(c.passed for c in checks)
        if not self.quiet:
            self._emit(f"---- {report.name}: passed {n_pass} / {len(checks)} ({report.seconds:.3f} s)")
        self._emit(report.verdict, "bold green" if report.passed else "bold red")

    def check(self, c: Check) -> None:
        if c.passed and self.quiet:
            return
        word = "PASS" if c.passed else "FAIL"
        text = f" {word} {shown(c.name)}" + (f" -- {c.detail}" if c.detail else "")
        self._emit(text, "green" if c.passed else "bold red", keep_newlines=True)

    def summary(self, reports: list[GateReport]) -> None:
        if len(reports) < 2:
            return
        n_pass = sum(r.passed for r in reports)
        ok = n_pass == len(reports)
        self._emit(f"==== nxgates: {n_pass} / {len(reports)} gates passed -- {'GREEN' if ok else 'RED'}",
                   "bold green" if ok else "bold red")

    def line(self, text: str, style: str | None = None) -> None:
        self._emit(text, style)


class RichProgress(Progress):
    """A rich progress bar for work that takes longer than about a second, titled with its gate and the
    step the gate names (``lora · gradcheck cells``); the CLI makes one only on a terminal."""

    DELAY = 1.0  #: seconds of a step before its bar appears: a quick step never flickers one

    def __init__(self, stream: TextIO, delay: float | None = None, gate: str = ""):
        self.stream = stream
        self.delay = self.DELAY if delay is None else delay
        self.gate = gate
        self._bar = None
        self._task = None
        self._label = ""
        self._total = 0
        self._done = 0
        self._started = 0.0

    def start(self, label: str, total: int) -> None:
        self.stop()
        self._label, self._total, self._done = label, total, 0
        self._started = time.monotonic()

    def advance(self, steps: int = 1) -> None:
        self._done += steps
        if self._bar is None and self._total and time.monotonic() - self._started > self.delay:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            console = Console(file=self.stream, width=console_width(self.stream))
            self._bar = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(shown(self.title()), total=self._total)
        if self._bar is not None:
            self._bar.update(self._task, completed=self._done)

    def title(self) -> str:
        """The bar's title: the gate, then the step it is in."""
        return f"{self.gate} · {self._label}" if self.gate else self._label

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        self._bar = None
        self._task = None
