"""The run plan: everything checked before a gate starts, and the judgement of a planted fault (caught,
missed, or inert) that keeps every planted run from ending green."""

from __future__ import annotations

import pytest

from nxgates.errors import EXIT_FAIL, EXIT_USAGE, ConfigError
from nxgates.gatekit import Fault, GateDef, GateOutput
from nxgates.plan import LIAR_KILL, PlannedGate, RunPlan, RunRequest, moved_figures, plan_run
from nxgates.registry import GateEntry
from nxgates.runner import INERT, exit_code


def standin(*, caught: bool, moves: bool, pins: bool = True, calls: list | None = None) -> GateEntry:
    """A gate whose fault is caught by its check or not, and moves its pinned figure or not."""

    def run(ctx):
        if calls is not None:
            calls.append(ctx.fault)
        out = GateOutput()
        out.check("c", ctx.fault is None or not caught)
        if pins:
            out.fingerprint("figure", 2 if ctx.fault and moves else 1)
        else:
            out.digest = "moved" if ctx.fault and moves else "same"
        return out

    gate = GateDef(params={}, checks=("c",), run=run, faults={"f": Fault("a fault", ("c",))})
    return GateEntry.of("g", gate, {})


def planted(entry: GateEntry):
    plan = RunPlan(RunRequest(("g",), fault="f", timeout=None), [PlannedGate(entry, {}, {})])
    return plan.run(plan.gates[0])


def test_a_caught_fault_is_red_and_needs_no_second_run():
    calls: list = []
    report = planted(standin(caught=True, moves=True, calls=calls))
    assert calls == ["f"] and exit_code([report]) == EXIT_FAIL
    assert LIAR_KILL not in [c.name for c in report.output.checks]


def test_a_missed_fault_is_a_failed_liar_kill_check_naming_what_moved():
    calls: list = []
    report = planted(standin(caught=False, moves=True, calls=calls))
    assert calls == ["f", None]  # the same run without the fault, to compare with
    (kill,) = [c for c in report.output.checks if c.name == LIAR_KILL]
    assert not kill.passed and "fault f MISSED: it moved figure" in kill.detail
    assert report.error is None and exit_code([report]) == EXIT_FAIL


def test_an_inert_fault_is_a_usage_error_never_green():
    report = planted(standin(caught=False, moves=False))
    assert report.error_kind == INERT and "changes nothing at these parameters" in report.error
    assert exit_code([report]) == EXIT_USAGE and "NO PROOF" in report.verdict


@pytest.mark.parametrize("moves", [True, False])
def test_a_gate_that_pins_nothing_is_judged_by_its_digest(moves):
    report = planted(standin(caught=False, moves=moves, pins=False))
    assert exit_code([report]) == (EXIT_FAIL if moves else EXIT_USAGE)


def test_moved_figures_names_each_figure_that_differs():
    a, b = planted(standin(caught=True, moves=True)), planted(standin(caught=True, moves=False))
    assert moved_figures(a, b) == ["figure"] and moved_figures(a, a) == []


@pytest.mark.parametrize(("request_args", "message"), [
    ({"gates": ("parallel-grad",), "reduction": "tree", "sets": ("reduction=sequential",)},
     "--reduction tree contradicts --set reduction=sequential"),
    ({"gates": ("parallel-grad",), "executor": "thread", "sets": ("executor=process",)},
     "--executor thread contradicts --set executor=process"),
    ({"gates": ("lora",), "reports": {"--html": "-"}}, "--html -: this report is written to a file"),
    ({"gates": ("lora",), "reports": {"--summary": "-"}}, "--summary -: this report is written to a file"),
    ({"gates": ("lora",), "reports": {"--json": "-", "--junit": "-"}}, "--json - and --junit - cannot both"),
    ({"gates": ("parallel-grad",), "ulp": 2**23 + 1, "compare_grads": "g.npy"}, "--ulp 8388609: give 0"),
    ({"gates": ("lora",), "fault": "no-such"}, "has no fault 'no-such'"),
    ({"gates": ("lora",), "target": "m:f"}, "--target applies to none of: lora"),
    ({"gates": ("dp-train",), "fault": "completion-order", "sets": ("B=2",)}, "--inject completion-order: at B=2"),
])
def test_the_plan_refuses_before_anything_runs(request_args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=None) as caught:
        plan_run(RunRequest(**request_args))
    assert message in str(caught.value)


