"""The group: each command lives in its own module, loaded when used, and all of them are listed."""

import pytest
from click.testing import CliRunner

from nxgates.cli import COMMANDS, cli


def test_help_lists_every_command_with_its_summary(invoke):
    r = invoke("--help")
    assert r.exit_code == 0
    listed = [line.split()[0] for line in r.stdout.split("Commands:\n")[1].splitlines() if line.strip()]
    assert listed == ["completion", "crosscheck", "diff", "export", "list", "run", "selftest", "show"]
    assert "  list        List the gates: name, aliases and what each proves." in r.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_loads_under_its_name(name):
    import click

    command = cli.get_command(click.Context(cli), name)
    assert command is not None and command.name == name
    assert CliRunner().invoke(cli, [name, "--help"]).exit_code == 0


def test_an_unknown_command_is_not_looked_up_as_a_module(invoke):
    r = invoke("os:path")
    assert r.exit_code == 2 and "No such command 'os:path'" in r.stderr
