"""gates.toml: which gates exist, their defaults and presets, and how ``--set`` values become params.

``from nxgates import registry; registry.load(...)`` is the way in; the work is split by concern:
:mod:`~nxgates.registry.loading` (reading and caching the file), :mod:`~nxgates.registry.tables` (checking
a table), :mod:`~nxgates.registry.entry` (a gate, loaded when first used), :mod:`~nxgates.registry.catalog`
(lookup by name), :mod:`~nxgates.registry.plugin_gates` (installed plugins) and
:mod:`~nxgates.registry.params` (defaults, presets, ``--set``).
"""

from nxgates.registry.catalog import Registry
from nxgates.registry.entry import GateEntry
from nxgates.registry.loading import PACKAGED_CONFIG, cache_packaged, default_config_path, load, parse
from nxgates.registry.names import ALL, BUILT_IN, NAME_SHOWN, SEED_PRESET, shorten
from nxgates.registry.params import effective_params, parse_sets, repeated_sets
from nxgates.registry.tables import GATES_DIR, available_modules

__all__ = [
    "ALL", "BUILT_IN", "GATES_DIR", "NAME_SHOWN", "PACKAGED_CONFIG", "SEED_PRESET", "GateEntry", "Registry",
    "available_modules", "cache_packaged", "default_config_path", "effective_params", "load", "parse",
    "parse_sets", "repeated_sets", "shorten",
]
