"""``nxgates crosscheck GATE LOG``: read what a seed program printed and recompute every figure of it.

nxgates exists to be a second, independent implementation. A crosscheck parses the stdout of a real NX
run, line by line against the seed's exact print format, which the gate declares (``GATE.seed_log``, a
:class:`~nxgates.gatekit.SeedLog`: one :class:`~nxgates.gatekit.LineSpec` per line the seed prints),
recomputes each figure with nxgates' own gate code at the run's sizes, and compares them integer by
integer. The result is a :class:`~nxgates.runner.GateReport` with one check per figure, so the JSON and
JUnit reports of ``run`` apply unchanged.

:mod:`.parse` reads the log, :mod:`.source` the ``--source`` program's constants, :mod:`.compare` makes
the report, :mod:`.seedlogs` finds a gate's declaration.

Exit codes: 0 every figure agrees (whatever the log's own verdict: a RED run that nxgates also computes
RED agrees), 1 a figure disagrees, 2 the log is not a complete run of that gate in the seed's format, or
``--source`` constants cannot be read.
"""

from __future__ import annotations

from typing import Any

from nxgates.crosscheck.compare import crosscheck
from nxgates.crosscheck.parse import LogError, parse_log, read_log
from nxgates.crosscheck.seedlogs import known, seed_log
from nxgates.crosscheck.source import (
    SOURCE_LIMIT,
    describe_source,
    effective_params,
    read_source,
    read_source_constants,
    source_params,
)
from nxgates.gatekit import Figure, LineSpec, ParsedLog, SourceConst

__all__ = ["SOURCE_LIMIT", "Figure", "LineSpec", "LogError", "ParsedLog", "SourceConst", "crosscheck",
           "describe_source", "effective_params", "known", "parse_log", "read_log", "read_source",
           "read_source_constants", "seed_log", "source_params"]


def __getattr__(name: str) -> Any:
    """``LOG_FORMATS`` (module -> line specs) and ``GATE_OF_MODULE`` (module -> gate name): what the
    gates declare, gathered only when asked for (it imports every built-in gate)."""
    if name == "LOG_FORMATS":
        return {module: log.lines for module, log in known().items()}
    if name == "GATE_OF_MODULE":
        return {module: log.name for module, log in known().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
