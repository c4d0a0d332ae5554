"""The installed ``nxgates`` console script in a subprocess: what CI actually runs."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPT = shutil.which("nxgates", path=str(Path(sys.executable).parent)) or "nxgates-not-installed"


def run(*args, cwd):
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_exit_codes_0_1_2_from_any_directory(tmp_path):
    ok = run("run", "lora", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "NX-INTFP-LORA verdict=GREEN 24/24" in ok.stdout

    bad = run("run", "lora", "--inject", "missing-rescale", cwd=tmp_path)
    assert bad.returncode == 1
    assert " FAIL gradcheck B (lora)" in bad.stdout

    usage = run("run", "lora", "--set", "DM=0", cwd=tmp_path)
    assert usage.returncode == 2
    assert usage.stdout == ""
    assert usage.stderr.count("\n") == 1 and "DM=0" in usage.stderr


def test_python_dash_m_and_json_stdout(tmp_path):
    r = subprocess.run([sys.executable, "-m", "nxgates", "run", "lora", "--json", "-"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0
    assert json.loads(r.stdout)["gates"][0]["metrics"]["loss_q"] == 1329684529960
