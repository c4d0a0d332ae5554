"""Files in /dev/shm named after their owner: a killed run's are reclaimed by the next run that makes a pool, a
live one's never, nor a file whose pid now belongs to another process's, nor a name of another form."""

import os
import signal
import subprocess
import sys
import time

import pytest

from nxgates.core.pool import make_pool, shm
from nxgates.core.pool.shm import (
    make_file,
    owned_files,
    owner_alive,
    owner_tag,
    process_start,
    reclaim_stale,
)

#: a process that makes a file of its own and maps it, as a run's arena, then waits to be killed
OWNER = """
import mmap, os, sys
from nxgates.core.pool.shm import make_file
path = make_file("arena", 1 << 20)
fd = os.open(path, os.O_RDWR)
arena = mmap.mmap(fd, 1 << 20)
arena[:5] = b"alive"
print(path, flush=True)
sys.stdin.read()
"""


@pytest.fixture
def owner():
    """A live process that made (and maps) a file tagged as its own; killed and reaped at the end."""
    proc = subprocess.Popen([sys.executable, "-c", OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    path = proc.stdout.readline().strip()
    yield proc, path
    proc.kill()
    proc.wait()
    proc.stdin.close()
    proc.stdout.close()
    if os.path.exists(path):
        os.unlink(path)


def test_a_file_is_named_after_its_owner_in_dev_shm():
    path = make_file("arena", 16)
    try:
        name = os.path.basename(path)
        assert os.path.dirname(path) == shm.shm_dir() and os.path.getsize(path) == 16
        assert name.startswith(f"nxgates-arena-{os.getpid()}-{process_start(os.getpid())}-")
        assert owned_files() == [path]
    finally:
        os.unlink(path)
    assert owned_files() == []


def test_an_empty_file_is_one_byte():
    path = make_file("barrier", 0)
    try:
        assert os.path.getsize(path) == 1
    finally:
        os.unlink(path)


def test_a_sigkilled_runs_file_is_reclaimed_by_the_next_pool(owner):
    proc, path = owner
    pid = proc.pid
    assert os.path.basename(path).startswith(f"nxgates-arena-{owner_tag(pid)}-")
    assert path in owned_files(pid) and path not in reclaim_stale()  # its owner runs: kept
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert os.path.exists(path) and owned_files(pid) == []  # nobody removed it: the owner is gone
    make_pool("thread", 2).close()
    assert not os.path.exists(path)


def test_a_live_owners_file_is_kept(owner):
    proc, path = owner
    assert path not in reclaim_stale()
    make_pool("thread", 2).close()
    with open(path, "rb") as fh:
        assert fh.read(5) == b"alive"
    assert proc.poll() is None


def test_a_zombie_owner_is_gone(owner):
    proc, path = owner
    os.kill(proc.pid, signal.SIGKILL)  # not reaped: a zombie, which never runs again
    deadline = time.monotonic() + 30
    while process_start(proc.pid) is not None:
        assert time.monotonic() < deadline, "the killed owner never became a zombie"
        time.sleep(0.01)
    assert os.path.exists(f"/proc/{proc.pid}")
    start = int(os.path.basename(path).split("-")[3])  # nxgates-arena-PID-START-...
    assert not owner_alive(proc.pid, start)
    # any run on this machine that makes a pool reclaims it too (the other xdist worker's, say): gone either way
    assert path in reclaim_stale() or not os.path.exists(path)


def test_a_reused_pid_is_not_the_owner(tmp_path):
    me, began = os.getpid(), process_start(os.getpid())
    mine = tmp_path / f"nxgates-arena-{me}-{began}-abc"
    reused = tmp_path / f"nxgates-arena-{me}-{began + 1}-abc"
    for path in (mine, reused):
        path.write_bytes(b"x")
    assert reclaim_stale(str(tmp_path)) == [str(reused)]
    assert [p.name for p in tmp_path.iterdir()] == [mine.name]


def test_names_of_another_form_are_never_touched(tmp_path):
    names = ["nxgates-arena-r_xv3y24", "nxgates-arena-1-2", "sem.mp-abc", "nxgates-dask-1-x", "other-1-2-x"]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    dead_tag = f"nxgates-arena-{os.getpid()}-{process_start(os.getpid()) + 1}-dir"
    (tmp_path / dead_tag).mkdir()  # a dead owner's tag, but a directory: not a file this module made
    assert reclaim_stale(str(tmp_path)) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names, dead_tag])


def test_a_missing_directory_has_nothing(tmp_path):
    assert reclaim_stale(str(tmp_path / "none")) == [] and owned_files(directory=str(tmp_path / "none")) == []


def test_process_start_of_no_process_is_none():
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert process_start(int(done.stdout)) is None
    assert process_start(os.getpid()) == process_start(os.getpid()) > 0


def test_an_owner_is_alive_only_with_its_start_time():
    me, began = os.getpid(), process_start(os.getpid())
    assert owner_alive(me, began) and not owner_alive(me, began + 1)


def test_without_proc_the_pid_alone_decides(monkeypatch):
    monkeypatch.setattr(shm, "process_start", lambda pid: None)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert owner_alive(os.getpid(), 0) and not owner_alive(int(done.stdout), 0)
    assert owner_tag() == f"{os.getpid()}-0"


def test_another_users_hidden_process_counts_as_alive(monkeypatch):
    monkeypatch.setattr(shm, "process_start", lambda pid: None if pid == 12345 else 7)

    def kill(pid, sig):
        raise PermissionError

    monkeypatch.setattr(os, "kill", kill)
    assert owner_alive(12345, 99)


def test_a_file_not_ours_to_remove_is_skipped(tmp_path, monkeypatch):
    stale = tmp_path / "nxgates-arena-1-1-abc"
    stale.write_bytes(b"x")
    monkeypatch.setattr(shm, "owner_alive", lambda pid, start: False)

    def unlink(path):
        raise PermissionError(path)

    monkeypatch.setattr(os, "unlink", unlink)
    assert reclaim_stale(str(tmp_path)) == []
