"""The dask pool against a real LocalCluster: pinning, real worker addresses, rows back, faults, bad addresses."""

import os
import pickle
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from nxgates.core.pool import dask as dask_pool
from nxgates.core.pool import make_pool, resolve
from nxgates.errors import ConfigError
from nxgates.gates.parallel_grad import host_memory
from nxgates.gates.parallel_grad.faults import DropTask, SingleWorker

distributed = pytest.importorskip("distributed")


@pytest.fixture
def cluster(dask_scheduler):
    """The session's LocalCluster of two single-threaded worker processes; pools join it by address."""
    return dask_scheduler(2)


def where(ctx, worker):
    from distributed import get_worker

    return ctx, worker, get_worker().address


def scaled_row(ctx, worker):
    handle, i = ctx
    return resolve(handle)[i] * 2


def boom(ctx, worker):
    if ctx == 2:
        raise ValueError("example 2 exploded")


def test_tasks_are_pinned_round_robin_and_report_the_worker_that_ran_them(cluster):
    got = {}
    with make_pool("dask", 0, scheduler=cluster) as pool:
        assert pool.n_workers == 2 and pool.scheduler == cluster
        for b in range(6):
            pool.submit(where, b, label=f"example {b}", on_result=lambda v: got.__setitem__(v[0], v))
        assert pool.wait(6, timeout=30).reached
        assert pool.workers_used(pool.records) == {0, 1}
        for r in pool.records:  # worker n mod 2 ran task n, and each task said so itself
            assert r.address == pool.addresses[r.task % 2] == got[r.task][2]
            assert r.worker == r.task % 2 and got[r.task][1] == r.task % 2
        assert pool.tasks_per_worker(pool.records) == {a: 3 for a in pool.addresses}
        assert pool.health(pool.records) == ([], {"workers_lost": [], "tasks_rerun": 0})


def test_registered_objects_travel_once_and_values_come_back(cluster):
    rows = np.zeros((4, 3), np.float32)
    with make_pool("dask", 2, scheduler=cluster) as pool:
        handle = pool.register(np.arange(12, dtype=np.float32).reshape(4, 3))
        for i in range(4):
            pool.submit(scaled_row, (handle, i), on_result=lambda row, i=i: rows.__setitem__(i, row))
        assert pool.wait(4, timeout=30).reached
    assert rows.tolist() == (np.arange(12).reshape(4, 3) * 2).tolist()


def test_a_raising_task_is_recorded_and_does_not_hang(cluster):
    with make_pool("dask", 2, scheduler=cluster) as pool:
        for b in range(4):
            pool.submit(boom, b, label=f"example {b}")
        res = pool.wait(4, timeout=30)
        assert not res.reached and not res.timed_out and res.finished == 4
        (bad,) = [r for r in pool.records if r.error]
        assert bad.label == "example 2" and bad.error == "ValueError: example 2 exploded"


def test_a_failing_on_result_fails_its_task(cluster):
    def refuse(value):
        raise RuntimeError("cannot store")

    with make_pool("dask", 2, scheduler=cluster) as pool:
        pool.submit(where, 0, on_result=refuse)
        assert not pool.wait(1, timeout=30).reached
        assert pool.records[0].error == "RuntimeError: cannot store"


def test_single_worker_and_drop_task_faults(cluster):
    with make_pool("dask", 2, SingleWorker, scheduler=cluster) as pool:
        for b in range(6):
            pool.submit(where, b)
        assert pool.wait(6, timeout=30).reached
        assert pool.workers_used(pool.records) == {0}
    with make_pool("dask", 2, DropTask, scheduler=cluster) as pool:
        for b in range(8):
            pool.submit(where, b, label=f"example {b}")
        res = pool.wait(8, timeout=30)
        assert not res.reached and not res.timed_out
        assert [r.label for r in pool.records if not r.done] == ["example 3"]


def test_more_workers_than_the_cluster_has_is_a_usage_error(cluster, monkeypatch):
    monkeypatch.setattr(dask_pool, "CONNECT_SECONDS", 0.5)
    with pytest.raises(ConfigError, match=r"has 2 worker\(s\), 3 needed"):
        make_pool("dask", 3, scheduler=cluster)


