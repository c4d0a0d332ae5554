"""A plugin's run under a deadline it ignores: its result, its SystemExit, or GateTimeout at the deadline."""

import sys
import threading
import time

import pytest

from nxgates.deadline import abandoned_threads, call_with_deadline
from nxgates.errors import GateTimeout


def test_the_result_comes_back():
    assert call_with_deadline("g", lambda: 42, None) == 42


def test_a_sys_exit_in_the_thread_reaches_the_caller():
    with pytest.raises(SystemExit) as info:
        call_with_deadline("g", lambda: sys.exit(0), time.monotonic() + 5)
    assert info.value.code == 0


def test_the_deadline_holds_for_a_run_that_never_checks_the_time():
    release = threading.Event()
    start = time.monotonic()
    with pytest.raises(GateTimeout):
        call_with_deadline("sleepy", lambda: release.wait(30), time.monotonic() + 0.3)
    assert time.monotonic() - start < 2
    assert any(t.name.endswith("sleepy") for t in abandoned_threads())
    release.set()
