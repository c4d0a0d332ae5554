"""gates.toml: which gates exist, their defaults and presets, and how ``--set`` values become params.

Gate modules are looked up by name among the modules of :mod:`nxgates.gates` and the modules installed
distributions registered (:mod:`nxgates.plugins`); nothing from user text is imported or executed. Every
problem becomes a :class:`ConfigError` with one line that names the file.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nxgates import safeio, tomlcache
from nxgates.errors import ConfigError, ResourceError
from nxgates.gatekit import GateDef, ParamValue

GATES_DIR = Path(__file__).parent / "gates"
PACKAGED_CONFIG = Path(__file__).parent / "gates.toml"

SEED_PRESET = "seed"
ALL = "all"  #: `run all`: reserved, no gate or alias may be called this
NAME_SHOWN = 60  #: characters of a user-given name echoed in an error
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
BUILT_IN = "built-in"


@dataclass(eq=False)  # entries are compared by identity; a generated __eq__ only costs start-up
class GateEntry:
    """One ``[gates.NAME]`` table. Its module is imported, and its params checked against the module's
    declaration, only when the gate is first used: ``nxgates run lora`` imports the lora gate alone.
    """

    name: str
    module: str
    description: str
    aliases: tuple[str, ...]
    raw_params: dict[str, Any] = field(default_factory=dict, repr=False)
    raw_presets: dict[str, Any] = field(default_factory=dict, repr=False)
    where: str = ""
    origin: str = BUILT_IN  #: "built-in", or the distribution ("name version") a plugin gate comes from
    plugin_module: str | None = None  #: set for a gate whose module an installed distribution registered
    broken: str | None = None  #: why a plugin gate cannot be used (one line); asking for it is exit 2
    _gate: GateDef | None = field(default=None, repr=False)
    _defaults: dict[str, ParamValue] = field(default_factory=dict, repr=False)
    _presets: dict[str, dict[str, ParamValue]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, name: str, gate: GateDef, defaults: dict[str, ParamValue]) -> GateEntry:
        """An entry for a gate defined in code (tests, embedding)."""
        return cls(name, name, name, (), _gate=gate, _defaults=dict(defaults), _presets={SEED_PRESET: {}})

    def _load(self) -> GateDef:
        if self.broken is not None:
            raise ConfigError(self.broken)
        if self._gate is None:
            raw_params, raw_presets = self.raw_params, self.raw_presets
            if self.plugin_module is None:
                gate = importlib.import_module(f"nxgates.gates.{self.module}").GATE
            else:  # the plugin's own TABLE gives the defaults a gates.toml table does not override
                from nxgates import plugins

                reg = plugins.Registration(self.name, self.plugin_module, self.origin)
                module = plugins.load_module(reg)
                gate = plugins.check_gatedef(getattr(module, "GATE", None), self.where)
                table = plugins.table_of(module, self.where)
                if not isinstance(table.get("params"), dict) or not isinstance(table.get("presets", {}), dict):
                    raise ConfigError(f"{self.where}: TABLE params and presets must be tables")
                raw_params = {**table["params"], **raw_params}
                raw_presets = {**table.get("presets", {}), **raw_presets}
            defaults = _checked_params(f"{self.where}.params", gate, raw_params, complete=True)
            _validate(f"{self.where}.params", gate, defaults)
            presets: dict[str, dict[str, ParamValue]] = {SEED_PRESET: {}}
            for pname, values in raw_presets.items():
                where = f"{self.where}.presets.{pname}"
                if not isinstance(values, dict):
                    raise ConfigError(f"{where}: must be a table")
                presets[pname] = _checked_params(where, gate, values, complete=False)
                try:  # a broken preset is refused now, not only when someone chooses it
                    gate.validate({**defaults, **presets[pname]})
                except ResourceError:
                    pass  # memory depends on the machine and the moment: checked when the preset is chosen
                except ConfigError as exc:
                    raise ConfigError(f"{where}: {exc}") from None
            self._gate, self._defaults, self._presets = gate, defaults, presets
        return self._gate

    @property
    def gate(self) -> GateDef:
        return self._load()

    @property
    def defaults(self) -> dict[str, ParamValue]:
        self._load()
        return self._defaults

    @property
    def presets(self) -> dict[str, dict[str, ParamValue]]:
        self._load()
        return self._presets


@dataclass(eq=False)
class Registry:
    """A loaded gates.toml: its gates in file order, and the plugin gates once asked for."""

    source: str
    gates: dict[str, GateEntry]
    _plugins: dict[str, GateEntry] | None = field(default=None, repr=False)

    def plugins(self) -> dict[str, GateEntry]:
        """The gates installed distributions register, scanned once and only when asked for."""
        if self._plugins is None:
            self._plugins = _plugin_entries(self)
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


def default_config_path() -> Path | None:
    """``./gates.toml`` replaces the packaged registry when present."""
    local = Path("gates.toml")
    return local if local.is_file() else None


def load(path: str | Path | None = None) -> Registry:
    """Read and validate a registry: ``path``, else ./gates.toml, else the one shipped in the package."""
    if path is None:
        path = default_config_path()
    source = "gates.toml (packaged)" if path is None else str(path)
    target = PACKAGED_CONFIG if path is None else path
    try:  # bounded: a config that is /dev/zero, a FIFO or a huge file is refused at once
        text = safeio.read_text(target, "config", safeio.TOML_LIMIT)
    except ConfigError as exc:
        reason = str(exc).removeprefix(f"config {target}: ")
        raise ConfigError(f"{source}: cannot read config: {reason}") from None
    return parse(text, source, tomlcache.cache_path(PACKAGED_CONFIG) if target == PACKAGED_CONFIG else None)


def cache_packaged() -> None:
    """Cache the packaged gates.toml's parse even under PYTHONDONTWRITEBYTECODE: ``make compile`` runs this,
    as compileall writes bytecode regardless."""
    cache = tomlcache.cache_path(PACKAGED_CONFIG)
    if cache is not None:
        text = safeio.read_text(PACKAGED_CONFIG, "config", safeio.TOML_LIMIT)
        tomlcache.write(cache, text, _toml(text, "gates.toml (packaged)"))


def shorten(name: str, limit: int = NAME_SHOWN) -> str:
    """A user-given name cut to ``limit`` characters for an error line (a 100 KB name stays one short line)."""
    return name if len(name) <= limit else f"{name[:limit]}... ({len(name)} characters)"


def parse(text: str, source: str, cache: Path | None = None) -> Registry:
    """A registry from gates.toml ``text``; ``cache`` (the packaged file's) may hold its parse already."""
    data = tomlcache.read(cache, text) if cache is not None else None
    if data is None:
        data = _toml(text, source)
        if cache is not None and not sys.dont_write_bytecode:  # where Python would write bytecode
            tomlcache.write(cache, text, data)
    tables = data.get("gates")
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f"{source}: no gates defined (expected [gates.NAME] tables)")
    unknown_top = sorted(set(data) - {"gates"})
    if unknown_top:
        raise ConfigError(f"{source}: unknown top-level key {unknown_top[0]!r} (only [gates.NAME] tables)")
    gates: dict[str, GateEntry] = {}
    for name, table in tables.items():
        entry = _entry(source, name, table)
        for other in gates.values():
            clash = ({entry.name, *entry.aliases}) & ({other.name, *other.aliases})
            if clash:
                raise ConfigError(f"{source}: gate name or alias {sorted(clash)[0]!r} is used twice")
        gates[name] = entry
    return Registry(source, gates)


