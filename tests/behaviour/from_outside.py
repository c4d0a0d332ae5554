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
from collections.abc import Callable
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


def start(args: list[str], cwd: Path, env: dict | None = None, stdin=subprocess.DEVNULL,
          preexec_fn: Callable[[], None] | None = None) -> subprocess.Popen:
    """The console script started in its own session (so :func:`kill_group` reaches its workers); ``preexec_fn``
    runs in the child before the script (:func:`stop_signals_at_default` for a command a test stops)."""
    proc = subprocess.Popen([SCRIPT, *args], cwd=cwd, env=env, stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=preexec_fn)
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


def stop_signals_at_default() -> None:
    """For ``preexec_fn``: the command starts with Ctrl-C, SIGTERM and SIGHUP at their defaults, as from a
    terminal, whatever this test run was started with. An ignored signal stays ignored across ``exec`` (a
    non-interactive shell's ``&`` ignores SIGINT, ``nohup`` SIGHUP), and nxgates, as Python does, keeps an
    ignored stop signal ignored: a test that stops a command with one must not inherit that."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


# ---- readiness: what a running command shows from outside ----------------------------------------------


def wait_for(proc: subprocess.Popen, ready: Callable[[], bool], what: str, limit: float = 60) -> None:
    """Poll ``ready()`` until it holds while ``proc`` runs; a command that ends first, or a sign not seen in
    ``limit`` seconds (the command is then killed), fails the test. The bound is for a hung or very loaded
    machine, never a pace: the sign is what the test waits for."""
    end = time.monotonic() + limit
    while not ready():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the command ended (exit {proc.returncode}) before {what}:\n{out[-1000:]}{err[-2000:]}")
        if time.monotonic() > end:
            proc.kill()
            kill_group(proc)
            pytest.fail(f"not seen within {limit} s: {what}")
        time.sleep(0.01)


def children_of(pid: int) -> list[int]:
    """The processes ``pid`` forked that still run (a pool's workers), from /proc; none once it is gone."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                found += [int(child) for child in fh.read().split()]
        except OSError:
            continue
    return found


def cpu_seconds(pid: int) -> float:
    """CPU time process ``pid`` has used itself, every thread's (not its children's); 0 once it is gone. A
    command's work costs about the same CPU however loaded the machine is, where wall-clock time does not."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


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
