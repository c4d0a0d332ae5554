"""The gates installed distributions register (:mod:`nxgates.plugins`), as registry entries: a broken one
is kept, marked with why, so ``list`` can show it and asking for it is one line."""

from __future__ import annotations

from nxgates.errors import ConfigError
from nxgates.registry.entry import GateEntry
from nxgates.registry.names import NAME
from nxgates.registry.tables import entry_from_table


def plugin_entries(gates: dict[str, GateEntry], source: str) -> dict[str, GateEntry]:
    """One entry per registered plugin gate, loaded and checked now so ``list`` can mark broken ones."""
    from nxgates import plugins

    taken = {n for e in gates.values() for n in (e.name, *e.aliases)}
    entries: dict[str, GateEntry] = {}
    for reg in plugins.registrations():
        entry = GateEntry(reg.name, reg.module, "", (), where=reg.where, origin=reg.dist, plugin_module=reg.module)
        try:
            if not NAME.match(reg.name):
                raise ConfigError(f"{reg.where}: gate names are lower-case letters, digits, '-' and '_'")
            if reg.name in taken or reg.name in entries:
                raise ConfigError(f"{reg.where}: the name {reg.name!r} is already a gate "
                                  f"({'of ' + source if reg.name in taken else 'of another plugin'})")
            table = plugins.table_of(plugins.load_module(reg), reg.where)
            entry = entry_from_table(reg.where, reg.name, table, plugin=reg)
            clash = set(entry.aliases) & (taken | set(entries))
            if clash:
                raise ConfigError(f"{reg.where}: alias {sorted(clash)[0]!r} is already a gate name or alias")
            entry.gate  # noqa: B018 - check GATE and TABLE now: a broken plugin is listed as broken
        except ConfigError as exc:
            entry.broken = str(exc)
        except (Exception, SystemExit) as exc:  # a plugin's validate() with a bug of its own, or a sys.exit()
            entry.broken = f"{reg.where}: {type(exc).__name__}: {' '.join(str(exc).split())}"
        if entry.broken is not None:
            entry.description, entry.aliases, entry._gate = "", (), None
        entries[reg.name if reg.name not in entries else f"{reg.name} ({reg.dist})"] = entry
        taken |= {entry.name, *entry.aliases}
    return entries
