"""A stopped run's reports tell the truth. ``selftest --json``, crosscheck's ``--json`` and
``--junit`` are written on SIGINT and SIGTERM (marked interrupted), with one line on stderr and nothing
else (no semaphore-leak warning); ``run``'s JUnit shows that the run was interrupted."""

from __future__ import annotations

import json
import signal
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.behaviour.from_outside import GREEN_BODY, Done, finish, plugin_source, start
from tests.oracles.seed_logs import parallel_grad_log

STOP = {signal.SIGINT: (130, "nxgates: interrupted"), signal.SIGTERM: (143, "nxgates: terminated (SIGTERM)")}


def stop_after(args: list[str], cwd: Path, sig: signal.Signals, after: float, timeout: float = 30,
               env: dict | None = None) -> Done:
    """Start ``nxgates ARGS``, send ``sig`` to it ``after`` seconds in, and wait for it to end."""
    proc = start(args, cwd, env)
    time.sleep(after)
    assert proc.poll() is None, f"the command ended before the signal: {proc.communicate()}"
    proc.send_signal(sig)
    return finish(proc, timeout, f"nxgates {args[0]}, {sig.name} sent,")


def assert_stopped(r: Done, sig: signal.Signals) -> None:
    """The signal's exit status and one line on stderr naming it, nothing else."""
    code, start = STOP[sig]
    lines = r.stderr.splitlines()
    assert r.returncode == code and len(lines) == 1 and lines[0].startswith(start), (r.returncode, r.stderr[-2000:])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_selftest_json_is_written_when_stopped_in_a_gate(plugins, sig):
    """A stopped selftest still writes its JSON, marked interrupted: stopped inside a gate's run (a plugin
    that waits, so the signal lands there however fast the machine), after finished runs."""
    env = plugins(slow=plugin_source("import time\ntime.sleep(0.5 if ctx.fault else 30)\n" + GREEN_BODY))
    r = stop_after(["selftest", "lora", "slow", "--json", "r.json"], env.cwd, sig, after=3, env=env.env)
    assert_stopped(r, sig)
    doc = json.loads((env.cwd / "r.json").read_text())
    assert doc["interrupted"] is True and doc["passed"] is False
    assert [k["gate"] for k in doc["kills"]][:1] == ["lora"]


def long_crosscheck_log(tmp_path: Path) -> list[str]:
    """A well-formed parallel-grad log at sizes whose recomputation takes many seconds."""
    D, H, O, B = 784, 1024, 10, 4096
    NP = H * D + O * H
    (tmp_path / "run.log").write_text(parallel_grad_log(workers=16, ran=B, B=B, mism=0, chk=B * NP // 2, NP=NP))
    return ["crosscheck", "parallel-grad", "run.log", "--set", f"D={D}", "--set", f"H={H}", "--set", f"O={O}",
            "--set", f"B={B}", "--json", "r.json", "--junit", "r.xml"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_crosscheck_reports_are_written_when_stopped(tmp_path, sig):
    r = stop_after(long_crosscheck_log(tmp_path), tmp_path, sig, after=3)
    assert_stopped(r, sig)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] is True and doc["passed"] is False
    assert "interrupt" in (tmp_path / "r.xml").read_text().lower()


def test_run_junit_shows_the_interruption(tmp_path):
    args = ["run", "lora", "parallel-grad", "--preset", "medium", "--repeat", "10000", "--timeout", "60",
            "--set", "executor=thread", "--json", "r.json", "--junit", "r.xml"]
    r = stop_after(args, tmp_path, signal.SIGTERM, after=4)
    assert_stopped(r, signal.SIGTERM)
    assert json.loads((tmp_path / "r.json").read_text())["interrupted"] is True
    root = ET.parse(tmp_path / "r.xml").getroot()
    text = ET.tostring(root, encoding="unicode").lower()
    assert "interrupt" in text and any(True for _ in root.iter("error")), text[:2000]

