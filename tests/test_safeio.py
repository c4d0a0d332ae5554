"""Bounded reads: devices, FIFOs, directories and oversized files are one-line usage errors, at once."""

import os

import pytest

from nxgates import safeio
from nxgates.errors import ConfigError


def test_a_small_regular_file_is_read(tmp_path):
    p = tmp_path / "a.toml"
    p.write_text("x = 1\n")
    assert safeio.read_text(p, "--config", 100) == "x = 1\n"


@pytest.mark.parametrize("path, message", [
    ("/dev/zero", "not a regular file"),
    (".", "is a directory"),
    ("missing.toml", "no such file"),
])
def test_non_files_are_refused_without_reading(tmp_path, monkeypatch, path, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=message):
        safeio.read_text(path, "--config", 100)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        safeio.read_text(fifo, "--config", 100)


def test_a_file_above_the_limit_is_refused(tmp_path):
    p = tmp_path / "big.toml"
    p.write_bytes(b"#" * 101)
    with pytest.raises(ConfigError, match="larger than 100 B"):
        safeio.read_text(p, "--config", 100)
    p.write_bytes(b"#" * 100)
    assert len(safeio.read_text(p, "--config", 100)) == 100


def test_undecodable_bytes_are_a_usage_error(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_bytes(b"x = '\xff'\n")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        safeio.read_text(p, "--config", 100)
