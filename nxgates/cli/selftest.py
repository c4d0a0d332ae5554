"""``nxgates selftest [GATES]``: every gate run clean (must pass) and with each planted fault (must fail)."""

from __future__ import annotations

import click

from nxgates.cli.group import NxCommand
from nxgates.cli.options import OnceOption, completes, config_option, debug_option, timeout_option
from nxgates.errors import EXIT_FAIL, EXIT_INTERNAL


@click.command("selftest", cls=NxCommand, example="nxgates selftest lora parallel-grad --json kills.json")
@click.argument("gates", nargs=-1, shell_complete=completes("gates"))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", shell_complete=completes("set"),
              help="Override a parameter, as for run (repeatable; GATE.KEY=VALUE targets one gate).")
@click.option("--preset", cls=OnceOption, default=None, metavar="NAME",
              shell_complete=completes("preset"), help="Parameter preset, as for run.")
@click.option("--inputs", cls=OnceOption, default=None, metavar="PATH", shell_complete=completes("path"),
              help="Prove the gate on these tensors, as for run.")
@click.option("--target", cls=OnceOption, default=None, metavar="SPEC", shell_complete=completes("path"),
              help="invariance: prove the gate on this function, as for run.")
@config_option
@click.option("--json", "json_path", cls=OnceOption, default=None, metavar="PATH", shell_complete=completes("path"),
              help="Write the kill table and every run as JSON ('-' = stdout).")
@timeout_option("Per-run time limit (inf = no limit).")
@debug_option
def selftest_cmd(gates: tuple[str, ...], sets: tuple[str, ...], preset: str | None, inputs: str | None,
                 target: str | None, config: str | None, json_path: str | None, timeout: float | None,
                 debug: bool) -> int:
    """Prove every gate can fail: run each clean (must PASS) and with each planted fault (must FAIL).

    Exits 0 only when every clean run passes and every fault is caught by the checks it names.
    """
    from nxgates.cli.exits import stop_reason
    from nxgates.cli.signals import signals_held
    from nxgates.plan import RunRequest, plan_run
    from nxgates.reporting import files
    from nxgates.reporting.console import Renderer
    from nxgates.reporting.selftest import KillTable, selftest_json_text
    from nxgates.selftest import KillRow, selftest

    plan = plan_run(RunRequest(gates or ("all",), sets, preset, config, inputs=inputs, target=target,
                               timeout=timeout, reports={"--json": json_path}), for_selftest=True)
    from nxgates.streams import check_written, human_stream, require_stdout, stdout_to_stderr

    if json_path == "-":
        require_stdout("the report")
    table = KillTable(Renderer(human_stream(to_stderr=json_path == "-")))
    table.header()

    def show(row: KillRow) -> None:
        table.row(row)
        if row.report.traceback and debug:
            click.echo(row.report.traceback, err=True)

    rows: list[KillRow] = []
    interrupted: KeyboardInterrupt | None = None
    quiet_stdout = stdout_to_stderr(json_path == "-")  # a gate's print() must not corrupt the JSON
    try:
        selftest(plan, on_row=show, rows=rows)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (Terminated): the rows so far are reported
        interrupted = exc
        click.echo(f"nxgates: {stop_reason(exc)[0]}; writing the report of the finished runs", err=True)
    finally:
        quiet_stdout.close()
    with signals_held():  # a second Ctrl-C or SIGTERM must not leave the report half written
        ok = table.summary(rows) if interrupted is None else False
        if json_path:
            files.write_text(json_path, selftest_json_text(rows, interrupted is not None), "--json")
    check_written(table.renderer.stream)
    if interrupted is not None:
        return stop_reason(interrupted)[1]
    if any(r.report.error_kind == "crash" for r in rows):
        return EXIT_INTERNAL
    return 0 if ok else EXIT_FAIL
