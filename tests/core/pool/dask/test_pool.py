"""The Dask pool's own logic, run in this process against a stand-in for ``distributed``: connecting, dealing
and pinning batches, fetching their rows, health, shutdown, and borrowing a session's cluster."""

import threading
import types

import numpy as np
import pytest

from nxgates.core.pool import dask as dask_pool
from nxgates.core.pool.dask import CONNECT_SECONDS, DaskWorkerPool
from nxgates.core.pool.dask import cluster as cluster_module
from nxgates.core.pool.dask.cluster import borrow_local_cluster, check_local_workers, session_cluster
from nxgates.core.pool.dask.remote import run_remote_batch
from nxgates.core.pool.interface import TaskRecord
from nxgates.errors import ConfigError

distributed = pytest.importorskip("distributed")



ADDRESSES = ["tcp://127.0.0.1:3", "tcp://127.0.0.1:1", "tcp://127.0.0.1:2"]


class FakeFuture:
    def __init__(self, fn=None, args=(), kwargs=None):
        self.fn, self.args, self.kwargs = fn, args, kwargs or {}
        self.callbacks = []
        self._result = self._error = None

    def add_done_callback(self, fn):
        self.callbacks.append(fn)

    def finish(self, result=None, error=None):
        self._result, self._error = result, error
        for fn in self.callbacks:
            fn(self)

    def result(self):
        if self._error is not None:
            raise self._error
        return self._result


class FakeClient:
    """Records what the pool asks of the cluster."""

    workers = ADDRESSES
    fail_connect: Exception | None = None
    fail_wait = False
    alive: list | None = None

    def __init__(self, target, timeout):
        if self.fail_connect is not None:
            raise self.fail_connect
        self.target, self.timeout = target, timeout
        self.calls = []
        self.futures = []
        CLIENTS.append(self)

    def wait_for_workers(self, n, timeout):
        self.calls.append(("wait_for_workers", n, timeout))
        if self.fail_wait:
            raise TimeoutError("not enough workers")

    def scheduler_info(self, n_workers):
        assert n_workers == -1
        return {"workers": {a: {} for a in self.workers}}

    def register_plugin(self, plugin, name):
        self.calls.append(("register_plugin", plugin, name))

    def submit(self, fn, *args, **kwargs):
        future = FakeFuture(fn, args, kwargs)
        self.futures.append(future)
        return future

    def cancel(self, futures):
        self.calls.append(("cancel", futures))

    def unregister_worker_plugin(self, handle):
        self.calls.append(("unregister_worker_plugin", handle))

    def close(self, timeout):
        self.calls.append(("close", timeout))

    def ncores(self):
        if self.alive is None:
            raise OSError("scheduler gone")
        return {a: 1 for a in self.alive}


CLIENTS: list[FakeClient] = []


class FakeCluster:
    def __init__(self, n):
        self.n = n


@pytest.fixture
def fake(monkeypatch):
    """distributed, the LocalCluster and the address probe replaced; returns what was made and closed."""
    CLIENTS.clear()
    log = types.SimpleNamespace(clusters=[], closed=[], probed=[], clients=CLIENTS)

    def local_cluster(n):
        log.clusters.append(FakeCluster(n))
        return log.clusters[-1]

    monkeypatch.setattr(dask_pool, "distributed_module", lambda: types.SimpleNamespace(Client=FakeClient))
    for module in (dask_pool, cluster_module):  # the pool's own names and the session's
        monkeypatch.setattr(module, "local_cluster", local_cluster)
        monkeypatch.setattr(module, "close_cluster", log.closed.append)
    monkeypatch.setattr(dask_pool, "probe_scheduler", lambda address, seconds: log.probed.append((address, seconds)))
    monkeypatch.setattr(dask_pool, "auto_workers", lambda: 2)
    monkeypatch.setattr(cluster_module, "max_process_workers", lambda: 16)
    monkeypatch.delenv(dask_pool.SCHEDULER_ENV, raising=False)
    monkeypatch.setattr(FakeClient, "workers", ADDRESSES)
    return log


# ---- connecting -----------------------------------------------------------------------------------------------------


