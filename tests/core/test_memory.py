"""The memory budget: what the machine has available now, within the address space ulimit -v leaves, and
the one-line refusal of a size beyond half of it."""

import builtins
import os
import resource
import sys

import pytest

from nxgates.core import memory
from nxgates.core.memory import BUDGET_FRACTION, available_bytes, fmt_bytes, require
from nxgates.errors import ResourceError

UNLIMITED = 1 << 62


@pytest.fixture
def proc(monkeypatch, tmp_path):
    """Stand-in contents for /proc/meminfo and /proc/self/status (None: the file cannot be opened)."""
    files = {"/proc/meminfo": None, "/proc/self/status": None}
    real_open = builtins.open

    def fake_open(path, *args, **kwargs):
        if path not in files or files[path] is None:
            raise FileNotFoundError(2, "No such file or directory", path)
        stand_in = tmp_path / path.strip("/").replace("/", "_")
        stand_in.write_text(files[path], encoding="ascii")
        return real_open(stand_in, *args, **kwargs)

    monkeypatch.setattr(memory, "open", fake_open, raising=False)
    return files


@pytest.fixture
def sysconf(monkeypatch):
    values = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 1000}

    def fake_sysconf(name):
        if name not in values:
            raise ValueError("unrecognized configuration name")
        return values[name]

    monkeypatch.setattr(os, "sysconf", fake_sysconf)
    return values


def _limit(monkeypatch, soft, hard=123 << 40):
    limits = {resource.RLIMIT_AS: (soft, hard)}
    monkeypatch.setattr(resource, "getrlimit", lambda which: limits[which])


MEMINFO = "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    12345678 kB\nBuffers: 1 kB\n"


def test_the_budget_is_half_of_what_is_available():
    assert BUDGET_FRACTION == 0.5


def test_available_memory_is_memavailable_in_bytes(proc, sysconf):
    proc["/proc/meminfo"] = MEMINFO
    assert memory._system_available() == 12345678 * 1024


def test_without_memavailable_the_physical_memory_counts(proc, sysconf):
    proc["/proc/meminfo"] = "MemTotal:       16000000 kB\nMemFree:         1000000 kB\n"
    assert memory._system_available() == 4096 * 1000


def test_an_unreadable_meminfo_falls_back_to_the_physical_memory(proc, sysconf):
    assert memory._system_available() == 4096 * 1000  # cannot be opened
    proc["/proc/meminfo"] = "MemAvailable:\n"
    assert memory._system_available() == 4096 * 1000  # no number
    proc["/proc/meminfo"] = "MemAvailable: many kB\n"
    assert memory._system_available() == 4096 * 1000  # not a number


def test_without_any_source_the_machine_is_taken_to_have_8_gib(proc, sysconf):
    sysconf.clear()
    assert memory._system_available() == 8 * 1024**3


def test_the_address_space_left_is_the_limit_less_what_is_mapped(monkeypatch, proc):
    _limit(monkeypatch, 10 << 30)
    proc["/proc/self/status"] = "Name:\tpython\nVmPeak:\t 9999 kB\nVmSize:\t 2000 kB\nVmRSS: 10 kB\n"
    assert memory._address_space_left() == (10 << 30) - 2000 * 1024


def test_an_unknown_mapped_size_counts_as_nothing_mapped(monkeypatch, proc):
    _limit(monkeypatch, 10 << 30)
    assert memory._address_space_left() == 10 << 30  # status cannot be opened
    proc["/proc/self/status"] = "Name:\tpython\n"
    assert memory._address_space_left() == 10 << 30  # no VmSize line
    proc["/proc/self/status"] = "VmSize:\n"
    assert memory._address_space_left() == 10 << 30
    proc["/proc/self/status"] = "VmSize: lots kB\n"
    assert memory._address_space_left() == 10 << 30


def test_a_limit_already_used_up_leaves_nothing(monkeypatch, proc):
    _limit(monkeypatch, 1 << 20)
    proc["/proc/self/status"] = "VmSize:\t 2048 kB\n"
    assert memory._address_space_left() == 0
    _limit(monkeypatch, 2048 * 1024)
    assert memory._address_space_left() == 0
    _limit(monkeypatch, 2048 * 1024 + 1)
    assert memory._address_space_left() == 1


