"""Reading gates.toml: ./gates.toml, ``--config``, or the packaged file, whose parse is cached
(:mod:`nxgates.tomlcache`). Every problem becomes a :class:`ConfigError` with one line that names the file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from nxgates import safeio, tomlcache
from nxgates.errors import ConfigError
from nxgates.registry.catalog import Registry
from nxgates.registry.entry import GateEntry
from nxgates.registry.tables import entry_from_table

PACKAGED_CONFIG = Path(__file__).parent.parent / "gates.toml"


def default_config_path() -> Path | None:
    """``./gates.toml`` replaces the packaged registry when present."""
    local = Path("gates.toml")
    return local if local.is_file() else None


def load(path: str | Path | None = None) -> Registry:
    """Read and validate a registry: ``path``, else ./gates.toml, else the one shipped in the package."""
    if path == "":
        raise ConfigError("--config: empty path")
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
        entry = entry_from_table(source, name, table)
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
