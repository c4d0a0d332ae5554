"""A bad ``--inputs`` is exit 2 with one line naming the array and what is wrong: never a traceback, never a
wrapped integer, never an unpickled object, never a read beyond the memory budget."""

import io
import zipfile

import numpy as np
import pytest

from nxgates.core import memory
from nxgates.errors import ResourceError
from nxgates.tensors import read
from nxgates.tensors.lora_spec import LORA_INPUTS
from nxgates.tensors.mlp_spec import MLP_INPUTS
from tests.helpers import assert_usage_error, run_in_process


def exported(tmp_path, gate, *pairs):
    args = [a for p in pairs for a in ("--set", p)]
    assert run_in_process("export", gate, *args, "--out", "good.npz", cwd=tmp_path).returncode == 0
    with np.load(tmp_path / "good.npz", allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files if k != "nxgates"}


def run_with(tmp_path, gate, arrays, *extra):
    np.savez(tmp_path / "bad.npz", **arrays)
    return run_in_process("run", gate, "--inputs", "bad.npz", *extra, cwd=tmp_path)


@pytest.fixture
def mlp(tmp_path):
    return exported(tmp_path, "parallel-grad")


@pytest.fixture
def q20(tmp_path):
    return exported(tmp_path, "lora")


def test_a_missing_array(tmp_path, mlp):
    del mlp["T"]
    assert_usage_error(run_with(tmp_path, "parallel-grad", mlp), "--inputs bad.npz: missing array T")


def test_an_unexpected_array(tmp_path, mlp):
    mlp["Y"] = mlp["T"]
    assert_usage_error(run_with(tmp_path, "parallel-grad", mlp), "unexpected array Y", "W1, W2, X, T")


def test_float64_where_q20_is_due(tmp_path, q20):
    q20["x"] = q20["x"].astype(np.float64)
    assert_usage_error(run_with(tmp_path, "lora", q20), "array x: dtype float64, expected Q20 int64")


def test_integers_where_float32_is_due(tmp_path, mlp):
    mlp["X"] = np.ones((8, 8), np.int64)
    assert_usage_error(run_with(tmp_path, "parallel-grad", mlp), "array X: dtype int64, expected float32")


def test_float64_where_float32_is_due(tmp_path, mlp):
    mlp["W2"] = mlp["W2"].astype(np.float64)
    assert_usage_error(run_with(tmp_path, "parallel-grad", mlp), "array W2: dtype float64, expected float32")


def test_a_wrong_rank(tmp_path, mlp):
    mlp["X"] = mlp["X"].reshape(-1)
    assert_usage_error(run_with(tmp_path, "parallel-grad", mlp), "array X: rank 1, expected 2 (B x D)")


def test_shapes_that_disagree(tmp_path, mlp):
    mlp["X"] = np.zeros((8, 9), np.float32)
    assert_usage_error(run_with(tmp_path, "parallel-grad", mlp),
                       "array X: shape (8, 9) gives D=9, but array W1 gives D=8")


def test_an_empty_array(tmp_path, mlp):
    mlp["X"], mlp["T"] = np.zeros((0, 8), np.float32), np.zeros((0, 4), np.float32)
    assert_usage_error(run_with(tmp_path, "parallel-grad", mlp), "array X: empty")


def test_sizes_out_of_the_gates_range(tmp_path, mlp):
    mlp["X"], mlp["T"] = mlp["X"][:1], mlp["T"][:1]  # parallel-grad needs B >= 2
    assert_usage_error(run_with(tmp_path, "parallel-grad", mlp), "array X: B=1 is out of range")


def test_a_set_that_contradicts_the_arrays(tmp_path, mlp):
    r = run_with(tmp_path, "parallel-grad", mlp, "--set", "D=9")
    assert_usage_error(r, "--set D=9 contradicts --inputs bad.npz: array W1 gives D=8")


