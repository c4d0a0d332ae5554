"""A gate of the registry: its table as read, and the gate module with checked defaults and presets,
loaded only when the gate is first used."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from nxgates.errors import ConfigError, ResourceError
from nxgates.gatekit import GateDef, ParamValue
from nxgates.registry.names import BUILT_IN, SEED_PRESET


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
