"""A stopped run's reports tell the truth. ``selftest --json``, crosscheck's ``--json`` and
``--junit`` are written on SIGINT and SIGTERM (marked interrupted), with one line on stderr and nothing
else (no semaphore-leak warning); ``run``'s JUnit shows that the run was interrupted."""

from __future__ import annotations

import json
import signal
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.behaviour.from_outside import (
    GREEN_BODY,
    Done,
    children_of,
    cpu_seconds,
    finish,
    plugin_source,
    start,
    stop_signals_at_default,
    wait_for,
)
from tests.oracles.seed_logs import parallel_grad_log

STOP = {signal.SIGINT: (130, "nxgates: interrupted"), signal.SIGTERM: (143, "nxgates: terminated (SIGTERM)")}


def stop_when(args: list[str], cwd: Path, sig: signal.Signals, ready: Callable[[subprocess.Popen], bool],
              what: str, timeout: float = 30, env: dict | None = None) -> Done:
    """Start ``nxgates ARGS``, send ``sig`` to it once ``ready(proc)`` shows it is where the test stops it
    (``what``), and wait for it to end. A command that ends first fails the test: the signal must land."""
    proc = start(args, cwd, env, preexec_fn=stop_signals_at_default)
    wait_for(proc, lambda: ready(proc), what)
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
    waiting = "import pathlib, time\nif not ctx.fault:\n    pathlib.Path('waiting').touch()\n"
    env = plugins(slow=plugin_source(waiting + "time.sleep(0.5 if ctx.fault else 30)\n" + GREEN_BODY))
    r = stop_when(["selftest", "lora", "slow", "--json", "r.json"], env.cwd, sig,
                  lambda _: (env.cwd / "waiting").exists(), "the slow gate's clean run waits", env=env.env)
    assert_stopped(r, sig)
    doc = json.loads((env.cwd / "r.json").read_text())
    assert doc["interrupted"] is True and doc["passed"] is False
    assert [k["gate"] for k in doc["kills"]][:1] == ["lora"]


def long_crosscheck_log(tmp_path: Path) -> list[str]:
    """A well-formed parallel-grad log at sizes whose recomputation takes many seconds, on forked workers."""
    D, H, O, B = 784, 1024, 10, 4096
    NP = H * D + O * H
    (tmp_path / "run.log").write_text(parallel_grad_log(workers=16, ran=B, B=B, mism=0, chk=B * NP // 2, NP=NP))
    return ["crosscheck", "parallel-grad", "run.log", "--set", f"D={D}", "--set", f"H={H}", "--set", f"O={O}",
            "--set", f"B={B}", "--set", "executor=process", "--json", "r.json", "--junit", "r.xml"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_crosscheck_reports_are_written_when_stopped(tmp_path, sig):
    """Stopped in the recomputation: its pool's workers, forked only there, are running."""
    r = stop_when(long_crosscheck_log(tmp_path), tmp_path, sig, lambda proc: bool(children_of(proc.pid)),
                  "the recomputation's workers run")
    assert_stopped(r, sig)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] is True and doc["passed"] is False
    assert "interrupt" in (tmp_path / "r.xml").read_text().lower()


def test_run_junit_shows_the_interruption(tmp_path):
    args = ["run", "lora", "parallel-grad", "--preset", "medium", "--repeat", "10000", "--timeout", "60",
            "--set", "executor=thread", "--json", "r.json", "--junit", "r.xml"]
    # past its imports (about 0.3 s of CPU) and into the first gate's repeated pool passes
    r = stop_when(args, tmp_path, signal.SIGTERM, lambda proc: cpu_seconds(proc.pid) >= 0.6,
                  "the run has used 0.6 s of CPU")
    assert_stopped(r, signal.SIGTERM)
    assert json.loads((tmp_path / "r.json").read_text())["interrupted"] is True
    root = ET.parse(tmp_path / "r.xml").getroot()
    text = ET.tostring(root, encoding="unicode").lower()
    assert "interrupt" in text and any(True for _ in root.iter("error")), text[:2000]

