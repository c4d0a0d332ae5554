"""Objects a pool's tasks reach by handle: registered, resolved by tasks, forgotten at close."""

import pytest

from nxgates.core.pool.handles import forget, register, resolve


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
