"""Gates from other packages: the entry-point group ``nxgates.gates``.

A distribution registers a gate in its ``pyproject.toml``::

    [project.entry-points."nxgates.gates"]
    my-gate = "my_package.my_gate"

The entry point's name is the gate's name; the module it points at declares ``GATE = GateDef(...)`` and
``TABLE``, the gate's default table (the fields of a gates.toml ``[gates.NAME]`` table, minus ``module``)::

    TABLE = {"description": "...", "aliases": [...], "params": {...every parameter...},
             "presets": {"bigger": {...}}}

Only modules an installed distribution registered can be loaded this way; nothing is imported from user
text. Scanning the entry points costs an ``importlib.metadata`` walk of ``sys.path``, so the registry does
it only when a name is not a built-in gate, and for ``list``, ``all`` and ``selftest``.

A plugin that cannot be imported, or whose GATE or TABLE is invalid, becomes a *broken* entry: ``list``
marks it, and asking for it is one line and exit 2.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from nxgates.errors import ConfigError
from nxgates.gatekit import ChoiceParam, Fault, GateDef, IntParam

GROUP = "nxgates.gates"


@dataclass(frozen=True)
class Registration:
    """One entry point of the group: a gate name, the module it points at, the distribution it came from."""

    name: str
    module: str
    dist: str

    @property
    def where(self) -> str:
        return f"plugin gate {self.name!r} (from {self.dist}, module {self.module})"


def registrations() -> list[Registration]:
    """Every installed entry point of :data:`GROUP`, sorted by gate name."""
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        origin = f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"
        found.append(Registration(ep.name, ep.module, origin))
    return sorted(found, key=lambda r: (r.name, r.dist))


def load_module(reg: Registration) -> ModuleType:
    """Import the registered module; any failure (a missing dependency, a syntax error) is one line."""
    try:
        return importlib.import_module(reg.module)
    except (Exception, SystemExit) as exc:  # an import-time bug or sys.exit(): the plugin is broken, nxgates runs on
        message = " ".join(str(exc).split())
        if isinstance(exc, SystemExit):
            message = f"sys.exit({exc.code!r}) at import"
        raise ConfigError(f"{reg.where}: cannot import: {type(exc).__name__}: {message}") from None


def table_of(module: ModuleType, where: str) -> dict[str, Any]:
    table = getattr(module, "TABLE", None)
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: the module declares no TABLE dict (description, aliases, params, presets)")
    if "module" in table:
        raise ConfigError(f"{where}: TABLE must not name a module (the entry point does)")
    return table


def check_gatedef(gate: Any, where: str) -> GateDef:
    """A third party's ``GATE``, checked field by field so a wrong one fails here, not mid-run."""
    if not isinstance(gate, GateDef):
        raise ConfigError(f"{where}: GATE must be a nxgates.gatekit.GateDef, found {type(gate).__name__}")
    if not isinstance(gate.params, dict) or not all(
            isinstance(k, str) and isinstance(v, IntParam | ChoiceParam) for k, v in gate.params.items()):
        raise ConfigError(f"{where}: GateDef.params must map names to IntParam or ChoiceParam")
    if not isinstance(gate.checks, tuple | list) or not gate.checks or not all(
            isinstance(c, str) and c for c in gate.checks):
        raise ConfigError(f"{where}: GateDef.checks must be a non-empty tuple of check names")
    if not callable(gate.run) or not callable(gate.validate):
        raise ConfigError(f"{where}: GateDef.run and GateDef.validate must be callables")
    if not isinstance(gate.faults, dict):
        raise ConfigError(f"{where}: GateDef.faults must map fault names to Fault")
    for name, fault in gate.faults.items():
        if not isinstance(name, str) or not isinstance(fault, Fault):
            raise ConfigError(f"{where}: GateDef.faults must map fault names to Fault")
        unknown = [c for c in fault.caught_by if c not in gate.checks]
        if not fault.caught_by or unknown:
            raise ConfigError(f"{where}: fault {name!r} must be caught by checks of the gate "
                              f"(unknown: {', '.join(map(repr, unknown)) or 'none given'})")
    if not isinstance(gate.options, tuple) or not all(isinstance(o, str) for o in gate.options):
        raise ConfigError(f"{where}: GateDef.options must be a tuple of option names")
    return gate
