"""What runs on a Dask worker, called here with a stand-in worker: the task loop with the worker's address,
rows packed as one block, and a registered object installing itself on a worker and leaving with it."""

import types

import numpy as np
import pytest

from nxgates.core.pool.dask.remote import RegisteredObject, pack, run_remote_batch, unpack
from nxgates.core.pool.handles import forget, register, resolve

distributed = pytest.importorskip("distributed")



def task(ctx, worker):
    return ctx * 10 + worker


def explode(ctx, worker):
    raise KeyError(f"row {ctx}")


@pytest.fixture
def on_worker(monkeypatch):
    monkeypatch.setattr(distributed, "get_worker", lambda: types.SimpleNamespace(address="tcp://127.0.0.1:7"))


def test_a_remote_batch_reports_its_worker_and_each_outcome(on_worker):
    assert run_remote_batch([(task, 1), (explode, 2), (task, 3)], 5) == (
        "tcp://127.0.0.1:7", [(None, 15), ("KeyError: 'row 2'", None), (None, 35)])


def test_a_remote_batch_of_equal_arrays_travels_as_one_block(on_worker):
    def row(ctx, worker):
        return np.full(3, ctx + worker, np.float32)

    address, packed = run_remote_batch([(row, 1), (row, 2)], 1)
    assert address == "tcp://127.0.0.1:7" and isinstance(packed, np.ndarray)
    assert packed.tolist() == [[2, 2, 2], [3, 3, 3]] and packed.dtype == np.float32


def test_pack_stacks_only_error_free_arrays_of_one_shape_and_dtype():
    a, b = np.zeros(2, np.float32), np.ones(2, np.float32)
    stacked = pack([(None, a), (None, b)])
    assert isinstance(stacked, np.ndarray) and stacked.tolist() == [[0, 0], [1, 1]]
    assert [row.tolist() for _, row in unpack(stacked)] == [[0, 0], [1, 1]]
    assert all(err is None for err, _ in unpack(stacked))
    for outcomes in ([], [(None, a), (None, np.ones(3, np.float32))], [(None, a), (None, np.ones(2, np.float64))],
                     [(None, a), ("ValueError: x", None)], [(None, a), (None, [1, 1])], [(None, 1), (None, 2)]):
        assert pack(outcomes) is outcomes and unpack(outcomes) is outcomes


def test_a_registered_object_registers_itself_on_a_worker_and_leaves_with_it():
    plugin = RegisteredObject("nxgates-test-handle", {"rows": 3})
    assert plugin.handle == "nxgates-test-handle" and plugin.obj == {"rows": 3}
    try:
        plugin.setup(worker=None)
        assert resolve("nxgates-test-handle") is plugin.obj
        plugin.teardown(worker=None)
        with pytest.raises(KeyError):
            resolve("nxgates-test-handle")
    finally:
        forget("nxgates-test-handle")


def test_a_registered_object_teardown_forgets_only_its_handle():
    other = register("other")
    try:
        RegisteredObject("nxgates-test-handle", 1).teardown(worker=None)
        assert resolve(other) == "other"
    finally:
        forget(other)
