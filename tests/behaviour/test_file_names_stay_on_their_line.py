"""A file name is outside text: inside a check's detail it stays on that check's line, escaped, so a name
holding a newline and a workflow command can neither split the line nor forge a command."""

from __future__ import annotations

import numpy as np

from nxgates.core import lora


def test_a_compare_grads_name_stays_on_its_check_line(invoke, tmp_path):
    assert invoke("run", "parallel-grad", "--save-grads", "g.npy").exit_code == 0
    hostile = "x\n::warning::forged\n.npy"
    (tmp_path / hostile).write_bytes((tmp_path / "g.npy").read_bytes())
    r = invoke("run", "parallel-grad", "--compare-grads", hostile)
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert not any(line.lstrip().startswith("::") for line in lines)
    (t4,) = [line for line in lines if " T4 " in line]
    assert "matches x\\n::warning::forged\\n.npy (sha256" in t4


def test_a_foreign_gradients_name_stays_on_its_check_line(invoke, tmp_path):
    m = lora.init_model(3, 6, 2)
    dA, dB = lora.backward(m, lora.forward(m))
    hostile = "y\n::error::forged\n.npz"
    np.savez(tmp_path / hostile, dA=dA, dB=dB)
    r = invoke("run", "lora", "--compare-grads", hostile)
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert not any(line.lstrip().startswith("::") for line in lines)
    assert any(line.endswith("24 cells equal y\\n::error::forged\\n.npz") for line in lines)
