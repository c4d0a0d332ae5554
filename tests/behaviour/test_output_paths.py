"""nxgates never destroys a file. A report or gradient path is written only if it is a new path or
an existing regular file reached without a symlink at its last component; anything else is exit 2 with
one line. ``-`` is stdout for ``--json``/``--junit``; ``--save-grads -`` is refused. Inputs and outputs of
one command are told apart by (device, inode), hardlinks included. New files respect the umask (a process's
own, so those cases, a symlink and ``-`` go through the console script; the other paths run in-process)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.behaviour.from_outside import SCRIPT, assert_one_line_error, nx
from tests.helpers import run_in_process
from tests.oracles.seed_logs import lora_log

PG = ("run", "parallel-grad", "-q")


def snapshot(path: Path) -> tuple:
    """What must not change about a file that nxgates was told to leave alone."""
    st = os.lstat(path)
    return stat.S_IFMT(st.st_mode), st.st_ino, path.read_bytes() if stat.S_ISREG(st.st_mode) else None


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A genuine gradient file of the seed-size parallel-grad run."""
    r = run_in_process(*PG, "--save-grads", "g.npy", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return tmp_path / "g.npy"


def test_save_grads_never_replaces_a_device_node(tmp_path):
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("cannot make a device node here")
    r = run_in_process(*PG, "--save-grads", str(node), cwd=tmp_path)
    assert_one_line_error(r, "refusing to write", "not a regular file")
    assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_save_grads_refuses_a_symlink(tmp_path, saved):
    before = saved.read_bytes()
    (tmp_path / "link.npy").symlink_to("g.npy")
    r = nx(*PG, "--save-grads", "link.npy", cwd=tmp_path)
    assert_one_line_error(r, "refusing to write", "is a symlink")
    assert (tmp_path / "link.npy").is_symlink() and saved.read_bytes() == before


def test_save_grads_onto_a_hardlinked_compare_file_is_refused(tmp_path, saved):
    os.link(saved, tmp_path / "same.npy")
    before = snapshot(saved)
    r = run_in_process(*PG, "--compare-grads", "g.npy", "--save-grads", "same.npy", cwd=tmp_path)
    assert_one_line_error(r)
    assert snapshot(saved) == before and os.stat(tmp_path / "same.npy").st_ino == before[1]


def test_save_grads_dash_is_refused(tmp_path):
    r = run_in_process(*PG, "--save-grads", "-", cwd=tmp_path)
    assert_one_line_error(r, "--save-grads needs a file path")
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_save_grads_respects_the_umask(tmp_path, umask):
    r = subprocess.run(["sh", "-c", f'umask {umask:03o}; exec "$NX" run parallel-grad -q --save-grads g.npy'],
                       cwd=tmp_path, env={**os.environ, "NX": SCRIPT}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(tmp_path / "g.npy").st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_reports_respect_the_umask(tmp_path, umask):
    r = subprocess.run(["sh", "-c", f'umask {umask:03o}; exec "$NX" run lora -q --json r.json --junit r.xml'],
                       cwd=tmp_path, env={**os.environ, "NX": SCRIPT}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for name in ("r.json", "r.xml"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("option", ["--json", "--junit"])
def test_a_report_path_that_is_a_symlink_is_refused(tmp_path, option):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    (tmp_path / "r.out").symlink_to("precious.txt")
    r = run_in_process("run", "lora", "-q", option, "r.out", cwd=tmp_path)
    assert_one_line_error(r, "refusing to write", "is a symlink")
    assert target.read_text() == "keep me\n" and (tmp_path / "r.out").is_symlink()


@pytest.mark.parametrize("option", ["--json", "--junit", "--save-grads"])
def test_a_dangling_symlink_is_refused_and_its_target_not_created(tmp_path, option):
    (tmp_path / "out").symlink_to("nowhere")
    r = run_in_process("run", "parallel-grad", "-q", option, "out", cwd=tmp_path)
    assert_one_line_error(r, "refusing to write", "is a symlink")
    assert not (tmp_path / "nowhere").exists() and (tmp_path / "out").is_symlink()


@pytest.mark.parametrize("option", ["--json", "--junit"])
def test_a_report_path_that_is_a_device_is_refused(tmp_path, option):
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("cannot make a device node here")
    r = run_in_process("run", "lora", "-q", option, str(node), cwd=tmp_path)
    assert_one_line_error(r, "refusing to write", "not a regular file")
    assert stat.S_ISCHR(os.lstat(node).st_mode)


@pytest.mark.parametrize("option", ["--json", "--junit"])
def test_crosscheck_report_onto_a_hardlink_of_its_log_is_refused(tmp_path, option):
    log = tmp_path / "run.log"
    log.write_text(lora_log())
    os.link(log, tmp_path / "r.out")
    before = snapshot(log)
    r = run_in_process("crosscheck", "lora", "run.log", option, "r.out", cwd=tmp_path)
    assert_one_line_error(r)
    assert snapshot(log) == before


@pytest.mark.parametrize("option", ["--json", "--junit"])
def test_report_onto_a_hardlink_of_the_compare_file_is_refused(tmp_path, saved, option):
    os.link(saved, tmp_path / "r.out")
    before = snapshot(saved)
    r = run_in_process(*PG, "--compare-grads", "g.npy", option, "r.out", cwd=tmp_path)
    assert_one_line_error(r)
    assert snapshot(saved) == before


def test_two_reports_onto_hardlinks_of_one_file_are_refused(tmp_path):
    (tmp_path / "a").write_text("x")
    os.link(tmp_path / "a", tmp_path / "b")
    r = run_in_process("run", "lora", "-q", "--json", "a", "--junit", "b", cwd=tmp_path)
    assert_one_line_error(r)
    assert (tmp_path / "a").read_text() == "x"


@pytest.mark.parametrize("option", ["--json", "--junit"])
def test_dash_is_stdout_for_reports(tmp_path, option):
    r = nx("run", "lora", option, "-", cwd=tmp_path)
    assert r.returncode == 0 and not (tmp_path / "-").exists()
    if option == "--json":
        assert json.loads(r.stdout)["passed"] is True
    else:
        assert r.stdout.lstrip().startswith("<?xml")


def test_an_existing_regular_report_file_is_overwritten(tmp_path):
    (tmp_path / "r.json").write_text("old")
    r = run_in_process("run", "lora", "-q", "--json", "r.json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads((tmp_path / "r.json").read_text())["passed"] is True