def _toml(text: str, source: str) -> dict[str, Any]:
    import tomllib  # here, not at the top: with the packaged file's parse cached, a start-up never needs it

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses per nesting level: `x = [[[[...]]]]` thousands deep
        raise ConfigError(f"{source}: invalid TOML: arrays or tables nested too deeply") from None


@functools.cache  # listed once per process: every table of every registry asks, up to twice
def available_modules() -> frozenset[str]:
    """The gate modules nxgates ships: the only modules a registry may name, besides registered plugins."""
    return frozenset(name.removesuffix(".py") for name in os.listdir(GATES_DIR) if not name.startswith("_") and (
        name.endswith(".py") or os.path.isfile(os.path.join(GATES_DIR, name, "__init__.py"))))


def _plugin_entries(registry: Registry) -> dict[str, GateEntry]:
    """One entry per registered plugin gate, loaded and checked now so ``list`` can mark broken ones."""
    from nxgates import plugins

    taken = {n for e in registry.gates.values() for n in (e.name, *e.aliases)}
    entries: dict[str, GateEntry] = {}
    for reg in plugins.registrations():
        entry = GateEntry(reg.name, reg.module, "", (), where=reg.where, origin=reg.dist, plugin_module=reg.module)
        try:
            if not _NAME.match(reg.name):
                raise ConfigError(f"{reg.where}: gate names are lower-case letters, digits, '-' and '_'")
            if reg.name in taken or reg.name in entries:
                raise ConfigError(f"{reg.where}: the name {reg.name!r} is already a gate "
                                  f"({'of ' + registry.source if reg.name in taken else 'of another plugin'})")
            table = plugins.table_of(plugins.load_module(reg), reg.where)
            entry = _entry(reg.where, reg.name, table, plugin=reg)
            clash = set(entry.aliases) & (taken | set(entries))
            if clash:
                raise ConfigError(f"{reg.where}: alias {sorted(clash)[0]!r} is already a gate name or alias")
            entry.gate  # noqa: B018 - check GATE and TABLE now: a broken plugin is listed as broken
        except ConfigError as exc:
            entry.broken = str(exc)
        except Exception as exc:  # a plugin's validate() with a bug of its own
            entry.broken = f"{reg.where}: {type(exc).__name__}: {' '.join(str(exc).split())}"
        if entry.broken is not None:
            entry.description, entry.aliases, entry._gate = "", (), None
        entries[reg.name if reg.name not in entries else f"{reg.name} ({reg.dist})"] = entry
        taken |= {entry.name, *entry.aliases}
    return entries


