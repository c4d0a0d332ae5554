"""Shell completion: ``nxgates completion bash|zsh|fish`` prints the script, and the words it completes.

The script is click's own (``_NXGATES_COMPLETE=bash_source``): the shell runs ``nxgates`` with
``_NXGATES_COMPLETE=bash_complete`` and the words typed so far, and click asks each parameter's
``shell_complete`` callback (:func:`nxgates.cli.options.completes`), which lands in :func:`complete_word`
here. This module is imported only then, or for ``nxgates completion``: a run never pays for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import click

from nxgates.cli.group import COMPLETE_VAR, NxCommand
from nxgates.registry.names import ALL

if TYPE_CHECKING:
    from click import shell_completion
    from click.shell_completion import CompletionItem

    from nxgates.registry import GateEntry, Registry

SHELLS = ("bash", "zsh", "fish")


def _registry(ctx: click.Context) -> Registry | None:
    """The registry the command line names so far (``--config`` if typed before), None if it cannot load."""
    from nxgates import registry

    try:
        return registry.load(ctx.params.get("config") or None)
    except Exception:  # a broken gates.toml: the shell offers nothing rather than a traceback
        return None


def _chosen(ctx: click.Context, reg: Registry) -> list[GateEntry]:
    """The gates typed so far (GATES of run and selftest, GATE of the others); every gate if none or ``all``."""
    typed = ctx.params.get("gates") or ((ctx.params["gate"],) if ctx.params.get("gate") else ())
    if not typed:  # an option still waiting for its value stops click's parse: the words left are unparsed
        words = [word for word in ctx.args if not word.startswith("-")]
        typed = tuple(words if "gates" in ctx.params else words[:1])
    entries: list[GateEntry] = []
    for name in typed:
        try:
            entries += reg.everything() if name == ALL else [reg.resolve(name)]
        except Exception:
            continue  # a half-typed or unknown name: completion goes on with the others
    return [e for e in dict.fromkeys(entries or reg.everything()) if e.broken is None]


def _items(words: Iterable[tuple[str, str | None]], incomplete: str) -> list[CompletionItem]:
    from click.shell_completion import CompletionItem

    return [CompletionItem(word, help=text) for word, text in dict(words).items() if word.startswith(incomplete)]


def _loaded(entries: list[GateEntry]) -> list[GateEntry]:
    """The entries whose gate module loads (a plugin that fails to import is left out, not raised)."""
    good = []
    for entry in entries:
        try:
            entry.gate  # noqa: B018 - loads the module and checks its parameters
        except Exception:
            continue
        good.append(entry)
    return good


def gate_names(ctx: click.Context, incomplete: str, *, with_all: bool) -> list[CompletionItem]:
    """Gate names and aliases, built-in and plugin (``all`` too where the command takes it)."""
    reg = _registry(ctx)
    if reg is None:
        return []
    words: list[tuple[str, str | None]] = [(ALL, "every gate")] if with_all else []
    for entry in reg.everything():
        words.append((entry.name, entry.description))
        words += [(alias, f"alias of {entry.name}") for alias in entry.aliases]
    return _items(words, incomplete)


def presets(ctx: click.Context, incomplete: str) -> list[CompletionItem]:
    """The presets of the gates chosen so far: with its values for one gate, else the gates that have it."""
    reg = _registry(ctx)
    entries = _loaded(_chosen(ctx, reg)) if reg is not None else []
    having: dict[str, list[str]] = {}
    for entry in entries:
        for name in entry.presets:
            having.setdefault(name, []).append(entry.name)
    if len(entries) == 1:
        values = entries[0].presets
        return _items(((name, " ".join(f"{k}={v}" for k, v in values[name].items()) or "the seed's sizes")
                       for name in having), incomplete)
    return _items(((name, ", ".join(gates)) for name, gates in having.items()), incomplete)


def faults(ctx: click.Context, incomplete: str) -> list[CompletionItem]:
    """The faults the chosen gate can plant, with what catches each."""
    reg = _registry(ctx)
    entries = _loaded(_chosen(ctx, reg)) if reg is not None else []
    words = [(name, f"{entry.name}: caught by {', '.join(fault.caught_by)}")
             for entry in entries for name, fault in entry.gate.faults.items()]
    return _items(words, incomplete)


def settings(ctx: click.Context, incomplete: str) -> list[CompletionItem]:
    """``KEY=`` for every parameter of the chosen gates, with its type; ``GATE.KEY=`` once a gate is typed
    before a dot; after ``KEY=``, the values of a parameter with named choices."""
    reg = _registry(ctx)
    entries = _loaded(_chosen(ctx, reg)) if reg is not None else []
    key, eq, _ = incomplete.partition("=")
    prefix, dot, _ = key.rpartition(".") if "." in key else ("", "", key)
    if dot:
        entries = [e for e in entries if prefix == e.name or prefix in e.aliases]
    qualify = f"{prefix}." if dot else ""
    words: list[tuple[str, str | None]] = []
    for entry in entries:
        for name, param in entry.gate.params.items():
            if not eq:
                words.append((f"{qualify}{name}=", f"{param.describe()}: {param.doc}"))
            elif f"{qualify}{name}" == key and param.kind == "str":
                words += [(f"{key}={choice}", f"{entry.name}: {name}") for choice in param.choices]
    return _items(words, incomplete)


def choices_of(param_name: str) -> Callable[[click.Context, str], list[CompletionItem]]:
    """The values of the chosen gates' ``param_name`` (``--executor``, ``--reduction``), from their declarations."""

    def complete(ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        reg = _registry(ctx)
        having: dict[str, list[str]] = {}
        for entry in _loaded(_chosen(ctx, reg)) if reg is not None else []:
            for choice in getattr(entry.gate.params.get(param_name), "choices", ()):
                having.setdefault(choice, []).append(entry.name)
        return _items(((choice, ", ".join(gates)) for choice, gates in having.items()), incomplete)

    return complete


def paths(ctx: click.Context, incomplete: str) -> list[CompletionItem]:
    """A file name: the shell completes it itself."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


COMPLETERS: dict[str, Callable[[click.Context, str], list[Any]]] = {
    "gates": lambda ctx, incomplete: gate_names(ctx, incomplete, with_all=True),
    "gate": lambda ctx, incomplete: gate_names(ctx, incomplete, with_all=False),
    "preset": presets,
    "fault": faults,
    "set": settings,
    "executor": choices_of("executor"),
    "reduction": choices_of("reduction"),
    "path": paths,
}


def bash_class() -> type[shell_completion.BashComplete]:
    """nxgates' bash completion class (made when asked: click.shell_completion is not imported for help)."""
    from click import shell_completion

    class BashComplete(shell_completion.BashComplete):
        """click's bash completion, which also completes ``--set KEY=VALUE``. bash splits a word at ``=``
        (``COMP_WORDBREAKS``), so click would see ``KEY`` and ``=`` as two words and offer gate names after them:
        here they are joined back, the offers cut to the part after ``=`` that bash replaces, and a ``KEY=``
        offered is not followed by a space."""

        source_template = shell_completion.BashComplete.source_template.replace(
            "COMPREPLY+=($value)", "COMPREPLY+=($value)\n            [[ $value == *= ]] && compopt -o nospace")
        cut = ""  #: the ``KEY=`` bash has already split off the word it completes

        def get_completion_args(self) -> tuple[list[str], str]:
            args, incomplete = super().get_completion_args()
            if incomplete == "=" and args and not args[-1].startswith("-"):  # `--set KEY=`
                self.cut = args.pop() + "="
                return args, self.cut
            if len(args) >= 2 and args[-1] == "=":
                if args[-2].startswith("-"):  # `--json=VAL`: the value of that option
                    return args[:-1], incomplete
                self.cut = args[-2] + "="  # `--set KEY=VAL`
                return args[:-2], self.cut + incomplete
            return args, incomplete

        def format_completion(self, item: CompletionItem) -> str:
            if self.cut and item.type == "plain" and item.value.startswith(self.cut):
                return f"{item.type},{item.value[len(self.cut):]}"
            return super().format_completion(item)

    return BashComplete


def register() -> None:
    """Make :func:`bash_class` the one click uses for bash: the script it prints and the words it completes."""
    from click.shell_completion import add_completion_class

    add_completion_class(bash_class(), "bash")


def complete_word(kind: str, ctx: click.Context, incomplete: str) -> list[Any]:
    """The completions of a word of ``kind`` (a key of :data:`COMPLETERS`)."""
    return COMPLETERS[kind](ctx, incomplete)


@click.command("completion", cls=NxCommand, example="nxgates completion fish > ~/.config/fish/completions/nxgates.fish")
@click.argument("shell", metavar="SHELL", type=click.Choice(SHELLS))
def completion_cmd(shell: str) -> None:
    """Print the shell completion script for SHELL (bash, zsh or fish).

    With it, Tab completes commands, gates and aliases, presets, faults, --set parameters, --executor and
    --reduction values, and file names.

    Install it once (see the README): for bash, source the script from ~/.bashrc; for zsh, from ~/.zshrc
    after compinit; for fish, save it as ~/.config/fish/completions/nxgates.fish.
    """
    from click.shell_completion import get_completion_class

    from nxgates.streams import require_stdout, write_stdout

    require_stdout("the script")
    register()
    root = click.get_current_context().find_root().command
    completer = get_completion_class(shell)
    assert completer is not None  # click registers bash, zsh and fish itself
    write_stdout(completer(root, {}, "nxgates", COMPLETE_VAR).source())
