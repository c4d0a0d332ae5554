"""Where reports go: a file checked before any gate runs, written whole afterwards, or stdout for ``-``."""

from __future__ import annotations

from pathlib import Path

from nxgates.errors import ConfigError
from nxgates.runner import GateReport


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


def write_reports(reports: list[GateReport], *, json_path: str | None, junit_path: str | None,
                  interrupted: bool = False) -> None:
    """The ``--json`` and ``--junit`` reports asked for; each format's module is imported only when asked."""
    if json_path:
        from nxgates.reporting.json_report import json_text

        write_text(json_path, json_text(reports, interrupted), "--json")
    if junit_path:
        from nxgates.reporting.junit_report import junit_text

        write_text(junit_path, junit_text(reports), "--junit")
