"""Gates from other packages (entry-point group ``nxgates.gates``): the example plugin through the console
script, broken plugins, gates.toml naming a plugin module, and no entry-point scan for built-in gates."""

import json
import os
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "nxgates-example-gate"
SCRIPT = shutil.which("nxgates", path=str(Path(sys.executable).parent)) or "nxgates-not-installed"


def fake_distribution(root: Path, name: str, version: str, entry_points: dict[str, str]) -> None:
    """What ``pip install`` leaves for importlib.metadata: a .dist-info with METADATA and entry_points.txt."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[nxgates.gates]\n{lines}")


@pytest.fixture
def example_env(tmp_path):
    """The example plugin 'installed' by path: its module on PYTHONPATH, its entry points (read from its own
    pyproject.toml) in a .dist-info beside it. Returns a runner of the console script in that environment."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    site = tmp_path / "site"
    fake_distribution(site, project["name"], project["version"], project["entry-points"]["nxgates.gates"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(EXAMPLE)])}
    work = tmp_path / "work"
    work.mkdir()

    def run(*args):
        return subprocess.run([SCRIPT, *args], capture_output=True, text=True, cwd=work, env=env, timeout=120)

    run.cwd = work
    return run


def test_example_plugin_is_listed_with_its_distribution(example_env):
    r = example_env("list")
    assert r.returncode == 0, r.stderr
    (row,) = [line for line in r.stdout.splitlines() if line.startswith("q20-dot ")]
    assert "q20-dot-example" in row and "nxgates-example-gate 0.1.0" in row
    assert any(line.startswith("lora ") and "built-in" in line for line in r.stdout.splitlines())


def test_example_plugin_runs_green_and_red_through_the_console_script(example_env):
    ok = example_env("run", "q20-dot", "--set", "N=100", "--preset", "large", "--json", "r.json", "--junit", "r.xml")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Q20-DOT GREEN 256/256" in ok.stdout
    gate = json.loads((example_env.cwd / "r.json").read_text())["gates"][0]
    assert gate["name"] == "q20-dot" and gate["params"] == {"N": 100, "rows": 256, "kernel": "numpy"}
    suite = ET.parse(example_env.cwd / "r.xml").getroot().find("testsuite")
    assert suite.get("name") == "q20-dot" and suite.get("tests") == "2" and suite.get("failures") == "0"

    red = example_env("run", "q20-dot-example", "--inject", "floor-division", "--set", "kernel=python")
    assert red.returncode == 1
    assert " FAIL negative quotients round toward zero -- (-3*S)/10 = -314573 (C gives -314572)" in red.stdout
    assert "Q20-DOT RED" in red.stdout

    usage = example_env("run", "q20-dot", "--set", "N=0")
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1 and "N=0 is out of range" in usage.stderr
    usage = example_env("run", "q20-dot", "--set", "N=65536", "--set", "rows=4096")
    assert usage.returncode == 2 and "more than the 4M cells" in usage.stderr