def test_without_an_address_the_pool_starts_its_own_local_cluster(fake):
    pool = DaskWorkerPool(0)
    (cluster,) = fake.clusters
    (client,) = fake.clients
    assert cluster.n == 2 and client.target is cluster and client.timeout == CONNECT_SECONDS
    assert client.calls == [("wait_for_workers", 2, 60)]
    assert pool.scheduler == "local" and pool.same_host is True and pool._cluster is cluster
    assert pool.addresses == ["tcp://127.0.0.1:1", "tcp://127.0.0.1:2"] and pool.n_workers == 2
    assert pool._seen == pool.addresses and pool._seen is not pool.addresses
    assert 0 <= pool.start_seconds < 60 and pool.kind == "dask" and pool.remote is True
    assert pool._fetchers._max_workers == 2 and pool._fetchers._thread_name_prefix == "nxgates-dask-fetch"
    pool.close()
    assert fake.closed == [cluster] and client.calls[-1] == ("close", 5) and pool._client is None


def test_a_pool_made_without_arguments_starts_auto_workers(fake):
    with DaskWorkerPool() as pool:
        assert fake.clusters[0].n == 2 and pool.n_workers == 2 and pool.scheduler == "local"


def test_one_worker_gets_one_fetcher(fake):
    with DaskWorkerPool(1, "tcp://10.0.0.1:8786") as pool:
        assert pool.addresses == ["tcp://127.0.0.1:1"] and pool._fetchers._max_workers == 1


def test_a_local_cluster_gets_the_workers_asked_for(fake):
    with DaskWorkerPool(3) as pool:
        assert fake.clusters[0].n == 3 and pool.addresses == sorted(ADDRESSES)
        assert fake.clients[0].calls == [("wait_for_workers", 3, 60)]


def test_a_local_cluster_beyond_the_cap_is_refused_before_it_starts(fake, monkeypatch):
    monkeypatch.setattr(cluster_module, "max_process_workers", lambda: 4)
    check_local_workers(4)
    with pytest.raises(ConfigError) as err:
        DaskWorkerPool(5)
    assert str(err.value) == ("workers=5 is more than the dask executor starts on this machine (at most 4: 8 per "
                              "usable CPU, within the memory budget); use fewer workers or a cluster at "
                              "--scheduler ADDRESS")
    assert fake.clusters == []


def test_an_address_joins_that_cluster_after_probing_it(fake):
    with DaskWorkerPool(2, "tcp://10.0.0.1:8786") as pool:
        (client,) = fake.clients
        assert fake.probed == [("tcp://10.0.0.1:8786", CONNECT_SECONDS)] and fake.clusters == []
        assert client.target == "tcp://10.0.0.1:8786" and client.timeout == CONNECT_SECONDS
        assert client.calls == [("wait_for_workers", 2, CONNECT_SECONDS)]
        assert pool.scheduler == "tcp://10.0.0.1:8786" and pool.same_host is False and pool._cluster is None
        assert pool.addresses == ["tcp://127.0.0.1:1", "tcp://127.0.0.1:2"]
    assert fake.closed == []


def test_an_address_with_no_worker_count_takes_all_its_workers(fake):
    with DaskWorkerPool(0, "tcp://10.0.0.1:8786") as pool:
        assert fake.clients[0].calls == [("wait_for_workers", 1, CONNECT_SECONDS)]
        assert pool.addresses == sorted(ADDRESSES) and pool.n_workers == 3


def test_the_environment_names_the_scheduler_when_none_is_given(fake, monkeypatch):
    monkeypatch.setenv(dask_pool.SCHEDULER_ENV, "tcp://10.0.0.2:8786")
    with DaskWorkerPool(1) as pool:
        assert pool.scheduler == "tcp://10.0.0.2:8786" and fake.clients[0].target == "tcp://10.0.0.2:8786"
        assert pool.addresses == ["tcp://127.0.0.1:1"]
    monkeypatch.setenv(dask_pool.SCHEDULER_ENV, "")
    with DaskWorkerPool(1) as pool:
        assert pool.scheduler == "local" and len(fake.clusters) == 1


def test_an_address_that_refuses_the_client_is_a_usage_error(fake, monkeypatch):
    monkeypatch.setattr(FakeClient, "fail_connect", OSError("Timed out trying\n  to connect " + "x" * 200))
    with pytest.raises(ConfigError) as err:
        DaskWorkerPool(2, "tcp://10.0.0.1:8786")
    why = ("Timed out trying to connect " + "x" * 200)[:160]
    assert str(err.value) == f"cannot reach the dask scheduler at tcp://10.0.0.1:8786: {why}"
    monkeypatch.setattr(FakeClient, "fail_connect", TimeoutError())
    with pytest.raises(ConfigError) as err:
        DaskWorkerPool(2, "tcp://10.0.0.1:8786")
    assert str(err.value) == "cannot reach the dask scheduler at tcp://10.0.0.1:8786: TimeoutError"


