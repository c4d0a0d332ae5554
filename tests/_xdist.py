"""The suite under pytest-xdist (``make test``: ``-n auto --dist loadgroup``): which tests share a worker, and the
session's /dev/shm check across the worker processes. Without xdist (``pytest`` alone) nothing here changes a run.

Groups. ``--dist loadgroup`` hands the tests of one ``xdist_group`` to one worker, one after the other; every other
test goes to whichever worker is free. Two kinds of group are made here from each test module's source, so that a
test moved or added is grouped by what it does rather than by a list of names that would go stale:

- ``whole-machine``: a test that starts a Dask cluster (or runs a gate on Dask, or asks for the session's cluster,
  ``dask_scheduler``), sends signals, or measures wall-clock time (its
  assertions bound how long something took, or it waits on a process it stops), in its own body or through a
  helper, fixture or constant of its module that it names (a statement of the module that names nothing, or
  an autouse fixture, takes the whole module). These tests never run beside each other, and a cluster started
  for one is the only one running. They are marked ``whole_machine`` too (with or without xdist), which
  ``make test-fast`` leaves out: they are most of the suite's waiting.
- ``module:<path>``: the other tests of a module that defines a fixture of module scope or wider (a Chromium
  rendering, a report made once for the module): they share one worker, so the fixture is made once, not once
  per worker.

/dev/shm. Each worker runs :func:`tests.conftest.pytest_sessionfinish` itself: it reclaims the files of processes
that are gone and lists those it made and did not remove in ``workeroutput``. The controller, which runs no test,
gathers those lists and fails the run when one is not empty; a worker that crashed reported nothing, its files
are those of a process that is gone (reclaimed, as the next run would), and the crash fails the run already.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

WHOLE_MACHINE = "whole-machine"
#: what a module does, from its source, that keeps it off a worker running beside another test of the kind
NEEDS_THE_MACHINE = re.compile(
    r"local_cluster\(|LocalCluster\("  # a Dask cluster: worker processes that want every core
    r"""|['"]executor['"]\s*:\s*['"]dask|executor=dask['"]|--executor['"]?,?\s*['"]?dask"""  # a gate on Dask
    r"""|make_pool\(\s*['"]dask"""
    r"|os\.kill\(|os\.killpg\(|\.send_signal\(|signal\.alarm\(|signal\.setitimer\("  # signals
    r"|time\.monotonic\(|perf_counter\(|thread_time\(|process_time\(|\.seconds\s*<"  # wall-clock bounds
)
#: fixtures of the conftests that do the same (a test asking for one, itself or through its fixtures, needs it too)
MACHINE_FIXTURES = frozenset({"dask_scheduler"})
WIDE_FIXTURE = re.compile(r"""scope\s*=\s*["'](?:module|package|session)["']""")
#: what each worker found left in /dev/shm, under this key of its ``workeroutput``
SHM_KEY = "nxgates_shm_left"

class Module:
    """What a test module does, from its source: which of its top-level names (functions, fixtures, classes,
    constants) reach :data:`NEEDS_THE_MACHINE`, directly or through another such name they refer to."""

    def __init__(self, source: str) -> None:
        self.whole = False  #: a top-level statement that names nothing matches: every test of the module
        self.wide_fixture = bool(WIDE_FIXTURE.search(source))
        refs: dict[str, set[str]] = {}
        self.machine: set[str] = set()
        if not NEEDS_THE_MACHINE.search(source):  # nothing anywhere in it, comments included: most modules
            return
        try:
            tree = ast.parse(source)
        except SyntaxError:
            self.whole = bool(NEEDS_THE_MACHINE.search(source))
            return
        for stmt in tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                continue
            matches = bool(NEEDS_THE_MACHINE.search(ast.unparse(stmt)))
            names = _defined(stmt)
            if not names:
                self.whole |= matches
                continue
            used = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
            used |= {a.arg for a in ast.walk(stmt) if isinstance(a, ast.arg)}  # a fixture's own fixtures
            for name in names:
                refs[name] = used
                if matches:
                    self.machine.add(name)
                    self.whole |= _autouse(stmt)
        grew = True
        while grew:  # whatever refers to a name that needs the machine needs it too
            reached = {name for name, used in refs.items() if used & self.machine} - self.machine
            self.machine |= reached
            grew = bool(reached)

    def needs_the_machine(self, item: pytest.Item) -> bool:
        """Whether test ``item`` (its function, its class, or a fixture of the module it asks for) does."""
        fixtures = set(getattr(item, "fixturenames", ()))  # every fixture the test gets, directly or not
        if self.whole or fixtures & MACHINE_FIXTURES:
            return True
        names = {getattr(item, "originalname", item.name), *fixtures}
        if (cls := getattr(item, "cls", None)) is not None:
            names.add(cls.__name__)
        return bool(names & self.machine)


def _defined(stmt: ast.stmt) -> list[str]:
    """The names a top-level statement defines (a fixture also by its ``name=``); none for any other statement."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        aliases = [k.value.value for d in getattr(stmt, "decorator_list", ()) if isinstance(d, ast.Call)
                   for k in d.keywords if k.arg == "name" and isinstance(k.value, ast.Constant)]
        return [stmt.name, *aliases]
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def _autouse(stmt: ast.stmt) -> bool:
    return any("autouse" in ast.unparse(d) for d in getattr(stmt, "decorator_list", ()))


_modules: dict[Path, Module] = {}


def module(path: Path) -> Module:
    if path not in _modules:
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            source = ""
        _modules[path] = Module(source)
    return _modules[path]


def group_of(item: pytest.Item) -> str | None:
    """The xdist group of test ``item`` (None: any free worker). The name is the same in every worker: each
    collects the tests itself, and their node ids must agree."""
    path = getattr(item, "path", None)
    if path is None or path.suffix != ".py":
        return None
    found = module(path)
    if found.needs_the_machine(item):
        return WHOLE_MACHINE
    return f"module:{item.nodeid.split('::', 1)[0]}" if found.wide_fixture else None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    xdist = config.pluginmanager.has_plugin("xdist")
    for item in items:
        group = group_of(item)
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
