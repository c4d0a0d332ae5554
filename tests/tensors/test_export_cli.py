"""``nxgates export`` refuses what it cannot do in one line (exit 2), before anything is made or written, and
writes its file as every other output of nxgates: the umask's mode for a new file, an existing file's mode
kept."""

import os
import stat

import numpy as np
import pytest

from nxgates.core import memory
from tests.helpers import assert_usage_error, run_in_process


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_sizes_beyond_the_memory_budget_are_refused_before_any_array_is_made(tmp_path, monkeypatch):
    monkeypatch.setattr(np, "arange", lambda *a, **k: pytest.fail("an array was made before the budget check"))
    r = run_in_process("export", "parallel-grad", "--set", "D=1048576", "--set", "H=1", "--set", "B=1048576",
                       "--set", "O=1048576", "--out", "big.npz", cwd=tmp_path)
    assert_usage_error(r, "export parallel-grad (arrays W1 [1, 1048576], W2 [1048576, 1], X [1048576, 1048576], "
                          "T [1048576, 1048576]) needs about 64.0 TiB but the memory budget is")
    assert os.listdir(tmp_path) == []


def test_the_budget_counts_what_making_the_arrays_takes(tmp_path, monkeypatch):
    asked = []
    real = memory.require
    monkeypatch.setattr("nxgates.tensors.write.require", lambda n, what: (asked.append(n), real(n, what)))
    r = run_in_process("export", "lora", "--out", "a.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert asked == [32 * (3 * 6 + 6 * 6 + 6 * 2 + 2 * 6)]  # x, W, A, B at T=3 DM=6 R=2


def test_all_is_refused_saying_export_takes_one_gate(tmp_path):
    r = run_in_process("export", "all", "--out", "a.npz", cwd=tmp_path)
    assert_usage_error(r, "export takes one gate, not 'all'")
    assert "unknown gate" not in r.stderr


def test_a_new_file_gets_the_umasks_mode(tmp_path):
    old = os.umask(0o027)
    try:
        r = run_in_process("export", "lora", "--out", "a.npz", cwd=tmp_path)
    finally:
        os.umask(old)
    assert r.returncode == 0, r.stderr
    assert mode(tmp_path / "a.npz") == 0o640


@pytest.mark.parametrize("kept", [0o644, 0o600, 0o664])
def test_an_existing_files_mode_is_kept(tmp_path, kept):
    (tmp_path / "a.npz").write_bytes(b"old")
    os.chmod(tmp_path / "a.npz", kept)
    r = run_in_process("export", "lora", "--out", "a.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert mode(tmp_path / "a.npz") == kept
    assert (tmp_path / "a.npz").read_bytes()[:2] == b"PK"
    assert sorted(os.listdir(tmp_path)) == ["a.npz"]
