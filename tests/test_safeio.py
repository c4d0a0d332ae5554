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


# ---- the output policy --------------------------------------------------------------------------------


def test_an_output_is_written_whole_by_a_rename_and_keeps_an_existing_files_mode(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    safeio.write_output(str(target), b"new", "--json")
    assert target.read_bytes() == b"new" and (os.stat(target).st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


@pytest.mark.parametrize("make, message", [
    (lambda p: p.symlink_to("elsewhere"), "is a symlink"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: os.mkfifo(p), "is a FIFO"),
])
def test_outputs_the_policy_refuses(tmp_path, make, message):
    target = tmp_path / "out"
    make(target)
    with pytest.raises(ConfigError, match=message):
        safeio.output_path(str(target), "--json")
    with pytest.raises(ConfigError, match=message):
        safeio.open_output(str(target), "--json")
    assert not (tmp_path / "elsewhere").exists()


def test_a_target_that_became_a_symlink_before_the_rename_is_left_alone(tmp_path):
    target = tmp_path / "g.npy"
    out = safeio.open_output(str(target), "--save-grads")
    out.fh.write(b"data")
    (tmp_path / "precious").write_text("keep")
    target.symlink_to("precious")
    with pytest.raises(ConfigError, match="is a symlink"):
        safeio.commit_output(out)
    assert target.is_symlink() and (tmp_path / "precious").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.npy", "precious"]


@pytest.mark.parametrize("failure, caught", [(OSError(28, "No space left on device"), ConfigError),
                                             (KeyboardInterrupt(), KeyboardInterrupt)])
def test_an_output_whose_writing_fails_leaves_the_target_as_it_was(tmp_path, failure, caught):
    """A full disk is one line naming the option; any other ending (Ctrl-C) goes on as it was. Either way the
    old content stays and no temporary file is left beside it."""
    target = tmp_path / "r.json"
    target.write_text("old")
    with pytest.raises(caught) as raised, safeio.output_file(str(target), "--json") as fh:
        fh.write(b"half")
        raise failure
    if caught is ConfigError:
        assert str(raised.value) == f"--json {target}: cannot write: No space left on device"
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_dash_is_stdout_only_where_allowed():
    safeio.output_path("-", "--json")
    with pytest.raises(ConfigError, match="--save-grads needs a file path"):
        safeio.output_path("-", "--save-grads", stdout_ok=False)


def test_hardlinks_share_a_same_file_key(tmp_path):
    (tmp_path / "a").write_text("x")
    os.link(tmp_path / "a", tmp_path / "b")
    assert safeio.same_file_key(str(tmp_path / "a")) == safeio.same_file_key(str(tmp_path / "b"))
    assert safeio.same_file_key(str(tmp_path / "new")) is None
