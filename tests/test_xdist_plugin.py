"""tests/_xdist.py: under pytest-xdist the /dev/shm check still fails a run that leaves a file (each worker is a
process of its own) and passes one that does not; the tests that need the machine share one worker's group."""

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import _xdist
from tests.helpers import pytest_session

pytest.importorskip("xdist")

LEAKY = """
from nxgates.core.pool.shm import make_file

def test_leaks_a_file():
    print("LEAKED", make_file("arena", 16))

def test_leaves_nothing():
    pass
"""

#: joined at run time, as below, so that this module's own source does not need the machine
CLOCK_NOW = "time.mono" + "tonic()"

TIDY = """
import os
import time
from pathlib import Path

from nxgates.core.pool.shm import make_file

def test_removes_its_file():
    os.unlink(make_file("arena", 16))

def test_leaves_nothing():
    pass

def ran_on(name):
    (Path(__file__).parent / f"{name}.worker").write_text(os.environ["PYTEST_XDIST_WORKER"])
""" + "".join(f"""
def test_needs_the_clock_{i}():
    time.sleep(0.05)
    assert {CLOCK_NOW} > 0
    ran_on("clock-{i}")
""" for i in range(6))


def session(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    """pytest on two workers over one test file, with the project's conftest as a plugin."""
    return pytest_session(tmp_path, source, "-n", "2", "--dist", "loadgroup", "-rP")


def test_a_file_a_worker_left_in_dev_shm_fails_the_run(tmp_path):
    done = session(tmp_path, LEAKY)
    leaked = done.stdout.split("LEAKED ", 1)[1].split()[0]
    try:
        assert "2 passed" in done.stdout and done.returncode == 1, done.stdout
        assert f"left in /dev/shm by this test run: {leaked}" in done.stdout
    finally:
        if os.path.exists(leaked):  # its worker is gone: the next run may have reclaimed it already
            os.unlink(leaked)


@pytest.fixture(scope="module")
def tidy(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A session whose tests leave nothing in /dev/shm, six of them timed (whole_machine)."""
    directory = tmp_path_factory.mktemp("tidy")
    return directory, session(directory, TIDY)


def test_workers_that_remove_their_files_pass(tidy):
    _, done = tidy
    assert done.returncode == 0 and "8 passed" in done.stdout and "left in /dev/shm" not in done.stdout, done.stdout


def test_the_tests_that_need_the_machine_run_on_one_worker(tidy):
    """What ``make test`` relies on: --dist loadgroup really hands a group to one worker, one test after another
    (a pytest or xdist that dropped the groups would spread these six over both workers)."""
    directory, _ = tidy
    workers = {p.read_text() for p in directory.glob("clock-*.worker")}
    assert len(list(directory.glob("clock-*.worker"))) == 6 and len(workers) == 1, workers


# the signatures are joined at run time, so that this module's own source does not match what it checks
CLUSTER = "dask_pool.local_cluster" + "(2)"
KILL = "os.killpg" + "(proc.pid, 9)"
CLOCK = "assert time.monotonic" + "() - t0 < 2"
SECONDS = "assert r.seconds" + " < 10"


@pytest.mark.parametrize("line", [
    CLUSTER, "LocalCluster" + "(n_workers=1)", KILL, "proc.send_signal" + "(15)", CLOCK, SECONDS,
    "run({'B': 8, 'executor'" + ": 'dask'})", "nx('--set', 'executor=" + "dask')",
    "nx('run', 'lora', '--executor'" + ", 'dask')", "make_pool(" + "'dask', 2)"])
def test_a_test_that_does_what_needs_the_machine_is_marked_and_one_that_does_not_is_free(line):
    found = _xdist.Module(f"def test_a():\n    {line}\n\ndef test_b():\n    time.sleep(0.1)\n")
    assert found.machine == {"test_a"} and not found.whole


def test_a_test_needs_the_machine_through_a_helper_a_fixture_or_a_constant_it_names():
    found = _xdist.Module(f"""
SCRIPT = "{CLUSTER}"

def start(script):
    return script

@pytest.fixture(name="scheduler")
def one_worker():
    return start(SCRIPT)

def stop():
    {KILL}

def test_through_a_fixture(scheduler):
    pass

def test_through_a_helper():
    stop()

class TestInAClass:
    def test_one(self):
        stop()

def test_free():
    start("x")
""")
    assert found.machine == {"SCRIPT", "one_worker", "scheduler", "stop", "test_through_a_fixture",
                             "test_through_a_helper", "TestInAClass"}
    assert not found.whole


@pytest.mark.parametrize("source", [f"if True:\n    {KILL}\n",
                                    f"@pytest.fixture(autouse=True)\ndef clock():\n    {CLOCK}\n"])
def test_a_statement_or_an_autouse_fixture_that_needs_the_machine_takes_the_whole_module(source):
    assert _xdist.Module(source + "\ndef test_b():\n    pass\n").whole


def test_a_module_wide_fixture_keeps_a_module_on_one_worker():
    assert _xdist.Module('@pytest.fixture(scope="mod' + 'ule")\ndef page():\n    pass\n').wide_fixture
    assert not _xdist.Module("@pytest.fixture\ndef page():\n    pass\n").wide_fixture


def test_a_message_that_names_the_dask_executor_is_not_a_run_on_dask():
    assert _xdist.Module("def test_a():\n    m = 'applies to executor=dask, not executor=process'\n").machine == set()


@pytest.mark.parametrize(("fixtures", "needs"), [(("tmp_path", "dask_scheduler"), True), (("tmp_path",), False)])
def test_a_test_that_gets_the_sessions_dask_cluster_needs_the_machine(fixtures, needs):
    item = SimpleNamespace(name="test_a", originalname="test_a", fixturenames=fixtures, cls=None)
    assert _xdist.Module("def test_a(cluster):\n    pass\n").needs_the_machine(item) is needs
