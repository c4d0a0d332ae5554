"""A ``[gates.NAME]`` table of gates.toml, or a plugin's TABLE, checked field by field into a GateEntry.

Gate modules are looked up by name among the modules of :mod:`nxgates.gates` and the modules installed
distributions registered (:mod:`nxgates.plugins`); nothing from user text is imported or executed.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nxgates.errors import ConfigError
from nxgates.registry.entry import GateEntry
from nxgates.registry.names import ALL, BUILT_IN, MODULE, NAME, SEED_PRESET, shorten

if TYPE_CHECKING:
    from nxgates.plugins import Registration

GATES_DIR = Path(__file__).parent.parent / "gates"


@functools.cache  # listed once per process: every table of every registry asks, up to twice
def available_modules() -> frozenset[str]:
    """The gate modules (or packages) nxgates ships: the only ones a registry may name, besides plugins."""
    return frozenset(name.removesuffix(".py") for name in os.listdir(GATES_DIR) if not name.startswith("_") and (
        name.endswith(".py") or os.path.isfile(os.path.join(GATES_DIR, name, "__init__.py"))))


def entry_from_table(source: str, name: str, table: Any, plugin: Registration | None = None) -> GateEntry:
    """A gates.toml table, or (``plugin`` given) a plugin's TABLE, whose module the entry point names."""
    where = source if plugin is not None else f"{source}: [gates.{name}]"
    if not NAME.match(name):
        raise ConfigError(f"{where}: gate names are lower-case letters, digits, '-' and '_'")
    if name == ALL:
        raise ConfigError(f"{where}: 'all' is reserved (`nxgates run all` runs every gate)")
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    allowed = {"module", "description", "aliases", "params", "presets"} - ({"module"} if plugin else set())
    extra = sorted(set(table) - allowed)
    if extra:
        raise ConfigError(f"{where}: unknown field {extra[0]!r} (allowed: {', '.join(sorted(allowed))})")
    module = plugin.module if plugin is not None else table.get("module")
    plugin_module, origin = None, BUILT_IN
    if plugin is not None:
        plugin_module, origin = plugin.module, plugin.dist
    elif isinstance(module, str) and module not in available_modules() and MODULE.match(module):
        from nxgates import plugins  # only a module name that is not built in costs an entry-point scan

        registered = {r.module: r for r in plugins.registrations()}
        if module in registered:
            plugin_module, origin = module, registered[module].dist
    required = ("module", "description") if plugin_module else ("module", "description", "params")
    for key in required if plugin is None else ("description", "params"):
        if key not in table:
            raise ConfigError(f"{where}: missing field {key!r}")
    if plugin_module is None and (not isinstance(module, str) or not MODULE.match(module)
                                  or module not in available_modules()):
        known = ", ".join(sorted(available_modules()))
        raise ConfigError(f"{where}: module {module!r} is not a gate module of nxgates or of an installed plugin "
                          f"(known: {known}, or a module an installed distribution registers)")
    description = table["description"]
    if not isinstance(description, str) or not description.strip():
        raise ConfigError(f"{where}: description must be a non-empty string")
    aliases = table.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and NAME.match(a) for a in aliases):
        raise ConfigError(f"{where}: aliases must be a list of gate names")
    if ALL in aliases:
        raise ConfigError(f"{where}: alias 'all' is reserved (`nxgates run all` runs every gate)")
    params = table.get("params", {})
    if not isinstance(params, dict):
        raise ConfigError(f"{where}: params must be a table")
    presets = table.get("presets", {})
    if not isinstance(presets, dict):
        raise ConfigError(f"{where}: presets must be a table of tables")
    for pname, values in presets.items():
        if not isinstance(values, dict):
            raise ConfigError(f"{where}.presets.{pname}: must be a table")
        if not NAME.match(pname):
            raise ConfigError(f"{where}.presets.{shorten(repr(pname))}: preset names are lower-case letters, "
                              "digits, '-' and '_'")
        if pname == SEED_PRESET:
            raise ConfigError(f"{where}.presets.{pname}: 'seed' is reserved for the defaults in [gates.{name}.params]"
                              " (name the preset otherwise)")
    return GateEntry(name, module, description.strip(), tuple(aliases), params, presets, where, origin,
                     plugin_module)
