"""A loaded registry: its gates by name or alias, ``all``, and the plugin gates scanned only when asked for."""

from __future__ import annotations

from dataclasses import dataclass, field

from nxgates.errors import ConfigError
from nxgates.registry.entry import GateEntry
from nxgates.registry.names import ALL, shorten


@dataclass(eq=False)
class Registry:
    """A loaded gates.toml: its gates in file order, and the plugin gates once asked for."""

    source: str
    gates: dict[str, GateEntry]
    _plugins: dict[str, GateEntry] | None = field(default=None, repr=False)

    def plugins(self) -> dict[str, GateEntry]:
        """The gates installed distributions register, scanned once and only when asked for."""
        if self._plugins is None:
            from nxgates.registry.plugin_gates import plugin_entries

            self._plugins = plugin_entries(self.gates, self.source)
        return self._plugins

    def everything(self) -> list[GateEntry]:
        """The registry's gates in file order, then the plugin gates by name (broken ones included)."""
        return [*self.gates.values(), *self.plugins().values()]

    def resolve(self, name: str) -> GateEntry:
        """A gate by name or alias; the entry points are scanned only for a name that is not built in."""
        entry = _find(self.gates, name) or _find(self.plugins(), name)
        if entry is not None:
            return entry
        known = ", ".join(sorted({*self.gates, *self.plugins()}))
        raise ConfigError(f"unknown gate {shorten(name)!r} (known: {known}, or 'all')")

    def select(self, names: tuple[str, ...] | list[str]) -> list[GateEntry]:
        """``all`` expands to every gate (file order, then plugins); duplicates collapse."""
        chosen: list[GateEntry] = []
        for name in names:
            for entry in self.everything() if name == ALL else [self.resolve(name)]:
                if entry not in chosen:
                    chosen.append(entry)
        for entry in chosen:
            entry.gate  # noqa: B018 - load and check each chosen gate before anything runs
        return chosen


def _find(entries: dict[str, GateEntry], name: str) -> GateEntry | None:
    if name in entries:
        return entries[name]
    return next((e for e in entries.values() if name in e.aliases), None)