def test_a_shorthand_that_agrees_with_set_is_fine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = plan_run(RunRequest(("parallel-grad",), reduction="tree", sets=("reduction=tree",)))
    assert plan.gates[0].params["reduction"] == "tree"


def test_error_and_warning_lines_escape_what_a_user_typed(invoke):
    r = invoke("run", "lora", "--set", "T=2", "--set", "T=3", "--baseline", "b\n::stop-commands::x\n.json")
    assert r.exit_code == 2
    lines = r.stderr.splitlines()
    assert lines and not any(line.lstrip().startswith("::") for line in lines)
    assert "--baseline b\\n::stop-commands::x\\n.json: no such file" in r.stderr


def test_a_contract_breach_in_pytest_is_shown_as_lines_nobody_can_forge():
    from nxgates.pytest_plugin import _shown

    assert _shown("moved\n::warning::x\x1b[31m") == "moved\n\\x3a:warning::x\\x1b[31m"


def test_a_gate_that_takes_any_arrays_gets_every_array_of_the_npz(tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.chdir(tmp_path)
    np.savez(tmp_path / "a.npz", X=np.ones((4, 3), np.float32), W=np.eye(3, dtype=np.float32))
    plan = plan_run(RunRequest(("invariance",), ("static=W",), inputs=str(tmp_path / "a.npz")))
    assert sorted(plan.gates[0].options["inputs"]) == ["W", "X"]


def test_a_user_function_that_raises_is_the_gates_error_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    import numpy as np

    (tmp_path / "f.py").write_text("def f(X):\n    raise ValueError('no')\n")
    np.savez(tmp_path / "a.npz", X=np.ones((4, 3), np.float32))
    plan = plan_run(RunRequest(("invariance",), target=str(tmp_path / "f.py") + ":f", inputs=str(tmp_path / "a.npz")))
    report = plan.run(plan.gates[0])
    assert report.error_kind == "gate" and "ValueError: no" in report.error
    assert exit_code([report]) == EXIT_FAIL


def test_two_targets_never_share_a_baseline_entry():
    from nxgates.baseline.session import key_of
    from nxgates.runner import GateReport

    def report(target):
        out = GateOutput()
        out.metrics = {"target": target}
        return GateReport("invariance", {"B": 8}, out, 0.0)

    assert key_of(report("a.py:f")) != key_of(report("b.py:f")) != key_of(report(None))


@pytest.mark.parametrize(("moves", "result", "by"), [
    (False, "NO PROOF", "fault f changes nothing at these parameters"),
    (True, "MISSED", "fault f MISSED: it moved figure, yet every check passed"),
])
def test_the_kill_table_says_what_the_judgement_found(moves, result, by):
    import io

    from nxgates.reporting.console import Renderer
    from nxgates.reporting.selftest import KillTable
    from nxgates.selftest import selftest

    entry = standin(caught=False, moves=moves)
    rows = selftest(RunPlan(RunRequest(("g",), timeout=None), [PlannedGate(entry, {}, {})]))
    out = io.StringIO()
    KillTable(Renderer(out)).row(rows[1])
    assert out.getvalue().split()[1:4] == ["f", "fail", result.split()[0]] and by in out.getvalue()


@pytest.mark.parametrize("args", [("run", "lora"), ("selftest", "lora"), ("list",), ("show", "lora"),
                                  ("export", "lora", "--out", "x.npz"), ("crosscheck", "lora", "log.txt")])
def test_an_empty_config_path_is_one_line_in_every_command(invoke, args):
    r = invoke(*args, "--config", "")
    assert r.exit_code == 2 and r.stderr.strip() == "nxgates: error: --config: empty path"
