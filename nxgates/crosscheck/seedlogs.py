"""Where crosscheck finds a gate's seed-log format: its own declaration, ``GATE.seed_log``.

The one exception is listed here, :data:`_NOT_YET_DECLARED`: parallel-grad's format lives in
``nxgates/gates/parallel_grad_seedlog.py`` until its ``GateDef`` declares ``seed_log`` itself (then this
lookup goes).
"""

from __future__ import annotations

import importlib

from nxgates.errors import ConfigError
from nxgates.gatekit import SeedLog

#: gate modules whose GateDef does not declare its seed log yet -> the module that does (``SEED_LOG``).
#: To move into parallel-grad's GateDef (``seed_log=``) when the two are merged.
_NOT_YET_DECLARED = {"parallel_grad": "nxgates.gates.parallel_grad_seedlog"}


def seed_log(module: str) -> SeedLog | None:
    """The seed-log format of the built-in gate module ``module``, or None if it has no seed program."""
    from nxgates.registry import available_modules

    if module not in available_modules():
        return None
    gate = getattr(importlib.import_module(f"nxgates.gates.{module}"), "GATE", None)
    if gate is not None and gate.seed_log is not None:
        return gate.seed_log()
    if module in _NOT_YET_DECLARED:
        return importlib.import_module(_NOT_YET_DECLARED[module]).SEED_LOG
    return None


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
