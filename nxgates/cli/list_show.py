"""``nxgates list`` and ``nxgates show GATE``: what the registry holds (text made in
:mod:`nxgates.reporting.listing`)."""

from __future__ import annotations

import click

from nxgates.cli.group import NxCommand
from nxgates.cli.options import completes, config_option, load_registry
from nxgates.errors import ConfigError


@click.command("list", cls=NxCommand, example="nxgates list --config my-gates.toml")
@config_option
def list_cmd(config: str | None) -> None:
    """List the gates: name, aliases and what each proves."""
    from nxgates.reporting.listing import gate_list
    from nxgates.streams import require_stdout

    require_stdout("the list")
    reg = load_registry(config)
    for line in gate_list(reg.everything()):
        click.echo(line)


@click.command("show", cls=NxCommand, example="nxgates show parallel-grad")
@click.argument("gate", shell_complete=completes("gate"))
@config_option
def show_cmd(gate: str, config: str | None) -> None:
    """Show a gate's parameters, presets, checks and injectable faults."""
    from nxgates.reporting.listing import gate_description
    from nxgates.streams import require_stdout

    require_stdout("the description")
    reg = load_registry(config)
    if gate == "all" and gate not in reg.gates:
        raise ConfigError(f"show takes one gate ('all' is for run and selftest; gates: {', '.join(reg.gates)})")
    for line in gate_description(reg.resolve(gate)):
        click.echo(line)
