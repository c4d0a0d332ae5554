"""The suite under pytest-xdist (``make test``: ``-n auto --dist loadgroup``): which tests share a worker, and the
session's /dev/shm check across the worker processes. Without xdist (``pytest`` alone) nothing here changes a run.

Groups. ``--dist loadgroup`` hands the tests of one ``xdist_group`` to one worker, one after the other; every other
test goes to whichever worker is free. Two groups are made here from each test module's source, so that a test
moved or added is grouped by what it does rather than by a list of names that would go stale:

- ``whole-machine``: a module that starts a Dask cluster, sends signals, or measures wall-clock time (its
  assertions bound how long something took, or it waits on a process it stops). These tests never run beside
  each other, and a cluster started for one module is the only one running. They are marked ``whole_machine``
  too (with or without xdist), which ``make test-fast`` leaves out: they are most of the suite's waiting.
- ``module:<path>``: any other module that defines a fixture of module scope or wider (a Chromium rendering, a
  report made once for the module): its tests share one worker, so the fixture is made once, not once per worker.

/dev/shm. Each worker runs :func:`tests.conftest.pytest_sessionfinish` itself: it reclaims the files of processes
that are gone and lists those it made and did not remove in ``workeroutput``. The controller, which runs no test,
gathers those lists and fails the run when one is not empty; a worker that crashed reported nothing, its files
are those of a process that is gone (reclaimed, as the next run would), and the crash fails the run already.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

WHOLE_MACHINE = "whole-machine"
#: what a module does, from its source, that keeps it off a worker running beside another test of the kind
NEEDS_THE_MACHINE = re.compile(
    r"local_cluster\(|LocalCluster\("  # a Dask cluster: worker processes that want every core
    r"|os\.kill\(|os\.killpg\(|\.send_signal\(|signal\.alarm\(|signal\.setitimer\("  # signals
    r"|time\.monotonic\(|perf_counter\(|thread_time\(|process_time\(|\.seconds\s*<"  # wall-clock bounds
)
WIDE_FIXTURE = re.compile(r"""scope\s*=\s*["'](?:module|package|session)["']""")
#: what each worker found left in /dev/shm, under this key of its ``workeroutput``
SHM_KEY = "nxgates_shm_left"

_groups: dict[Path, str | None] = {}


def group_of(path: Path, module_id: str) -> str | None:
    """The xdist group of the tests of module ``path``, ``module_id`` in node ids (None: any free worker). The
    name is the same in every worker: each collects the tests itself, and their node ids must agree."""
    if path not in _groups:
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            source = ""
        if NEEDS_THE_MACHINE.search(source):
            _groups[path] = WHOLE_MACHINE
        elif WIDE_FIXTURE.search(source):
            _groups[path] = f"module:{module_id}"
        else:
            _groups[path] = None
    return _groups[path]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    xdist = config.pluginmanager.has_plugin("xdist")
    for item in items:
        path = getattr(item, "path", None)
        if path is None or path.suffix != ".py":
            continue
        group = group_of(path, item.nodeid.split("::", 1)[0])
        if group == WHOLE_MACHINE:
            item.add_marker(pytest.mark.whole_machine)
        if xdist and group is not None and not any(item.iter_markers("xdist_group")):  # a test's own group stays
            item.add_marker(pytest.mark.xdist_group(group))


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def is_controller(config: pytest.Config) -> bool:
    """The process that hands tests to xdist's workers and runs none itself (known once configured: xdist
    registers its "dsession" plugin last)."""
    return config.pluginmanager.has_plugin("dsession")


def report_shm(config: pytest.Config, left: list[str]) -> None:
    """On a worker: hand what it left in /dev/shm to the controller."""
    config.workeroutput[SHM_KEY] = list(left)


class ShmReports:
    """On the controller: what each worker left in /dev/shm, as it reported at its session's end."""

    def __init__(self) -> None:
        self.left: list[str] = []
        self.workers = 0

    @pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown, and never called, without xdist
    def pytest_testnodedown(self, node, error) -> None:
        output = getattr(node, "workeroutput", None) or {}
        if SHM_KEY in output:
            self.workers += 1
            self.left.extend(output[SHM_KEY])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "whole_machine: starts a Dask cluster, sends signals or bounds wall-clock "
                            "time (tests/_xdist.py); one xdist worker runs these one after another, and "
                            "`make test-fast` leaves them out")
    config.pluginmanager.register(ShmReports(), "nxgates-shm-reports")


def left_by_workers(config: pytest.Config) -> tuple[int, list[str]]:
    """On the controller: how many workers reported, and the files they left."""
    reports = config.pluginmanager.get_plugin("nxgates-shm-reports")
    return reports.workers, sorted(reports.left)