def _entry(source: str, name: str, table: Any, plugin: Any = None) -> GateEntry:
    """A gates.toml table, or (``plugin`` given) a plugin's TABLE, whose module the entry point names."""
    where = source if plugin is not None else f"{source}: [gates.{name}]"
    if not _NAME.match(name):
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
    elif isinstance(module, str) and module not in available_modules() and _MODULE.match(module):
        from nxgates import plugins  # only a module name that is not built in costs an entry-point scan

        registered = {r.module: r for r in plugins.registrations()}
        if module in registered:
            plugin_module, origin = module, registered[module].dist
    required = ("module", "description") if plugin_module else ("module", "description", "params")
    for key in required if plugin is None else ("description", "params"):
        if key not in table:
            raise ConfigError(f"{where}: missing field {key!r}")
    if plugin_module is None and (not isinstance(module, str) or not _MODULE.match(module)
                                  or module not in available_modules()):
        known = ", ".join(sorted(available_modules()))
        raise ConfigError(f"{where}: module {module!r} is not a gate module of nxgates or of an installed plugin "
                          f"(known: {known}, or a module an installed distribution registers)")
    description = table["description"]
    if not isinstance(description, str) or not description.strip():
        raise ConfigError(f"{where}: description must be a non-empty string")
    aliases = table.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and _NAME.match(a) for a in aliases):
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
        if not _NAME.match(pname):
            raise ConfigError(f"{where}.presets.{shorten(repr(pname))}: preset names are lower-case letters, "
                              "digits, '-' and '_'")
        if pname == SEED_PRESET:
            raise ConfigError(f"{where}.presets.{pname}: 'seed' is reserved for the defaults in [gates.{name}.params]"
                              " (name the preset otherwise)")
    return GateEntry(name, module, description.strip(), tuple(aliases), params, presets, where, origin,
                     plugin_module)


