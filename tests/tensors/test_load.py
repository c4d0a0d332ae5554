"""``run --inputs``: a gate's parameters and arrays from the user's tensors, every refusal one exact line."""

import numpy as np
import pytest

from nxgates.errors import ConfigError
from nxgates.gatekit import GateDef, GateOutput, InputArray, InputSpec, IntParam
from nxgates.registry import GateEntry
from nxgates.tensors import load

admitted = []


def admit(arrays, params):
    admitted.append((sorted(arrays), dict(params)))
    if arrays["a"][0, 0] == 99:
        raise ConfigError("array a: 99 is refused")


SPEC = InputSpec(arrays=(InputArray("a", "q20", ("N", "M")), InputArray("b", "float32", ("M",))),
                 make=lambda params: {}, admit=admit)


def validate(params):
    if params["N"] > params["M"]:
        raise ConfigError("N must not exceed M")


def gate(inputs=SPEC):
    return GateDef(params={"N": IntParam("rows", 1, 4), "M": IntParam("columns", 1, 8), "steps": IntParam("steps")},
                   checks=("c",), run=lambda ctx: GateOutput(), validate=validate, options=("inputs",),
                   inputs=inputs)


def entry(inputs=SPEC):
    return GateEntry("g", "g", "a gate", ("gee",), _gate=gate(inputs), _defaults={"N": 1, "M": 1, "steps": 5},
                     _presets={"seed": {}})


PARAMS = {"g": {"N": 1, "M": 1, "steps": 5}, "other": {"K": 7}}


def arrays(n=2, m=3):
    return {"a": np.arange(n * m, dtype=np.int64).reshape(n, m), "b": np.linspace(0, 1, m, dtype=np.float32)}


def npz(tmp_path, **kwargs):
    path = str(tmp_path / "in.npz")
    np.savez(path, **arrays(**kwargs))
    return path


def refusal(fn, *args):
    with pytest.raises(ConfigError) as exc:
        fn(*args)
    return str(exc.value)


# --- the declaration ------------------------------------------------------------------------------------


def test_the_declared_inputs():
    assert load.input_spec(entry(), "--inputs") is SPEC


def test_a_gate_without_inputs():
    assert refusal(load.input_spec, entry(None), "--x") == "--x: gate 'g' declares no input tensors"


@pytest.mark.parametrize("inputs", [
    (InputArray("a", "q20", ("N",)),),
    InputSpec(arrays=(), make=lambda p: {}),
    InputSpec(arrays=(("a", "q20", ("N",)),), make=lambda p: {}),
    InputSpec(arrays=(InputArray("a", "q20", ("N",)), InputArray("b", "int64", ("N",))), make=lambda p: {}),
])
def test_a_malformed_declaration(inputs):
    assert refusal(load.input_spec, entry(inputs), "--inputs") == (
        "--inputs: gate 'g': GateDef.inputs must be an InputSpec of InputArrays with dtypes q20, float32")


# --- inputs_for_run -------------------------------------------------------------------------------------


def test_inputs_take_one_gate(tmp_path):
    path = npz(tmp_path)
    assert refusal(load.inputs_for_run, [entry(), entry()], PARAMS, (), path) == \
        "--inputs takes the tensors of one gate, not 2"
    assert refusal(load.inputs_for_run, [], PARAMS, (), path) == "--inputs takes the tensors of one gate, not 0"


def test_a_gate_without_inputs_is_named_with_the_flag(tmp_path):
    assert refusal(load.inputs_for_run, [entry(None)], PARAMS, (), npz(tmp_path)) == \
        "--inputs: gate 'g' declares no input tensors"


def test_an_npz_gives_the_sizes_and_leaves_the_other_parameters(tmp_path):
    admitted.clear()
    params = {"g": dict(PARAMS["g"]), "other": {"K": 7}}
    chosen, got = load.inputs_for_run([entry()], params, (), npz(tmp_path))
    assert chosen == {"g": {"N": 2, "M": 3, "steps": 5}, "other": {"K": 7}}
    assert params == PARAMS  # not changed in place
    assert list(got) == ["a", "b"]
    np.testing.assert_array_equal(got["a"], arrays()["a"])
    assert admitted == [(["a", "b"], {"N": 2, "M": 3, "steps": 5})]


def test_a_set_that_agrees_with_the_arrays_is_fine(tmp_path):
    params = {"g": {"N": 2, "M": 3, "steps": 5}}
    chosen, _ = load.inputs_for_run([entry()], params, ("N=2", "g.M=3"), npz(tmp_path))
    assert chosen["g"] == {"N": 2, "M": 3, "steps": 5}


