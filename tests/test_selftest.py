"""The selftest's engine on a stand-in gate: a clean run must pass, a planted fault must be caught by the
checks it names."""

from nxgates.gatekit import Fault, GateDef, GateOutput
from nxgates.plan import PlannedGate, RunPlan, RunRequest
from nxgates.registry import GateEntry
from nxgates.selftest import selftest


def plan_of(entry: GateEntry) -> RunPlan:
    return RunPlan(RunRequest((entry.name,), timeout=None), [PlannedGate(entry, {}, {})])


def entry(catches: bool) -> GateEntry:
    def run(ctx):
        out = GateOutput()
        out.check("sum", ctx.fault is None or not catches)
        out.fingerprint("total", 2 if ctx.fault else 1)  # the fault always moves the figure
        return out

    gate = GateDef(params={}, checks=("sum",), run=run, faults={"off-by-one": Fault("adds one", ("sum",))})
    return GateEntry.of("g", gate, {})


def test_a_gate_that_catches_its_fault():
    seen = []
    rows = selftest(plan_of(entry(catches=True)), on_row=seen.append)
    assert seen == rows
    assert [(r.fault, r.ok, r.failed_checks) for r in rows] == [(None, True, []), ("off-by-one", True, ["sum"])]


def test_a_fault_no_check_catches_is_a_missed_row():
    clean, planted = selftest(plan_of(entry(catches=False)))
    assert clean.ok and not planted.ok and planted.failed_checks == ["liar-kill"]
    assert "fault off-by-one MISSED: it moved total" in planted.report.output.checks[-1].detail
