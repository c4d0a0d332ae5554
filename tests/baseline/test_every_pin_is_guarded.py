"""Every figure a gate pins is guarded: a baseline in which that one figure differs fails ``--baseline``'s
check with a line naming it. Run for every built-in gate at its defaults (each must pin figures) and for the
stand-in gate, so the proof is seen to bite; and end to end through ``nxgates run`` for each built-in gate."""

import copy
import json
import math
from typing import Any

import numpy as np
import pytest

from nxgates import registry
from nxgates.baseline import session
from nxgates.baseline.cells import is_cells
from nxgates.gatekit import GateDef, GateOutput
from nxgates.registry import GateEntry
from nxgates.runner import GateReport, run_gate

BUILT_IN = list(registry.load(registry.PACKAGED_CONFIG).gates)


def moved(value: Any) -> Any:
    """``value`` changed as little as its kind allows."""
    if is_cells(value):
        value = copy.deepcopy(value)
        value["sha256"] = "0" * 64
        value["blocks"][0] = "0" * 16
        if "values" in value:
            first = value["values"][0]
            value["values"][0] = (not first) if isinstance(first, bool) else first + 1
        return value
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return math.nextafter(value, math.inf)
    return value + "x"


def assert_each_figure_is_guarded(report: GateReport) -> None:
    figures = report.output.fingerprints
    doc = {"format": 1, "entries": {session.key_of(report): json.loads(json.dumps(session.entry_of(report)))}}
    (entry,) = doc["entries"].values()
    for name, value in figures.items():
        tampered = copy.deepcopy(doc)
        next(iter(tampered["entries"].values()))["fingerprints"][name] = moved(value)
        again = GateReport(report.name, report.params, _copy(report.output), report.seconds, label=report.label)
        session.add_check(again, tampered, "b.json", "fail")
        check = again.output.checks[-1]
        assert check.name == "baseline" and not check.passed, name
        assert any(line.startswith(f"{report.label} {name}: ") for line in check.detail.splitlines()), check.detail
    untouched = GateReport(report.name, report.params, _copy(report.output), report.seconds, label=report.label)
    session.add_check(untouched, doc, "b.json", "fail")
    assert untouched.output.checks[-1].passed, untouched.output.checks[-1].detail
    assert entry["fingerprints"] == json.loads(json.dumps(figures))


def _copy(out: GateOutput) -> GateOutput:
    again = copy.copy(out)
    again.items = list(out.items)
    return again


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_figure_a_built_in_gate_pins_is_guarded(name):
    entry = registry.load(registry.PACKAGED_CONFIG).gates[name]
    report = run_gate(entry, dict(entry.defaults))
    assert report.passed, report.output.checks
    assert report.output.fingerprints, f"{name} pins no figure"
    assert_each_figure_is_guarded(report)


#: per built-in gate, the figure the end-to-end test moves in the baseline file
MOVED_IN_FILE = {"lora": "A_analytic", "parallel-grad": "grads_sha256", "ta-gradcheck": "mlp_worst_permil",
                 "lora-train": "A_steps", "dp-train": "losses", "invariance": "output out"}


def test_every_built_in_gate_has_a_figure_moved_end_to_end():
    assert set(MOVED_IN_FILE) == set(BUILT_IN)


@pytest.mark.parametrize("name", sorted(MOVED_IN_FILE))
def test_a_figure_moved_in_the_file_fails_the_run_naming_it(invoke, tmp_path, name):
    """``--update-baseline``, then one figure of the file changed: ``--baseline`` fails, naming it."""
    r = invoke("run", name, "--update-baseline", "b.json", "-q")
    assert r.exit_code == 0, r.output
    r = invoke("run", name, "--baseline", "b.json", "-q")
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "b.json").read_text())
    (entry,) = doc["entries"].values()
    figure = MOVED_IN_FILE[name]
    entry["fingerprints"][figure] = moved(entry["fingerprints"][figure])
    (tmp_path / "b.json").write_text(json.dumps(doc))
    r = invoke("run", name, "--baseline", "b.json", "-q")
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith(" FAIL baseline -- 1 of ") and lines[0].endswith(" figures moved since b.json:")
    assert lines[1].startswith(f"{entry['label']} {figure}: "), lines


def test_every_figure_of_a_stand_in_is_guarded():
    def run(ctx):
        out = GateOutput()
        out.check("c", True)
        out.fingerprint("n", 3)
        out.fingerprint("x", 0.1)
        out.fingerprint("s", "abc")
        out.fingerprint("ok", True)
        out.fingerprint_cells("small", np.arange(6).reshape(2, 3))
        out.fingerprint_cells("large", np.arange(5000, dtype=np.float32))
        return out

    entry = GateEntry.of("pins", GateDef(params={}, checks=("c",), run=run), {})
    assert_each_figure_is_guarded(run_gate(entry, {}))