def test_too_few_workers_at_an_address_is_a_usage_error_and_the_client_is_closed(fake, monkeypatch):
    monkeypatch.setattr(FakeClient, "fail_wait", True)
    with pytest.raises(ConfigError) as err:
        DaskWorkerPool(5, "tcp://10.0.0.1:8786")
    assert str(err.value) == "the dask scheduler at tcp://10.0.0.1:8786 has 3 worker(s), 5 needed (waited 8 s)"
    assert fake.clients[0].calls == [("wait_for_workers", 5, CONNECT_SECONDS), ("cancel", []), ("close", 5)]
    with pytest.raises(ConfigError, match=r"has 3 worker\(s\), 1 needed"):
        DaskWorkerPool(0, "tcp://10.0.0.1:8786")


def test_a_failed_local_start_closes_what_it_made(fake, monkeypatch):
    monkeypatch.setattr(FakeClient, "fail_wait", True)
    with pytest.raises(TimeoutError):
        DaskWorkerPool(2)
    assert fake.closed == fake.clusters and fake.clients[0].calls[-1] == ("close", 5)


# ---- registering and dealing and fetching ---------------------------------------------------------------------------


def test_register_installs_a_worker_plugin_under_a_fresh_handle(fake):
    with DaskWorkerPool(2) as pool:
        payload = object()
        h1, h2 = pool.register(payload), pool.register(payload)
        assert h1.startswith("nxgates-") and len(h1) == len("nxgates-") + 32 and h1 != h2
        (_, plugin, name), _ = fake.clients[0].calls[1:]
        assert name == h1 and plugin.handle == h1 and plugin.obj is payload
        assert pool._handles == [h1, h2]


def test_a_barrier_is_refused():
    pool = DaskWorkerPool.__new__(DaskWorkerPool)
    with pytest.raises(NotImplementedError) as err:
        pool.barrier(2, 1.0)
    assert str(err.value) == "a Dask cluster's workers share no barrier with this process"


def task(ctx, worker):
    return ctx * 10 + worker


def test_each_workers_tasks_go_as_one_batch_pinned_to_its_address(fake):
    with DaskWorkerPool(2) as pool:
        for b in range(5):
            pool.submit(task, b)
        assert pool._planned == {0: "tcp://127.0.0.1:1", 1: "tcp://127.0.0.1:2", 2: "tcp://127.0.0.1:1",
                                 3: "tcp://127.0.0.1:2", 4: "tcp://127.0.0.1:1"}
        pool.flush()
        client = fake.clients[0]
        assert [f.fn for f in client.futures] == [run_remote_batch, run_remote_batch]
        first, second = client.futures
        assert first.args == ([(task, 0), (task, 2), (task, 4)], 0)
        assert second.args == ([(task, 1), (task, 3)], 1)
        for worker, future in enumerate(client.futures):
            kwargs = dict(future.kwargs)
            key = kwargs.pop("key")
            assert kwargs == {"workers": [pool.addresses[worker]], "allow_other_workers": True, "pure": False}
            assert key.startswith(f"nxgates-batch-{worker}-") and len(key) == len(f"nxgates-batch-{worker}-") + 32
        assert first.kwargs["key"] != second.kwargs["key"]
        assert pool._batches == {first, second} and pool._queued == {}
        pool.flush()
        assert len(client.futures) == 2  # nothing queued: nothing sent


