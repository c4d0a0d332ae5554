"""Help for people: `run --help` groups its options under headings, every command's help is wrapped to the
terminal alike and ends with one example, and none of it costs start-up."""

import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from nxgates.cli import COMMANDS, cli

RUN_HEADINGS = ["Parameters", "Faults", "Reports", "Baselines", "Execution", "Your tensors", "Limits",
                "Other options"]


def help_of(*command: str, width: int = 100) -> str:
    r = CliRunner().invoke(cli, [*command, "--help"], terminal_width=width)
    assert r.exit_code == 0, r.output
    return r.stdout


def test_run_help_groups_its_options_under_headings():
    text = help_of("run")
    headings = [line[:-1] for line in text.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert headings == [*RUN_HEADINGS, "Example"]
    sections = dict(zip(headings, text.split("\n\n")[2:], strict=False))
    assert "--inject FAULT" in sections["Faults"]
    assert "--baseline-missing" in sections["Baselines"] and "--executor NAME" in sections["Execution"]
    assert "--compare-grads PATH" in sections["Your tensors"] and "--timeout SECONDS" in sections["Limits"]


def test_run_help_lists_every_option_once():
    text = help_of("run")
    command = cli.get_command(None, "run")  # type: ignore[arg-type]
    for param in command.params:
        for opt in getattr(param, "opts", []) if param.param_type_name == "option" else []:
            assert text.count(f"  {opt} ") + text.count(f"  {opt},") + text.count(f", {opt} ") == 1, opt


def test_every_help_column_lines_up():
    """One column for the option help of every heading, so the sections read as one table."""
    rows = [re.match(r"^  (-\S.*?) {2,}(\S)", line) for line in help_of("run").splitlines()]
    columns = {row.start(2) for row in rows if row}
    assert len([row for row in rows if row]) >= 25 and len(columns) == 1


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_ends_with_one_example(name):
    text = help_of(name)
    *_, heading, example = text.rstrip("\n").split("\n")
    assert heading == "Example:"
    assert example.startswith(f"  nxgates {name} ")
    assert text.count("Example:") == 1


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("width", [60, 80])
def test_every_command_is_wrapped_to_the_terminal(name, width):
    """No paragraph is laid out by hand: each is wrapped to the width given (its example stays one line)."""
    lines = help_of(name, width=width).rstrip("\n").split("\n")
    too_long = [line for line in lines[:-1] if len(line) > width]
    assert too_long == []


def test_the_groups_help_is_wrapped_too():
    lines = help_of(width=60).splitlines()
    examples = lines.index("  Examples:")
    assert [line for line in lines[:examples] if len(line) > 60] == []


CODE = """
import sys
from nxgates.cli import cli
cli.main(sys.argv[1:], standalone_mode=False)
print(" ".join(sorted(sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize("command", [["run", "--help"], ["--help"]])
def test_help_imports_no_completion_machinery(tmp_path, command):
    out = subprocess.run([sys.executable, "-c", CODE, *command], capture_output=True, text=True, cwd=tmp_path,
                         check=True)
    modules = set(out.stderr.split())
    assert "nxgates.cli.run" in modules and "click.shell_completion" not in modules
    if command[0] == "run":
        assert "nxgates.cli.completion" not in modules  # the group's help lists every command, this one too
