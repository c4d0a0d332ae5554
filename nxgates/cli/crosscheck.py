"""``nxgates crosscheck GATE LOG``: recompute every figure a seed program printed, and compare."""

from __future__ import annotations

import click

from nxgates.cli.group import NxCommand
from nxgates.cli.options import completes, config_option, debug_option, load_registry, timeout_option
from nxgates.errors import EXIT_FAIL, ConfigError


@click.command("crosscheck", cls=NxCommand,
               example="nxgates crosscheck lora seed-run.log --source nx_intfp_lora_gradcheck_gate.nx")
@click.argument("gate", shell_complete=completes("gate"))
@click.argument("log", metavar="LOG", shell_complete=completes("path"))
@click.option("--source", default=None, metavar="FILE.nx", shell_complete=completes("path"),
              help="Read the sizes and constants from the seed program that printed LOG.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", shell_complete=completes("set"),
              help="Override a parameter (as for run).")
@click.option("--preset", default=None, metavar="NAME", shell_complete=completes("preset"),
              help="Parameter preset (as for run).")
@config_option
@click.option("--json", "json_path", default=None, metavar="PATH", shell_complete=completes("path"),
              help="Write the JSON report here ('-' = stdout).")
@click.option("--junit", "junit_path", default=None, metavar="PATH", shell_complete=completes("path"),
              help="Write JUnit XML here ('-' = stdout).")
@click.option("-q", "--quiet", is_flag=True, help="Print only FAIL lines and the verdict.")
@timeout_option("Time limit for the recomputation. inf = no limit.")
@debug_option
@click.option("--inputs", default=None, metavar="PATH", shell_complete=completes("path"),
              help="The tensors the logged run computed from (as for run --inputs).")
def crosscheck_cmd(gate: str, log: str, source: str | None, sets: tuple[str, ...], preset: str | None,
                   config: str | None, json_path: str | None, junit_path: str | None, quiet: bool,
                   timeout: float, debug: bool, inputs: str | None = None) -> int:
    """Recompute every figure in LOG, the stdout of GATE's seed program ('-' = stdin), and compare.

    Exits 0 when every figure agrees, 1 on any disagreement, 2 when LOG is not a complete run of GATE in
    the seed's format or --source constants cannot be read.
    """
    from nxgates import crosscheck as xc
    from nxgates import plan
    from nxgates.reporting import files
    from nxgates.reporting.console import Renderer
    from nxgates.reporting.crosscheck import CrosscheckHeading, render_crosscheck
    from nxgates.safeio import distinct_files

    if gate == "all":  # one log is the output of one gate's seed program
        known = ", ".join(xc.GATE_OF_MODULE[m] for m in xc.LOG_FORMATS)
        raise ConfigError(f"crosscheck takes one gate, not 'all': a log is one seed program's run (crosscheck "
                          f"knows: {known})")
    entry = load_registry(config).resolve(gate)
    if entry.module not in xc.LOG_FORMATS:
        known = ", ".join(xc.GATE_OF_MODULE[m] for m in xc.LOG_FORMATS)
        raise ConfigError(f"gate {entry.name!r} has no seed log format to crosscheck (crosscheck knows: {known})")
    plan.check_stdout_reports({"--json": json_path, "--junit": junit_path})
    distinct_files({"--json": json_path, "--junit": junit_path, "LOG": log, "--source": source,
                    "--inputs": inputs})
    files.check_writable(json_path, "--json")
    files.check_writable(junit_path, "--junit")
    params = xc.effective_params(entry, preset, sets, source)
    options = {}
    if inputs is not None:
        chosen, options["inputs"] = plan.resolve_inputs([entry], {entry.name: params}, sets, inputs)
        params = chosen[entry.name]
    parsed = xc.parse_log(xc.read_log(log), entry.module, f"log {log}")

    from nxgates.cli.exits import stop_reason
    from nxgates.cli.signals import signals_held

    try:
        report = xc.crosscheck(entry.name, entry.module, parsed, params, timeout=timeout, source=source,
                                options=options)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (Terminated): the reports say so
        click.echo(f"nxgates: {stop_reason(exc)[0]}; writing the reports", err=True)
        with signals_held():
            files.write_reports([], json_path=json_path, junit_path=junit_path, interrupted=True)
        return stop_reason(exc)[1]
    from nxgates.streams import check_written, human_stream, require_stdout

    if "-" in (json_path, junit_path):
        require_stdout("the report")
    human = human_stream(to_stderr="-" in (json_path, junit_path))
    heading = CrosscheckHeading(entry.name, log, params, xc.describe_source(source))
    render_crosscheck(Renderer(human, quiet=quiet), heading, report)
    with signals_held():  # a Ctrl-C or SIGTERM now must not leave a report half written
        files.write_reports([report], json_path=json_path, junit_path=junit_path)
    check_written(human)
    return 0 if report.passed else EXIT_FAIL
