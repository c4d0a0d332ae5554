"""Helpers several test modules share (test modules never import each other): a section per area."""

import contextlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from nxgates import registry
from nxgates.core.pool import ProcessWorkerPool
from nxgates.core.tape import F32
from nxgates.gatekit import RunContext
from tests.oracles.seed_lora import seed_lora


def ctx(params, fault=None, **options):
    """A run context for calling a gate's ``run`` directly, as the runner would."""
    return RunContext(params=dict(params), fault=fault, options=options)


# cli

#: the installed console script: what a user and CI run
SCRIPT = shutil.which("nxgates", path=str(Path(sys.executable).parent)) or "nxgates-not-installed"

#: a ./gates.toml holding lora at the seed's sizes, to edit into a broken one
GOOD_TABLE = ('[gates.lora]\nmodule = "lora"\ndescription = "d"\n'
              "params = { T = 3, DM = 6, R = 2, delta = 2097, tol_permil = 70, algorithm = 'fast' }\n")


def record_made(monkeypatch, owner, name: str) -> list:
    """Replace ``owner.name`` (a factory: make_pool, a classmethod) by one that calls it and keeps each result;
    the list of what it made, in order."""
    made = []
    real = getattr(owner, name)

    def making(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(owner, name, making)
    return made


def run_script(*args, cwd, stdin=subprocess.DEVNULL, timeout=60):
    """The console script in a subprocess."""
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, cwd=cwd, stdin=stdin, timeout=timeout)


def run_in_process(*args, cwd, env=None, stdin=None):
    """The same CLI in-process (no interpreter start-up), with the attributes of :func:`run_script`'s result:
    for the variants of a behaviour already pinned through the console script. ``env``, if given, is the whole
    environment for the call (as for a subprocess); an exception nxgates lets escape fails the test, as a
    traceback on the script's stderr would."""
    from click.testing import CliRunner

    from nxgates.cli import cli

    overrides = None
    if env is not None:
        overrides = {k: v for k, v in env.items() if os.environ.get(k) != v}
        overrides.update({k: None for k in os.environ if k not in env})
    with contextlib.chdir(cwd):
        r = CliRunner().invoke(cli, list(args), env=overrides, input=stdin, catch_exceptions=False)
    return SimpleNamespace(returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)


def shell(command, cwd, timeout=60):
    """``command`` in sh with $NX the console script: for redirections such as ``>&-``."""
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env={**os.environ, "NX": SCRIPT})


def assert_usage_error(r, *fragments):
    """Exit 2, nothing on stdout, one line on stderr holding every fragment."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nxgates: error: "), r.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# lora


def metrics_like_seed(out):
    """The lora gate's JSON metrics, narrowed to the fields :func:`reference` has."""
    m = out.metrics
    return {"loss_q": m["loss_q"], **{k: {f: m[k][f] for f in ("passed", "cells", "worst_permil",
            "max_abs_grad", "analytic", "numeric")} for k in ("A", "B")}}


def reference(T, DM, R, delta=2097, tol=70):
    """The seed transcription's gradcheck, in :func:`metrics_like_seed`'s shape."""
    r = seed_lora(T, DM, R, delta, tol)
    for key in ("A", "B"):
        r[key].pop("npass")
    return r


#: a size other than the seed's (an odd width), the lora report tests' default
ODD = {"T": 2, "DM": 5, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast"}


def lines(out, level="info"):
    """The texts of a gate output's lines at ``level``."""
    return [i.text for i in out.lines() if getattr(i, "level", None) == level]


def checks(out):
    """A gate output's checks by name: (passed, detail)."""
    return {c.name: (c.passed, c.detail) for c in out.checks}


# tape


def reference_tree_sum(values: list[float]) -> np.float32:
    """The documented order, element by element in scalar float32: k absorbs k + n - n//2."""
    v = [F32(x) for x in values]
    n = len(v)
    while n > 1:
        h = n // 2
        for k in range(h):
            v[k] = F32(v[k] + v[k + n - h])
        n -= h
    return v[0]


class Units:
    """A progress sink: [label, total, advanced] per unit started."""

    def __init__(self):
        self.units = []

    def start(self, label, total):
        self.units.append([label, total, 0])

    def advance(self, steps=1):
        self.units[-1][2] += steps

    def stop(self):
        pass


def process_gone(pid: int) -> bool:
    """The process ``pid`` has exited: no longer in /proc, or a zombie waiting to be reaped (Linux)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


# ---- the process pool's workers, and pytest sessions a test starts ------------------------------------------


def _no_task(ctx, worker):
    return None


def add(ctx, worker):
    """A task whose answer names its worker."""
    return ctx + 10 * worker


def fail_on_two(ctx, worker):
    """A task that raises for ``ctx`` 2 only."""
    if ctx == 2:
        raise ValueError(f"task {ctx} on worker {worker} failed")
    return ctx


def processes_of(pool):
    """The processes of a process pool's workers that have started."""
    return [w.process for w in pool._executors if w.process is not None]


def started_workers(pool):
    """Start each worker of a process pool (a task on each) and return its processes."""
    for w in range(pool.n_workers):
        pool.submit(_no_task, None, worker=w)
    assert pool.wait(pool.n_completed() + pool.n_workers, 10).reached
    return processes_of(pool)


class HoldingPool(ProcessWorkerPool):
    """A process pool that holds its tasks' records (``held``) instead of queueing them: tasks in flight, no
    worker started."""

    def __init__(self, n_workers: int):
        super().__init__(n_workers)
        self.held = []

    def _dispatch(self, worker, fn, ctx, record, on_result):
        self.held.append(record)


#: the repository's root: where a test's pytest session runs, so that ``tests.conftest`` imports
ROOT = Path(__file__).resolve().parents[1]


def pytest_session(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess:
    """pytest (with ``args``) over one test file of ``source``, the project's conftest as a plugin and neither
    hypothesis's plugin nor nxgates' (the session uses neither; each costs a second or more of start-up)."""
    (tmp_path / "test_one.py").write_text(source)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
                           "-p", "no:hypothesispytest", "-p", "no:nxgates", *args, "-c", os.devnull,
                           "--rootdir", str(tmp_path), str(tmp_path / "test_one.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


# ---- the packaged gates.toml, as the registry's and its parse cache's tests read it --------------------------

PACKAGED_SOURCE = "gates.toml (packaged)"
PACKAGED_TEXT = registry.PACKAGED_CONFIG.read_text(encoding="utf-8")
PACKAGED_DATA = tomllib.loads(PACKAGED_TEXT)


def registry_tables(reg: registry.Registry) -> list:
    """Everything a registry took from the file, in file order."""
    return [(e.name, e.module, e.description, e.aliases, e.raw_params, e.raw_presets, e.where)
            for e in reg.gates.values()]


PACKAGED_PARSED = registry_tables(registry.parse(PACKAGED_TEXT, PACKAGED_SOURCE))
