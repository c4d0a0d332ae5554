"""Helpers for the behaviour suites: nxgates driven only from outside, through its console script, with
plugin gates "installed" by path (a module and the .dist-info pip would write). The fixtures that use them
(``plugins``, ``fake_scheduler``) are in this folder's conftest.py."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

SCRIPT = shutil.which("nxgates", path=str(Path(sys.executable).parent)) or "nxgates-not-installed"
PYTHON = str(Path(SCRIPT).with_name("python"))


class Done(NamedTuple):
    """What one command did: its exit status, its streams, and how long it took."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float


def nx(*args: str, cwd: Path, env: dict | None = None, timeout: float = 60, stdin=subprocess.DEVNULL) -> Done:
    """The console script with ``args``; a command that outlives ``timeout`` fails the test, never hangs it."""
    return finish(start(list(args), cwd, env, stdin), timeout, f"nxgates {' '.join(args)[:200]}")


def start(args: list[str], cwd: Path, env: dict | None = None, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    """The console script started in its own session (so :func:`kill_group` reaches its workers)."""
    proc = subprocess.Popen([SCRIPT, *args], cwd=cwd, env=env, stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    proc.started = time.monotonic()
    return proc


def finish(proc: subprocess.Popen, timeout: float, what: str) -> Done:
    """Wait for a command from :func:`start`; one that outlives ``timeout`` is killed and fails the test."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        pytest.fail(f"{what} still running after {timeout} s")
    return Done(proc.returncode, out, err, time.monotonic() - proc.started)


def kill_group(proc: subprocess.Popen) -> None:
    """Kill a command started in its own session, workers included, and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def assert_one_line_error(r: Done, *fragments: str) -> None:
    """Exit 2, nothing on stdout, one line on stderr naming the problem, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# ---- plugin gates --------------------------------------------------------------------------------------

PLUGIN_HEAD = '''
from nxgates.gatekit import Fault, GateDef, GateOutput, IntParam, RunContext

TABLE = {"description": "a fixture plugin gate", "aliases": [], "params": {"N": 1}, "presets": {}}
'''

PLUGIN_TAIL = '''
GATE = GateDef(params={"N": IntParam("size", min=1, max=100)}, checks=CHECKS, run=run,
               faults={"noop": Fault("changes nothing", CHECKS[:1])})
'''


def plugin_source(run_body: str, checks: tuple[str, ...] = ("c1",), prelude: str = "") -> str:
    """A plugin module: ``prelude`` at import, then ``run(ctx)`` with ``run_body`` (indented by 4)."""
    body = "".join(f"    {line}\n" for line in run_body.strip("\n").splitlines())
    head = f"{PLUGIN_HEAD}{prelude}\nCHECKS = {checks!r}\n\n"
    return f"{head}def run(ctx: RunContext) -> GateOutput:\n{body}{PLUGIN_TAIL}"


GREEN_BODY = '''
out = GateOutput()
for name in CHECKS:
    out.check(name, True, "ok")
out.green, out.red = "PLUG GREEN", "PLUG RED"
return out
'''


class Plugins(NamedTuple):
    """An environment in which gates are installed plugins; ``run`` calls the console script there."""

    env: dict
    cwd: Path
    site: Path

    def run(self, *args: str, timeout: float = 60) -> Done:
        return nx(*args, cwd=self.cwd, env=self.env, timeout=timeout)


# ---- Dask ----------------------------------------------------------------------------------------------


def have_distributed() -> bool:
    """Whether the venv has the dask extra, without importing it here (it is slow to import)."""
    return importlib.util.find_spec("distributed") is not None


needs_dask = pytest.mark.skipif(not have_distributed(), reason="the dask extra (distributed) is not installed")
