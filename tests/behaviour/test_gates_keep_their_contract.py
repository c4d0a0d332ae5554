"""A gate never ends the runner, and it keeps its contract. ``SystemExit`` from a plugin's
``run()`` or import is that gate's error (never exit 0, never a silent stop); every declared check is
reported exactly once with a real boolean, else the gate fails with a line naming the check."""

from __future__ import annotations

import json

import pytest

from tests.behaviour.from_outside import GREEN_BODY, assert_one_line_error, plugin_source

EXIT_IN_RUN = 'import sys\nsys.exit({arg})\n'


def test_a_well_behaved_fixture_plugin_is_green(plugins):
    env = plugins(good=plugin_source(GREEN_BODY, checks=("c1", "c2")))
    r = env.run("run", "good")
    assert r.returncode == 0 and "PLUG GREEN" in r.stdout, r.stdout + r.stderr


# ---- 2. SystemExit is the gate's error ----------------------------------------------------------------


@pytest.mark.parametrize("arg", ["0", "None", "'bye from the plugin'", "3"])
def test_sys_exit_in_run_is_the_gates_error(plugins, arg):
    env = plugins(exiter=plugin_source(EXIT_IN_RUN.format(arg=arg)), good=plugin_source(GREEN_BODY))
    r = env.run("run", "exiter", "good", "--json", "r.json")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert "exiter" in r.stdout + r.stderr and "PLUG GREEN" in r.stdout  # the next gate still ran
    report = json.loads((env.cwd / "r.json").read_text())
    gates = {g["name"]: g for g in report["gates"]}
    assert gates["exiter"]["passed"] is False and gates["exiter"]["error"]
    assert gates["good"]["passed"] is True and report["passed"] is False


@pytest.mark.parametrize("args", [["run", "lorra"], ["run", "exiter"], ["selftest", "exiter"], ["show", "exiter"]])
def test_sys_exit_at_import_is_a_broken_plugin(plugins, args):
    env = plugins(exiter=plugin_source(GREEN_BODY, prelude="import sys\nsys.exit(0)\n"))
    r = env.run(*args)
    assert_one_line_error(r, "exiter" if "exiter" in args else "lorra")


def test_list_marks_a_plugin_that_exits_at_import_broken(plugins):
    env = plugins(exiter=plugin_source(GREEN_BODY, prelude="import sys\nsys.exit(0)\n"))
    r = env.run("list")
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("exiter ")]
    assert rows and "BROKEN" in rows[0], r.stdout
    assert any(line.startswith("lora ") for line in r.stdout.splitlines())


def test_a_gate_that_exits_during_run_all_still_gets_a_verdict_line(plugins):
    """``run all`` goes on past a gate's SystemExit to the final line."""
    env = plugins(exiter=plugin_source(EXIT_IN_RUN.format(arg="0")))
    r = env.run("run", "all", "-q", "--set", "lora.T=2")
    lines = r.stdout.splitlines()
    assert r.returncode == 1 and lines[-1].startswith("==== nxgates:") and "RED" in lines[-1]


# ---- 3. the declared checks are the reported checks ----------------------------------------------------

CONTRACT_BREAKS = {
    "missing": ('out = GateOutput()\nout.check("c1", True, "ok")\nout.green, out.red = "PLUG GREEN", "PLUG RED"\n'
                "return out\n", ("c1", "c2"), "c2"),
    "undeclared": ('out = GateOutput()\nout.check("other", True, "ok")\nout.green, out.red = "PLUG GREEN", '
                   '"PLUG RED"\nreturn out\n', ("c1",), "other"),
    "string-bool": ('out = GateOutput()\nout.check("c1", "False", "ok")\nout.green, out.red = "PLUG GREEN", '
                    '"PLUG RED"\nreturn out\n', ("c1",), "c1"),
    "int-bool": ('out = GateOutput()\nout.check("c1", 1, "ok")\nout.green, out.red = "PLUG GREEN", '
                 '"PLUG RED"\nreturn out\n', ("c1",), "c1"),
    "twice": ('out = GateOutput()\nout.check("c1", True, "ok")\nout.check("c1", True, "again")\n'
              'out.green, out.red = "PLUG GREEN", "PLUG RED"\nreturn out\n', ("c1",), "c1"),
    "none-reported": ('out = GateOutput()\nout.green, out.red = "PLUG GREEN", "PLUG RED"\nreturn out\n',
                      ("c1",), "c1"),
}


@pytest.mark.parametrize("kind", sorted(CONTRACT_BREAKS))
def test_a_gate_that_breaks_its_check_contract_fails(plugins, kind):
    body, checks, named = CONTRACT_BREAKS[kind]
    env = plugins(liar=plugin_source(body, checks=checks))
    r = env.run("run", "liar", "--json", "r.json")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "PLUG GREEN" not in r.stdout
    assert any(named in line for line in (r.stdout + r.stderr).splitlines() if "liar" in line or "FAIL" in line
               or "error" in line), r.stdout + r.stderr
    assert json.loads((env.cwd / "r.json").read_text())["passed"] is False