def test_a_finished_batch_delivers_each_task_with_the_worker_that_really_ran_it(fake):
    got = {}
    with DaskWorkerPool(2) as pool:
        for b in range(4):
            pool.submit(task, b, label=f"example {b}", on_result=lambda v, b=b: got.__setitem__(b, v))
        pool.flush()
        first, second = fake.clients[0].futures
        first.finish(("tcp://127.0.0.1:1", [(None, 0), (None, 20)]))
        second.finish(("tcp://127.0.0.1:9", np.array([[1.0], [3.0]])))  # moved to a worker that joined later
        res = pool.wait(4, timeout=10)
        assert res.reached and res.finished == 4 and pool._batches == set()
        assert got[0] == 0 and got[2] == 20 and got[1].tolist() == [1.0] and got[3].tolist() == [3.0]
        assert [(r.worker, r.address, r.done, r.error) for r in pool.records] == [
            (0, "tcp://127.0.0.1:1", True, None), (2, "tcp://127.0.0.1:9", True, None),
            (0, "tcp://127.0.0.1:1", True, None), (2, "tcp://127.0.0.1:9", True, None)]
        assert pool._seen == ["tcp://127.0.0.1:1", "tcp://127.0.0.1:2", "tcp://127.0.0.1:9"]
        assert pool.tasks_per_worker(pool.records) == {"tcp://127.0.0.1:1": 2, "tcp://127.0.0.1:9": 2}


def test_a_task_error_fails_only_that_task(fake):
    with DaskWorkerPool(1) as pool:
        pool.submit(task, 0)
        pool.submit(task, 1)
        pool.flush()
        fake.clients[0].futures[0].finish(("tcp://127.0.0.1:1", [(None, 0), ("ValueError: bad row", None)]))
        res = pool.wait(2, timeout=10)
        assert not res.reached and res.finished == 2
        assert [r.error for r in pool.records] == [None, "ValueError: bad row"]


def test_a_failed_batch_fails_each_of_its_tasks_on_one_line(fake):
    with DaskWorkerPool(1) as pool:
        pool.submit(task, 0)
        pool.submit(task, 1)
        pool.flush()
        future = fake.clients[0].futures[0]
        future.finish(error=RuntimeError("worker   died\n while running " + "y" * 300))
        res = pool.wait(2, timeout=10)
        assert not res.reached and res.finished == 2 and pool._batches == set()
        why = ("worker died while running " + "y" * 300)[:200]
        assert [r.error for r in pool.records] == [f"RuntimeError: {why}"] * 2
        assert [r.address for r in pool.records] == ["", ""]


def test_a_batch_finishing_after_close_is_not_fetched(fake):
    pool = DaskWorkerPool(1)
    pool.submit(task, 0)
    pool.flush()
    future = fake.clients[0].futures[0]
    pool.close()
    future.finish(("tcp://127.0.0.1:1", [(None, 0)]))  # the fetchers are shut down: nothing raises
    assert pool.records[0].done is False


def test_a_batch_whose_outcomes_do_not_match_its_tasks_is_refused(fake):
    with DaskWorkerPool(1) as pool:
        pool.submit(task, 0)
        pool.submit(task, 1)
        items = pool._queued.pop(0)
        future = FakeFuture()
        future.finish(("tcp://127.0.0.1:1", [(None, 0)]))
        with pytest.raises(ValueError, match="zip"):
            pool._finish_batch(items, future)


# ---- health and shutdown --------------------------------------------------------------------------------------------


def records_run_on(pool, *addresses):
    records = []
    for task_no, address in enumerate(addresses):
        pool._planned[task_no] = pool.addresses[task_no % 2]
        records.append(TaskRecord(task_no, 0, f"task {task_no}", done=address is not None, address=address or ""))
    return records


def test_health_is_quiet_when_every_task_ran_where_planned(fake, monkeypatch):
    monkeypatch.setattr(FakeClient, "alive", ADDRESSES)
    with DaskWorkerPool(2) as pool:
        records = records_run_on(pool, "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", None)
        assert pool.health(records) == ([], {"workers_lost": [], "tasks_rerun": 0})


def test_health_counts_tasks_the_scheduler_moved(fake, monkeypatch):
    monkeypatch.setattr(FakeClient, "alive", ADDRESSES)
    with DaskWorkerPool(2) as pool:
        records = records_run_on(pool, "tcp://127.0.0.1:2", "tcp://127.0.0.1:2", "tcp://127.0.0.1:1")
        records.append(TaskRecord(9, 0, "unplanned", done=False, address="tcp://127.0.0.1:3"))
        assert pool.health(records) == ([" dask: 1 task(s) moved off their planned worker by the scheduler"],
                                        {"workers_lost": [], "tasks_rerun": 1})


