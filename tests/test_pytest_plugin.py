"""The pytest plugin: ``pytest --nxgates GATE`` turns a gate's checks into items GATE::CHECK, a planted
fault into a failed item, a crashed gate into errors; without --nxgates it adds nothing and imports nothing."""

import os
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy  # noqa: F401  pytester forgets what a test imported, and numpy's C core cannot load twice
import pytest

import nxgates.gates.lora  # noqa: F401  (and the gates' numpy-using modules, for the same reason)
import nxgates.runner  # noqa: F401

pytest_plugins = ["pytester"]

LORA_ITEMS = ["lora::gradcheck A (lora)", "lora::gradcheck B (lora)", "lora::base W frozen"]


@pytest.fixture
def run(pytester, monkeypatch):
    """pytest in-process, from an empty directory (the packaged gates.toml); `-p nxgates` loads the plugin by its
    entry point even where PYTEST_DISABLE_PLUGIN_AUTOLOAD is set."""
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)

    def _run(*args):
        # its own rootdir: a configuration file in a folder above (/tmp) must not rename the items
        return pytester.runpytest("-p", "nxgates", "-p", "no:cacheprovider", f"--rootdir={pytester.path}", *args)

    return _run


def test_without_nxgates_nothing_of_nxgates_is_collected(pytester, run):
    pytester.makepyfile("def test_own():\n    pass\n")
    r = run("--collect-only", "-q")
    assert "lora" not in r.stdout.str()
    run().assert_outcomes(passed=1)


def test_each_check_is_an_item_named_gate_check(run):
    r = run("--nxgates", "lora", "--collect-only", "-q")
    assert [line for line in r.stdout.lines if line.startswith("lora::")] == LORA_ITEMS


def test_a_green_gate_passes_every_item(run):
    run("--nxgates", "lora").assert_outcomes(passed=3)


def test_a_planted_fault_is_a_failed_item_with_the_detail(run):
    r = run("--nxgates", "lora", "--nxgates-inject", "grad-bug")
    r.assert_outcomes(passed=3, failed=1)  # the liar-kill item passes: the fault was caught
    r.stdout.fnmatch_lines(["collected 4 items", "*lora::gradcheck A (lora)*",
                            "11/12 cells within 70permil (worst=101permil)"])
    r.stdout.fnmatch_lines(["*FAILED lora::gradcheck A (lora) - Failed: 11/12 cells within 70permil*"])


def test_k_selects_checks_and_m_selects_the_gates(pytester, run):
    run("--nxgates", "lora", "-k", "frozen").assert_outcomes(passed=1, deselected=2)
    pytester.makepyfile("def test_own():\n    pass\n")
    run("--nxgates", "lora", "-m", "nxgates").assert_outcomes(passed=3, deselected=1)


def test_preset_and_set_reach_the_gate(run):
    r = run("--nxgates", "lora", "--nxgates-set", "DM=8", "-rA")
    r.assert_outcomes(passed=3)
    r.stdout.fnmatch_lines(["*PASSED lora::gradcheck A (lora)*"])
    r = run("--nxgates", "lora", "--nxgates-preset", "medium", "--nxgates-inject", "grad-bug")
    r.stdout.fnmatch_lines(["*FAILED lora::gradcheck A (lora) - Failed: 383/384 cells*"])  # DM=96 R=4


def test_the_ini_names_the_gates(pytester, run):
    pytester.makeini("[pytest]\nnxgates_gates = lora\n")
    run().assert_outcomes(passed=3)


def test_junitxml_has_the_items_and_the_failure(pytester, run):
    run("--nxgates", "lora", "--nxgates-inject", "train-base", f"--junitxml={pytester.path / 'out.xml'}")
    cases = ET.parse(pytester.path / "out.xml").getroot().iter("testcase")
    failed = {c.get("name"): c.find("failure") for c in cases}
    assert sorted(failed) == sorted(["gradcheck A (lora)", "gradcheck B (lora)", "base W frozen", "liar-kill"])
    assert failed["gradcheck A (lora)"] is None
    assert "cells of W changed during the run" in failed["base W frozen"].get("message")


def test_a_crashed_gate_is_an_error_not_a_failure(run, monkeypatch):
    from nxgates import runner
    from nxgates.gatekit import GateOutput

    def crash(entry, params, **kwargs):
        out = GateOutput()
        out.check("crash", False, "internal error: RuntimeError: boom")
        return runner.GateReport(entry.name, dict(params), out, 0.0, None, "internal error: RuntimeError: boom",
                                 "crash", "Traceback: boom")

    monkeypatch.setattr(runner, "run_gate", crash)
    r = run("--nxgates", "lora")
    r.assert_outcomes(errors=3)
    assert "internal error: RuntimeError: boom" in r.stdout.str()


