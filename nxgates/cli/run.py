"""``nxgates run GATES``: run gates, print PASS/FAIL lines and verdicts, write the JSON and JUnit reports."""

from __future__ import annotations

import click

from nxgates.cli.group import NxCommand
from nxgates.cli.options import (
    MAX_REPEAT,
    OnceOption,
    completes,
    config_option,
    debug_option,
    timeout_option,
)
from nxgates.errors import EXIT_FAIL, EXIT_INTERNAL, ConfigError

#: the headings of `nxgates run --help`, each with its options in order
SECTIONS = {
    "Parameters": ("sets", "preset", "config"),
    "Faults": ("fault",),
    "Reports": ("json_path", "junit_path", "quiet", "verbose", "annotations", "summary_path", "html_path"),
    "Baselines": ("baseline", "update_baseline", "baseline_missing"),
    "Execution": ("executor", "scheduler", "reduction", "repeat"),
    "Your tensors": ("inputs", "save_grads", "compare_grads", "ulp", "target"),
    "Limits": ("timeout",),
}
PATH = completes("path")


@click.command("run", cls=NxCommand, sections=SECTIONS,
               example="nxgates run lora --preset medium --json report.json")
@click.argument("gates", nargs=-1, required=True, shell_complete=completes("gates"))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              shell_complete=completes("set"),
              help="Override a parameter (repeatable; GATE.KEY=VALUE targets one gate).")
@click.option("--preset", cls=OnceOption, default=None, metavar="NAME",
              shell_complete=completes("preset"),
              help="Parameter preset (see `nxgates show GATE`).")
@config_option
@click.option("--json", "json_path", cls=OnceOption, default=None, metavar="PATH",
              shell_complete=PATH,
              help="Write the JSON report here ('-' = stdout; the human report then goes to stderr).")
@click.option("--junit", "junit_path", cls=OnceOption, default=None, metavar="PATH",
              shell_complete=PATH,
              help="Write a JUnit XML report here ('-' = stdout; the human report then goes to stderr).")
@click.option("-q", "--quiet", is_flag=True, help="Print only FAIL lines and verdicts.")
@click.option("-v", "--verbose", is_flag=True, help="Print per-cell detail.")
@click.option("--repeat", cls=OnceOption, type=click.IntRange(min=1, max=MAX_REPEAT), default=1, show_default=True,
              help="Run each gate N times; FAIL unless every run agrees (flake hunting).")
@timeout_option("Per-gate time limit, all --repeat runs included; a gate past it FAILs (timed out). "
                "inf = no limit.")
@click.option("--inject", "fault", cls=OnceOption, default=None, metavar="FAULT",
              shell_complete=completes("fault"),
              help="Plant a named defect; the gate must then FAIL (see `nxgates show GATE`). One per run.")
@click.option("--executor", cls=OnceOption, default=None, metavar="NAME",
              shell_complete=completes("executor"),
              help="Shorthand for --set executor=NAME (gates with a worker pool: auto|thread|process|dask).")
@click.option("--scheduler", cls=OnceOption, default=None, metavar="ADDRESS",
              help="parallel-grad, dp-train, lora: run on this Dask cluster (executor=dask; default: "
                   "$NXGATES_DASK_SCHEDULER, else a LocalCluster).")
@click.option("--save-grads", cls=OnceOption, default=None, metavar="PATH",
              shell_complete=PATH,
              help="parallel-grad: write the per-example gradients (.npy, float32, B x NP).")
@click.option("--compare-grads", cls=OnceOption, default=None, metavar="PATH",
              shell_complete=PATH,
              help="parallel-grad: add check T4, gradients bit-identical to a saved .npy (or a raw float32 "
                   ".bin, B x NP); lora, lora-train: dA, dB equal to these (.npz, or a directory of raw int64 "
                   ".bin).")
@click.option("--baseline", "baseline", cls=OnceOption, default=None, metavar="FILE",
              shell_complete=PATH,
              help="Add check `baseline`: every figure the gates pin as in FILE (see docs/baselines.md).")
@click.option("--update-baseline", "update_baseline", cls=OnceOption, default=None, metavar="FILE",
              shell_complete=PATH,
              help="Write the pinned figures of the gates that passed into FILE (merged into its entries).")
@click.option("--baseline-missing", cls=OnceOption, type=click.Choice(("fail", "warn")), default="fail",
              show_default=True, help="What a gate FILE lacks, or one that pins no figure, does to --baseline.")
@click.option("--reduction", cls=OnceOption, default=None, metavar="ORDER",
              shell_complete=completes("reduction"),
              help="Shorthand for --set reduction=ORDER (f32 gates: tree|sequential).")
