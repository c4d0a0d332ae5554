"""Dask never hangs, never runs away, never sprays tracebacks. An address that accepts TCP
but is not a Dask scheduler is exit 2 with one line within the connect limit (by option or by
``NXGATES_DASK_SCHEDULER``); a worker count past the cap is exit 2 before any worker starts; a stopped Dask
run ends with its one line, no ``distributed`` traceback, and no scratch directory left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from nxgates.core.pool.shm import owned_files
from tests.behaviour.from_outside import SCRIPT, Done, assert_one_line_error, kill_group, needs_dask

pytestmark = needs_dask

HTTP_REPLY = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nbad request"
NOT_A_SCHEDULER = {  # case -> (what the listener answers, the gate, whether the address comes by environment)
    "silent-parallel-grad": (None, "parallel-grad", False),
    "silent-lora": (None, "lora", False),
    "silent-dp-train": (None, "dp-train", False),
    "http-parallel-grad": (HTTP_REPLY, "parallel-grad", False),
    "http-dp-train": (HTTP_REPLY, "dp-train", False),
    "silent-by-environment": (None, "parallel-grad", True),
}
MUST_END_WITHIN = 15  # the 8 s connect limit, with room for start-up on a busy machine
WAIT_AT_MOST = 20


class NotASchedulerRuns:
    """Every case's command at once, each timed by a thread of its own from its start to its exit: once all
    of them are waiting on their listener (or have ended), the module's other tests run while they wait out
    their connect limit."""

    def __init__(self, fake_scheduler, tmp_path_factory) -> None:
        self.runs: dict[str, tuple[str, subprocess.Popen, threading.Thread]] = {}
        self.done: dict[str, Done] = {}
        self.killed: set[str] = set()
        for case, (reply, gate, by_env) in NOT_A_SCHEDULER.items():
            address = fake_scheduler(reply)
            env = {**os.environ}
            if by_env:
                env["NXGATES_DASK_SCHEDULER"] = address
                args = ["run", gate, "--executor", "dask", "--timeout", "10"]
            else:
                env.pop("NXGATES_DASK_SCHEDULER", None)
                args = ["run", gate, "--scheduler", address, "--timeout", "10"]
            proc = subprocess.Popen([SCRIPT, *args], cwd=tmp_path_factory.mktemp(case), env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, start_new_session=True)
            timer = threading.Thread(target=self._time, args=(case, proc, time.monotonic()), daemon=True)
            timer.start()
            self.runs[case] = (address, proc, timer)
        self.deadline = time.monotonic() + WAIT_AT_MOST
        waiting = dict(self.runs)
        while waiting and time.monotonic() < self.deadline:
            waiting = {case: run for case, run in waiting.items() if not _connected_or_ended(*run[:2])}
            time.sleep(0.05)

    def _time(self, case: str, proc: subprocess.Popen, start: float) -> None:
        out, err = proc.communicate()
        self.done[case] = Done(proc.returncode, out, err, time.monotonic() - start)

    def result(self, case: str) -> tuple[str, Done | None]:
        """(address, what the command did), or None for what it did if it was still running after
        WAIT_AT_MOST seconds (it is then killed)."""
        address, proc, timer = self.runs[case]
        timer.join(max(0.0, self.deadline - time.monotonic()))
        if timer.is_alive():
            self.killed.add(case)
            _kill(proc, timer)
        return address, None if case in self.killed else self.done[case]

    def stop(self) -> None:
        for _, proc, timer in self.runs.values():
            _kill(proc, timer)


def _kill(proc: subprocess.Popen, timer: threading.Thread) -> None:
    """Kill a command and its group (its timer then ends), unless it has ended."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    timer.join()


def _connected_or_ended(address: str, proc: subprocess.Popen) -> bool:
    """Whether the command has connected to the listener at ``address`` (it then only waits), or has ended."""
    import psutil

    port = int(address.rsplit(":", 1)[1])
    try:
        return any(c.raddr and c.raddr.port == port for c in psutil.Process(proc.pid).net_connections("tcp"))
    except psutil.Error:
        return proc.poll() is not None


@pytest.fixture(scope="module")
def not_a_scheduler_runs(fake_scheduler, tmp_path_factory):
    """The commands of :class:`NotASchedulerRuns`; one still running at the module's end is killed."""
    runs = NotASchedulerRuns(fake_scheduler, tmp_path_factory)
    yield runs
    runs.stop()


@pytest.fixture(scope="module", autouse=True)
def not_a_scheduler_runs_go_first(request):
    """The not-a-scheduler commands start before the module's first test when one of their tests is to run,
    so that the tests above theirs run while they wait."""
    if any(item.path == request.path and getattr(item, "originalname", "") == NOT_A_SCHEDULER_TEST
           for item in request.session.items):
        request.getfixturevalue("not_a_scheduler_runs")


