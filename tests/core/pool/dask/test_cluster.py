"""A LocalCluster of our own, against stand-ins: loopback single-threaded processes in our scratch space,
closed and its scratch removed whatever fails, stop signals held while it starts or stops, ``distributed``
imported only when asked and quiet."""

import logging
import os
import signal
import sys
import threading
import types

import pytest

from nxgates.core.pool.dask import cluster as cluster_module
from nxgates.core.pool.dask.cluster import stops_deferred
from nxgates.errors import ConfigError, Terminated

distributed = pytest.importorskip("distributed")



def test_distributed_logs_are_silenced():
    logger, root = logging.getLogger("distributed"), logging.getLogger()
    before = logger.level, root.level
    try:
        logger.setLevel(logging.NOTSET)
        cluster_module.silence_distributed()
        assert logger.level == logging.CRITICAL + 1 == cluster_module.QUIET and root.level == before[1]
    finally:
        logger.setLevel(before[0])
        root.setLevel(before[1])


class Stopped(Exception):
    """A stop signal that reached its handler at once instead of being held."""


@pytest.fixture
def stop_handlers():
    """Handlers of our own for the stop signals, restored after the test: an undeferred signal raises Stopped."""

    def handler(signum, frame):
        raise Stopped(signum)

    numbers = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.signal(s, handler) for s in numbers}
    yield handler
    for number, previous in before.items():
        signal.signal(number, previous)


@pytest.mark.parametrize(("signum", "raised"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated),
                                                (signal.SIGHUP, Terminated)])
def test_a_stop_signal_while_a_cluster_starts_is_raised_once_it_is_done(stop_handlers, signum, raised):
    done = []
    with pytest.raises(raised) as err, stops_deferred():
        os.kill(os.getpid(), signum)
        done.append(True)
    assert done == [True] and type(err.value) is raised
    if raised is Terminated:
        assert err.value.signum == signum
    assert all(signal.getsignal(s) is stop_handlers for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))


def test_only_the_first_stop_signal_decides(stop_handlers):
    with pytest.raises(Terminated) as err, stops_deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
    assert type(err.value) is Terminated and err.value.signum == signal.SIGTERM


def test_an_ignored_signal_stays_ignored_while_a_cluster_starts(stop_handlers):
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with stops_deferred():
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_IGN, stop_handlers)
        os.kill(os.getpid(), signal.SIGHUP)
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is stop_handlers


def test_off_the_main_thread_stop_signals_are_left_alone():
    seen = []

    def body():
        before = signal.getsignal(signal.SIGTERM)
        with stops_deferred():
            seen.append(signal.getsignal(signal.SIGTERM) is before)

    t = threading.Thread(target=body)
    t.start()
    t.join(5)
    assert seen == [True]


class RecordingCluster:
    def __init__(self, fail=False, scratch=None):
        self.fail, self.closed = fail, []
        if scratch is not None:
            self.nxgates_scratch = scratch

    def close(self, timeout):
        self.closed.append(timeout)
        if self.fail:
            raise RuntimeError("already closed")


def test_closing_a_cluster_stops_it_and_removes_its_scratch(monkeypatch):
    removed = []
    monkeypatch.setattr(cluster_module, "remove_scratch", removed.append)
    recording = RecordingCluster(scratch="/tmp/nxgates-dask-1-x")
    cluster_module.close_cluster(recording)
    assert recording.closed == [10] and removed == ["/tmp/nxgates-dask-1-x"]
    failing = RecordingCluster(fail=True)
    cluster_module.close_cluster(failing)
    assert failing.closed == [10] and removed == ["/tmp/nxgates-dask-1-x", None]


def test_a_local_cluster_is_loopback_single_threaded_processes_in_our_scratch(monkeypatch):
    import dask.config

    made = []

    class LocalCluster:
        def __init__(self, **kwargs):
            self.kwargs = kwargs
            self.config = (dask.config.get("temporary-directory"),
                           dask.config.get("distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"))
            made.append(self)

    monkeypatch.setattr(cluster_module, "distributed_module", lambda: types.SimpleNamespace(LocalCluster=LocalCluster))
    monkeypatch.setattr(cluster_module, "make_scratch", lambda: "/tmp/nxgates-dask-1-abc")
    cluster = cluster_module.local_cluster(3)
    assert made == [cluster] and cluster.nxgates_scratch == "/tmp/nxgates-dask-1-abc"
    assert cluster.kwargs == {
        "n_workers": 3, "threads_per_worker": 1, "processes": True, "dashboard_address": None,
        "host": "127.0.0.1", "silence_logs": logging.CRITICAL + 1, "local_directory": "/tmp/nxgates-dask-1-abc",
        "scheduler_kwargs": {"dashboard": False, "dashboard_address": "127.0.0.1:0"}}
    assert cluster.config == ("/tmp/nxgates-dask-1-abc", None)
    assert dask.config.get("temporary-directory", None) != "/tmp/nxgates-dask-1-abc"


def test_a_local_cluster_that_fails_to_start_removes_its_scratch(monkeypatch):
    removed = []

    def refuse(**kwargs):
        raise OSError("no ports left")

    monkeypatch.setattr(cluster_module, "distributed_module", lambda: types.SimpleNamespace(LocalCluster=refuse))
    monkeypatch.setattr(cluster_module, "make_scratch", lambda: "/tmp/nxgates-dask-1-abc")
    monkeypatch.setattr(cluster_module, "remove_scratch", removed.append)
    with pytest.raises(OSError, match="no ports left"):
        cluster_module.local_cluster(2)
    assert removed == ["/tmp/nxgates-dask-1-abc"]


def test_distributed_is_imported_only_when_asked_and_its_absence_named(monkeypatch):
    assert cluster_module.distributed_module() is distributed
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ConfigError) as err:
        cluster_module.distributed_module()
    assert str(err.value) == "executor=dask needs the optional 'dask' extra: pip install 'nxgates[dask]'"
