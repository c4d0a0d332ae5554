"""``list`` and ``show`` as text: the gates as an aligned table, one gate's parameters, presets, checks and
faults. Lines are yielded one at a time, so a gate that cannot load fails before any line is printed.

A plugin's names, descriptions and docs are outside text: each line is :func:`nxgates.streams.shown`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from nxgates.streams import safe_line, shown

if TYPE_CHECKING:
    from nxgates.registry import GateEntry


class ListRow(NamedTuple):
    """One gate in ``nxgates list``."""

    name: str
    aliases: str
    origin: str
    description: str

    @classmethod
    def of(cls, e: GateEntry) -> ListRow:
        return cls(shown(e.name), shown(", ".join(e.aliases) or "-"), shown(e.origin),
                   shown(f"BROKEN: {e.broken}" if e.broken else e.description))


HEADINGS = ListRow("GATE", "ALIASES", "FROM", "DESCRIPTION")


def gate_list(entries: Iterable[GateEntry]) -> Iterator[str]:
    """The table of ``nxgates list``: the columns as wide as their widest cell (the last one unaligned)."""
    rows = [ListRow.of(e) for e in entries]  # plugin gates too: FROM names their distribution
    width = [max(len(r[i]) for r in [*rows, HEADINGS]) for i in range(3)]
    for name, aliases, origin, desc in [HEADINGS, *rows]:
        yield safe_line(f"{name:<{width[0]}}  {aliases:<{width[1]}}  {origin:<{width[2]}}  {desc}")


def gate_description(entry: GateEntry) -> Iterator[str]:
    """``nxgates show GATE``: what can be set, chosen, checked and planted."""
    for line in _description(entry):
        yield safe_line(shown(line))


def _description(entry: GateEntry) -> Iterator[str]:
    g = entry.gate
    yield f"{entry.name}: {entry.description}"
    if entry.aliases:
        yield f"aliases: {', '.join(entry.aliases)}"
    yield "parameters (--set KEY=VALUE):"
    for key, spec in g.params.items():
        yield f"  {key:<12} default {entry.defaults[key]!s:<8} {spec.describe():<24} {spec.doc}"
    yield "presets (--preset NAME):"
    for name, values in entry.presets.items():
        shown = " ".join(f"{k}={v}" for k, v in values.items()) or (
            "(the defaults: the seed's sizes)" if entry.plugin_module is None else "(the defaults)")
        yield f"  {name:<12} {shown}"
    yield "checks:"
    for check in g.checks:
        yield f"  {check}"
    yield "faults (--inject FAULT):"
    for fault, spec in g.faults.items():
        yield f"  {fault:<18} {spec.doc} (caught by: {', '.join(spec.caught_by)})"
    if not g.faults:
        yield "  (none)"
