"""Options several commands share, and the checks on their values that click does not make itself."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from nxgates.registry import Registry

F = TypeVar("F", bound=Callable[..., Any])

MAX_REPEAT = 10_000  #: --repeat's upper bound (one --timeout covers all the runs of a gate anyway)
CONFIG_PATH = click.Path(dir_okay=False)  #: shared: each click.Path costs a gettext lookup at start-up


class OnceOption(click.Option):
    """An option given at most once: the same value twice is harmless, two different values are a usage
    error (click would silently keep the last, e.g. plant only the second of two ``--inject`` faults)."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.once_default = kwargs.pop("default", None)
        super().__init__(*args, multiple=True, default=(), **kwargs)

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        return super().get_default(ctx, call) if call else self.once_default  # call=False: for --help

    def process_value(self, ctx: click.Context, value: Any) -> Any:
        values = self.type_cast_value(ctx, value)
        distinct = list(dict.fromkeys(map(str, values)))
        if len(distinct) > 1:
            shown = " and ".join(repr(v if len(v) <= 60 else v[:60] + "...") for v in distinct[:2])
            raise click.BadParameter(f"given {len(values)} times with different values ({shown}); give it once",
                                     ctx=ctx, param=self)
        value = values[-1] if values else self.once_default
        if self.callback is not None:
            value = self.callback(ctx, self, value)
        return value


def timeout_seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A finite positive number of seconds; ``inf`` means no limit (None). ``nan`` would silently switch the
    limit off (every comparison with it is false), so it is refused like 0 and negatives."""
    if value is None or math.isnan(value) or value <= 0:
        raise click.BadParameter(f"{value} is not a positive number of seconds (use inf for no limit)",
                                 ctx=ctx, param=param)
    return None if math.isinf(value) else value


def config_option(f: F) -> F:
    """``--config PATH``: the gate registry to read."""
    return click.option("--config", "config", cls=OnceOption, type=CONFIG_PATH, default=None,
                        shell_complete=completes("path"),
                        help="Gate registry to use instead of ./gates.toml or the packaged one.")(f)


def timeout_option(help_text: str) -> Callable[[F], F]:
    """``--timeout SECONDS``, 600 by default, ``inf`` for no limit."""
    return click.option("--timeout", cls=OnceOption, type=float, default=600.0, show_default=True,
                        callback=timeout_seconds, metavar="SECONDS", help=help_text)


def debug_option(f: F) -> F:
    """``--debug``: tracebacks of internal errors."""
    return click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")(f)


def load_registry(config: str | None) -> Registry:
    """The registry ``--config`` names, else ./gates.toml, else the packaged one."""
    from nxgates import registry

    return registry.load(config)


def completes(kind: str) -> Callable[[click.Context, click.Parameter, str], list[Any]]:
    """A ``shell_complete`` callback for words of ``kind`` (:data:`nxgates.cli.completion.COMPLETERS`); that
    module is imported only when a shell asks, so start-up pays nothing for completion."""

    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        from nxgates.cli.completion import complete_word

        return complete_word(kind, ctx, incomplete)

    return complete