def test_usage_errors_stop_pytest_before_anything_runs(run):
    r = run("--nxgates", "no-such-gate")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "no-such-gate" in r.stderr.str()
    r = run("--nxgates", "lora", "--nxgates-inject", "no-such-fault")
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "no fault 'no-such-fault'" in r.stderr.str()


def test_plugin_gates_work_the_same(pytester, monkeypatch):
    from tests.cli.test_plugins import EXAMPLE, fake_distribution

    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    site = pytester.path / "site"
    fake_distribution(site, project["name"], project["version"], project["entry-points"]["nxgates.gates"])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(EXAMPLE)]))
    r = pytester.runpytest_subprocess("-p", "nxgates", "-p", "no:cacheprovider",
                                      "--nxgates", "q20-dot", "--nxgates-inject", "drop-last")
    r.assert_outcomes(passed=2, failed=1)  # the liar-kill item passes: the fault was caught
    r.stdout.fnmatch_lines(["*FAILED q20-dot::dot products equal Python integers*"])


def test_the_plugin_module_is_cheap_to_import():
    """It loads in every pytest run of the environment: nxgates' gates and numpy wait for --nxgates."""
    code = ("import sys; before = set(sys.modules); import nxgates.pytest_plugin; "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent)
    new = set(out.stdout.split())
    assert {m for m in new if m.startswith("nxgates")} <= {"nxgates", "nxgates.pytest_plugin"}
    assert "numpy" not in new


def test_compare_grads_makes_t4_an_item_that_passes_and_fails(pytester, run):
    import numpy as np
    from click.testing import CliRunner

    from nxgates.cli import cli

    saved = pytester.path / "g.npy"
    assert CliRunner().invoke(cli, ["run", "parallel-grad", "--save-grads", str(saved)]).exit_code == 0
    from nxgates.registry import load

    (t4,) = [f"parallel-grad::{c}" for c in load(None).resolve("parallel-grad").gate.optional_checks]
    r = run("--nxgates", "parallel-grad", "--nxgates-compare-grads", str(saved), "--collect-only", "-q")
    assert t4 in r.stdout.lines
    run("--nxgates", "parallel-grad", "--nxgates-compare-grads", str(saved)).assert_outcomes(passed=4)
    grads = np.load(saved)
    grads[0, 0] = np.nextafter(grads[0, 0], np.float32(np.inf))
    np.save(saved, grads)
    r = run("--nxgates", "parallel-grad", "--nxgates-compare-grads", str(saved))
    r.assert_outcomes(passed=3, failed=1)
    r.stdout.fnmatch_lines([f"FAILED {t4}*"])
    r = run("--nxgates", "parallel-grad", "--nxgates-compare-grads", str(saved), "--nxgates-ulp", "1")
    r.assert_outcomes(passed=4)


def test_every_run_option_reaches_the_plan(run):
    r = run("--nxgates", "parallel-grad", "--nxgates-reduction", "sequential", "--nxgates-set",
            "reduction=tree")
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "contradicts --set reduction=tree" in r.stderr.str()
    r = run("--nxgates", "lora", "--nxgates-executor", "thread", "--nxgates-timeout", "0")
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "--timeout 0.0" in r.stderr.str()
    r = run("--nxgates", "lora", "--nxgates-baseline", "missing.json")
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "missing.json" in r.stderr.str()
    r = run("--nxgates", "lora", "--nxgates-repeat", "2", "--collect-only", "-q")
    assert "lora::repeat: 2 runs agree" in r.stdout.lines


def test_a_planted_fault_that_changes_nothing_is_a_usage_error(run):
    r = run("--nxgates", "lora", "--nxgates-inject", "transposed-b", "--nxgates-set", "R=1")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "fault transposed-b changes nothing at these parameters" in r.stdout.str() + r.stderr.str()


def test_a_missed_fault_fails_the_liar_kill_item(run):
    r = run("--nxgates", "lora", "--nxgates-inject", "grad-bug", "--nxgates-set", "tol_permil=150")
    r.assert_outcomes(passed=3, failed=1)
    r.stdout.fnmatch_lines(["FAILED lora::liar-kill - Failed: fault grad-bug MISSED: it moved A_analytic*"])


def test_invariance_on_a_users_function_through_pytest(pytester, run):
    import numpy as np

    (pytester.path / "f.py").write_text("import numpy as np\n\ndef f(X, W):\n    return X @ W + X.sum(0)\n")
    np.savez(pytester.path / "a.npz", X=np.arange(12, dtype=np.float32).reshape(4, 3), W=np.eye(3, dtype=np.float32))
    target = f"--nxgates-target={pytester.path / 'f.py'}:f"
    r = run("--nxgates", "invariance", target, f"--nxgates-inputs={pytester.path / 'a.npz'}",
            "--nxgates-set", "static=W")
    failed = [line for line in r.stdout.lines if line.startswith("FAILED invariance::")]
    assert r.ret == 1 and any("I1 row alone == in batch" in line for line in failed)  # X.sum(0) mixes rows
