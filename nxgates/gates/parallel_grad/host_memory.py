"""Memory every process on this host maps, for a Dask LocalCluster whose workers share nothing else with the
gate: arrays and a barrier in files under ``/dev/shm`` that pickle as their path. A LocalCluster's workers
write their gradient rows straight into such arrays, and the shared-arena fault's one arena and barrier are
made of them. :class:`HostFiles` removes the files when the run ends."""

from __future__ import annotations

import fcntl
import math
import mmap
import os
import threading
import time
from contextlib import suppress
from typing import Any

import numpy as np

from nxgates.core.pool.shm import make_file, shm_dir


class HostFiles:
    """The files a run made for host memory, removed together by :meth:`remove`."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def array(self, shape: tuple[int, ...], dtype: Any = np.float32) -> HostArray:
        arr = host_array(shape, dtype)
        self.paths.append(arr.path)
        return arr

    def barrier(self, parties: int, timeout: float) -> HostBarrier:
        barrier = HostBarrier(parties, timeout)
        self.paths.append(barrier.path)
        return barrier

    def remove(self) -> None:
        for path in self.paths:
            with suppress(OSError):
                os.unlink(path)
        self.paths.clear()


def _shm_dir() -> str:
    return shm_dir()


def _map(path: str, nbytes: int) -> mmap.mmap:
    fd = os.open(path, os.O_RDWR)
    try:
        return mmap.mmap(fd, nbytes)  # MAP_SHARED, mmap's default on Unix
    finally:
        os.close(fd)


class HostArray(np.ndarray):
    """An array in a shared file mapping that pickles as its path: every process that unpickles it on this
    host writes the same bytes. A view of it pickles as a copy, like any array."""

    path: str = ""

    def __reduce__(self):
        if self.path:  # set only on the array mapping the file (a view's is "")
            return _attach_host_array, (self.path, self.shape, self.dtype.str)
        return np.asarray(self).__reduce__()

    def __array_finalize__(self, obj: Any) -> None:
        self.path = ""


def host_array(shape: tuple[int, ...], dtype: Any = np.float32) -> HostArray:
    dt = np.dtype(dtype)
    count = math.prod(shape)
    path = make_file("arena", count * dt.itemsize)  # named after this process: reclaimed if it is killed
    return _attach_host_array(path, shape, dt.str)


def _attach_host_array(path: str, shape: tuple[int, ...], dtype: str) -> HostArray:
    dt = np.dtype(dtype)
    buf = _map(path, max(1, math.prod(shape) * dt.itemsize))
    arr = np.ndarray.__new__(HostArray, shape, dt, buffer=buf)  # its base is the mapping itself
    arr.path = path
    return arr


class HostBarrier:
    """``threading.Barrier`` for worker processes on one host that share nothing but a file: an arrival
    counter and an abort flag in a shared mapping, counted under ``flock``. One use per party, as the
    shared-arena fault needs; a timeout or :meth:`abort` raises ``BrokenBarrierError`` in every waiter."""

    def __init__(self, parties: int, timeout: float, path: str | None = None):
        self.parties, self.timeout = parties, timeout
        if path is None:
            path = make_file("barrier", 16)
        self.path = path
        self._state: np.ndarray | None = None

    def __reduce__(self):
        return HostBarrier, (self.parties, self.timeout, self.path)

    def _counts(self) -> np.ndarray:
        if self._state is None:
            self._state = np.frombuffer(_map(self.path, 16), dtype=np.int64)  # [arrived, aborted]
        return self._state

    def _add(self, index: int, value: int) -> None:
        state = self._counts()
        with open(self.path) as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state[index] += value
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def wait(self) -> None:
        state = self._counts()
        self._add(0, 1)
        deadline = time.monotonic() + self.timeout
        while state[0] < self.parties:
            if state[1]:
                raise threading.BrokenBarrierError
            if time.monotonic() > deadline:
                self.abort()
                raise threading.BrokenBarrierError
            time.sleep(0.0005)

    def abort(self) -> None:
        self._add(1, 1)
