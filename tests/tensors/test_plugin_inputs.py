"""A gate outside nxgates declares its inputs through gatekit and gets export and ``--inputs`` as is."""

import numpy as np
import pytest

from nxgates.core import q20
from nxgates.errors import ConfigError
from nxgates.gatekit import GateDef, GateOutput, InputArray, InputSpec, IntParam, RunContext
from nxgates.registry import GateEntry
from nxgates.tensors.load import inputs_for_run
from nxgates.tensors.write import export_arrays, write_npz


def _admit(arrays, params):
    q20.total(q20.mul(arrays["a"], arrays["b"], "a*b"), what="sum a*b")


INPUTS = InputSpec(
    arrays=(InputArray("a", "q20", ("N",)), InputArray("b", "q20", ("N",)), InputArray("w", "float32", (2, "N"))),
    make=lambda p: {"a": np.arange(p["N"], dtype=np.int64), "b": np.ones(p["N"], np.int64),
                    "w": np.zeros((2, p["N"]), np.float32)},
    admit=lambda arrays, params: _guarded(_admit, arrays, params),
)


def _guarded(f, arrays, params):
    try:
        f(arrays, params)
    except q20.Q20Overflow as exc:
        raise ConfigError(f"arrays a, b: {exc}") from None


def run(ctx: RunContext) -> GateOutput:
    arrays = ctx.options.get("inputs") or INPUTS.make(ctx.params)
    out = GateOutput()
    dot = int(q20.total(q20.mul(arrays["a"], arrays["b"], "a*b")))
    out.check("dot", True, str(dot))
    out.metrics = {"dot": dot}
    return out


GATE = GateDef(params={"N": IntParam("length", min=1, max=1 << 20)}, checks=("dot",), run=run,
               options=("inputs",), inputs=INPUTS)


def test_sizes_names_the_parameters_the_arrays_give():
    assert INPUTS.sizes == ("N",)
    assert INPUTS.arrays[2].shape({"N": 4}) == (2, 4)


def test_export_and_inputs_for_a_gate_defined_elsewhere(tmp_path):
    entry = GateEntry.of("dot", GATE, {"N": 3})
    arrays = export_arrays(INPUTS, {"N": 5})
    write_npz(str(tmp_path / "dot.npz"), "dot", {"N": 5}, arrays)
    params, given = inputs_for_run([entry], {"dot": {"N": 3}}, (), str(tmp_path / "dot.npz"))
    assert params["dot"]["N"] == 5 and np.array_equal(given["a"], np.arange(5))
    assert run(RunContext(params["dot"], options={"inputs": given})).metrics["dot"] == 10


def test_a_fixed_axis_and_the_gates_admit_are_enforced(tmp_path):
    entry = GateEntry.of("dot", GATE, {"N": 3})
    arrays = export_arrays(INPUTS, {"N": 3})
    np.savez(tmp_path / "fixed.npz", **{**arrays, "w": np.zeros((3, 3), np.float32)})
    with pytest.raises(ConfigError, match="array w: axis 0 has length 3, expected 2"):
        inputs_for_run([entry], {"dot": {"N": 3}}, (), str(tmp_path / "fixed.npz"))
    np.savez(tmp_path / "big.npz", **{**arrays, "a": np.full(3, 1 << 62, np.int64)})
    with pytest.raises(ConfigError, match=r"big.npz: arrays a, b: int64 overflow guard tripped in a\*b"):
        inputs_for_run([entry], {"dot": {"N": 3}}, (), str(tmp_path / "big.npz"))


def test_a_gate_without_inputs_says_so():
    entry = GateEntry.of("plain", GateDef(params={}, checks=("x",), run=run), {})
    with pytest.raises(ConfigError, match="gate 'plain' declares no input tensors"):
        inputs_for_run([entry], {"plain": {}}, (), "x.npz")


@pytest.mark.parametrize("inputs", [{"a": "q20"}, InputSpec((InputArray("a", "float64", ("N",)),), make=dict)])
def test_a_malformed_declaration_is_a_usage_error(inputs):
    entry = GateEntry.of("odd", GateDef(params={}, checks=("x",), run=run, inputs=inputs), {})
    with pytest.raises(ConfigError, match="gate 'odd': GateDef.inputs must be an InputSpec of InputArrays"):
        inputs_for_run([entry], {"odd": {}}, (), "x.npz")
