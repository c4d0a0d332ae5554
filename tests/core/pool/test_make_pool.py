"""make_pool: which pool class each executor gets, with what, and what it refuses."""

import sys

import pytest

from nxgates.core.cpus import auto_workers
from nxgates.core.pool import ProcessWorkerPool, ThreadWorkerPool, dask_available, make_pool
from nxgates.core.pool import dask as dask_pool
from nxgates.errors import ConfigError


class Pinned:
    def worker_for(self, task):
        return 0


class FakeDaskPool(ThreadWorkerPool):
    """Stands in for the Dask pool: records what make_pool passed."""

    def __init__(self, n_workers=0, scheduler=None):
        self.args = (n_workers, scheduler)
        super().__init__(1)


@pytest.fixture
def fake_dask(monkeypatch):
    monkeypatch.setattr(dask_pool, "DaskWorkerPool", FakeDaskPool)


def test_dask_available_finds_the_extra_without_importing_it(monkeypatch):
    assert dask_available() is True
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert dask_available() is False


def test_thread_and_process_kinds_get_their_own_class_and_auto_workers():
    with make_pool("thread") as pool:
        assert type(pool) is ThreadWorkerPool and pool.n_workers == auto_workers()
    with make_pool("thread", 3) as pool:
        assert type(pool) is ThreadWorkerPool and pool.n_workers == 3
    assert ThreadWorkerPool is ThreadWorkerPool  # the former name callers still make and extend
    with make_pool("process", 2) as pool:
        assert type(pool) is ProcessWorkerPool and pool.n_workers == 2


def test_dask_kind_gets_the_dask_pool_with_workers_and_scheduler(fake_dask):
    with make_pool("dask", 3, scheduler="tcp://127.0.0.1:8786") as pool:
        assert type(pool) is FakeDaskPool and pool.args == (3, "tcp://127.0.0.1:8786")
    with make_pool("dask") as pool:
        assert pool.args == (0, None)
    with make_pool("dask", 2, Pinned, "tcp://h:1") as pool:
        assert type(pool).__name__ == "PinnedFakeDaskPool" and type(pool).__mro__[1:3] == (Pinned, FakeDaskPool)
        assert pool.args == (2, "tcp://h:1") and pool.worker_for(5) == 0


@pytest.mark.parametrize(("kind", "cls"), [("thread", ThreadWorkerPool), ("process", ProcessWorkerPool)])
def test_a_class_in_front_is_put_before_the_pool_class(kind, cls, fake_dask):
    with make_pool(kind, 2, Pinned) as pool:
        assert type(pool).__name__ == f"Pinned{cls.__name__}"
        assert type(pool).__mro__[1:3] == (Pinned, cls) and pool.n_workers == 2
        assert pool.worker_for(5) == 0


def test_a_scheduler_address_is_refused_for_a_local_executor(fake_dask):
    with pytest.raises(ConfigError) as err:
        make_pool("thread", 2, scheduler="tcp://127.0.0.1:8786")
    assert str(err.value) == "a scheduler address applies to executor=dask, not executor=thread"
    with pytest.raises(ConfigError) as err:
        make_pool("process", 2, scheduler="tcp://127.0.0.1:8786")
    assert str(err.value) == "a scheduler address applies to executor=dask, not executor=process"


def test_an_unknown_executor_is_refused_naming_the_choices(fake_dask):
    with pytest.raises(ValueError) as err:
        make_pool("fibers", 2)
    assert str(err.value) == "unknown executor 'fibers' (choose from thread, process, dask)"
