"""The test session's last word on /dev/shm: a file the session made and did not remove fails the run, even
when every test passed."""

import os
import subprocess
from pathlib import Path

from tests.helpers import pytest_session

LEAKY = """
from nxgates.core.pool.shm import make_file

def test_leaks_a_file():
    print("LEAKED", make_file("arena", 16))
"""

TIDY = """
import os
from nxgates.core.pool.shm import make_file

def test_removes_its_file():
    os.unlink(make_file("arena", 16))
"""


def session(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    """pytest on one test file, with the project's conftest as a plugin."""
    return pytest_session(tmp_path, source, "-s")


def test_a_file_left_in_dev_shm_fails_the_session(tmp_path):
    done = session(tmp_path, LEAKY)
    leaked = done.stdout.split("LEAKED ", 1)[1].split()[0]
    try:
        assert "1 passed" in done.stdout and done.returncode == 1, done.stdout
        assert f"left in /dev/shm by this test run: {leaked}" in done.stdout
    finally:
        os.unlink(leaked)


def test_a_session_that_removes_its_files_passes(tmp_path):
    done = session(tmp_path, TIDY)
    assert done.returncode == 0 and "left in /dev/shm" not in done.stdout, done.stdout
