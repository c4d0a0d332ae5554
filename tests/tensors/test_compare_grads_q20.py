"""lora and lora-train ``--compare-grads``: another implementation's dA, dB, compared exactly."""

import json

import numpy as np

from nxgates.gates import lora_train
from nxgates.gates.lora.gate import CHECK_FOREIGN
from nxgates.tensors.lora_spec import LORA_GRADS
from tests.helpers import assert_usage_error, ctx, run_in_process

SEED = {"T": 3, "DM": 6, "R": 2}


def check(r, name):
    line = next(line for line in r.stdout.splitlines() if name in line)
    return line.split()[0], line


def test_equal_gradients_pass_and_one_integer_off_fails_with_where(tmp_path):
    grads = LORA_GRADS.make(SEED)
    np.savez(tmp_path / "same.npz", **grads)
    r = run_in_process("run", "lora", "--compare-grads", "same.npz", cwd=tmp_path)
    assert r.returncode == 0
    assert check(r, CHECK_FOREIGN) == ("PASS", f" PASS {CHECK_FOREIGN} -- 24 cells equal same.npz")
    grads["dA"][4, 1] -= 3
    np.savez(tmp_path / "off.npz", **grads)
    r = run_in_process("run", "lora", "--compare-grads", "off.npz", "--json", "r.json", cwd=tmp_path)
    assert r.returncode == 1
    assert check(r, CHECK_FOREIGN)[0] == "FAIL" and "1 of 24 cells differ from off.npz" in r.stdout
    assert "   dA: 1/12 cells differ (8.33%)" in r.stdout.splitlines()
    (cell,) = [line for line in r.stdout.splitlines() if line.startswith("   dA[4,1]")]
    assert cell.endswith("(difference -3)")
    m = json.loads((tmp_path / "r.json").read_text())["gates"][0]["metrics"]["compare_grads"]
    assert m["differing_cells"] == 1 and m["tensors"]["dB"] == {"cells": 12, "differing": 0, "share": 0.0}
    assert m["first_differing"] == [{"tensor": "dA", "row": 4, "col": 1, "ours": int(grads["dA"][4, 1]) + 3,
                                     "theirs": int(grads["dA"][4, 1])}]


def test_raw_int64_dumps(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for name, arr in LORA_GRADS.make(SEED).items():
        (raw / f"{name}.bin").write_bytes(arr.astype("<i8").tobytes())
    assert run_in_process("run", "lora", "--compare-grads", "raw", cwd=tmp_path).returncode == 0
    (raw / "dB.bin").write_bytes(b"\0" * 8)
    r = run_in_process("run", "lora", "--compare-grads", "raw", cwd=tmp_path)
    assert_usage_error(r, "--compare-grads raw: array dB: dB.bin has 8 bytes, expected 96")


def test_gradients_of_other_sizes_or_types_are_usage_errors(tmp_path):
    grads = LORA_GRADS.make({"T": 3, "DM": 7, "R": 2})
    np.savez(tmp_path / "other.npz", **grads)
    r = run_in_process("run", "lora", "--compare-grads", "other.npz", cwd=tmp_path)
    assert_usage_error(r, "--compare-grads other.npz: array dA: shape (7, 2), expected (6, 2) at DM=6 R=2")
    np.savez(tmp_path / "f.npz", dA=grads["dA"].astype(np.float64), dB=grads["dB"])
    r = run_in_process("run", "lora", "--compare-grads", "f.npz", cwd=tmp_path)
    assert_usage_error(r, "--compare-grads f.npz: array dA: dtype float64, expected Q20 int64")


def test_lora_train_compares_the_final_gradients(tmp_path):
    params = {**SEED, "steps": 3, "lr_q": 104858}
    run = lora_train.train(3, 6, 2, 3, 104858, ctx(params))
    np.savez(tmp_path / "final.npz", dA=run.dA, dB=run.dB)
    r = run_in_process("run", "lora-train", "--set", "steps=3", "--compare-grads", "final.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stdout
    assert f" PASS {lora_train.L5} -- 24 cells equal final.npz" in r.stdout.splitlines()
    np.savez(tmp_path / "initial.npz", **LORA_GRADS.make(SEED))
    r = run_in_process("run", "lora-train", "--set", "steps=3", "--compare-grads", "initial.npz", "--json", "r.json",
                       cwd=tmp_path)
    assert r.returncode == 1 and f" FAIL {lora_train.L5} -- 24 of 24 cells differ from initial.npz" in r.stdout
    report = json.loads((tmp_path / "r.json").read_text())["gates"][0]["metrics"]["compare_grads"]
    assert report["differing_cells"] == 24