def _checked_params(where: str, gate: GateDef, values: dict, complete: bool) -> dict[str, ParamValue]:
    for key in values:
        if key not in gate.params:
            raise ConfigError(f"{where}: unknown parameter {key!r} (known: {', '.join(gate.params)})")
    if complete:
        # a parameter added after a gates.toml was written takes its own default
        later = {k: p.default for k, p in gate.params.items() if getattr(p, "default", None) is not None}
        values = {**later, **values}
        missing = [k for k in gate.params if k not in values]
        if missing:
            raise ConfigError(f"{where}: missing parameter {missing[0]!r}")
    try:
        return {k: gate.params[k].check(k, v) for k, v in values.items()}
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _validate(where: str, gate: GateDef, params: dict[str, ParamValue]) -> None:
    try:
        gate.validate(params)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def parse_sets(pairs: tuple[str, ...] | list[str]) -> list[tuple[str | None, str, str]]:
    """``KEY=VALUE`` or ``GATE.KEY=VALUE`` into (gate or None, key, raw value)."""
    parsed = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: expected KEY=VALUE")
        if not value.strip():
            raise ConfigError(f"--set {pair!r}: empty value for {key}")
        gate, dot, bare = key.rpartition(".")
        parsed.append((gate if dot else None, bare, value))
    return parsed


def repeated_sets(pairs: tuple[str, ...] | list[str]) -> list[str]:
    """One warning per ``--set`` key given more than once with different values (the last one wins)."""
    values: dict[tuple[str | None, str], list[str]] = {}
    for gate, key, value in parse_sets(pairs):
        values.setdefault((gate, key), []).append(value.strip())
    warnings = []
    for (gate, key), given in values.items():
        if len(set(given)) > 1:
            name = shorten(f"{gate}.{key}" if gate else key)
            warnings.append(f"--set {name} given {len(given)} times ({', '.join(shorten(v, 20) for v in given[:4])}); "
                            f"using the last, {name}={shorten(given[-1])}")
    return warnings


def effective_params(
    entries: list[GateEntry], preset: str | None, sets: tuple[str, ...] | list[str]
) -> dict[str, dict[str, ParamValue]]:
    """Defaults, then the preset, then ``--set``; every value typed, range-checked and cross-validated."""
    parsed = parse_sets(sets)
    used = [False] * len(parsed)
    result: dict[str, dict[str, ParamValue]] = {}
    for entry in entries:
        name = SEED_PRESET if preset is None else preset  # '' is a preset name like any other: unknown
        if name not in entry.presets:
            raise ConfigError(
                f"gate {entry.name!r} has no preset {shorten(name)!r} (presets: {', '.join(entry.presets)})"
            )
        params = {**entry.defaults, **entry.presets[name]}
        for n, (gate, key, raw) in enumerate(parsed):
            if gate is not None and gate != entry.name and gate not in entry.aliases:
                continue
            if key not in entry.gate.params:
                if gate is not None:
                    raise ConfigError(f"--set {gate}.{key}: gate {entry.name!r} has no parameter {key!r} "
                                      f"(parameters: {', '.join(entry.gate.params)})")
                continue
            try:
                params[key] = entry.gate.params[key].parse(key, raw)
            except ConfigError as exc:
                raise ConfigError(f"{entry.name}: --set {key}={raw}: {exc}") from None
            used[n] = True
        try:
            entry.gate.validate(params)
        except ConfigError as exc:
            raise ConfigError(f"{entry.name}: {exc}") from None
        result[entry.name] = params
    for n, (gate, key, _raw) in enumerate(parsed):
        if not used[n]:
            if gate is not None:
                entry = [e for e in entries if gate in (e.name, *e.aliases)]
                if not entry:
                    raise ConfigError(f"--set {gate}.{key}: gate {gate!r} is not among the gates being run")
            names = ", ".join(e.name for e in entries)
            raise ConfigError(f"--set {key}: unknown parameter for {names}")
    return result
