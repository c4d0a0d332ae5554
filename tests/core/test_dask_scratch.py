"""A LocalCluster's scratch space: made in nxgates' own directory, removed, and swept when its run died."""

import os
import socket
import subprocess
import sys
import threading

import pytest

from nxgates.core.pool import dask_scratch
from nxgates.core.pool.dask_address import probe_scheduler
from nxgates.errors import ConfigError


@pytest.fixture
def temp(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    return tmp_path


def test_scratch_is_made_and_removed(temp):
    path = dask_scratch.make_scratch()
    assert os.path.dirname(path) == str(temp) and os.path.basename(path).startswith(f"nxgates-dask-{os.getpid()}-")
    (temp / path / "dask-scratch-space").mkdir()
    dask_scratch.remove_scratch(path)
    assert list(temp.iterdir()) == []


def test_a_dead_runs_scratch_is_swept_a_live_ones_kept(temp):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = temp / f"nxgates-dask-{int(dead.stdout)}-abc"
    (stale / "dask-scratch-space").mkdir(parents=True)
    live = temp / f"nxgates-dask-{os.getppid()}-def"
    live.mkdir()
    other = temp / "nxgates-dask-notapid-x"
    other.mkdir()
    dask_scratch.sweep_stale()
    assert sorted(p.name for p in temp.iterdir()) == sorted([live.name, other.name])


def test_a_listener_that_never_answers_is_not_a_scheduler():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    accepted = []  # kept open: a silent listener, not one that hangs up
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with pytest.raises(ConfigError, match="did not answer as a Dask scheduler within 0.5 s"):
            probe_scheduler(address, 0.5)
    finally:
        listener.close()


def test_other_schemes_are_left_to_distributed():
    probe_scheduler("tls://127.0.0.1:1", 0.1)
    probe_scheduler("inproc://x", 0.1)