def test_unreachable_scheduler_is_a_usage_error_naming_it_within_the_bound(monkeypatch):
    monkeypatch.setattr(dask_pool, "CONNECT_SECONDS", 1.0)
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="cannot reach the dask scheduler at tcp://127.0.0.1:9"):
        make_pool("dask", 2, scheduler="tcp://127.0.0.1:9")
    assert time.monotonic() - t0 < 10
    with pytest.raises(ConfigError, match="cannot reach the dask scheduler at no-port-here"):
        make_pool("dask", 2, scheduler="no-port-here")
    assert dask_pool.CONNECT_SECONDS <= 15


def test_a_failed_connect_leaves_no_client_for_the_garbage_collector(monkeypatch):
    """The half-made client of a refused address is collected (and closed) before the error is raised. Left
    in its cycle, a later collection inside another client's start closes it there, and that close waits on
    the loop lock the start holds: the process hangs."""
    import gc

    from distributed import Client

    monkeypatch.setattr(dask_pool, "CONNECT_SECONDS", 1.0)
    gc.collect()
    gc.disable()  # no collection but the pool's own
    try:
        with pytest.raises(ConfigError, match="cannot reach the dask scheduler at no-port-here"):
            make_pool("dask", 2, scheduler="no-port-here")
        left = [c for c in gc.get_objects() if isinstance(c, Client) and c.status != "closed"]
    finally:
        gc.enable()
    assert left == []


def test_env_variable_names_the_scheduler(cluster, monkeypatch):
    monkeypatch.setenv(dask_pool.SCHEDULER_ENV, cluster)
    with make_pool("dask", 2) as pool:
        assert pool.scheduler == cluster and pool._cluster is None


def test_a_scheduler_address_with_a_local_executor_is_a_usage_error():
    with pytest.raises(ConfigError, match="executor=dask, not executor=thread"):
        make_pool("thread", 2, scheduler="tcp://127.0.0.1:8786")


def test_without_distributed_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'nxgates\[dask\]'"):
        make_pool("dask", 2)


def test_lora_start_up_never_imports_distributed(tmp_path):
    code = ("import sys; from nxgates.cli import cli; cli.main(['run', 'lora', '-q'], standalone_mode=False); "
            "print('distributed' in sys.modules, 'nxgates.core.pool.dask' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.stdout.split()[-2:] == ["False", "False"], r.stderr


def test_host_array_pickles_as_shared_memory_and_views_as_copies(tmp_path):
    arr = host_memory.host_array((4,))
    try:
        arr[...] = 1
        other = pickle.loads(pickle.dumps(arr))
        other[2] = 5  # another mapping of the same file: the write shows through
        assert arr.tolist() == [1, 1, 5, 1]
        view = pickle.loads(pickle.dumps(arr[1:3]))
        view[0] = 9
        assert arr.tolist() == [1, 1, 5, 1] and type(view) is np.ndarray
    finally:
        os.unlink(arr.path)


def test_host_barrier_releases_all_parties_and_breaks_on_timeout_or_abort():
    barrier = host_memory.HostBarrier(2, timeout=5)
    other = pickle.loads(pickle.dumps(barrier))  # what a second worker process would hold
    try:
        t = threading.Thread(target=other.wait)
        t.start()
        barrier.wait()
        t.join(5)
        assert not t.is_alive()
    finally:
        os.unlink(barrier.path)
    lonely = host_memory.HostBarrier(2, timeout=0.2)
    try:
        with pytest.raises(threading.BrokenBarrierError):
            lonely.wait()
    finally:
        os.unlink(lonely.path)
    aborted = host_memory.HostBarrier(2, timeout=5)
    try:
        aborted.abort()
        t0 = time.monotonic()
        with pytest.raises(threading.BrokenBarrierError):
            aborted.wait()
        assert time.monotonic() - t0 < 2
    finally:
        os.unlink(aborted.path)


def test_without_distributed_the_cli_exits_2_with_one_line(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from nxgates.cli import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "distributed", None)
    r = CliRunner().invoke(cli, ["run", "parallel-grad", "--executor", "dask"], catch_exceptions=False)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == "nxgates: error: executor=dask needs the optional 'dask' extra: pip install 'nxgates[dask]'\n"