def test_a_zero_limit_leaves_nothing(monkeypatch, proc):
    _limit(monkeypatch, 0)
    assert memory._address_space_left() == 0


def test_no_address_space_limit_is_a_very_large_number(monkeypatch, proc):
    proc["/proc/self/status"] = "VmSize:\t 2048 kB\n"
    _limit(monkeypatch, resource.RLIM_INFINITY)
    assert memory._address_space_left() == UNLIMITED
    _limit(monkeypatch, -5)
    assert memory._address_space_left() == UNLIMITED


def test_without_the_resource_module_the_address_space_is_unlimited(monkeypatch):
    monkeypatch.setitem(sys.modules, "resource", None)
    assert memory._address_space_left() == UNLIMITED


def test_a_failing_limit_query_means_unlimited(monkeypatch):
    def broken(which):
        raise OSError("no")

    monkeypatch.setattr(resource, "getrlimit", broken)
    assert memory._address_space_left() == UNLIMITED


def test_the_soft_limit_is_the_one_that_counts(monkeypatch, proc):
    _limit(monkeypatch, 5 << 30, 50 << 30)
    assert memory._address_space_left() == 5 << 30


def test_available_bytes_is_the_smaller_of_memory_and_address_space(monkeypatch):
    monkeypatch.setattr(memory, "_system_available", lambda: 1000)
    monkeypatch.setattr(memory, "_address_space_left", lambda: 3000)
    assert available_bytes() == 1000
    monkeypatch.setattr(memory, "_address_space_left", lambda: 700)
    assert available_bytes() == 700


def test_available_bytes_on_this_machine_is_a_positive_int():
    n = available_bytes()
    assert type(n) is int and n > 0


def test_a_size_within_half_of_the_available_memory_is_accepted_and_one_byte_more_refused(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 2001)
    assert require(1000, "the batch") is None  # exactly the budget (half of 2001, rounded down): no refusal
    assert require(0, "nothing") is None
    with pytest.raises(ResourceError, match=r"^the batch needs about 1001 B but the memory budget is 1000 B "):
        require(1001, "the batch")


def test_a_size_beyond_the_budget_is_refused_with_both_sizes(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 2001)
    with pytest.raises(ResourceError) as err:
        require(1001, "the batch")
    assert str(err.value) == ("the batch needs about 1001 B but the memory budget is 1000 B "
                              "(half of the memory available now); use smaller sizes")
    monkeypatch.setattr(memory, "available_bytes", lambda: 3 << 30)
    with pytest.raises(ResourceError) as err:
        require(5 << 30, "per-example gradients")
    assert str(err.value) == ("per-example gradients needs about 5.0 GiB but the memory budget is 1.5 GiB "
                              "(half of the memory available now); use smaller sizes")


def test_bytes_below_a_kib_are_printed_whole():
    assert [fmt_bytes(n) for n in (0, 1, 512, 1023)] == ["0 B", "1 B", "512 B", "1023 B"]


def test_larger_sizes_take_the_largest_binary_unit_below_1024():
    assert fmt_bytes(1024) == "1.0 KiB"
    assert fmt_bytes(1536) == "1.5 KiB"
    assert fmt_bytes(1024**2 - 1) == "1024.0 KiB"
    assert fmt_bytes(1024**2) == "1.0 MiB"
    assert fmt_bytes(1025 * 1024) == "1.0 MiB"
    assert fmt_bytes(3 * 1024**3 // 2) == "1.5 GiB"
    assert fmt_bytes(1024**3) == "1.0 GiB"
    assert fmt_bytes(1024**4) == "1.0 TiB"
    assert fmt_bytes(5 * 1024**4 // 2) == "2.5 TiB"


def test_tib_is_the_largest_unit():
    assert fmt_bytes(1024**5) == "1024.0 TiB"
    assert fmt_bytes(3 * 1024**6) == "3145728.0 TiB"