@pytest.mark.parametrize("value, shown", [(np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf")])
def test_nan_or_inf_in_float32(tmp_path, mlp, value, shown):
    mlp["W2"][1, 2] = value
    assert_usage_error(run_with(tmp_path, "parallel-grad", mlp), "array W2: 1 value(s) are NaN or Inf",
                       f"(first at (1, 2): {shown})")


def test_q20_values_the_overflow_proofs_cannot_admit(tmp_path, q20):
    q20["x"][0, 0] = 1 << 60
    r = run_with(tmp_path, "lora", q20)
    assert_usage_error(r, "arrays x, W, A, B: int64 overflow guard tripped in x@W")


def test_int64_minimum_is_refused_not_wrapped(tmp_path, q20):
    q20["A"][0, 0] = np.iinfo(np.int64).min
    assert_usage_error(run_with(tmp_path, "lora", q20), "int64 overflow guard tripped in x@A")


def test_a_rank_above_the_width(tmp_path, q20):
    q20["A"], q20["B"] = np.zeros((6, 7), np.int64), np.zeros((7, 6), np.int64)
    assert_usage_error(run_with(tmp_path, "lora", q20), "R=7 must not exceed DM=6")


class _Planted:
    """Unpickling this would create a file: the test proves nothing is unpickled."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_object_arrays_are_refused_and_never_unpickled(tmp_path, mlp):
    planted = tmp_path / "unpickled"
    mlp["X"] = np.array([_Planted(str(planted))], dtype=object)
    np.savez(tmp_path / "bad.npz", **mlp)  # numpy pickles the object array into X.npy
    r = run_in_process("run", "parallel-grad", "--inputs", "bad.npz", cwd=tmp_path)
    assert_usage_error(r, "array X: an object array (refused: nothing is unpickled)")
    assert not planted.exists()


def test_a_truncated_archive(tmp_path, mlp):
    np.savez(tmp_path / "whole.npz", **mlp)
    data = (tmp_path / "whole.npz").read_bytes()
    (tmp_path / "bad.npz").write_bytes(data[: len(data) // 2])
    r = run_in_process("run", "parallel-grad", "--inputs", "bad.npz", cwd=tmp_path)
    assert_usage_error(r, "--inputs bad.npz: not a readable .npz archive")


def test_a_corrupt_member(tmp_path, mlp):
    np.savez(tmp_path / "whole.npz", **mlp)
    data = bytearray((tmp_path / "whole.npz").read_bytes())
    at = data.index(b"X.npy") + 200  # inside X's data: the member's CRC no longer holds
    data[at] ^= 0xFF
    (tmp_path / "bad.npz").write_bytes(bytes(data))
    r = run_in_process("run", "parallel-grad", "--inputs", "bad.npz", cwd=tmp_path)
    assert_usage_error(r, "array X: corrupt member", "CRC")


def test_a_header_that_declares_more_than_the_member_holds(tmp_path, mlp):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (1 << 20, 1 << 20)})
    buf.write(mlp["X"].tobytes())
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as zf:
        for k, v in mlp.items():
            if k != "X":
                with zf.open(f"{k}.npy", "w") as fh:
                    np.lib.format.write_array(fh, v)
        zf.writestr("X.npy", buf.getvalue())
    r = run_in_process("run", "parallel-grad", "--inputs", "bad.npz", cwd=tmp_path)
    assert_usage_error(r, "array X: truncated or corrupt: the header declares float32 of shape (1048576, 1048576)")


def test_not_an_archive_at_all(tmp_path, mlp):
    with open(tmp_path / "bad.npz", "wb") as fh:  # an .npy under an .npz name
        np.save(fh, mlp["X"])
    r = run_in_process("run", "parallel-grad", "--inputs", "bad.npz", cwd=tmp_path)
    assert_usage_error(r, "--inputs bad.npz: an .npy array, not an .npz archive")


def test_a_missing_file(tmp_path):
    assert_usage_error(run_in_process("run", "lora", "--inputs", "nope.npz", cwd=tmp_path), "nope.npz: no such file")


def test_members_that_would_inflate_beyond_the_budget_are_refused_before_reading(tmp_path, monkeypatch, q20):
    """A compressed member declares its size: 8 MiB of zeros compress to a few KiB, and are refused unread."""
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as zf:
        for k, v in q20.items():
            with zf.open(f"{k}.npy", "w") as fh:
                np.lib.format.write_array(fh, v if k != "x" else np.zeros((1 << 17, 8), np.int64))
    assert (tmp_path / "bomb.npz").stat().st_size < 1 << 16
    monkeypatch.setattr(memory, "available_bytes", lambda: 4 << 20)
    read_members = []
    monkeypatch.setattr(read, "_read_member", lambda *a: read_members.append(a))
    with pytest.raises(ResourceError, match="its arrays needs about 16.0 MiB but the memory budget is 2.0 MiB"):
        read.read_npz(str(tmp_path / "bomb.npz"), LORA_INPUTS)
    assert read_members == []


def test_metadata_from_a_newer_nxgates(tmp_path, q20):
    q20["nxgates"] = np.array('{"format": 99}')
    assert_usage_error(run_with(tmp_path, "lora", q20), "format 99 is newer than this nxgates reads (1)")


def test_metadata_that_is_not_nxgates(tmp_path, q20):
    q20["nxgates"] = np.array([1, 2])
    assert_usage_error(run_with(tmp_path, "lora", q20), "member nxgates.npy is not nxgates' metadata")


# ---- raw dumps ------------------------------------------------------------------------------------------


def raw_dir(tmp_path, arrays):
    d = tmp_path / "raw"
    d.mkdir()
    for k, v in arrays.items():
        (d / f"{k}.bin").write_bytes(v.astype("<" + v.dtype.str[1:]).tobytes())
    return d


def test_a_raw_file_of_the_wrong_length(tmp_path, mlp):
    d = raw_dir(tmp_path, mlp)
    (d / "X.bin").write_bytes((d / "X.bin").read_bytes()[:-4])
    r = run_in_process("run", "parallel-grad", "--inputs", "raw", cwd=tmp_path)
    assert_usage_error(r, "array X: X.bin has 252 bytes, expected 256 (float32 of shape (B=8, D=8))")


def test_a_raw_dump_at_other_sizes_than_the_parameters(tmp_path, mlp):
    raw_dir(tmp_path, mlp)
    r = run_in_process("run", "parallel-grad", "--inputs", "raw", "--set", "B=4", cwd=tmp_path)
    assert_usage_error(r, "array X: X.bin has 256 bytes, expected 128")


def test_a_missing_raw_file(tmp_path, q20):
    d = raw_dir(tmp_path, q20)
    (d / "B.bin").unlink()
    assert_usage_error(run_in_process("run", "lora", "--inputs", "raw", cwd=tmp_path), "missing array B (B.bin)")


def test_an_unexpected_raw_file(tmp_path, q20):
    raw_dir(tmp_path, {**q20, "dB": q20["B"]})
    assert_usage_error(run_in_process("run", "lora", "--inputs", "raw", cwd=tmp_path), "unexpected array dB (dB.bin)")


def test_nan_in_a_raw_dump(tmp_path, mlp):
    mlp["X"][3, 1] = np.nan
    raw_dir(tmp_path, mlp)
    r = run_in_process("run", "parallel-grad", "--inputs", "raw", cwd=tmp_path)
    assert_usage_error(r, "array X: 1 value(s) are NaN or Inf (first at (3, 1): nan)")


# ---- the option itself ----------------------------------------------------------------------------------


def test_inputs_take_one_gate(tmp_path, q20):
    np.savez(tmp_path / "in.npz", **q20)
    r = run_in_process("run", "lora", "lora-train", "--inputs", "in.npz", cwd=tmp_path)
    assert_usage_error(r, "--inputs takes the tensors of one gate, not 2")


def test_a_member_that_is_not_an_npy(tmp_path, mlp):
    np.savez(tmp_path / "bad.npz", **mlp)
    with zipfile.ZipFile(tmp_path / "bad.npz", "a") as zf:
        zf.writestr("README.txt", "not an array")
    r = run_in_process("run", "parallel-grad", "--inputs", "bad.npz", cwd=tmp_path)
    assert_usage_error(r, "unexpected member 'README.txt'")


def test_a_member_with_a_garbage_header(tmp_path, mlp):
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as zf:
        for k, v in mlp.items():
            with zf.open(f"{k}.npy", "w") as fh:
                if k == "W2":
                    fh.write(b"\x93NUMPY\x01\x00\x10\x00{'descr': <f4 }\n")
                else:
                    np.lib.format.write_array(fh, v)
    r = run_in_process("run", "parallel-grad", "--inputs", "bad.npz", cwd=tmp_path)
    assert_usage_error(r, "array W2: corrupt member, or not an .npy one")


def test_raw_dumps_beyond_the_budget_are_refused_before_reading(tmp_path, monkeypatch, mlp):
    d = raw_dir(tmp_path, mlp)
    monkeypatch.setattr(memory, "available_bytes", lambda: 1024)
    monkeypatch.setattr(np, "fromfile", lambda *a, **k: pytest.fail("read before the budget was checked"))
    with pytest.raises(ResourceError, match="raw: its arrays needs about"):
        read.read_raw_dir(str(d), MLP_INPUTS, {"D": 8, "H": 16, "O": 4, "B": 8})