@click.option("--inputs", cls=OnceOption, default=None, metavar="PATH",
              shell_complete=PATH,
              help="Run one gate on these tensors: an .npz as `nxgates export` writes, or a directory of raw "
                   "little-endian NAME.bin dumps (sizes from the parameters).")
@click.option("--ulp", cls=OnceOption, type=click.IntRange(min=0), default=None, metavar="N",
              help="parallel-grad: --compare-grads passes within N ULPs per cell (default 0: bit-identical; at "
                   "most 2^23, one binade).")
@click.option("--target", cls=OnceOption, default=None, metavar="SPEC",
              shell_complete=PATH,
              help="invariance: the function to gate, package.module:callable or path/to/file.py:callable.")
@click.option("--annotations", cls=OnceOption, type=click.Choice(("github", "none")), default=None,
              help="FAIL lines as GitHub ::error annotations (default: github when GITHUB_ACTIONS=true).")
@click.option("--summary", "summary_path", cls=OnceOption, default=None, metavar="PATH",
              shell_complete=PATH,
              help="Write the Markdown job summary here (on GitHub Actions it is appended to $GITHUB_STEP_SUMMARY).")
@click.option("--html", "html_path", cls=OnceOption, default=None, metavar="PATH",
              shell_complete=PATH,
              help="Write a self-contained HTML report with plots here (needs nxgates[html]).")
@debug_option
def run_cmd(gates: tuple[str, ...], sets: tuple[str, ...], preset: str | None, config: str | None,
            json_path: str | None, junit_path: str | None, quiet: bool, verbose: bool, repeat: int,
            timeout: float | None, fault: str | None, executor: str | None, scheduler: str | None,
            save_grads: str | None, compare_grads: str | None, baseline: str | None, update_baseline: str | None,
            baseline_missing: str, reduction: str | None, inputs: str | None, ulp: int | None, target: str | None,
            annotations: str | None, summary_path: str | None, html_path: str | None, debug: bool) -> int:
    """Run GATES (names, aliases, or `all`) and print PASS/FAIL lines and a verdict per gate."""
    from nxgates.cli.exits import one_line, stop_reason
    from nxgates.cli.signals import signals_held
    from nxgates.plan import RunRequest, plan_run
    from nxgates.reporting.console import Renderer, RichProgress
    from nxgates.runner import INERT, GateReport, exit_code

    if quiet and verbose:
        raise ConfigError("-q/--quiet and -v/--verbose cannot be combined")
    reports = {"--json": json_path, "--junit": junit_path, "--summary": summary_path, "--html": html_path}
    plan = plan_run(RunRequest(
        gates, sets, preset, config, fault, executor, reduction, scheduler, save_grads, compare_grads, inputs, ulp,
        target, baseline, update_baseline, baseline_missing, timeout, repeat, reports, annotations))

    from nxgates.streams import check_written, human_stream, require_stdout, stdout_to_stderr

    on_stdout = "-" in (json_path, junit_path)
    if on_stdout:
        require_stdout("the report")
    human = human_stream(to_stderr=on_stdout)
    renderer = Renderer(human, quiet=quiet, verbose=verbose)
    for warning in plan.warnings:
        click.echo(f"nxgates: warning: {one_line(warning)}", err=True)

    def show(report: GateReport) -> None:
        renderer.gate(report)
        if report.traceback and debug:
            click.echo(report.traceback, err=True)

    def progress(name: str) -> RichProgress | None:
        """The plan asks just before it runs gate ``name``: on a terminal the gate's header shows now, and its
        bar is titled with its name."""
        if renderer.console is None:
            return None
        renderer.begin(name, plan.fault)
        return RichProgress(human, gate=name)

    with stdout_to_stderr(on_stdout):  # a gate's print() must not corrupt a report on stdout
        outcome = plan.execute(show, progress)
    if outcome.interrupted is not None:
        click.echo(f"nxgates: {stop_reason(outcome.interrupted)[0]}; writing the reports of finished gates",
                   err=True)
    with signals_held():  # a second Ctrl-C or SIGTERM must not leave a report half written
        renderer.summary(outcome.done)
        for warning in plan.write_reports(outcome, lambda line: human.write(line + "\n")):
            click.echo(f"nxgates: warning: {one_line(warning)}", err=True)
    check_written(human)
    if outcome.refused is not None:
        raise outcome.refused
    if outcome.interrupted is not None:
        return stop_reason(outcome.interrupted)[1]
    done = outcome.done
    code = exit_code(done)
    if code == EXIT_INTERNAL:
        click.echo("nxgates: internal error in a gate (run with --debug for the traceback)", err=True)
    for report in done:
        if report.error_kind == INERT:
            click.echo(f"nxgates: error: {one_line(f'{report.name}: {report.error}')}", err=True)
    return code if done else EXIT_FAIL
