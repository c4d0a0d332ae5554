"""The installed ``nxgates`` console script in a subprocess: what CI actually runs."""

import json
import subprocess
import sys

from tests.behaviour.from_outside import cpu_seconds, stop_signals_at_default, wait_for
from tests.helpers import SCRIPT


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


def test_hostile_input_through_the_script(tmp_path):
    (tmp_path / "gates.toml").write_text("[gates.lora\nmodule = 1\n")
    r = run("run", "lora", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "line 1, column" in r.stderr and "Traceback" not in r.stderr


def test_ctrl_c_writes_finished_reports_and_exits_130(tmp_path):
    """SIGINT during a long second gate: prompt exit 130, the first gate's report is written."""
    import signal
    import time

    proc = subprocess.Popen(
        [SCRIPT, "run", "parallel-grad", "lora", "--set", "lora.algorithm=naive", "--set", "lora.T=16",
         "--set", "lora.DM=256", "--set", "lora.R=8", "--json", "r.json", "--junit", "r.xml"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=stop_signals_at_default)
    for line in proc.stdout:
        if line.startswith("TA-PARALLEL-GRAD GREEN"):
            break
    cpu = cpu_seconds(proc.pid)
    wait_for(proc, lambda: cpu_seconds(proc.pid) >= cpu + 0.25, "0.25 s of CPU into the long naive lora gradcheck")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)
    assert proc.returncode == 130
    assert time.monotonic() - t0 < 5
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] is True and doc["passed"] is False
    assert [g["name"] for g in doc["gates"]] == ["parallel-grad"]
    assert "parallel-grad" in (tmp_path / "r.xml").read_text()


def test_junit_and_timeout_through_the_script(tmp_path):
    r = run("run", "lora", "parallel-grad", "--preset", "medium", "--timeout", "0.001", "--junit", "-",
            cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.startswith('<?xml version="1.0" encoding="utf-8"?>')
    assert r.stdout.count('<error message="timed out after 0.001 s" type="timeout"') == 2
    assert "RED -- timed out" in r.stderr  # the human report moved to stderr


def test_every_line_reaches_a_pipe_before_the_script_exits(tmp_path):
    """The script skips shutdown's last object walk (gc.freeze): the 768 per-cell lines of -v, made only
    when shown, and the reports still arrive whole."""
    r = run("run", "lora", "--preset", "medium", "-v", "--json", "r.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cells = [line for line in r.stdout.splitlines() if line.startswith("   A (lora) cell ")]
    assert len(cells) == 384 and cells[-1].startswith("   A (lora) cell 383 ana=")
    assert r.stdout.rstrip().endswith("no float.")
    assert json.loads((tmp_path / "r.json").read_text())["gates"][0]["metrics"]["A"]["cells"] == 384