def test_health_names_lost_workers_and_the_tasks_rerun(fake, monkeypatch):
    monkeypatch.setattr(FakeClient, "alive", ["tcp://127.0.0.1:3"])
    with DaskWorkerPool(2) as pool:
        records = records_run_on(pool, "tcp://127.0.0.1:3", "tcp://127.0.0.1:3", "tcp://127.0.0.1:1")
        assert pool.health(records) == (
            [" dask: 2 worker(s) lost (tcp://127.0.0.1:1, tcp://127.0.0.1:2); 2 task(s) re-run on other workers"],
            {"workers_lost": ["tcp://127.0.0.1:1", "tcp://127.0.0.1:2"], "tasks_rerun": 2})


def test_health_counts_every_planned_worker_lost_when_the_scheduler_is_gone(fake):
    with DaskWorkerPool(2) as pool:
        records = records_run_on(pool, "tcp://127.0.0.1:1")
        assert pool.health(records) == (
            [" dask: 1 worker(s) lost (tcp://127.0.0.1:1); 0 task(s) re-run on other workers"],
            {"workers_lost": ["tcp://127.0.0.1:1"], "tasks_rerun": 0})


def test_closing_a_joined_cluster_cancels_batches_and_forgets_registered_objects(fake):
    pool = DaskWorkerPool(2, "tcp://10.0.0.1:8786")
    h1, h2 = pool.register("a"), pool.register("b")
    pool.submit(task, 0)
    pool.flush()
    (future,) = fake.clients[0].futures
    pool.close()
    client = fake.clients[0]
    assert client.calls[3:] == [("cancel", [future]), ("unregister_worker_plugin", h1),
                                ("unregister_worker_plugin", h2), ("close", 5)]
    assert pool._client is None and pool._cluster is None and fake.closed == []
    pool.close()  # a second close has nothing left to do
    assert len(client.calls) == 7


def test_closing_our_own_cluster_stops_it_without_unregistering(fake):
    pool = DaskWorkerPool(2)
    pool.register("a")
    pool.close()
    client = fake.clients[0]
    assert client.calls[2:] == [("cancel", []), ("close", 5)] and fake.closed == fake.clusters


def test_closing_survives_a_cluster_that_is_gone(fake, monkeypatch):
    pool = DaskWorkerPool(2, "tcp://10.0.0.1:8786")
    pool.register("a")

    def gone(*args, **kwargs):
        raise OSError("connection closed")

    for name in ("cancel", "unregister_worker_plugin", "close"):
        monkeypatch.setattr(fake.clients[0], name, gone)
    pool.close()
    assert pool._client is None


def test_closing_does_not_wait_for_a_fetch_and_cancels_those_queued(fake):
    pool = DaskWorkerPool(1)
    release = threading.Event()
    safety = threading.Timer(5, release.set)
    safety.start()
    running = pool._fetchers.submit(release.wait, 10)
    queued = pool._fetchers.submit(release.wait, 10)
    pool.close()
    try:
        assert not release.is_set() and queued.cancelled() and not running.cancelled()
    finally:
        release.set()
        safety.cancel()


# ---- a session's LocalCluster ---------------------------------------------------------------------------------------


def test_a_session_lends_one_cluster_and_restarts_it_for_another_size(fake):
    with session_cluster():
        first = borrow_local_cluster(2)
        assert borrow_local_cluster(2) is first and fake.clusters == [first] and first.n == 2
        second = borrow_local_cluster(3)
        assert second is not first and second.n == 3 and fake.closed == [first]
        assert cluster_module.SESSIONS[-1] == {"cluster": second, "workers": 3}
        with DaskWorkerPool(3) as pool:
            assert pool._cluster is None and fake.clients[0].target is second
        assert fake.closed == [first]  # the pool borrowed it: the session stops it
    assert fake.closed == [first, second] and cluster_module.SESSIONS == []


def test_a_session_that_started_no_cluster_stops_nothing(fake):
    with session_cluster():
        assert cluster_module.SESSIONS == [{"cluster": None, "workers": 0}]
    assert fake.closed == [] and cluster_module.SESSIONS == []


def test_a_failed_start_in_a_session_leaves_no_cluster_behind(fake, monkeypatch):
    with session_cluster():
        first = borrow_local_cluster(2)

        def refuse(n):
            raise OSError("no ports")

        monkeypatch.setattr(cluster_module, "local_cluster", refuse)
        with pytest.raises(OSError):
            borrow_local_cluster(4)
        assert cluster_module.SESSIONS[-1] == {"cluster": None, "workers": 0}
    assert fake.closed == [first]
