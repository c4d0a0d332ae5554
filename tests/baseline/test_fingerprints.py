"""The gatekit API a gate pins its figures with."""

import subprocess
import sys

import numpy as np
import pytest

from nxgates.gatekit import GateOutput


def test_scalars_and_cells_are_returned_in_the_order_recorded():
    out = GateOutput()
    out.fingerprint("loss_q", 1329684529960)
    out.fingerprint("digest", "ab12")
    out.fingerprint("lr", np.float32(0.5))  # a numpy scalar is stored as its Python value
    out.fingerprint_cells("grad_A", np.arange(6).reshape(2, 3))
    figures = out.fingerprints
    assert list(figures) == ["loss_q", "digest", "lr", "grad_A"]
    assert figures["loss_q"] == 1329684529960 and figures["lr"] == 0.5 and type(figures["lr"]) is float
    assert figures["grad_A"]["values"] == [0, 1, 2, 3, 4, 5] and figures["grad_A"]["shape"] == [2, 3]


def test_a_gate_that_pins_nothing_has_no_fingerprints():
    assert GateOutput().fingerprints == {}


def test_cells_are_copied_when_recorded():
    out = GateOutput()
    cells = np.zeros(4, dtype=np.int64)
    out.fingerprint_cells("c", cells)
    cells[0] = 99  # the gate reuses its buffer afterwards
    assert out.fingerprints["c"]["values"] == [0, 0, 0, 0]


@pytest.mark.parametrize("value", [[1, 2], None, {"a": 1}])
def test_a_scalar_figure_must_be_a_scalar(value):
    with pytest.raises(TypeError, match="takes an int, float, str or bool"):
        GateOutput().fingerprint("x", value)


def test_each_figure_needs_its_own_name():
    out = GateOutput()
    out.fingerprint("x", 1)
    with pytest.raises(ValueError, match="its own"):
        out.fingerprint_cells("x", [1])
    with pytest.raises(ValueError, match="non-empty"):
        out.fingerprint("", 1)
    with pytest.raises(TypeError, match="must be numbers"):
        out.fingerprint_cells("objects", np.array([object()]))


def test_cells_are_hashed_only_when_the_fingerprints_are_read():
    code = ("import sys, numpy; from nxgates.gatekit import GateOutput; out = GateOutput(); "
            "out.fingerprint_cells('c', numpy.arange(3)); before = 'hashlib' in sys.modules; out.fingerprints; "
            "print(before, 'hashlib' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["False", "True"]
