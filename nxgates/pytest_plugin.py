"""pytest plugin: ``pytest --nxgates GATE ...`` runs each gate once and reports its checks as test items.

Every pytest run of an environment where nxgates is installed loads this module (the ``pytest11`` entry
point), so it imports nothing of nxgates until ``--nxgates`` or the ``nxgates_gates`` ini value asks for
gates. Items are named ``GATE::CHECK`` and carry the ``nxgates`` marker (``-m nxgates`` runs only them);
a gate that crashes or times out is a pytest error on each of its items, a failed check a failure whose
message is the check's detail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from nxgates.registry import GateEntry
    from nxgates.runner import GateReport


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nxgates", "nxgates gates as test items")
    group.addoption("--nxgates", dest="nxgates", action="extend", nargs="+", default=None, metavar="GATE",
                    help="Run these gates (names, aliases or `all`); each check becomes an item GATE::CHECK.")
    group.addoption("--nxgates-preset", dest="nxgates_preset", default=None, metavar="NAME",
                    help="Parameter preset of the gates (see `nxgates show GATE`).")
    group.addoption("--nxgates-set", dest="nxgates_sets", action="append", default=[], metavar="KEY=VALUE",
                    help="Override a parameter (repeatable; GATE.KEY=VALUE targets one gate).")
    group.addoption("--nxgates-inject", dest="nxgates_fault", default=None, metavar="FAULT",
                    help="Plant a named defect, as `nxgates run --inject` does; the gate's checks must then fail.")
    group.addoption("--nxgates-config", dest="nxgates_config", default=None, metavar="PATH",
                    help="The gate registry to use (default: ./gates.toml, else the packaged one).")
    parser.addini("nxgates_gates", type="args", default=[],
                  help="Gates to run as items when --nxgates is not given.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "nxgates: a check of an nxgates gate (pytest --nxgates GATE)")


def gate_names(config: pytest.Config) -> list[str]:
    """The gates asked for: ``--nxgates`` wins over the ini's ``nxgates_gates``."""
    return list(config.getoption("nxgates") or config.getini("nxgates_gates") or [])


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect: they must see the gates' items
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    names = gate_names(config)
    if not names:
        return
    from nxgates.errors import NxError

    try:
        planned = _plan(config, names)
    except NxError as exc:
        raise pytest.UsageError(f"nxgates: {exc}") from None
    for entry, params in planned:
        collector = GateCollector.from_parent(session, name=entry.name, nodeid=entry.name, entry=entry,
                                              params=params, fault=config.getoption("nxgates_fault"))
        collected = collector.collect()
        # reported as collected, so pytest's "collected N items" and the plugins that count them see the gates
        session.ihook.pytest_collectreport(report=pytest.CollectReport(collector.nodeid, "passed", None, collected))
        items.extend(collected)


def _plan(config: pytest.Config, names: list[str]) -> list[tuple[GateEntry, dict[str, Any]]]:
    """Each gate with its parameters, checked as ``nxgates run`` checks them, before anything runs."""
    from nxgates import registry
    from nxgates.errors import ConfigError

    if config.getoption("nxgates_config") == "":
        raise ConfigError("--nxgates-config: empty path")
    reg = registry.load(config.getoption("nxgates_config"))
    entries = reg.select(names)
    params = registry.effective_params(entries, config.getoption("nxgates_preset"),
                                       config.getoption("nxgates_sets"))
    fault = config.getoption("nxgates_fault")
    if fault is not None:
        for e in entries:
            if fault not in e.gate.faults:
                known = ", ".join(e.gate.faults) or "none"
                raise ConfigError(f"gate {e.name!r} has no fault {fault!r} (faults: {known})")
    return [(e, params[e.name]) for e in entries]


class GateCollector(pytest.Collector):
    """One gate: its declared checks are the items; the gate runs once, when the first of them is set up."""

    def __init__(self, *, entry: GateEntry, params: dict[str, Any], fault: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entry = entry
        self.params = params
        self.fault = fault
        self.report: GateReport | None = None

    def collect(self) -> list[pytest.Item]:
        items = []
        for check in self.entry.gate.checks:
            if check in self.entry.gate.optional_checks:  # recorded only with an option no item can give
                continue
            item = CheckItem.from_parent(self, name=check)
            item.add_marker("nxgates")
            items.append(item)
        return items

    def setup(self) -> None:
        from nxgates.errors import NxError
        from nxgates.runner import run_gate

        try:
            report = run_gate(self.entry, self.params, fault=self.fault)
        except NxError as exc:  # e.g. sizes beyond this machine's memory: the gate could not run
            pytest.fail(f"{self.name}: {exc}", pytrace=False)
        if report.error:  # crashed or timed out: an error of each item, never a failed check
            why = f"{self.name}: {report.error}"
            pytest.fail(f"{why}\n{report.traceback}" if report.traceback else why, pytrace=False)
        self.report = report


class CheckItem(pytest.Item):
    """One check of a gate run: passes or fails as the check did, with its detail as the message."""

    def runtest(self) -> None:
        report = self.parent.report
        assert report is not None  # set up by the gate's collector before any of its items runs
        for check in report.output.checks:
            if check.name == self.name:
                if not check.passed:
                    pytest.fail(check.detail or "FAIL", pytrace=False)
                return
        pytest.skip(f"{self.parent.name} recorded no check {self.name!r} in this run")

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.nodeid
