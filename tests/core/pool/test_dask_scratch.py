"""The Dask workers' scratch space: made under nxgates' prefix, removed quietly, swept only when its run died."""

import os
import shutil
import subprocess
import sys

import pytest

from nxgates.core.pool import dask_scratch
from nxgates.core.pool.dask_scratch import PREFIX, _alive, make_scratch, remove_scratch, sweep_stale


@pytest.fixture
def temp(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    return tmp_path


@pytest.fixture
def dead_pid():
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


@pytest.fixture
def sleeper():
    """A live process that any signal but 0 would end: every disposition set back to its default (a test run
    under nohup would otherwise hand it an ignored SIGHUP)."""
    code = ("import signal, time\n"
            "for s in signal.valid_signals():\n"
            "    try:\n"
            "        signal.signal(s, signal.SIG_DFL)\n"
            "    except (OSError, ValueError):\n"
            "        pass\n"
            "print('ready', flush=True)\n"
            "time.sleep(30)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    yield proc
    proc.kill()
    proc.wait()
    proc.stdout.close()


@pytest.fixture
def stubborn_rmtree(monkeypatch):
    """rmtree that fails unless told to ignore errors; records what it removed."""
    removed = []
    real = shutil.rmtree

    def rmtree(path, ignore_errors=False):
        if not ignore_errors:
            raise PermissionError(f"cannot remove {path}")
        removed.append(os.path.basename(path))
        real(path, ignore_errors=True)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    return removed


def test_a_scratch_directory_is_named_by_this_process(temp):
    path = make_scratch()
    assert os.path.isdir(path) and os.path.dirname(path) == str(temp)
    assert os.path.basename(path).startswith(f"{PREFIX}{os.getpid()}-")
    assert PREFIX == "nxgates-dask-"


def test_making_a_scratch_directory_sweeps_a_dead_runs_first(temp, dead_pid):
    (temp / f"{PREFIX}{dead_pid}-old").mkdir()
    path = make_scratch()
    assert [p.name for p in temp.iterdir()] == [os.path.basename(path)]


def test_remove_scratch_removes_everything_and_never_raises(temp, stubborn_rmtree):
    path = make_scratch()
    os.makedirs(os.path.join(path, "dask-scratch-space", "worker-1"))
    remove_scratch(path)
    assert list(temp.iterdir()) == [] and stubborn_rmtree == [os.path.basename(path)]
    remove_scratch(None)
    assert stubborn_rmtree == [os.path.basename(path)]


def test_a_live_process_is_alive_and_is_not_signalled(sleeper):
    assert _alive(sleeper.pid) is True
    with pytest.raises(subprocess.TimeoutExpired):  # probed with signal 0: still running
        sleeper.wait(0.5)


def test_a_finished_process_is_not_alive(dead_pid):
    assert _alive(dead_pid) is False


def test_another_users_process_counts_as_alive(monkeypatch):
    def kill(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", kill)
    assert _alive(12345) is True


def test_sweep_removes_only_dead_runs_directories(temp, dead_pid, sleeper, stubborn_rmtree):
    dead = temp / f"{PREFIX}{dead_pid}-abc"
    (dead / "dask-scratch-space").mkdir(parents=True)
    dead_dashed = temp / f"{PREFIX}{dead_pid}-ab-cd"
    dead_dashed.mkdir()
    live = temp / f"{PREFIX}{sleeper.pid}-def"
    live.mkdir()
    not_a_pid = temp / f"{PREFIX}notapid-x"
    not_a_pid.mkdir()
    a_file = temp / f"{PREFIX}{dead_pid}-file"
    a_file.write_text("")
    sweep_stale()
    assert sorted(p.name for p in temp.iterdir()) == sorted([live.name, not_a_pid.name, a_file.name])
    assert sorted(stubborn_rmtree) == sorted([dead.name, dead_dashed.name])
    assert sleeper.poll() is None


def test_sweep_gives_up_quietly_when_the_temp_dir_cannot_be_listed(monkeypatch):
    tried = []

    class Unlistable:
        def __init__(self, path):
            pass

        def glob(self, pattern):
            tried.append(pattern)
            raise PermissionError("cannot list")

    monkeypatch.setattr(dask_scratch, "Path", Unlistable)
    assert sweep_stale() is None  # no PermissionError escapes
    assert tried == [f"{dask_scratch.PREFIX}*-*"]  # it did look, and gave up on the error


def test_sweep_looks_for_the_prefix_in_the_temp_dir(temp, monkeypatch):
    seen = []

    class Recording(type(temp)):
        def glob(self, pattern):
            seen.append((str(self), pattern))
            return iter(())

    monkeypatch.setattr(dask_scratch, "Path", Recording)
    sweep_stale()
    assert seen == [(str(temp), f"{PREFIX}*-*")]