# ---- 8. a cap on Dask workers, and quiet stops ------------------------------------------------------------


@pytest.mark.parametrize("workers", [32, 1023])
def test_a_dask_worker_count_past_the_cap_is_refused_at_once(tmp_path, workers):
    if 8 * (os.cpu_count() or 1) >= workers:
        pytest.skip(f"this machine would allow {workers} workers")
    # 10 s, not the 60 s such a run may take to fail: without a cap it starts dozens of workers in 10 s.
    proc = subprocess.Popen([SCRIPT, "run", "parallel-grad", "--executor", "dask", "--set", f"workers={workers}"],
                            cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    start = time.monotonic()
    try:
        out, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        pytest.fail(f"workers={workers} on Dask was still running after 10 s")
    assert_one_line_error(Done(proc.returncode, out, err, time.monotonic() - start), f"workers={workers}")


LONG_DASK_RUN = ["run", "parallel-grad", "--executor", "dask", "--set", "workers=2", "--repeat", "10000",
                 "--timeout", "120", "--json", "r.json"]
#: a timeout that passes in the first run's work (its workers' start-up tasks in flight) or, where a cluster
#: starts fast, in a later run's
SHORT_TIMEOUT = "2"


def stop_a_dask_run(tmp_path: Path, how: signal.Signals | None) -> tuple[Done, list[str]]:
    """Start a long Dask run with its own temp dir; once its cluster is up and the gate at work (the gate's
    rows are mapped in /dev/shm), send ``how`` (None: let ``--timeout`` stop it). Returns what it did and what
    it left in the temp dir once every process of the run has ended."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    args = LONG_DASK_RUN if how is not None else [*LONG_DASK_RUN[:-4], "--timeout", SHORT_TIMEOUT]
    proc = subprocess.Popen([SCRIPT, *args], cwd=tmp_path, env={**os.environ, "TMPDIR": str(temp)},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    start = time.monotonic()
    try:
        while how is not None and not owned_files(proc.pid):
            if proc.poll() is not None:
                pytest.fail(f"the Dask run ended (exit {proc.returncode}) before its gate was at work on its "
                            f"cluster: {proc.stderr.read()[-2000:]}")
            if time.monotonic() - start > 40:
                kill_group(proc)
                pytest.fail("the Dask run's gate was not at work on its cluster within 40 s")
            time.sleep(0.05)
        if how is not None:
            proc.send_signal(how)
        out, err = proc.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        pytest.fail("the Dask run did not end")
    done = Done(proc.returncode, out, err, time.monotonic() - start)
    left = processes_of_group(proc.pid, wait=10)
    assert left == [], f"processes of the run still there 10 s after it ended: {left}"
    return done, sorted(p.name for p in temp.iterdir())


def processes_of_group(pgid: int, wait: float) -> list[str]:
    """The live processes of group ``pgid``, once there are none or ``wait`` seconds have passed."""
    import psutil

    deadline = time.monotonic() + wait
    while True:
        alive = []
        for p in psutil.process_iter():
            try:
                if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(" ".join(p.cmdline())[:200])
            except (psutil.Error, OSError):
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


STOPPED = {signal.SIGTERM: (143, "nxgates: terminated (SIGTERM)"), signal.SIGINT: (130, "nxgates: interrupted")}


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_dask_run_is_one_line_and_leaves_nothing(tmp_path, how):
    r, left = stop_a_dask_run(tmp_path, how)
    code, start = STOPPED[how]
    lines = r.stderr.splitlines()
    assert r.returncode == code and len(lines) == 1 and lines[0].startswith(start), (r.returncode, r.stderr[-3000:])
    assert left == [], left


def test_a_dask_run_past_its_timeout_is_quiet(tmp_path):
    r, left = stop_a_dask_run(tmp_path, None)
    assert r.returncode == 1 and "timed out" in r.stdout, (r.returncode, r.stdout[-1000:])
    assert r.stderr == "" and left == [], (r.stderr[-3000:], left)


# ---- not a scheduler: these commands have waited out their connect limit while the tests above ran ----------


@pytest.mark.parametrize("case", sorted(NOT_A_SCHEDULER))
def test_an_address_that_is_not_a_scheduler_is_exit_2_in_time(not_a_scheduler_runs, case):
    address, r = not_a_scheduler_runs.result(case)
    assert r is not None, f"still running after {WAIT_AT_MOST} s"
    assert r.seconds < MUST_END_WITHIN, r.seconds
    assert_one_line_error(r, address)


NOT_A_SCHEDULER_TEST = test_an_address_that_is_not_a_scheduler_is_exit_2_in_time.__name__
