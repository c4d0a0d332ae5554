"""Where reports go: a file checked before any gate runs, written whole afterwards, or stdout for ``-``."""

from __future__ import annotations

from nxgates.runner import GateReport


def check_writable(path: str | None, flag: str) -> None:
    """Fail before any gate runs when a report could not be written (exit 2, one line); see
    :func:`nxgates.safeio.output_path` for which paths may be written."""
    if path is not None:
        from nxgates.safeio import output_path

        output_path(path, flag)


def write_text(path: str, text: str, flag: str) -> None:
    """Write a report to ``path`` (whole, by a rename), or to stdout for ``-``."""
    if path == "-":
        from nxgates.streams import write_stdout

        write_stdout(text)  # closed stdout: exit 2; a reader gone (EPIPE): dropped, the verdict stands
        return
    from nxgates.safeio import write_output

    write_output(path, text.encode("utf-8", "backslashreplace"), flag)  # a lone surrogate: escaped, not exit 3


def write_reports(reports: list[GateReport], *, json_path: str | None, junit_path: str | None,
                  interrupted: bool = False) -> None:
    """The ``--json`` and ``--junit`` reports asked for; each format's module is imported only when asked."""
    if json_path:
        from nxgates.reporting.json_report import json_text

        write_text(json_path, json_text(reports, interrupted), "--json")
    if junit_path:
        from nxgates.reporting.junit_report import junit_text

        write_text(junit_path, junit_text(reports, interrupted), "--junit")
