"""tests/_xdist.py: under pytest-xdist the /dev/shm check still fails a run that leaves a file (each worker is a
process of its own) and passes one that does not; the tests that need the machine share one worker's group."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import _xdist

pytest.importorskip("xdist")

ROOT = Path(__file__).resolve().parents[1]

LEAKY = """
from nxgates.core.pool.shm import make_file

def test_leaks_a_file():
    print("LEAKED", make_file("arena", 16))

def test_leaves_nothing():
    pass
"""

TIDY = """
import os
from nxgates.core.pool.shm import make_file

def test_removes_its_file():
    os.unlink(make_file("arena", 16))

def test_leaves_nothing():
    pass
"""


def session(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    """pytest on two workers over one test file, with the project's conftest as a plugin."""
    (tmp_path / "test_one.py").write_text(source)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-n", "2",
                           "-rP", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path / "test_one.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_file_a_worker_left_in_dev_shm_fails_the_run(tmp_path):
    done = session(tmp_path, LEAKY)
    leaked = done.stdout.split("LEAKED ", 1)[1].split()[0]
    try:
        assert "2 passed" in done.stdout and done.returncode == 1, done.stdout
        assert f"left in /dev/shm by this test run: {leaked}" in done.stdout
    finally:
        if os.path.exists(leaked):  # its worker is gone: the next run may have reclaimed it already
            os.unlink(leaked)


def test_workers_that_remove_their_files_pass(tmp_path):
    done = session(tmp_path, TIDY)
    assert done.returncode == 0 and "2 passed" in done.stdout and "left in /dev/shm" not in done.stdout, done.stdout


# each source is split in two literals, so this module's own text does not match what it checks
@pytest.mark.parametrize(("source", "group"), [
    ("with dask_pool.local_cluster" "(2) as lc:\n", _xdist.WHOLE_MACHINE),
    ("cluster = LocalCluster" "(n_workers=1)\n", _xdist.WHOLE_MACHINE),
    ("os.killpg" "(proc.pid, signal.SIGINT)\n", _xdist.WHOLE_MACHINE),
    ("proc.send_signal" "(signal.SIGTERM)\n", _xdist.WHOLE_MACHINE),
    ("assert time.monotonic" "() - t0 < 2\n", _xdist.WHOLE_MACHINE),
    ("assert r.seconds" " < 10\n", _xdist.WHOLE_MACHINE),
    ('@pytest.fixture(scope="mod' 'ule")\ndef page():\n', "module:tests/x/test_m.py"),
    ("@pytest.fixture\ndef page():\n    time.sleep(0.1)\n", None),
])
def test_a_module_is_grouped_by_what_it_does(tmp_path, source, group):
    module = tmp_path / "test_m.py"
    module.write_text(source)
    assert _xdist.group_of(module, "tests/x/test_m.py") == group