def test_example_plugin_show_selftest_and_all(example_env):
    r = example_env("show", "q20-dot")
    assert r.returncode == 0 and "floor-division" in r.stdout and "large" in r.stdout
    assert "  seed         (the defaults)" in r.stdout.splitlines()
    r = example_env("selftest", "q20-dot")
    assert r.returncode == 0, r.stdout
    assert "==== selftest: 1/1 clean gates passed, 2/2 faults caught -- GREEN" in r.stdout
    r = example_env("run", "all", "-q", "--set", "lora.T=2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "==== nxgates: 7 / 7 gates passed -- GREEN"  # 6 built in + the plugin


# ---- broken plugins, in-process ------------------------------------------------------------------------

GOOD = (EXAMPLE / "nxgates_example_gate.py").read_text()
BROKEN = {
    "missing": (None, "cannot import: ModuleNotFoundError"),
    "syntax": ("def run(:\n", "cannot import: SyntaxError"),
    "raises": ("raise RuntimeError('no GPU here')\n", "cannot import: RuntimeError: no GPU here"),
    "notgate": (GOOD.replace("GATE = GateDef(", "GATE = dict("), "GATE must be a nxgates.gatekit.GateDef"),
    "notable": (GOOD.replace("TABLE = {", "TABLE_ = {"), "declares no TABLE dict"),
    "badparam": (GOOD.replace('"N": 64, ', ""), "missing parameter 'N'"),
    "badfault": (GOOD.replace('(CHECK_DOTS,)),', '("no such check",)),'), "fault 'drop-last' must be caught by"),
    "badtable": (GOOD.replace('"aliases": ["q20-dot-example"]', '"alias": []'), "unknown field 'alias'"),
}


@pytest.fixture
def broken_site(tmp_path, monkeypatch):
    """One distribution registering a broken plugin of each kind, plus a plugin named like a built-in gate."""
    site = tmp_path / "site"
    site.mkdir()
    suffix = tmp_path.name.replace("-", "_").lower()  # module names unique to this test
    points = {}
    for kind, (source, _) in BROKEN.items():
        module = f"broken_{kind}_{suffix}"
        if source is not None:
            (site / f"{module}.py").write_text(source)
        points[f"broken-{kind}"] = module
    (site / f"clash_{suffix}.py").write_text(GOOD)
    points["lora"] = f"clash_{suffix}"
    fake_distribution(site, "broken-gates", "9.9", points)
    monkeypatch.syspath_prepend(str(site))
    return site


def test_list_marks_each_broken_plugin_and_still_works(invoke, broken_site):
    r = invoke("list")
    assert r.exit_code == 0, r.output
    rows = {line.split()[0]: line for line in r.stdout.splitlines()[1:]}
    for kind, (_, message) in BROKEN.items():
        assert "broken-gates 9.9" in rows[f"broken-{kind}"] and "BROKEN: " in rows[f"broken-{kind}"]
        assert message in rows[f"broken-{kind}"], rows[f"broken-{kind}"]
    assert any("BROKEN" in line and "already a gate" in line for line in r.stdout.splitlines())


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_asking_for_a_broken_plugin_is_one_line_and_exit_2(invoke, broken_site, kind):
    for args in (["run", f"broken-{kind}"], ["show", f"broken-{kind}"], ["selftest", f"broken-{kind}"]):
        r = invoke(*args)
        assert r.exit_code == 2, r.output
        assert r.stdout == "" and len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr
        assert f"plugin gate 'broken-{kind}' (from broken-gates 9.9" in r.stderr and BROKEN[kind][1] in r.stderr
    r = invoke("run", "all")
    assert r.exit_code == 2 and "plugin gate 'broken-" in r.stderr


def test_built_in_gates_are_unaffected_by_broken_plugins(invoke, broken_site):
    r = invoke("run", "lora", "-q")
    assert r.exit_code == 0 and r.stdout.startswith("NX-INTFP-LORA verdict=GREEN 24/24")


# ---- gates.toml naming a plugin's module ---------------------------------------------------------------


@pytest.fixture
def example_site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    fake_distribution(site, "nxgates-example-gate", "0.1.0", {"q20-dot": "nxgates_example_gate"})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    return site


def test_gates_toml_configures_a_plugin_gate_by_its_registered_module(invoke, example_site, tmp_path):
    (tmp_path / "gates.toml").write_text('[gates.dots]\nmodule = "nxgates_example_gate"\ndescription = "short"\n'
                                         "params = { N = 5 }\n")
    r = invoke("run", "dots", "--json", "-")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["gates"][0]["params"] == {"N": 5, "rows": 8, "kernel": "numpy"}
    r = invoke("list")
    assert any(line.startswith("dots ") and "nxgates-example-gate 0.1.0" in line for line in r.stdout.splitlines())


@pytest.mark.parametrize("module", ["json", "os.path", "tests.cli.test_plugins", "nxgates.cli"])
def test_gates_toml_cannot_load_an_unregistered_module(invoke, example_site, tmp_path, module):
    (tmp_path / "gates.toml").write_text(f'[gates.x]\nmodule = "{module}"\ndescription = "d"\nparams = {{}}\n')
    r = invoke("run", "x")
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1
    assert f"module {module!r} is not a gate module of nxgates or of an installed plugin" in r.stderr


# ---- start-up: no entry-point scan for a built-in gate -------------------------------------------------

PROBE = """
import sys
from nxgates.cli import cli
code = cli.main({args!r}, standalone_mode=False)
print(code, "importlib.metadata" in sys.modules)
"""


@pytest.mark.parametrize("args, scans", [(["run", "lora", "-q"], False), (["run", "lora-gradcheck", "-q"], False),
                                         (["show", "parallel-grad"], False), (["list"], True),
                                         (["run", "no-such-gate"], True), (["selftest", "lora"], False)])
def test_entry_points_are_scanned_only_when_needed(tmp_path, args, scans):
    r = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.stdout.splitlines()[-1].split()[1] == str(scans), r.stdout + r.stderr
