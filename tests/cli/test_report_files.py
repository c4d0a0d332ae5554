"""Where --json, --junit and --save-grads may write: refused before any gate runs (exit 2, one line)
when the path could block, clash with another output, or not be written."""

import os

import pytest

from tests.helpers import assert_usage_error, run_in_process, run_script, shell


def test_one_path_for_two_outputs_is_refused(tmp_path):
    (tmp_path / "sub").mkdir()
    os.symlink("sub/out.json", tmp_path / "link.json")
    assert_usage_error(run_script("run", "lora", "--json", "out.json", "--junit", "out.json", cwd=tmp_path),
                       "--json and --junit name the same file")
    assert_usage_error(run_in_process("run", "lora", "--json", "sub/out.json", "--junit", "link.json", cwd=tmp_path),
                       "same file")
    assert_usage_error(run_in_process("run", "lora", "--json", "./out.json", "--junit", "out.json", cwd=tmp_path),
                       "same file")
    assert_usage_error(run_in_process("run", "parallel-grad", "--save-grads", "g.npy", "--compare-grads", "./g.npy",
                           cwd=tmp_path), "same file")
    assert not (tmp_path / "out.json").exists()


def test_report_targets_that_would_block_or_waste_a_run(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "adir").mkdir()
    assert_usage_error(run_script("run", "lora", "--json", "fifo", cwd=tmp_path), "--json fifo: is a FIFO")
    assert_usage_error(run_in_process("run", "parallel-grad", "--save-grads", "fifo", cwd=tmp_path), "is a FIFO")
    assert_usage_error(run_in_process("run", "parallel-grad", "--save-grads", "adir", cwd=tmp_path), "is a directory")


@pytest.mark.parametrize("option", ["--json", "--junit", "--config", "--save-grads", "--compare-grads"])
def test_an_empty_path_is_named_as_such(tmp_path, option):
    runner = run_script if option == "--json" else run_in_process
    assert_usage_error(runner("run", "parallel-grad", option, "", cwd=tmp_path), f"{option}: empty path")


def test_a_deleted_working_directory(tmp_path):
    (tmp_path / "gone").mkdir()
    r = shell('cd gone && rmdir ../gone && "$NX" run lora --json r.json', tmp_path)
    assert r.returncode == 2 and r.stderr == "nxgates: error: --json r.json: cannot resolve the path: " \
                                             "No such file or directory\n"


def test_a_path_too_long_for_the_system(tmp_path):
    """ENAMETOOLONG from pathlib's is_dir() is a usage error, not an internal one; the echoed path is cut."""
    r = run_script("run", "lora", "--json", "a" * 5000, cwd=tmp_path)
    assert_usage_error(r, "cannot write: File name too long")
    assert len(r.stderr) < 1100
