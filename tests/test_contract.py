"""The gate contract: declared checks reported once each with a real boolean, a GateOutput, JSON metrics."""

import json
import math

import numpy as np
import pytest

from nxgates import contract
from nxgates.gatekit import GateDef, GateOutput


def gate(*checks: str) -> GateDef:
    return GateDef(params={}, checks=checks, run=lambda ctx: GateOutput())


def output(*checks) -> GateOutput:
    out = GateOutput()
    for name, passed in checks:
        out.check(name, passed)
    return out


def test_a_gate_that_keeps_its_contract():
    assert contract.broken_checks(gate("a", "b"), output(("a", True), ("b", np.bool_(False)))) is None


@pytest.mark.parametrize("checks, named", [
    ((("a", True),), "'b' not reported"),
    ((("a", True), ("b", True), ("c", True)), "'c' is not declared"),
    ((("a", True), ("a", True), ("b", True)), "'a' was reported 2 times"),
    ((("a", "False"), ("b", True)), "'a' was given a str"),
    ((("a", 1), ("b", True)), "'a' was given a int"),
    ((), "'a', 'b' not reported"),
])
def test_each_break_is_named(checks, named):
    assert named in contract.broken_checks(gate("a", "b"), output(*checks))


def test_a_non_boolean_is_a_fail():
    assert output(("a", "True")).checks[0].passed is False


def test_only_a_check_declared_optional_may_be_left_out():
    optional = GateDef(params={}, checks=("a", "b"), run=lambda ctx: GateOutput(), optional_checks=("b",))
    assert contract.broken_checks(optional, output(("a", True))) is None
    assert contract.broken_checks(optional, output(("a", True), ("b", False))) is None
    assert "'a' not reported" in contract.broken_checks(optional, output(("b", True)))
    assert "'b' was reported 2 times" in contract.broken_checks(optional, output(("a", True), ("b", True),
                                                                                 ("b", True)))


@pytest.mark.parametrize("gate_name", ["lora", "parallel-grad", "lora-train"])
def test_the_built_in_gates_declare_what_an_option_adds_as_optional(gate_name):
    from nxgates import registry

    entry = registry.load().resolve(gate_name)
    assert len(entry.gate.optional_checks) == 1 and entry.gate.optional_checks[0] in entry.gate.checks


def test_wrong_results_and_metrics():
    assert contract.wrong_output(GateOutput()) is None
    assert "returned NoneType" in contract.wrong_output(None)
    assert contract.not_json({"x": [1, 2.5, "s", None, {"y": True}]}) is None
    assert "numpy.int64" in contract.not_json({"n": np.int64(3)})
    assert "not a string" in contract.not_json({1: 2})


def test_non_finite_floats_become_null():
    doc = contract.finite_or_null({"x": math.nan, "y": [1.0, -math.inf]})
    assert json.dumps(doc, allow_nan=False) == '{"x": null, "y": [1.0, null]}'
