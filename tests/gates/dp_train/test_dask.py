"""dp-train on Dask: the job travels once, each step's weights as one more shared object, rows come back;
the weights are bit-identical to the local executors' and every fault is still caught by its check."""

import pytest

from nxgates.core import chunks
from nxgates.core.pool import dask as dask_pool
from nxgates.gates import dp_train
from tests.helpers import ctx, record_made

pytest.importorskip("distributed")

SEED = {"D": 8, "H": 16, "O": 4, "B": 8, "steps": 5, "lr_num": 1, "lr_den": 8, "workers": 2, "executor": "dask",
        "step_exp": 6, "tol_permil": 10, "d4_examples": 0}


@pytest.fixture
def cluster(dask_scheduler):
    return dask_scheduler(3)  # D2 runs on one worker more than D1


def by_name(out):
    return {c.name: c.passed for c in out.checks}


@pytest.mark.parametrize("sizes", [{}, {"D": 5, "H": 7, "O": 3, "B": 6, "steps": 3}], ids=["seed", "odd"])
def test_dask_trains_to_the_weights_of_thread_and_process(cluster, sizes):
    params = {**SEED, **sizes}
    digests = {}
    for executor, options in (("thread", {}), ("process", {}), ("dask", {"scheduler": cluster})):
        out = dp_train.run(ctx({**params, "executor": executor}, **options))
        assert all(by_name(out).values()), (executor, by_name(out))
        digests[executor] = out.metrics["weights_sha256"]
    assert len(set(digests.values())) == 1, digests


@pytest.mark.parametrize("fault", ["completion-order", "stale-weights", "wrong-sign"])
def test_faults_are_caught_on_dask_by_their_checks(cluster, fault):
    out = dp_train.run(ctx(SEED, fault, scheduler=cluster))
    failed = {name for name, ok in by_name(out).items() if not ok}
    assert failed >= set(dp_train.FAULTS[fault].caught_by), failed


def test_dask_streams_a_step_in_chunks_to_the_same_weights(cluster, monkeypatch):
    """Chunks of 3 examples on Dask: each chunk's rows come back into the chunk buffer they were dealt from,
    and the step's weights travel once per step (not once per chunk); the thread executor's bits."""
    params = {**SEED, "D": 5, "H": 7, "O": 3, "B": 11, "steps": 3}
    expected = dp_train.run(ctx({**params, "executor": "thread"})).metrics["weights_sha256"]
    monkeypatch.setattr(chunks, "REMOTE_CHUNK_BYTES", 3 * 4 * (5 * 7 + 3 * 7))  # three rows a chunk
    shared = []
    real_register = dask_pool.DaskWorkerPool.register

    def register(self, obj):
        shared.append(obj)
        return real_register(self, obj)

    monkeypatch.setattr(dask_pool.DaskWorkerPool, "register", register)
    from nxgates.gates.dp_train.training import TrainingJob

    jobs = record_made(monkeypatch, TrainingJob, "make")
    out = dp_train.run(ctx(params, scheduler=cluster))
    assert all(by_name(out).values()) and out.metrics["weights_sha256"] == expected
    # the serial run's job is in this process (the whole batch a chunk); each pool's streams the cluster's chunks
    assert [job.grads.shape[1] for job in jobs] == [11, 3, 3]
    assert len(shared) == 2 * (1 + 3)  # two pools (D1, D2): the job, then one set of weights per step


@pytest.mark.parametrize("executor", ["dask", "auto"])
def test_a_scheduler_address_is_the_cluster_used_and_none_is_started(cluster, executor, monkeypatch):
    """--scheduler ADDRESS: the run is on that cluster (with executor=auto too), never on one of its own."""
    def no_cluster_of_its_own(*args):
        raise AssertionError("started a LocalCluster though an address was given")

    monkeypatch.setattr(dask_pool, "local_cluster", no_cluster_of_its_own)
    monkeypatch.setattr(dask_pool, "_borrow_local_cluster", no_cluster_of_its_own)
    used = []
    real_connect = dask_pool.DaskWorkerPool._connect

    def connect(self, distributed, n_workers, scheduler):
        used.append(scheduler)
        return real_connect(self, distributed, n_workers, scheduler)

    monkeypatch.setattr(dask_pool.DaskWorkerPool, "_connect", connect)
    out = dp_train.run(ctx({**SEED, "executor": executor}, scheduler=cluster))
    assert all(by_name(out).values()) and used and set(used) == {cluster}
