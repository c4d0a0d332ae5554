"""The public API for writing a gate: what a gate module declares and what its run produces.

A gate is a module exposing ``GATE = GateDef(...)``: its parameters (:class:`IntParam`,
:class:`ChoiceParam`), the names of its checks, its planted faults (:class:`Fault`) and a ``run`` function
that gets a :class:`RunContext` and returns a :class:`GateOutput`. Built-in gates live under
``nxgates/gates/`` with their defaults in gates.toml; a gate from another package also declares its default
table ``TABLE`` and registers its module in the entry-point group ``nxgates.gates`` (see
:mod:`nxgates.plugins` and docs/plugins.md). The runner, the CLI and the reports see a
gate only through these types, so everything ``nxgates run`` offers works the same for every gate.

A gate reproducing a seed program may also declare how that program prints its run (:class:`SeedLog`), so
``nxgates crosscheck`` can read a real run's stdout and recompute every figure of it.

Stable for plugins: the names in ``__all__``. ``validate`` and ``run`` report bad parameters by raising
:class:`ConfigError` (one line, exit 2).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from nxgates.errors import ConfigError, GateTimeout

__all__ = ["ChoiceParam", "ConfigError", "Fault", "Figure", "GateDef", "GateOutput", "InputArray", "InputSpec",
           "IntParam", "LineSpec", "ParsedLog", "RunContext", "SeedLog", "SourceConst"]

ParamValue = int | str
_INT = r"[+-]?[0-9]{1,30}"  #: compiled on first use (re caches it): only --set values need it
#: what a seed program prints for an i64: ASCII digits, no leading zero, no sign but a minus on a non-zero value,
#: at most 19 digits (range-checked in :meth:`LineSpec.match`)
_LOG_INT = r"(?:0|-?[1-9][0-9]{0,18})"
_I64 = range(-(1 << 63), 1 << 63)


# Start-up: every method a dataclass generates is compiled at import, ~0.1 ms apiece at every
# start of the command line. So the small immutable records are NamedTuples (immutable, with a repr and ==,
# at a fraction of the cost); the others are dataclasses without an __eq__ (nothing compares them by
# value) and, where they hold functions or a run's state, without a __repr__. GateDef stays a frozen
# dataclass: ``dataclasses.replace`` is how one is varied.
class IntParam(NamedTuple):
    """An integer parameter with an inclusive range; ``--set`` values must parse as base-10 integers."""

    doc: str
    min: int = 1
    max: int = 1 << 31
    default: int | None = None  #: a parameter added later has one, so a gates.toml written before it still loads

    kind = "int"

    def parse(self, key: str, text: str) -> int:
        text = text.strip()
        if not re.fullmatch(_INT, text):  # no floats, hex, underscores or other spellings int() would take
            if re.fullmatch(r"[+-]?[0-9]+", text, flags=re.ASCII):  # an integer, too long to be in range
                raise ConfigError(f"{key}={text[:40]}... ({len(text)} digits) is out of range [{self.min}, {self.max}]")
            raise ConfigError(f"{key} takes an integer, got {text!r}")
        return self.check(key, int(text, 10))

    def check(self, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} takes an integer, got {value!r}")
        if not self.min <= value <= self.max:
            raise ConfigError(f"{key}={value} is out of range [{self.min}, {self.max}]")
        return value

    def describe(self) -> str:
        return f"int in [{self.min}, {self.max}]"


class ChoiceParam(NamedTuple):
    """A string parameter restricted to named choices."""

    doc: str
    choices: tuple[str, ...]
    default: str | None = None  #: a parameter added later has one, so a gates.toml written before it still loads

    kind = "str"

    def parse(self, key: str, text: str) -> str:
        return self.check(key, text.strip())

    def check(self, key: str, value: Any) -> str:
        if not isinstance(value, str) or value not in self.choices:
            raise ConfigError(f"{key} must be one of {', '.join(self.choices)}, got {value!r}")
        return value

    def describe(self) -> str:
        return "one of " + "|".join(self.choices)


Param = IntParam | ChoiceParam


class Fault(NamedTuple):
    """A named, deliberately planted defect; the gate must FAIL, at least through ``caught_by``."""

    doc: str
    caught_by: tuple[str, ...]


class Check(NamedTuple):
    """One PASS/FAIL line of a gate."""

    name: str
    passed: bool
    detail: str = ""
    seconds: float = 0.0


class Line(NamedTuple):
    """An information line; ``level`` is ``info`` (always), ``detail`` (hidden by -q) or ``verbose`` (-v)."""

    text: str
    level: str = "info"


class Lines(NamedTuple):
    """Lines made only where they are shown: ``make()`` formats their texts then. A gate's thousands of
    per-cell ``verbose`` lines would otherwise cost more to format than the gradcheck they report."""

    make: Callable[[], Iterable[str]]
    level: str = "verbose"


class Progress:
    """Progress reporting seen by gates; the CLI swaps in a rich bar on a terminal. The default is silent."""

    def start(self, label: str, total: int) -> None:
        """Begin a unit of work of ``total`` steps."""

    def advance(self, steps: int = 1) -> None:
        """Record ``steps`` more steps done."""

    def stop(self) -> None:
        """End the current unit of work."""


@dataclass(eq=False, repr=False)
class RunContext:
    """Everything a gate run gets from the runner."""

    params: dict[str, ParamValue]
    fault: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    deadline: float | None = None
    progress: Progress = field(default_factory=Progress)

    def remaining(self) -> float | None:
        """Seconds left before the gate's deadline (None: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def check_time(self) -> None:
        """Called between units of work: raises :class:`GateTimeout` once the deadline has passed."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise GateTimeout("timed out")


class GateOutput:
    """What a gate run reports: ordered lines and checks, metrics for JSON, the verdict texts, a digest.

    ``digest`` is a stable fingerprint of the numbers, compared across ``--repeat`` runs. A gate may set it
    to a function returning that string: it is then called when the digest is first read, so a single run,
    which never reads it, does not pay for hashing (importing hashlib alone is ~3 ms of start-up).
    """

    def __init__(self, items: list[Line | Lines | Check] | None = None, metrics: dict[str, Any] | None = None,
                 green: str = "GREEN", red: str = "RED", digest: str | Callable[[], str] = ""):
        self.items = [] if items is None else items
        self.metrics = {} if metrics is None else metrics
        self.green = green
        self.red = red
        self.digest = digest
        self._clock = time.perf_counter()

    @property
    def digest(self) -> str:
        if callable(self._digest):
            self._digest = self._digest()
        return self._digest

    @digest.setter
    def digest(self, value: str | Callable[[], str]) -> None:
        self._digest = value

    def info(self, text: str) -> None:
        """A line always shown (the seed's own output lines)."""
        self.items.append(Line(text, "info"))

    def detail(self, text: str) -> None:
        """A line hidden by ``-q`` (e.g. the cells that failed)."""
        self.items.append(Line(text, "detail"))

    def verbose(self, text: str) -> None:
        """A line shown only with ``-v`` (e.g. every cell)."""
        self.items.append(Line(text, "verbose"))

    def verbose_lines(self, make: Callable[[], Iterable[str]]) -> None:
        """Lines shown only with ``-v``, formatted by ``make()`` only then (see :class:`Lines`)."""
        self.items.append(Lines(make, "verbose"))

    def lines(self) -> Iterator[Line | Check]:
        """Every line and check in order, with :class:`Lines` made into their lines."""
        for item in self.items:
            if isinstance(item, Lines):
                yield from (Line(text, item.level) for text in item.make())
            else:
                yield item

    def check(self, name: str, passed: bool, detail: str = "", seconds: float | None = None) -> Check:
        """Record a PASS/FAIL line; its time is the work since the previous check (or the start).

        ``passed`` must be a boolean (numpy's included); anything else is a FAIL and breaks the gate's contract.
        """
        now = time.perf_counter()
        if not _is_boolean(passed):  # "False" or 1 is not a verdict
            self.__dict__.setdefault("_not_boolean", {})[name] = type(passed).__name__
            passed = False
        c = Check(name, bool(passed), detail, now - self._clock if seconds is None else seconds)
        self._clock = now
        self.items.append(c)
        return c

    @property
    def checks(self) -> list[Check]:
        return [i for i in self.items if isinstance(i, Check)]

    # Fingerprints: the figures ``nxgates run --baseline`` pins (see docs/baselines.md).
    def fingerprint(self, name: str, value: int | float | str | bool) -> None:
        """Pin a scalar figure (a loss, a count, a digest) so ``--baseline`` fails when it moves.

        Compared exactly: an int digit for digit, a float bit for bit (its repr round-trips), a str as text.
        """
        if hasattr(value, "item") and not isinstance(value, str):  # a numpy scalar: its Python value
            value = value.item()
        if not isinstance(value, int | float | str):
            raise TypeError(f"fingerprint {name!r}: takes an int, float, str or bool, got {type(value).__name__}")
        self._add_figure(name, value)

    def fingerprint_cells(self, name: str, cells: Any) -> None:
        """Pin an array figure, every cell of it (e.g. each analytic gradient cell).

        A copy is kept and hashed only when the fingerprints are read (``--baseline``, ``--json``), so a
        plain run pays for neither hashlib nor the digest. What is stored is described by
        :func:`nxgates.baseline.cells.cell_fingerprint`: a sha256 of dtype, shape and bytes, per-block
        digests that say where cells moved, and the values themselves for small arrays.
        """
        import numpy as np

        array = np.array(cells, copy=True)
        if array.dtype.hasobject:
            raise TypeError(f"fingerprint {name!r}: cells must be numbers, got dtype {array.dtype}")
        self._add_figure(name, _PendingCells(array))

    @property
    def fingerprints(self) -> dict[str, Any]:
        """The pinned figures by name, in the order recorded; cells as their digest records."""
        figures = self.__dict__.get("_figures", {})
        for name, value in figures.items():
            if isinstance(value, _PendingCells):
                from nxgates.baseline.cells import cell_fingerprint

                figures[name] = cell_fingerprint(value.array)
        return dict(figures)

    def _add_figure(self, name: str, value: Any) -> None:
        figures = self.__dict__.setdefault("_figures", {})
        if not name or name in figures:
            raise ValueError(f"fingerprint {name!r}: each figure needs its own, non-empty name")
        figures[name] = value


def _is_boolean(value: Any) -> bool:
    """A Python bool or a numpy boolean scalar (what a comparison of arrays gives); nothing else."""
    if isinstance(value, bool):
        return True
    dtype = getattr(value, "dtype", None)
    return dtype is not None and dtype.kind == "b" and getattr(value, "ndim", 1) == 0


class Variant(NamedTuple):
    """Another configuration ``nxgates selftest`` runs a gate and each of its faults under (e.g. an executor).

    ``session`` is entered around those runs (e.g. one cluster they share, so the selftest stays cheap).
    """

    label: str
    params: dict[str, ParamValue]
    session: Callable[[], AbstractContextManager] = contextlib.nullcontext


# ---- a seed program's log, for ``nxgates crosscheck`` ----------------------------------------------------


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


@dataclass(frozen=True, eq=False, repr=False)
class GateDef:
    """A gate module's declaration. ``run`` must be deterministic for given params and fault.

    ``checks`` names every check ``run`` may record (``GateOutput.check``), in order; each fault's
    ``caught_by`` names checks from it; ``run`` plants ``ctx.fault`` when it is set and must then FAIL.
    """

    params: dict[str, Param]
    checks: tuple[str, ...]
    run: Callable[[RunContext], GateOutput]
    faults: dict[str, Fault] = field(default_factory=dict)
    #: cross-parameter validation and resource estimates; raises ConfigError / ResourceError
    validate: Callable[[dict[str, ParamValue]], None] = lambda params: None
    #: extra `run` options this gate understands (e.g. save_grads), beyond --set/--preset
    options: tuple[str, ...] = ()
    #: more configurations the selftest proves the gate under (computed when the selftest runs)
    selftest_variants: Callable[[], tuple[Variant, ...]] = lambda: ()
    #: the seed program's log format, for ``nxgates crosscheck``; a function, so a run never imports it
    seed_log: Callable[[], SeedLog] | None = None
    #: the tensors a run computes from, for ``nxgates export`` and ``nxgates run --inputs`` (a gate that
    #: declares them also lists "inputs" in ``options``, and reads them from ``ctx.options["inputs"]``)
    inputs: InputSpec | None = None
    #: why ``fault`` cannot change anything at these parameters (planting it there is a usage error, not a
    #: green run), or None where it can and a check must catch it
    fault_applies: Callable[[str, dict[str, ParamValue]], str | None] = lambda fault, params: None
    #: declared checks a run records only when an option asks for them (parallel-grad's T4 with
    #: ``--compare-grads``); every other declared check is recorded by every run that finishes
    optional_checks: tuple[str, ...] = ()


class _PendingCells(NamedTuple):
    """An array figure whose digest is made only when the fingerprints are read."""

    array: Any


# ---- a gate's input tensors, for ``nxgates export`` and ``nxgates run --inputs`` -------------------------

#: the element types an input array may have: Q20 fixed point in int64, or float32
INPUT_DTYPES = {"q20": "int64", "float32": "float32"}


class InputArray(NamedTuple):
    """One named input tensor. ``axes`` gives its shape: each axis a parameter's name (the array's size
    along it sets that parameter, e.g. ``("B", "D")``) or a fixed length."""

    name: str
    dtype: str  #: a key of :data:`INPUT_DTYPES`
    axes: tuple[str | int, ...]
    doc: str = ""

    def shape(self, params: dict[str, ParamValue]) -> tuple[int, ...]:
        """The shape the parameters give (a raw ``NAME.bin`` is read in it)."""
        return tuple(int(params[a]) if isinstance(a, str) else a for a in self.axes)


class InputSpec(NamedTuple):
    """The arrays a gate computes from. ``make`` gives them at given parameters (what ``nxgates export``
    writes); ``admit`` refuses values the gate's arithmetic cannot take (raises :class:`ConfigError` naming
    the array), beyond the dtype, shape and finiteness checks every input gets."""

    arrays: tuple[InputArray, ...]
    make: Callable[[dict[str, ParamValue]], dict[str, Any]]
    admit: Callable[[dict[str, Any], dict[str, ParamValue]], None] = lambda arrays, params: None

    @property
    def sizes(self) -> tuple[str, ...]:
        """The parameters the arrays' shapes determine, in order of first appearance."""
        return tuple(dict.fromkeys(a for arr in self.arrays for a in arr.axes if isinstance(a, str)))
