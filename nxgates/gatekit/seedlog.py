"""How a seed program prints its run, for ``nxgates crosscheck``: each line in the printer's exact form."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from nxgates.gatekit.output import GateOutput, RunContext

#: what a seed program prints for an i64: ASCII digits, no leading zero, no sign but a minus on a non-zero value,
#: at most 19 digits (range-checked in :meth:`LineSpec.match`)
_LOG_INT = r"(?:0|-?[1-9][0-9]{0,18})"
_I64 = range(-(1 << 63), 1 << 63)


class LineSpec(NamedTuple):
    """One line the seed prints. ``pattern`` must match the whole line, ``{INT}`` standing for an integer; its
    named groups are figures (integers unless listed in ``words``), except those named ``_...``, which only
    steer the pattern (e.g. a conditional tail). ``repeat`` lines occur zero or more times
    (e.g. one per failing cell)."""

    key: str
    pattern: str
    shows: str  #: the line as the seed prints it, for "expected ..." messages
    repeat: bool = False
    words: tuple[str, ...] = ()

    def match(self, line: str) -> dict[str, Any] | None:
        """The line's figures, or None unless every one is in the exact form the seed's printer writes."""
        m = re.fullmatch(self.pattern.replace("{INT}", _LOG_INT), line)
        if m is None:
            return None
        record = {k: (v if k in self.words or v is None else int(v)) for k, v in m.groupdict().items()
                  if not k.startswith("_")}
        if any(k not in self.words and v is not None and v not in _I64 for k, v in record.items()):
            return None
        return record


class ParsedLog:
    """The figures of a log: for each line key, the records of the lines that matched it, in order."""

    def __init__(self, records: dict[str, list[dict[str, Any]]] | None = None):
        self.records = {} if records is None else records

    def one(self, key: str) -> dict[str, Any]:
        return self.records[key][0]

    def all(self, key: str) -> list[dict[str, Any]]:
        return self.records.get(key, [])


class Figure(NamedTuple):
    """One figure of the log next to nxgates' value for it. ``None`` on the nxgates side: no such thing."""

    name: str
    log: Any
    nxgates: Any

    @property
    def agrees(self) -> bool:
        return self.log == self.nxgates


class SourceConst(NamedTuple):
    """A constant the seed program declares, and the gate parameter it sets (None: only checked)."""

    name: str
    param: str | None
    form: str  #: "const" (``const NAME: i64 = 3``) or "let" (``let NAME: i64=2097;``, ``;`` or end of line)


class SeedLog(NamedTuple):
    """How a gate's seed program prints its run, and how the gate recomputes each figure of it.

    ``lines`` are matched in order, each line of the log against the next spec; ``figures`` recomputes the
    parsed figures at the run's parameters (a context without a fault); ``verdict`` reads the log's own
    GREEN or RED. ``constants`` are what ``--source`` reads from the program (each declared exactly once),
    and ``derived`` gives, from them, the values some must have for the gate's kernels to apply.
    ``notes`` adds to the report what the log states but nxgates cannot compare (e.g. the NX machine's
    worker count).
    """

    name: str  #: the gate, as messages about its logs name it
    lines: tuple[LineSpec, ...]
    figures: Callable[[ParsedLog, RunContext], list[Figure]]
    verdict: Callable[[ParsedLog], str]
    constants: tuple[SourceConst, ...] = ()
    derived: Callable[[dict[str, int]], dict[str, int]] = lambda values: {}
    notes: Callable[[ParsedLog, GateOutput], None] = lambda log, out: None
