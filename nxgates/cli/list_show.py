"""``nxgates list`` and ``nxgates show GATE``: what the registry holds, as plain aligned text."""

from __future__ import annotations

import click

from nxgates.cli.options import config_option, load_registry
from nxgates.errors import ConfigError


@click.command("list")
@config_option
def list_cmd(config: str | None) -> None:
    """List the gates: name, aliases and what each proves."""
    from nxgates.streams import require_stdout

    require_stdout("the list")
    reg = load_registry(config)
    rows = [(e.name, ", ".join(e.aliases) or "-", e.origin, f"BROKEN: {e.broken}" if e.broken else e.description)
            for e in reg.everything()]  # plugin gates too: FROM names their distribution
    width = [max(len(r[i]) for r in rows + [("GATE", "ALIASES", "FROM", "")]) for i in range(3)]
    click.echo(f"{'GATE':<{width[0]}}  {'ALIASES':<{width[1]}}  {'FROM':<{width[2]}}  DESCRIPTION")
    for name, aliases, origin, desc in rows:
        click.echo(f"{name:<{width[0]}}  {aliases:<{width[1]}}  {origin:<{width[2]}}  {desc}")


@click.command("show")
@click.argument("gate")
@config_option
def show_cmd(gate: str, config: str | None) -> None:
    """Show a gate's parameters, presets, checks and injectable faults."""
    from nxgates.streams import require_stdout

    require_stdout("the description")
    reg = load_registry(config)
    if gate == "all" and gate not in reg.gates:
        raise ConfigError(f"show takes one gate ('all' is for run and selftest; gates: {', '.join(reg.gates)})")
    entry = reg.resolve(gate)
    g = entry.gate
    click.echo(f"{entry.name}: {entry.description}")
    if entry.aliases:
        click.echo(f"aliases: {', '.join(entry.aliases)}")
    click.echo("parameters (--set KEY=VALUE):")
    for key, spec in g.params.items():
        click.echo(f"  {key:<12} default {entry.defaults[key]!s:<8} {spec.describe():<24} {spec.doc}")
    click.echo("presets (--preset NAME):")
    for name, values in entry.presets.items():
        shown = " ".join(f"{k}={v}" for k, v in values.items()) or (
            "(the defaults: the seed's sizes)" if entry.plugin_module is None else "(the defaults)")
        click.echo(f"  {name:<12} {shown}")
    click.echo("checks:")
    for check in g.checks:
        click.echo(f"  {check}")
    click.echo("faults (--inject FAULT):")
    for fault, spec in g.faults.items():
        click.echo(f"  {fault:<18} {spec.doc} (caught by: {', '.join(spec.caught_by)})")
    if not g.faults:
        click.echo("  (none)")
