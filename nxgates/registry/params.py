"""How a run's parameters are chosen: a gate's defaults, then ``--preset``, then ``--set KEY=VALUE``
(or ``GATE.KEY=VALUE``), every value typed, range-checked and cross-validated."""

from __future__ import annotations

from nxgates.errors import ConfigError
from nxgates.gatekit import ParamValue
from nxgates.registry.entry import GateEntry
from nxgates.registry.names import SEED_PRESET, shorten


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
        except SystemExit as exc:  # a plugin's validate() must not end the runner either
            raise ConfigError(f"{entry.name}: validate() called sys.exit({exc.code!r})") from None
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
