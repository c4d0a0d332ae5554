"""stdout closed, full, or read by a reader that goes away (``| head -1``): one line or nothing, the
verdict kept as the exit status, the report files written whole."""

import json
import os
import subprocess

import pytest

from tests.helpers import SCRIPT, shell


@pytest.mark.parametrize("command", ['"$NX" run lora >&-', '"$NX" run lora --json - >&-', '"$NX" list >&-'])
def test_closed_stdout_is_one_clear_line(tmp_path, command):
    r = shell(command, tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [
        r.stderr.splitlines()[0]] and "standard output is closed" in r.stderr, r.stderr
    assert "AttributeError" not in r.stderr


def test_closed_stderr_is_tolerated(tmp_path):
    r = shell('"$NX" run lora --json - 2>&-', tmp_path)
    assert r.returncode == 0
    assert json.loads(r.stdout)["passed"] is True


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_stdout_on_a_full_disk_is_one_line_and_reports_are_written(tmp_path):
    r = shell('"$NX" run lora --json r.json >/dev/full', tmp_path)
    assert r.returncode == 2
    assert r.stderr == "nxgates: error: cannot write the report to standard output: No space left on device\n"
    assert json.loads((tmp_path / "r.json").read_text())["passed"] is True
    for command in ('"$NX" run lora --json - >/dev/full', '"$NX" list >/dev/full', '"$NX" selftest lora >/dev/full'):
        r = shell(command, tmp_path)
        assert r.returncode == 2 and "No space left on device" in r.stderr, (command, r.stderr)
        assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr
    r = shell('"$NX" run lora --json - 2>/dev/full', tmp_path)  # only the human report is lost
    assert r.returncode == 0 and json.loads(r.stdout)["passed"] is True


def _first_line_then_close(tmp_path, *args):
    proc = subprocess.Popen([SCRIPT, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    first = proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`: parallel-grad's lines, still to come, meet a closed pipe
    err = proc.stderr.read()
    proc.wait(timeout=60)
    return proc.returncode, first, err


def test_head_dash_1_keeps_the_verdict_and_the_reports(tmp_path):
    code, first, err = _first_line_then_close(tmp_path, "run", "lora", "parallel-grad", "--json", "r.json",
                                              "--junit", "r.xml")
    assert (code, first, err) == (0, "# gate lora\n", "")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["passed"] is True and [g["name"] for g in doc["gates"]] == ["lora", "parallel-grad"]
    assert (tmp_path / "r.xml").read_text().rstrip().endswith("</testsuites>")


def test_a_closed_pipe_keeps_a_red_verdict(tmp_path):
    """-v prints a line per cell: far more than a pipe holds, so the closed pipe is met mid-report."""
    code, first, err = _first_line_then_close(tmp_path, "run", "lora", "-v", "--set", "DM=128", "--set", "R=8",
                                              "--inject", "grad-bug", "--json", "r.json")
    assert (code, first, err) == (1, "# gate lora [fault injected: grad-bug]\n", "")
    assert json.loads((tmp_path / "r.json").read_text())["passed"] is False


def test_list_into_a_closed_pipe_is_not_an_error(tmp_path):
    proc = subprocess.Popen([SCRIPT, "show", "parallel-grad"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode == 0 and err == ""
