"""The click group of ``nxgates``: commands imported only when used, and every failure one line on stderr
with a documented exit code (:mod:`nxgates.cli.exits`); and the class of its commands, whose help reads alike."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from nxgates.cli.exits import carried_past_click, exit_code_of

COMPLETE_VAR = "_NXGATES_COMPLETE"  #: set by the completion script when the shell asks (click's protocol)
HELP_TERM_WIDTH = 30  #: the widest option column of a command's help (click's own default)


class NxGroup(click.Group):
    """A click group whose commands live in their own modules, named in ``lazy_commands`` as
    ``"module:attribute"``: ``nxgates run`` imports the run command alone."""

    def __init__(self, *args: Any, lazy_commands: dict[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands and cmd_name not in self.commands:
            module, attribute = self.lazy_commands[cmd_name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        """Ctrl-C and output errors leave a command as exceptions click passes on untouched."""
        try:
            return super().invoke(ctx)
        except (KeyboardInterrupt, OSError) as exc:
            carried = carried_past_click(exc)
            if carried is exc:
                raise
            raise carried from None

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """click's main, but every ending is an exit code (returned, or exited with when standalone)."""
        debug = "--debug" in (sys.argv[1:] if args is None else list(args))
        if COMPLETE_VAR in os.environ:  # a shell asks for completions: click's, with nxgates' bash class
            importlib.import_module("nxgates.cli.completion").register()
        try:
            rv = super().main(args=args, prog_name=prog_name or "nxgates", complete_var=complete_var,
                              standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else 0
        except (KeyboardInterrupt, Exception) as exc:
            code = exit_code_of(exc, debug)
        if standalone_mode:
            sys.exit(code)
        return code


class NxCommand(click.Command):
    """A command whose help lists its options under headings and ends with one example.

    ``sections`` maps a heading to the option names it holds, in order; options in no section follow under
    "Other options". Written with click's own formatter, so it costs nothing at start-up.
    """

    def __init__(self, *args: Any, sections: dict[str, tuple[str, ...]] | None = None, example: str = "",
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.sections = sections or {}
        self.example = example

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {param.name: param.get_help_record(ctx) for param in self.get_params(ctx)
                   if isinstance(param, click.Option)}
        records = {name: record for name, record in records.items() if record is not None}
        placed = {name for names in self.sections.values() for name in names}
        groups = [(heading, [records[name] for name in names if name in records])
                  for heading, names in self.sections.items()]
        groups.append(("Other options" if self.sections else "Options",
                       [record for name, record in records.items() if name not in placed]))
        width = min(HELP_TERM_WIDTH, max(len(term) for term, _ in records.values()))
        for heading, rows in groups:
            if rows:  # one column for the help of every heading: the sections read as one table
                with formatter.section(heading):
                    formatter.write_dl([(term.ljust(width), text) for term, text in rows], col_max=width)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        if self.example:
            with formatter.section("Example"):
                formatter.write(f"{'':>{formatter.current_indent}}{self.example}\n")
