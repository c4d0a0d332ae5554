"""What a gate run gets (:class:`RunContext`) and what it reports (:class:`GateOutput`): lines, checks,
metrics, verdict texts, a digest and the figures a baseline pins."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from nxgates.errors import GateTimeout
from nxgates.gatekit.params import ParamValue


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

    def advance(self, n: int) -> None:
        """``n`` more units of work are done: the gate's progress bar moves (a :class:`nxgates.core.pacing.Pacer`,
        so the core's long loops take a run's context without knowing it)."""
        self.progress.advance(n)

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
        self._not_boolean: dict[str, str] = {}  #: checks given something else than a boolean: name -> its type
        self._figures: dict[str, Any] = {}  #: the pinned figures by name (cells kept until first read)

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
            self._state("_not_boolean")[name] = type(passed).__name__
            passed = False
        c = Check(name, bool(passed), detail, now - self._clock if seconds is None else seconds)
        self._clock = now
        self.items.append(c)
        return c

    @property
    def non_boolean_checks(self) -> dict[str, str]:
        """The checks recorded with something else than a boolean, each with the type it was given: the
        check contract (:mod:`nxgates.contract`) fails the run on them."""
        return dict(self._state("_not_boolean"))

    def _state(self, name: str) -> dict[str, Any]:
        """One of this output's own dicts; made on first use where a subclass's ``__init__`` skipped ours."""
        if not hasattr(self, name):
            setattr(self, name, {})
        return getattr(self, name)

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
        figures = self._state("_figures")
        for name, value in figures.items():
            if isinstance(value, _PendingCells):
                from nxgates.baseline.cells import cell_fingerprint

                figures[name] = cell_fingerprint(value.array)
        return dict(figures)

    def _add_figure(self, name: str, value: Any) -> None:
        figures = self._state("_figures")
        if not name or name in figures:
            raise ValueError(f"fingerprint {name!r}: each figure needs its own, non-empty name")
        figures[name] = value


def _is_boolean(value: Any) -> bool:
    """A Python bool or a numpy boolean scalar (what a comparison of arrays gives); nothing else."""
    if isinstance(value, bool):
        return True
    dtype = getattr(value, "dtype", None)
    return dtype is not None and dtype.kind == "b" and getattr(value, "ndim", 1) == 0


class _PendingCells(NamedTuple):
    """An array figure whose digest is made only when the fingerprints are read."""

    array: Any