@pytest.mark.parametrize("given", ["N=3", "g.N=3", "gee.N=3"])
def test_a_set_that_contradicts_the_arrays(tmp_path, given):
    path = npz(tmp_path)
    params = {"g": {"N": 3, "M": 3, "steps": 5}}
    assert refusal(load.inputs_for_run, [entry()], params, (given,), path) == \
        f"--set N=3 contradicts --inputs {path}: array a gives N=2"


def test_a_set_for_another_gate_is_not_a_contradiction(tmp_path):
    params = {"g": {"N": 3, "M": 3, "steps": 5}}
    chosen, _ = load.inputs_for_run([entry()], params, ("other.N=3", "steps=9"), npz(tmp_path))
    assert chosen["g"]["N"] == 2


def test_a_size_outside_the_parameters_range(tmp_path):
    path = npz(tmp_path, n=5, m=6)
    assert refusal(load.inputs_for_run, [entry()], PARAMS, (), path) == \
        f"--inputs {path}: array a: N=5 is out of range [1, 4]"


def test_sizes_the_gate_does_not_validate(tmp_path):
    path = npz(tmp_path, n=3, m=2)
    assert refusal(load.inputs_for_run, [entry()], PARAMS, (), path) == f"g: --inputs {path}: N must not exceed M"


def test_shapes_that_disagree(tmp_path):
    path = str(tmp_path / "in.npz")
    np.savez(path, a=np.zeros((2, 3), np.int64), b=np.zeros(4, np.float32))
    assert refusal(load.inputs_for_run, [entry()], PARAMS, (), path) == \
        f"--inputs {path}: array b: shape (4,) gives M=4, but array a gives M=3"


def test_nan_in_a_float32_array(tmp_path):
    path = str(tmp_path / "in.npz")
    np.savez(path, a=np.zeros((2, 3), np.int64), b=np.array([0, np.nan, 1], np.float32))
    assert refusal(load.inputs_for_run, [entry()], PARAMS, (), path) == \
        f"--inputs {path}: array b: 1 value(s) are NaN or Inf (first at (1,): nan)"


def test_values_the_gate_does_not_admit(tmp_path):
    path = str(tmp_path / "in.npz")
    a = arrays()["a"]
    a[0, 0] = 99
    np.savez(path, a=a, b=arrays()["b"])
    assert refusal(load.inputs_for_run, [entry()], PARAMS, (), path) == f"--inputs {path}: array a: 99 is refused"


def raw(tmp_path, a, b):
    d = tmp_path / "dumps"
    d.mkdir()
    a.astype("<i8").tofile(d / "a.bin")
    b.astype("<f4").tofile(d / "b.bin")
    return str(d)


def test_raw_dumps_take_their_shapes_from_the_parameters(tmp_path):
    admitted.clear()
    d = raw(tmp_path, **arrays())
    params = {"g": {"N": 2, "M": 3, "steps": 5}}
    chosen, got = load.inputs_for_run([entry()], params, ("N=2",), d)
    assert chosen == params
    np.testing.assert_array_equal(got["a"], arrays()["a"])
    np.testing.assert_array_equal(got["b"], arrays()["b"])
    assert admitted == [(["a", "b"], params["g"])]


def test_raw_dumps_are_checked_for_length_nan_and_admission(tmp_path):
    a, b = arrays()["a"], arrays()["b"]
    b[2] = np.inf
    d = raw(tmp_path, a, b)
    params = {"g": {"N": 2, "M": 3, "steps": 5}}
    assert refusal(load.inputs_for_run, [entry()], params, (), d) == \
        f"--inputs {d}: array b: 1 value(s) are NaN or Inf (first at (2,): inf)"
    params = {"g": {"N": 2, "M": 2, "steps": 5}}
    assert refusal(load.inputs_for_run, [entry()], params, (), d) == \
        f"--inputs {d}: array a: a.bin has 48 bytes, expected 32 (int64 of shape (N=2, M=2))"


def test_raw_dumps_the_gate_does_not_admit(tmp_path):
    a = arrays()["a"]
    a[0, 0] = 99
    d = raw(tmp_path, a, arrays()["b"])
    params = {"g": {"N": 2, "M": 3, "steps": 5}}
    assert refusal(load.inputs_for_run, [entry()], params, (), d) == f"--inputs {d}: array a: 99 is refused"
