"""Huge finite float32 inputs overflow to inf and NaN as IEEE 754 says; the gates judge those numbers, and
nothing is printed as a numpy RuntimeWarning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from nxgates.cli import cli


@pytest.mark.parametrize("gate", ["parallel-grad", "ta-gradcheck", "dp-train"])
def test_huge_finite_inputs_warn_nothing(gate, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(cli, ["export", gate, "--out", "e.npz"]).exit_code == 0
    with np.load("e.npz") as exported:
        arrays = {name: exported[name] for name in exported.files}
    for name in ("W1", "W2", "X", "T"):
        arrays[name] = np.full_like(arrays[name], 3e38)
    np.savez("huge.npz", **arrays)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # any overflow warning fails the run as a crash
        # dp-train's learning rate given: derived from these inputs, it would be refused (exit 2)
        lr = ["--set", "lr_num=1", "--set", "lr_den=8"] if gate == "dp-train" else []
        r = CliRunner().invoke(cli, ["run", gate, "--inputs", "huge.npz", *lr])
    assert r.exit_code in (0, 1), r.output
    assert "RuntimeWarning" not in r.output
