"""Objects shared with a pool's tasks: registered under handles, resolved by tasks, forgotten at close."""

import pytest

from nxgates.core.pool import resolve
from nxgates.core.pool.shared import TaskRecord, WaitResult, forget, register


def test_register_hands_out_a_new_integer_handle_per_object():
    first, second = object(), object()
    h1, h2 = register(first), register(second)
    try:
        assert isinstance(h1, int) and isinstance(h2, int) and h2 > h1
        assert resolve(h1) is first and resolve(h2) is second
    finally:
        forget(h1)
        forget(h2)


def test_register_under_a_given_handle_keeps_that_handle():
    obj = [1, 2, 3]
    assert register(obj, "given-handle") == "given-handle"
    try:
        assert resolve("given-handle") is obj
    finally:
        forget("given-handle")


def test_forget_drops_the_object_and_ignores_an_unknown_handle():
    handle = register("payload")
    forget(handle)
    with pytest.raises(KeyError):
        resolve(handle)
    forget(handle)  # already gone: nothing happens
    forget("never-registered")


def test_forget_leaves_other_handles_alone():
    keep, drop = register("keep"), register("drop")
    fresh = register("under none", None)  # None asks for a fresh handle, never the key None
    try:
        forget(drop)
        assert resolve(keep) == "keep"
        with pytest.raises(KeyError):
            resolve(None)
    finally:
        forget(keep)
        forget(fresh)


def test_records_and_wait_results_start_as_declared():
    record = TaskRecord(3, 1, "example 3")
    assert (record.task, record.worker, record.label) == (3, 1, "example 3")
    assert record.done is False and record.error is None and record.address == ""
    assert WaitResult(True, False, 4) == WaitResult(reached=True, timed_out=False, finished=4)
