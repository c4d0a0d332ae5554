"""Host memory for a LocalCluster's workers: arrays in shared files that pickle as their path, a barrier of
two counters in a file, and the files removed when the run ends."""

import os
import pickle
import tempfile
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from nxgates.gates.parallel_grad import host_memory
from nxgates.gates.parallel_grad.host_memory import HostArray, HostBarrier, HostFiles, host_array


@pytest.fixture
def files():
    made = HostFiles()
    yield made
    made.remove()


def test_shared_memory_lives_in_dev_shm_where_there_is_one(monkeypatch):
    assert host_memory._shm_dir() == ("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
    real = os.path.isdir
    monkeypatch.setattr(os.path, "isdir", lambda p: False if p == "/dev/shm" else real(p))
    assert host_memory._shm_dir() == tempfile.gettempdir()


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_dev_shm_is_used():
    assert host_memory._shm_dir() == "/dev/shm"


def test_an_array_is_a_file_of_its_bytes(files):
    arr = files.array((3, 5), np.int64)
    assert isinstance(arr, HostArray) and arr.shape == (3, 5) and arr.dtype == np.int64
    assert os.path.dirname(arr.path) == host_memory._shm_dir()
    assert os.path.basename(arr.path).startswith("nxgates-arena-")
    assert os.path.getsize(arr.path) == 3 * 5 * 8
    arr[...] = np.arange(15).reshape(3, 5)
    assert np.fromfile(arr.path, np.int64).tolist() == list(range(15))
    assert files.paths == [arr.path]


def test_float32_is_the_default(files):
    arr = files.array((4,))
    assert arr.dtype == np.float32 and os.path.getsize(arr.path) == 16
    plain = host_array((2, 2))
    try:
        assert plain.dtype == np.float32
    finally:
        os.unlink(plain.path)


def test_an_empty_array_has_a_one_byte_file(files):
    arr = files.array((0, 7))
    assert arr.shape == (0, 7) and os.path.getsize(arr.path) == 1


def test_an_array_pickles_as_its_path_and_a_copy_shares_its_bytes(files):
    arr = files.array((2, 3))
    arr[...] = 1
    copy = pickle.loads(pickle.dumps(arr))
    assert isinstance(copy, HostArray) and copy.path == arr.path and copy.shape == (2, 3)
    assert copy.dtype == np.float32
    copy[1, 2] = 5
    assert arr[1, 2] == 5
    assert pickle.dumps(arr) != pickle.dumps(np.asarray(arr).copy())
    assert len(pickle.dumps(files.array((1000,)))) < 1000


def test_a_view_has_no_path_and_pickles_as_a_copy(files):
    arr = files.array((4, 4))
    arr[...] = 2
    view = arr[1:]
    assert view.path == "" and arr.path
    copy = pickle.loads(pickle.dumps(view))
    assert copy.shape == (3, 4) and (copy == 2).all()
    copy[0, 0] = 9
    assert arr[1, 0] == 2


def test_remove_unlinks_every_file_once_and_ignores_one_already_gone():
    made = HostFiles()
    assert made.paths == []
    a, b = made.array((2,)), made.barrier(2, 1.0)
    os.unlink(a.path)
    made.remove()
    assert made.paths == [] and not os.path.exists(b.path)
    made.remove()


def test_a_barrier_is_a_sixteen_byte_file_of_two_counters(files):
    barrier = files.barrier(1, 5.0)
    assert files.paths == [barrier.path] and (barrier.parties, barrier.timeout) == (1, 5.0)
    assert os.path.basename(barrier.path).startswith("nxgates-barrier-")
    assert os.path.dirname(barrier.path) == host_memory._shm_dir()
    assert np.fromfile(barrier.path, np.int64).tolist() == [0, 0]
    barrier.wait()  # the only party: through at once
    assert np.fromfile(barrier.path, np.int64).tolist() == [1, 0]
    barrier.abort()
    assert np.fromfile(barrier.path, np.int64).tolist() == [1, 1]


def test_a_barrier_lets_its_parties_through_together(files):
    barrier = files.barrier(2, 30.0)
    other = pickle.loads(pickle.dumps(barrier))
    assert (other.parties, other.timeout, other.path) == (2, 30.0, barrier.path)
    through = []
    t = threading.Thread(target=lambda: (other.wait(), through.append(1)))
    t.start()
    barrier.wait()
    t.join(30)
    assert through == [1] and np.fromfile(barrier.path, np.int64).tolist() == [2, 0]


def test_an_aborted_barrier_breaks_every_waiter(files):
    barrier = files.barrier(2, 30.0)
    HostBarrier(2, 30.0, barrier.path).abort()
    with pytest.raises(threading.BrokenBarrierError):
        barrier.wait()


class FakeTime:
    """A clock that moves only when read, and a sleep that records."""

    def __init__(self, readings):
        self.readings, self.slept = list(readings), []

    def monotonic(self):
        return self.readings.pop(0)

    def sleep(self, seconds):
        self.slept.append(seconds)


def test_a_barrier_times_out_only_after_its_deadline_and_aborts(files, monkeypatch):
    clock = FakeTime([100.0, 105.0, 105.0, 105.5])
    monkeypatch.setattr(host_memory, "time", SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep))
    barrier = files.barrier(2, 5.0)
    with pytest.raises(threading.BrokenBarrierError):
        barrier.wait()
    assert clock.slept == [0.0005, 0.0005] and clock.readings == []
    assert np.fromfile(barrier.path, np.int64).tolist() == [1, 1]
