"""The selftest's engine: every gate run clean (must pass), then with each of its planted faults (must fail,
caught by the checks the fault names), under each of the gate's selftest variants."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from nxgates.gatekit import ParamValue, Variant
from nxgates.registry import GateEntry
from nxgates.runner import GateReport, run_gate


class KillRow(NamedTuple):  # immutable: a NamedTuple costs start-up less than a dataclass
    """One selftest row: a gate run clean (``fault`` None, must pass) or with a planted fault (must fail)."""

    gate: str
    fault: str | None
    report: GateReport
    expected: tuple[str, ...] = ()
    variant: str = ""  #: the selftest variant's label ("" = the gate's defaults)

    @property
    def failed_checks(self) -> list[str]:
        return [c.name for c in self.report.output.checks if not c.passed]

    @property
    def ok(self) -> bool:
        if self.fault is None:
            return self.report.passed
        failed = set(self.failed_checks)
        return self.report.error is None and not self.report.passed and failed >= set(self.expected)


def selftest(entries: list[GateEntry], params: dict[str, dict[str, ParamValue]], timeout: float | None,
             on_row: Callable[[KillRow], None] | None = None, rows: list[KillRow] | None = None) -> list[KillRow]:
    """Every gate clean, then with each of its faults: the liar-kill table.

    Rows are appended to ``rows`` as they finish, so a caller stopped midway still has the finished ones.
    """
    rows = [] if rows is None else rows
    for entry in entries:
        faults = [(None, None), *entry.gate.faults.items()]
        for variant in (Variant("", {}), *entry.gate.selftest_variants()):
            with variant.session():
                for fault, spec in faults:
                    report = run_gate(entry, {**params[entry.name], **variant.params}, fault=fault, timeout=timeout)
                    row = KillRow(entry.name, fault, report, spec.caught_by if spec else (), variant.label)
                    rows.append(row)
                    if on_row is not None:
                        on_row(row)
    return rows
