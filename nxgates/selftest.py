"""The selftest's engine: every gate run clean (must pass), then with each of its planted faults (must fail,
caught by the checks the fault names), under each of the gate's selftest variants."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from nxgates.errors import NxError
from nxgates.gatekit import Variant
from nxgates.plan import RunPlan, fault_cannot_show, refused_report
from nxgates.runner import REFUSED, GateReport


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


def selftest(plan: RunPlan, on_row: Callable[[KillRow], None] | None = None,
             rows: list[KillRow] | None = None) -> list[KillRow]:
    """Every planned gate clean, then with each of its faults: the liar-kill table.

    Each run goes through the plan as ``nxgates run`` would run it, so a fault the checks miss, or one that
    changes nothing at these parameters, is a row that was not caught. Rows are appended to ``rows`` as they
    finish, so a caller stopped midway still has the finished ones.
    """
    rows = [] if rows is None else rows
    for gate in plan.gates:
        faults = [(None, None), *gate.entry.gate.faults.items()]
        for variant in (Variant("", {}), *gate.entry.gate.selftest_variants()):
            with variant.session():
                for fault, spec in faults:
                    params = {**gate.params, **variant.params}
                    why = None if fault is None else fault_cannot_show(gate.entry, fault, params)
                    if why is not None:
                        report = refused_report(gate.entry, params, fault, f"--inject {fault}: {why}")
                    else:
                        try:
                            report = plan.run(gate, fault=fault, extra_params=variant.params)
                        except NxError as exc:  # refused once running: a row that proves nothing
                            report = refused_report(gate.entry, params, fault, str(exc), REFUSED)
                    row = KillRow(gate.name, fault, report, spec.caught_by if spec else (), variant.label)
                    rows.append(row)
                    if on_row is not None:
                        on_row(row)
    return rows
