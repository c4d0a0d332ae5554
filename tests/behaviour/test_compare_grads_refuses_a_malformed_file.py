"""A ``--compare-grads`` file whose header or length is not that of a (B, NP) float32 array is
exit 2 with one line, and nothing else on stderr (no OverflowError as exit 3, no numpy warning); bytes
after the data make the file not the array it claims to be. The console script reads the huge header and the
genuine file; the other damaged files are read by the same command in-process."""

from __future__ import annotations

import struct

import pytest

from tests.behaviour.from_outside import assert_one_line_error, nx
from tests.helpers import run_in_process

B, NP = 8, 192  # parallel-grad at the seed's sizes


def npy(shape: str, data: bytes = b"", descr: str = "<f4") -> bytes:
    """A version 1.0 .npy file with the given header text, as numpy lays it out."""
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + data


@pytest.mark.parametrize("shape", ["(-8, 192)", "(8, -192)", "(-1,)"])
def test_a_negative_shape_is_a_usage_error(tmp_path, shape):
    (tmp_path / "c.npy").write_bytes(npy(shape, bytes(4 * B * NP)))
    r = run_in_process("run", "parallel-grad", "-q", "--compare-grads", "c.npy", cwd=tmp_path)
    assert_one_line_error(r, "c.npy")


def test_a_huge_shape_is_one_line_without_a_warning(tmp_path):
    (tmp_path / "c.npy").write_bytes(npy(f"({2**62}, {2**62})", bytes(64)))
    r = nx("run", "parallel-grad", "-q", "--compare-grads", "c.npy", cwd=tmp_path)
    assert_one_line_error(r, "c.npy")
    assert "Warning" not in r.stderr


@pytest.mark.parametrize("extra", [b"\0", b"\0" * 4 * NP, b"trailing garbage"])
def test_trailing_bytes_after_the_data_are_refused(tmp_path, extra):
    r = run_in_process("run", "parallel-grad", "-q", "--save-grads", "g.npy", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (tmp_path / "c.npy").write_bytes((tmp_path / "g.npy").read_bytes() + extra)
    r = run_in_process("run", "parallel-grad", "-q", "--compare-grads", "c.npy", cwd=tmp_path)
    assert_one_line_error(r, "c.npy")


def test_the_genuine_file_compares_green(tmp_path):
    assert nx("run", "parallel-grad", "-q", "--save-grads", "g.npy", cwd=tmp_path).returncode == 0
    r = nx("run", "parallel-grad", "--compare-grads", "g.npy", cwd=tmp_path)
    assert r.returncode == 0 and " PASS T4" in r.stdout, r.stdout + r.stderr
