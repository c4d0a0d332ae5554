"""Every front door plans a run the same way, so each gives one verdict for the same gates, options, faults
and misbehaving plugin gates: ``nxgates run``, the selftest's engine, and ``pytest --nxgates``.

A verdict is green, red or refused: ``run`` exits 0, 1 (or 3) or 2; pytest exits 0, 1, or 4 (its usage
error); a selftest row's run is judged as ``run`` judges it.
"""

from __future__ import annotations

import itertools

import numpy  # noqa: F401  pytester forgets what a test imported, and numpy's C core cannot load twice
import pytest
from click.testing import CliRunner

import nxgates.gates.dp_train  # noqa: F401  (the gates' numpy-using modules, for the same reason)
import nxgates.gates.lora  # noqa: F401
from nxgates.errors import NxError
from nxgates.plan import RunRequest, plan_run
from nxgates.runner import exit_code
from nxgates.selftest import selftest
from tests.behaviour.from_outside import GREEN_BODY, plugin_source

pytest_plugins = ["pytester"]

GREEN, RED, REFUSED = "green", "red", "refused"
RUN_VERDICT = {0: GREEN, 1: RED, 2: REFUSED, 3: RED}
PYTEST_VERDICT = {0: GREEN, 1: RED, 4: REFUSED}

#: plugin gates that break the check contract, or whose fault changes nothing
MISBEHAVING = {
    "twice": ('out = GateOutput()\nout.check("c1", True)\nout.check("c1", False)\nout.fingerprint("n", 1)\n'
              'out.green, out.red = "G", "R"\nreturn out', ("c1",)),
    "undeclared": ('out = GateOutput()\nout.check("c1", True)\nout.check("extra", True)\n'
                   'out.green, out.red = "G", "R"\nreturn out', ("c1",)),
    "silent": ('out = GateOutput()\nout.check("c1", True)\nout.green, out.red = "G", "R"\nreturn out',
               ("c1", "c2")),
    "inert": ('out = GateOutput()\nout.check("c1", True)\nout.fingerprint("n", 1)\n'
              'out.green, out.red = "G", "R"\nreturn out', ("c1",)),
    "good": (GREEN_BODY, ("c1", "c2")),
}

#: (gate, fault, --set values, the verdict every front door must give)
CASES = [
    ("lora", None, (), GREEN),
    ("lora", "grad-bug", (), RED),
    ("lora", "grad-bug", ("tol_permil=150",), RED),  # missed: moved, yet every check passed
    ("lora", "transposed-b", ("R=1",), REFUSED),  # inert: changes nothing at rank 1
    ("dp-train", "completion-order", ("B=2",), REFUSED),  # the gate knows before running
    ("dp-train", None, ("B=4", "steps=2"), GREEN),
    ("lora-train", None, ("DM=64",), REFUSED),  # the seed's rate at sizes it was not made for: refused once run
    ("lora-train", None, ("DM=64", "lr_q=0"), GREEN),  # a derived rate
    ("twice", None, (), RED),
    ("undeclared", None, (), RED),
    ("silent", None, (), RED),
    ("inert", "noop", (), REFUSED),
    ("good", None, (), GREEN),
    ("good", "noop", (), REFUSED),  # GREEN_BODY ignores its fault and pins nothing that could move
]

_installed = itertools.count()


@pytest.fixture
def site(tmp_path, monkeypatch):
    """The misbehaving gates installed as plugins (a .dist-info on sys.path), for this process and pytester."""
    root = tmp_path / "site"
    info = root / "diff_plugins-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: diff-plugins\nVersion: 1.0\n")
    points = []
    suffix = next(_installed)  # a module name of its own, since sys.modules outlives the test
    for name, (body, checks) in MISBEHAVING.items():
        module = f"diff_{name}_{suffix}"
        (root / f"{module}.py").write_text(plugin_source(body, checks))
        points.append(f"{name} = {module}\n")
    (info / "entry_points.txt").write_text("[nxgates.gates]\n" + "".join(points))
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    return root


def through_run(gate, fault, sets) -> str:
    from nxgates.cli import cli

    args = ["run", gate, *(["--inject", fault] if fault else []), *itertools.chain(*(("--set", s) for s in sets))]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    return RUN_VERDICT[result.exit_code]


def through_selftest(gate, fault, sets) -> str:
    try:
        plan = plan_run(RunRequest((gate,), tuple(sets), timeout=120), for_selftest=True)
    except NxError:
        return REFUSED
    (row,) = [row for row in selftest(plan) if row.fault == fault]
    return RUN_VERDICT[exit_code([row.report])]


def through_pytest(pytester, gate, fault, sets) -> str:
    args = ["-p", "nxgates", "-p", "no:cacheprovider", "--nxgates", gate]
    args += ["--nxgates-inject", fault] if fault else []
    args += list(itertools.chain(*(("--nxgates-set", s) for s in sets)))
    return PYTEST_VERDICT[int(pytester.runpytest(*args).ret)]


@pytest.mark.parametrize(("gate", "fault", "sets", "verdict"), CASES,
                         ids=[f"{g}-{f or 'clean'}-{'-'.join(s) or 'defaults'}" for g, f, s, _ in CASES])
def test_one_verdict_from_run_selftest_and_pytest(site, pytester, gate, fault, sets, verdict):
    seen = {"run": through_run(gate, fault, sets), "selftest": through_selftest(gate, fault, sets),
            "pytest": through_pytest(pytester, gate, fault, sets)}
    assert seen == dict.fromkeys(seen, verdict)
