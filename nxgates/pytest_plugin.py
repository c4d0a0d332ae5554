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
    from nxgates.plan import PlannedGate, RunPlan, RunRequest
    from nxgates.runner import GateReport


#: the run options, as (pytest flag, RunRequest field, type, metavar, help); each is ``nxgates run``'s flag
RUN_OPTIONS = (
    ("--nxgates-preset", "preset", str, "NAME", "Parameter preset of the gates (see `nxgates show GATE`)."),
    ("--nxgates-inject", "fault", str, "FAULT",
     "Plant a named defect, as `nxgates run --inject` does; the gate's checks must then fail."),
    ("--nxgates-config", "config", str, "PATH",
     "The gate registry to use (default: ./gates.toml, else the packaged one)."),
    ("--nxgates-executor", "executor", str, "NAME", "As run --executor (auto|thread|process|dask)."),
    ("--nxgates-reduction", "reduction", str, "ORDER", "As run --reduction (tree|sequential)."),
    ("--nxgates-scheduler", "scheduler", str, "ADDRESS", "As run --scheduler: the Dask cluster to run on."),
    ("--nxgates-save-grads", "save_grads", str, "PATH", "As run --save-grads."),
    ("--nxgates-compare-grads", "compare_grads", str, "PATH",
     "As run --compare-grads; its check (parallel-grad's T4, lora's) becomes an item."),
    ("--nxgates-ulp", "ulp", int, "N", "As run --ulp: --nxgates-compare-grads passes within N ULPs per cell."),
    ("--nxgates-inputs", "inputs", str, "PATH", "As run --inputs: run one gate on these tensors."),
    ("--nxgates-target", "target", str, "SPEC", "As run --target: the function the invariance gate checks."),
    ("--nxgates-baseline", "baseline", str, "FILE", "As run --baseline; the `baseline` check becomes an item."),
    ("--nxgates-baseline-missing", "baseline_missing", str, "fail|warn", "As run --baseline-missing."),
    ("--nxgates-timeout", "timeout", float, "SECONDS", "Per-gate time limit, as run --timeout (default 600)."),
    ("--nxgates-repeat", "repeat", int, "N", "As run --repeat; the runs' agreement becomes an item."),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nxgates", "nxgates gates as test items")
    group.addoption("--nxgates", dest="nxgates", action="extend", nargs="+", default=None, metavar="GATE",
                    help="Run these gates (names, aliases or `all`); each check becomes an item GATE::CHECK.")
    group.addoption("--nxgates-set", dest="nxgates_sets", action="append", default=[], metavar="KEY=VALUE",
                    help="Override a parameter (repeatable; GATE.KEY=VALUE targets one gate).")
    for flag, field, kind, metavar, text in RUN_OPTIONS:
        group.addoption(flag, dest=f"nxgates_{field}", type=kind, default=None, metavar=metavar, help=text)
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
    from nxgates.plan import plan_run

    try:
        plan = plan_run(request_of(config, names))
    except NxError as exc:
        raise pytest.UsageError(f"nxgates: {exc}") from None
    for gate in plan.gates:
        collector = GateCollector.from_parent(session, name=gate.name, nodeid=gate.name, plan=plan, gate=gate)
        collected = collector.collect()
        # reported as collected, so pytest's "collected N items" and the plugins that count them see the gates
        session.ihook.pytest_collectreport(report=pytest.CollectReport(collector.nodeid, "passed", None, collected))
        items.extend(collected)


def request_of(config: pytest.Config, names: list[str]) -> RunRequest:
    """The options given, as the run request ``nxgates run`` would make of its own flags."""
    from nxgates.plan import RunRequest

    given = {field: config.getoption(f"nxgates_{field}") for _flag, field, *_rest in RUN_OPTIONS}
    chosen = {field: value for field, value in given.items() if value is not None}
    return RunRequest(tuple(names), tuple(config.getoption("nxgates_sets")), **chosen)


class GateCollector(pytest.Collector):
    """One gate: its checks are the items; the gate runs once, when the first of them is set up.

    The items are the gate's declared checks, the optional ones when an option of the gate is given, and the
    checks the plan adds (``baseline``, the ``--repeat`` agreement, ``liar-kill`` for a planted fault). A run
    that broke the check contract fails every item.
    """

    def __init__(self, *, plan: RunPlan, gate: PlannedGate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan
        self.gate = gate
        self.report: GateReport | None = None

    def item_names(self) -> list[str]:
        from nxgates.baseline.session import CHECK as BASELINE_CHECK
        from nxgates.plan import LIAR_KILL

        gate, request = self.gate.entry.gate, self.plan.request
        option_given = any(value is not None for value in self.gate.options.values())
        names = [c for c in gate.checks if c not in gate.optional_checks or option_given]
        if request.repeat > 1:
            names.append(f"repeat: {request.repeat} runs agree")
        if self.plan.baseline_doc is not None:
            names.append(BASELINE_CHECK)
        if request.fault is not None:
            names.append(LIAR_KILL)
        return names

    def collect(self) -> list[pytest.Item]:
        items = []
        for name in self.item_names():
            item = CheckItem.from_parent(self, name=name)
            item.add_marker("nxgates")
            items.append(item)
        return items

    def setup(self) -> None:
        from nxgates.errors import NxError
        from nxgates.runner import INERT

        try:
            report = self.plan.run(self.gate)
        except NxError as exc:  # refused once running (sizes beyond memory, a rate made for other sizes): a
            # usage error, as `nxgates run` makes it (exit 2), never a failed check
            pytest.exit(_shown(f"nxgates: {self.name}: {exc}"), returncode=pytest.ExitCode.USAGE_ERROR)
        if report.error_kind == INERT:  # a usage error, as `nxgates run` makes it (exit 2): nothing was proved
            pytest.exit(_shown(f"nxgates: {self.name}: {report.error}"), returncode=pytest.ExitCode.USAGE_ERROR)
        if report.error:  # crashed or timed out: an error of each item, never a failed check
            why = _shown(f"{self.name}: {report.error}")
            pytest.fail(f"{why}\n{report.traceback}" if report.traceback else why, pytrace=False)
        self.report = report


class CheckItem(pytest.Item):
    """One check of a gate run: passes or fails as the check did, with its detail as the message."""

    def runtest(self) -> None:
        from nxgates.contract import CONTRACT_CHECK
        from nxgates.plan import LIAR_KILL

        report = self.parent.report
        assert report is not None  # set up by the gate's collector before any of its items runs
        checks = report.output.checks
        for check in checks:
            if check.name == CONTRACT_CHECK and not check.passed:  # no check of a broken run can be trusted
                pytest.fail(_shown(f"{self.parent.name} broke its check contract: {check.detail}"), pytrace=False)
        for check in checks:
            if check.name == self.name:
                if not check.passed:
                    pytest.fail(_shown(check.detail) or "FAIL", pytrace=False)
                return
        if self.name == LIAR_KILL:  # the plan adds it only when the planted fault was not caught
            return
        pytest.skip(f"{self.parent.name} recorded no check {self.name!r} in this run")

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.nodeid


def _shown(text: str) -> str:
    """A gate's text (a plugin's detail, a file name in it) as lines nobody can forge: its own line breaks
    kept, every other control character escaped, no line read as a GitHub workflow command."""
    from nxgates.streams import printable_lines

    return "\n".join(printable_lines(text))
