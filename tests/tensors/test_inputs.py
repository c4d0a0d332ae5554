"""``nxgates export`` and ``nxgates run GATE --inputs``: every gate's numbers, bit for bit, from its exported
tensors or from raw dumps, at the seed and at odd sizes."""

import json
import zipfile

import numpy as np
import pytest

from tests.helpers import run_in_process

#: every gate with inputs, at the seed's sizes and at odd ones
CASES = [
    ("lora", ()),
    ("lora", ("T=5", "DM=7", "R=3")),
    ("lora-train", ()),
    ("lora-train", ("T=4", "DM=5", "R=3", "steps=3")),
    ("parallel-grad", ()),
    ("parallel-grad", ("D=7", "H=5", "O=3", "B=9", "reduction=sequential")),
    ("ta-gradcheck", ()),
    ("ta-gradcheck", ("D=5", "H=3", "O=2", "B=3")),
    ("dp-train", ()),
    ("dp-train", ("D=7", "H=4", "O=3", "B=5", "steps=3", "reduction=sequential")),
]

RAW = {"int64": "<i8", "float32": "<f4"}


def sets(pairs):
    return [a for p in pairs for a in ("--set", p)]


def numbers(tmp_path, *args):
    """A run's JSON report, without its timings: every number and check it reports."""
    r = run_in_process("run", *args, "--json", "report.json", "-q", cwd=tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr)
    gate = json.loads((tmp_path / "report.json").read_text())["gates"][0]
    gate["metrics"] = {k: v for k, v in gate["metrics"].items() if "seconds" not in k}
    gate.pop("seconds")
    return gate


@pytest.mark.parametrize("gate, pairs", CASES)
def test_export_then_inputs_reproduces_every_number(tmp_path, gate, pairs):
    r = run_in_process("export", gate, *sets(pairs), "--out", "in.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{gate}: wrote ") and r.stdout.rstrip().endswith(" to in.npz")
    formula = numbers(tmp_path, gate, *sets(pairs))
    # the sizes come from the arrays: only the parameters that are not sizes are given again
    others = [p for p in pairs if p.split("=")[0] not in ("T", "DM", "R", "D", "H", "O", "B")]
    given = numbers(tmp_path, gate, "--inputs", "in.npz", *sets(others))
    assert len(given["metrics"].pop("inputs_sha256")) == 64  # the run says which tensors it ran on
    assert given == formula


@pytest.mark.parametrize("gate, pairs", [CASES[1], CASES[5], CASES[9]])
def test_raw_dumps_reproduce_every_number(tmp_path, gate, pairs):
    assert run_in_process("export", gate, *sets(pairs), "--out", "in.npz", cwd=tmp_path).returncode == 0
    raw = tmp_path / "raw"
    raw.mkdir()
    with np.load(tmp_path / "in.npz", allow_pickle=False) as npz:
        for name in npz.files:
            if name != "nxgates":
                arr = npz[name]
                (raw / f"{name}.bin").write_bytes(arr.astype(RAW[arr.dtype.name]).tobytes())
    (raw / "README").write_text("other files are ignored")
    from_raw = numbers(tmp_path, gate, "--inputs", "raw", *sets(pairs))
    from_npz = numbers(tmp_path, gate, "--inputs", "in.npz")
    # the same tensors, whatever carried them: the same digest, and every number of the formula run
    assert from_raw["metrics"].pop("inputs_sha256") == from_npz["metrics"]["inputs_sha256"]
    assert from_raw == numbers(tmp_path, gate, *sets(pairs))


def test_the_archive_holds_the_gate_its_parameters_and_a_format_version_without_pickle(tmp_path):
    assert run_in_process("export", "lora", "--set", "T=4", "--out", "in.npz", cwd=tmp_path).returncode == 0
    with np.load(tmp_path / "in.npz", allow_pickle=False) as npz:
        assert sorted(npz.files) == ["A", "B", "W", "nxgates", "x"]
        meta = json.loads(str(npz["nxgates"][()]))
        assert npz["x"].dtype == np.dtype("<i8") and npz["x"].shape == (4, 6)
    assert meta["format"] == 1 and meta["gate"] == "lora" and meta["params"]["T"] == 4


def test_user_values_change_the_numbers(tmp_path):
    assert run_in_process("export", "parallel-grad", "--out", "in.npz", cwd=tmp_path).returncode == 0
    with np.load(tmp_path / "in.npz", allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["X"] = arrays["X"] * np.float32(0.5)
    np.savez(tmp_path / "half.npz", **arrays)
    assert numbers(tmp_path, "parallel-grad", "--inputs", "half.npz")["metrics"]["grads_sha256"] != \
        numbers(tmp_path, "parallel-grad")["metrics"]["grads_sha256"]


def test_big_endian_and_fortran_order_are_converted_losslessly(tmp_path):
    assert run_in_process("export", "dp-train", "--set", "B=5", "--out", "in.npz", cwd=tmp_path).returncode == 0
    with np.load(tmp_path / "in.npz", allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files if k != "nxgates"}
    arrays["W1"] = arrays["W1"].astype(">f4")
    arrays["X"] = np.asfortranarray(arrays["X"])
    arrays["T"] = np.asfortranarray(arrays["T"].astype(">f4"))
    np.savez(tmp_path / "odd.npz", **arrays)
    assert numbers(tmp_path, "dp-train", "--inputs", "odd.npz") == numbers(tmp_path, "dp-train", "--inputs", "in.npz")


def test_a_set_that_agrees_with_the_arrays_is_fine(tmp_path):
    assert run_in_process("export", "lora", "--out", "in.npz", cwd=tmp_path).returncode == 0
    assert numbers(tmp_path, "lora", "--inputs", "in.npz", "--set", "DM=6")["passed"]


def test_a_gate_reads_what_another_gate_of_the_same_model_exported(tmp_path):
    assert run_in_process("export", "parallel-grad", "--set", "B=4", "--out", "in.npz", cwd=tmp_path).returncode == 0
    assert numbers(tmp_path, "ta-gradcheck", "--inputs", "in.npz")["params"]["B"] == 4


def test_export_refuses_what_it_cannot_write(tmp_path):
    r = run_in_process("export", "lora", cwd=tmp_path)
    assert r.returncode == 2 and "--out" in r.stderr
    r = run_in_process("export", "lora", "--out", "no-such-dir/x.npz", cwd=tmp_path)
    assert r.returncode == 2 and "does not exist" in r.stderr
    assert not list(tmp_path.iterdir())


def test_export_writes_atomically_over_an_old_file(tmp_path):
    (tmp_path / "in.npz").write_bytes(b"old")
    assert run_in_process("export", "lora", "--out", "in.npz", cwd=tmp_path).returncode == 0
    assert zipfile.is_zipfile(tmp_path / "in.npz")
    assert [p.name for p in tmp_path.iterdir()] == ["in.npz"]
