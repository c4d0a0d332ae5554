"""Where crosscheck finds a gate's seed-log format: its own declaration, ``GATE.seed_log``."""

from __future__ import annotations

import importlib

from nxgates.errors import ConfigError
from nxgates.gatekit import SeedLog


def seed_log(module: str) -> SeedLog | None:
    """The seed-log format of the built-in gate module ``module``, or None if it has no seed program."""
    from nxgates.registry import available_modules

    if module not in available_modules():
        return None
    gate = importlib.import_module(f"nxgates.gates.{module}").GATE  # every built-in gate module has one
    return None if gate.seed_log is None else gate.seed_log()


def known() -> dict[str, SeedLog]:
    """Every built-in gate module with a seed-log format, by module name (sorted)."""
    from nxgates.registry import available_modules

    found = {module: seed_log(module) for module in sorted(available_modules())}
    return {module: log for module, log in found.items() if log is not None}


def declared(module: str) -> SeedLog:
    """:func:`seed_log`, required: a gate module without one is a usage error (exit 2)."""
    found = seed_log(module)
    if found is None:
        raise ConfigError(f"gate module {module!r} declares no seed log format")
    return found
