"""``nxgates diff A.json B.json``: what moved between two JSON reports (two machines, two versions)."""

from __future__ import annotations

import click

from nxgates.cli.group import NxCommand
from nxgates.cli.options import completes
from nxgates.errors import EXIT_FAIL, EXIT_PASS


@click.command("diff", cls=NxCommand, example="nxgates diff main.json branch.json")
@click.argument("report_a", metavar="A.json", shell_complete=completes("path"))
@click.argument("report_b", metavar="B.json", shell_complete=completes("path"))
def diff_cmd(report_a: str, report_b: str) -> int:
    """Compare two JSON reports of `nxgates run` figure by figure.

    One line per figure that moved (`lora[T=3 DM=6 R=2] loss_q: OLD -> NEW`), one per environment field
    that differs (listed, but not by itself a difference). Exit 0 same, 1 different, 2 unreadable or not
    comparable.
    """
    from nxgates.baseline.reports import diff_reports, load_report
    from nxgates.streams import write_stdout

    result = diff_reports(load_report(report_a), load_report(report_b), report_a, report_b)
    verdict = "DIFFERENT" if result.figures else "SAME"
    summary = (f"==== nxgates diff: {len(result.figures)} figures differ in {result.gates_differing} gate runs, "
               f"{result.gates} in both reports -- {verdict}")
    write_stdout("".join(line + "\n" for line in [*result.environment, *result.figures, summary]))
    return EXIT_FAIL if result.figures else EXIT_PASS
