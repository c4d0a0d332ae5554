"""Liar-kill: every planted fault is caught, every time, by the check it names; clean runs stay green."""

import json
from importlib import resources

import pytest
from click.testing import CliRunner

from nxgates import registry
from nxgates.cli import cli
from nxgates.core.pool import dask_available
from nxgates.gates import parallel_grad as pg
from nxgates.runner import run_gate


def packaged():
    return registry.parse(resources.files("nxgates").joinpath("gates.toml").read_text(), "packaged")


@pytest.fixture(scope="module")
def reg():
    return packaged()


def fault_cases():
    return [(e.name, f) for e in packaged().gates.values() for f in e.gate.faults]


@pytest.mark.parametrize("gate, fault", fault_cases())
def test_fault_is_caught_100_out_of_100(reg, gate, fault):
    entry = reg.resolve(gate)
    expected = set(entry.gate.faults[fault].caught_by)
    for _ in range(100):
        report = run_gate(entry, entry.defaults, fault=fault, timeout=60)
        failed = {c.name for c in report.output.checks if not c.passed}
        assert report.error is None and not report.passed and failed >= expected, failed


@pytest.mark.parametrize("fault", ["shared-arena", "single-worker", "nondeterministic", "drop-task"])
def test_parallel_grad_faults_are_caught_with_processes_too(reg, fault):
    entry = reg.resolve("parallel-grad")
    expected = set(entry.gate.faults[fault].caught_by)
    for _ in range(20):
        report = run_gate(entry, {**entry.defaults, "executor": "process"}, fault=fault, timeout=60)
        assert not report.passed and {c.name for c in report.output.checks if not c.passed} >= expected


@pytest.mark.parametrize("fault", ["shared-arena", "single-worker", "nondeterministic", "drop-task"])
def test_parallel_grad_faults_are_caught_when_the_workers_share_each_passs_tail(reg, fault):
    """B=40: one chunk of 40, whose last 10 tasks the process pool lets either worker run."""
    entry = reg.resolve("parallel-grad")
    expected = set(entry.gate.faults[fault].caught_by)
    for _ in range(5):
        report = run_gate(entry, {**entry.defaults, "executor": "process", "B": 40}, fault=fault, timeout=60)
        assert not report.passed and {c.name for c in report.output.checks if not c.passed} >= expected


@pytest.mark.parametrize("gate, fault", fault_cases())
def test_cli_inject_exits_1_and_names_the_check(reg, gate, fault, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["run", gate, "--inject", fault], catch_exceptions=False)
    assert r.exit_code == 1, r.output
    for check in reg.resolve(gate).gate.faults[fault].caught_by:
        assert any(line.startswith(f" FAIL {check}") for line in r.stdout.splitlines()), check
    assert f"[fault injected: {fault}]" in r.stdout


def test_a_fault_off_by_default_leaves_every_gate_green(reg):
    for entry in reg.gates.values():
        assert run_gate(entry, entry.defaults).passed


def test_selftest_exits_0_and_shows_every_fault_caught(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["selftest", "--json", "kills.json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    # with the dask extra, parallel-grad is proven clean and with each of its 4 faults on Dask too
    clean, faults = (7, 25) if dask_available() else (6, 21)
    assert r.stdout.splitlines()[-1] == (f"==== selftest: {clean}/{clean} clean gates passed, {faults}/{faults} "
                                         "faults caught -- GREEN")
    doc = json.loads((tmp_path / "kills.json").read_text())
    assert doc["passed"] is True
    assert {(k["gate"], k["fault"]) for k in doc["kills"] if k["fault"]} == set(fault_cases())
    assert all(k["ok"] for k in doc["kills"])
    on_dask = {(k["gate"], k["fault"]) for k in doc["kills"] if k["variant"] == "dask"}
    assert on_dask == ({("parallel-grad", f) for f in (None, *pg.FAULTS)} if dask_available() else set())


def test_selftest_exits_1_when_a_gate_is_a_liar(tmp_path, monkeypatch):
    """A tolerance so lax that a 10% gradient error passes: the selftest must expose the gate."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gates.toml").write_text(
        '[gates.lax]\nmodule = "lora"\ndescription = "lora with a useless tolerance"\n'
        "params = { T = 3, DM = 6, R = 2, delta = 2097, tol_permil = 1000, algorithm = 'fast' }\n"
    )
    r = CliRunner().invoke(cli, ["selftest"], catch_exceptions=False)
    assert r.exit_code == 1
    assert any(line.startswith("lax") and "grad-bug" in line and "MISSED" in line for line in r.stdout.splitlines())
    assert r.stdout.splitlines()[-1].endswith("RED")
