"""The JSON document's top level: what ``passed`` means, and the mark of an interrupted run."""

import json

from nxgates import __version__
from nxgates.gatekit import GateOutput
from nxgates.reporting.json_report import json_text, to_json
from nxgates.runner import GateReport


def report(passed):
    out = GateOutput()
    out.check("c", passed, "d")
    return GateReport("g", {"N": 1}, out, 0.1234567)


def test_passed_needs_every_gate_and_at_least_one():
    assert to_json([report(True), report(True)])["passed"] is True
    assert to_json([report(True), report(False)])["passed"] is False
    assert to_json([])["passed"] is False


def test_an_interrupted_run_never_passed_and_says_so():
    doc = to_json([report(True)], interrupted=True)
    assert doc["passed"] is False and doc["interrupted"] is True
    assert "interrupted" not in to_json([report(True)])


def test_the_text_is_indented_json_with_one_trailing_newline():
    text = json_text([report(True)])
    assert text.endswith("}\n") and not text.endswith("\n\n") and text.startswith('{\n  "nxgates"')
    (gate,) = json.loads(text)["gates"]
    assert json.loads(text)["nxgates"] == __version__
    assert gate == {"name": "g", "passed": True, "seconds": 0.123457, "params": {"N": 1}, "fault": None,
                    "error": None, "checks": [{"name": "c", "passed": True, "detail": "d"}], "metrics": {}}


def test_the_environment_is_a_new_top_level_key_with_each_gates_execution():
    out = GateOutput()
    out.check("c", True)
    out.metrics = {"executor": "process"}
    doc = to_json([GateReport("g", {"N": 1, "workers": 3, "executor": "auto"}, out, 0.1)])
    assert list(doc) == ["nxgates", "passed", "gates", "environment"]
    env = doc["environment"]
    assert env["nxgates"] == __version__ and {"python", "numpy", "blas", "os", "cpu"} <= env.keys()
    assert env["gates"] == [{"name": "g", "executor": "process", "workers": 3}]


def test_a_gate_that_pins_figures_adds_them_and_its_label():
    out = GateOutput()
    out.check("c", True)
    out.fingerprint("loss", 7)
    (gate,) = to_json([GateReport("g", {"N": 1}, out, 0.1)])["gates"]
    assert gate["label"] == "g[N=1]" and gate["fingerprints"] == {"loss": 7}
    assert "fingerprints" not in to_json([report(True)])["gates"][0]
